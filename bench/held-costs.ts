/**
 * What the coordinator holds in memory for each idle connection, each idle
 * subscription, each held WAIT_JOB and each subscriber that stopped reading.
 *
 * One process runs the coordinator (memory store, no worker: jobs stay
 * queued) and measures its own heap plus the memory of its Buffers after a
 * full collection; a flood-peer process of its own opens the connections, so
 * their client side is not counted. Each kind is measured from a settled
 * start to a settled state with everything held, and divided by the count:
 *
 * - `idle-connection`: connections that send nothing;
 * - `idle-subscription`: connections that each hold one SUBSCRIBE_JOBS and
 *   read, with no job changing (per connection, the connection included);
 * - `held-wait`: WAIT_JOBs on queued jobs, 1 h timeout, over 10 connections;
 * - `stalled-subscriber`: connections with 16 subscriptions each that stop
 *   reading; jobs are submitted until every one of them has more than it may
 *   leave unread (its events are dropped), and what closing them frees is
 *   divided among them.
 *
 *   node --expose-gc dist/bench/held-costs.js [--connections 500] [--waits 50000] [--stalled 40]
 *
 * Prints one JSON line per kind: `{kind, count, bytesEach}`.
 */
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { MAX_SUBSCRIPTIONS } from '../src/protocol/limits.js';
import type { SubmitJobsElement } from '../src/protocol/messages.js';
import { Flood } from '../test/helpers/flood.js';
import type { FloodPlan } from '../test/helpers/flood-peer.js';
import { startCoordinator, type TestCoordinator } from '../test/helpers/test-coordinator.js';
import { until } from '../test/helpers/until.js';

const HOST = '127.0.0.1';
const HOLD_MS = 300_000;
const SUBSCRIPTIONS_PER_STALLED = 16;
/** Jobs per submission while the stalled subscribers fill up (16 x 10 events: ~70 KB each). */
const STALL_BATCH = 10;
/** Most jobs submitted to make the stalled subscribers overflow. */
const MAX_STALL_JOBS = 40_000;

export interface HeldCost {
  kind: 'idle-connection' | 'idle-subscription' | 'held-wait' | 'stalled-subscriber';
  count: number;
  bytesEach: number;
}

/** Heap in use plus Buffer memory, after full collections. */
async function settledBytes(): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run with node --expose-gc');
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.external;
}

function clientsOpen(tc: TestCoordinator): number {
  return tc.coordinator.connectionCounts().client.open;
}

/** Runs a flood, measures with it held (once `held` is true), stops it; the growth. */
async function heldBy(
  tc: TestCoordinator,
  plan: Omit<FloodPlan, 'port' | 'host' | 'holdMs'>,
  held: () => boolean,
  what: string,
): Promise<number> {
  const before = await settledBytes();
  const flood = Flood.start({
    ...plan,
    port: tc.coordinator.clientPort,
    host: HOST,
    holdMs: HOLD_MS,
  });
  try {
    await until(held, { timeoutMs: 120_000, what });
    const during = await settledBytes();
    return during - before;
  } finally {
    await flood.stop();
    await until(() => clientsOpen(tc) === 0, { timeoutMs: 30_000, what: 'the flood to close' });
  }
}

function queuedJobs(n: number): SubmitJobsElement[] {
  return Array.from({ length: n }, (_, i) => ({
    taskType: 'SHA256',
    payload: { text: `held ${i}` },
    maxAttempts: null,
    idempotencyKey: null,
    priority: null,
  }));
}

async function submit(tc: TestCoordinator, n: number): Promise<string[]> {
  const reply = await tc.coordinator.request({ type: 'SUBMIT_JOBS', jobs: queuedJobs(n) });
  if (reply.type !== 'JOBS_SUBMITTED') throw new Error(JSON.stringify(reply));
  return reply.jobIds;
}

async function heldWaits(tc: TestCoordinator, waits: number): Promise<HeldCost> {
  const connections = 10;
  const perConnection = Math.ceil(waits / connections);
  const jobIds = await submit(tc, 10);
  const count = connections * perConnection;
  const grown = await heldBy(
    tc,
    { mode: 'waits', count: connections, waits: perConnection, jobIds, waitTimeoutMs: 3_600_000 },
    () => tc.coordinator.inspect().pendingWaits === count,
    `${count} held waits`,
  );
  return { kind: 'held-wait', count, bytesEach: Math.round(grown / count) };
}

/**
 * Stalled subscribers: connected and stalled, then jobs until each had its
 * events dropped; measured before and after they close (the jobs stay).
 */
async function stalledSubscribers(tc: TestCoordinator, count: number): Promise<HeldCost> {
  const dropped = new Set<string>();
  tc.coordinator.events.on('net', (event) => {
    if (event.type === 'events.dropped') dropped.add(event.remote);
  });
  const flood = Flood.start({
    port: tc.coordinator.clientPort,
    host: HOST,
    holdMs: HOLD_MS,
    mode: 'subscribe',
    subscriptions: SUBSCRIPTIONS_PER_STALLED,
    stall: true,
    count,
  });
  try {
    const subscriptions = count * SUBSCRIPTIONS_PER_STALLED;
    await until(() => tc.coordinator.inspect().subscriptions === subscriptions, {
      timeoutMs: 60_000,
      what: `${subscriptions} subscriptions`,
    });
    // Small batches: a burst over 256 KiB in one push window is dropped even for a reader.
    for (let sent = 0; dropped.size < count && sent < MAX_STALL_JOBS; sent += STALL_BATCH) {
      await submit(tc, STALL_BATCH);
      await new Promise((resolve) => setTimeout(resolve, 6));
    }
    if (dropped.size < count) throw new Error(`only ${dropped.size} subscribers overflowed`);
    const during = await settledBytes();
    await flood.stop();
    await until(() => clientsOpen(tc) === 0, { timeoutMs: 30_000, what: 'the flood to close' });
    const afterClose = await settledBytes();
    return {
      kind: 'stalled-subscriber',
      count,
      bytesEach: Math.round((during - afterClose) / count),
    };
  } finally {
    await flood.stop();
  }
}

export async function heldCosts(options: {
  connections: number;
  waits: number;
  stalled: number;
}): Promise<HeldCost[]> {
  const tc = await startCoordinator({
    maxActiveJobs: 1_000_000,
    heartbeatTimeoutMs: 60_000,
    sweepIntervalMs: 200,
    // Past a normal client's idle timeout: the idle connections stay.
    netLimits: { clientIdleTimeoutMs: 0 },
    // Costs, not budgets, are measured here: every peer comes from one address.
    maxSubscriptionsPerAddress: MAX_SUBSCRIPTIONS,
    maxWaitsPerAddress: 100_000_000,
    maxWaits: 100_000_000,
  });
  try {
    const n = options.connections;
    const costs: HeldCost[] = [];
    const idle = await heldBy(tc, { mode: 'idle', count: n }, () => clientsOpen(tc) === n, 'idle');
    costs.push({ kind: 'idle-connection', count: n, bytesEach: Math.round(idle / n) });
    const subscribed = await heldBy(
      tc,
      { mode: 'subscribe', count: n },
      () => tc.coordinator.inspect().subscriptions === n,
      `${n} subscriptions`,
    );
    costs.push({ kind: 'idle-subscription', count: n, bytesEach: Math.round(subscribed / n) });
    costs.push(await heldWaits(tc, options.waits));
    costs.push(await stalledSubscribers(tc, options.stalled));
    return costs;
  } finally {
    await tc.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      connections: { type: 'string', default: '500' },
      waits: { type: 'string', default: '50000' },
      stalled: { type: 'string', default: '40' },
    },
  });
  const costs = await heldCosts({
    connections: Number(values.connections),
    waits: Number(values.waits),
    stalled: Number(values.stalled),
  });
  for (const cost of costs) console.log(JSON.stringify(cost));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
