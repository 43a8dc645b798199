/**
 * Flows: a coordinator and workers as separate processes (SQLite), two
 * shapes, each on a fresh database.
 *
 * - fan-in: `parents` SHA256 jobs, then joins that each depend on at most
 *   MAX_PARENTS (1,000) of them, then one final job depending on every
 *   join: 10,000 parents reach one job through two levels, because one job
 *   may name at most 1,000 parents. Everything is submitted before any
 *   worker connects, so every parent's end settles its dependents while the
 *   dependents are WAITING. The joins are HIGH priority: released while
 *   other parents are still queued, they go first, so their hand-off is not
 *   a wait behind those parents.
 * - layered DAG: `layers` layers of `width` jobs in one SUBMIT_FLOW, each job
 *   of a layer depending on two jobs of the layer above (the same index and
 *   the next one, wrapping). Measured: the time SUBMIT_FLOW takes until
 *   FLOW_SUBMITTED is in hand (the flow is committed then), and the
 *   coordinator's RSS and V8 heap in use (its `/metrics`; garbage not yet
 *   collected included) before and after. The workers (2 x 64 slots) connect
 *   after that and have more slots than a layer has jobs.
 *
 * Hand-off latency, both shapes: for every dependent, its `startedAtMillis`
 * minus the latest `finishedAtMillis` of its parents. Both stamps come from
 * the coordinator's clock (the time it handled the parent's COMPLETE and the
 * time it leased the dependent's attempt), so no two clocks are compared.
 * The dependent is leased only once the parent's completion is durable, so
 * the figure includes that commit.
 */
import { join } from 'node:path';
import { DtpClient } from '../src/client/index.js';
import type { FlowJobSpec } from '../src/client/index.js';
import type { JobSnapshot } from '../src/protocol/messages.js';
import { MAX_PARENTS } from '../src/protocol/limits.js';
import { ScriptProcess } from '../test/helpers/processes.js';
import { until } from '../test/helpers/until.js';
import { freePort, HOST, rssMiB, startQuietCoordinator } from './harness.js';

export interface HandOff {
  /** Dependents measured. */
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface FanInRun {
  parents: number;
  /** Submitting everything (parents in SUBMIT_JOBS of 1,000, then the joins and the final job), ms. */
  submitMs: number;
  /** Last parent's end -> its join's start, over the joins (coordinator and worker stamps). */
  joinCore: HandOff;
  joinWire: HandOff;
  /** Last join's end -> the final job's start. */
  final: HandOffPair;
  /** First worker connected -> final job COMPLETED, ms. */
  runMs: number;
}

export interface LayeredRun {
  jobs: number;
  layers: number;
  submitMs: number;
  rssBeforeMiB: number;
  rssAfterMiB: number;
  heapBeforeMiB: number;
  heapAfterMiB: number;
  handOffCore: HandOff;
  handOffWire: HandOff;
  runMs: number;
}

const WORKERS = 2;
/** 2 x 64 slots: more than a layer's 100 jobs, so a released job never waits for a slot. */
const CAPACITY = 64;

function startWorkers(workerPort: number): ScriptProcess[] {
  return Array.from({ length: WORKERS }, (_, i) =>
    ScriptProcess.start('worker.sh', [
      ...['--coordinator-host', HOST, '--coordinator-port', String(workerPort)],
      ...['--id', `flows-${i + 1}`, '--capacity', String(CAPACITY), '--log-format', 'json'],
      ...['--tasks', join(import.meta.dirname, 'flow-tasks.js')],
    ]),
  );
}

async function heapMiB(httpPort: number): Promise<number> {
  const text = await (await fetch(`http://${HOST}:${httpPort}/metrics`)).text();
  const bytes = Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? NaN);
  return Math.round((bytes / 2 ** 20) * 10) / 10;
}

/** Every job in `state`, through LIST_JOBS pages of 1,000. */
async function allIn(client: DtpClient, state: 'COMPLETED'): Promise<JobSnapshot[]> {
  const out: JobSnapshot[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 1_000; page++) {
    const got = await client.listPage({ state, limit: 1_000, ...(cursor ? { cursor } : {}) });
    out.push(...got.jobs);
    if (got.nextCursor === null) return out;
    cursor = got.nextCursor;
  }
  throw new Error('too many pages');
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

/** Where a `stamp` job's handler started and ended (the worker's clock). */
function stampOf(job: JobSnapshot): { startMs: number; endMs: number } {
  return JSON.parse(job.result ?? 'null') as { startMs: number; endMs: number };
}

/** A dependent's hand-off measured two ways, ms. */
export interface HandOffPair {
  /** Coordinator stamps: its `startedAtMillis` - the latest parent `finishedAtMillis`. */
  core: number;
  /** Worker stamps: its handler's start - the latest parent handler's end. */
  wire: number;
}

/** The hand-off of every job of `jobs` that has parents, by job id (its parents must be in `jobs`). */
export function handOffs(jobs: readonly JobSnapshot[]): Map<string, HandOffPair> {
  const byId = new Map(jobs.map((job) => [job.jobId, job]));
  const out = new Map<string, HandOffPair>();
  for (const job of jobs) {
    const parents = job.dependsOn ?? [];
    if (parents.length === 0) continue;
    let lastFinished = -Infinity;
    let lastEnd = -Infinity;
    for (const id of parents) {
      const parent = byId.get(id);
      if (parent === undefined) throw new Error(`job ${job.jobId}: parent ${id} is not COMPLETED`);
      lastFinished = Math.max(lastFinished, parent.finishedAtMillis ?? NaN);
      lastEnd = Math.max(lastEnd, stampOf(parent).endMs);
    }
    out.set(job.jobId, {
      core: (job.startedAtMillis ?? NaN) - lastFinished,
      wire: stampOf(job).startMs - lastEnd,
    });
  }
  return out;
}

function summary(values: readonly number[]): HandOff {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.some((v) => !Number.isFinite(v) || v < 0)) {
    throw new Error('a dependent has no start time or started before a parent ended');
  }
  return {
    count: sorted.length,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    maxMs: sorted[sorted.length - 1] ?? NaN,
  };
}

async function nothingLeft(client: DtpClient): Promise<boolean> {
  for (const state of ['WAITING', 'QUEUED', 'RUNNING', 'RETRY_WAIT'] as const) {
    if ((await client.listPage({ state, limit: 1 })).jobs.length > 0) return false;
  }
  return true;
}

async function waitCompleted(client: DtpClient, jobId: string): Promise<void> {
  await until(async () => (await client.status(jobId)).state === 'COMPLETED', {
    timeoutMs: 600_000,
    intervalMs: 20,
    what: `job ${jobId} COMPLETED`,
  });
}

async function withCoordinator<T>(
  args: string[],
  body: (c: { client: DtpClient; workerPort: number; httpPort: number; pid: number }) => Promise<T>,
): Promise<T> {
  const httpPort = await freePort();
  const c = await startQuietCoordinator([...args, '--http-port', String(httpPort)]);
  const client = await DtpClient.connect({ host: HOST, port: c.clientPort });
  try {
    return await body({ client, workerPort: c.workerPort, httpPort, pid: c.proc.pid });
  } finally {
    await client.close();
    await c.proc.stop();
  }
}

export async function fanInRun(dir: string, parents: number): Promise<FanInRun> {
  const args = [
    '--database',
    `${dir}/fan-in-${parents}.db`,
    '--max-active-jobs',
    String(parents * 2),
  ];
  return withCoordinator(args, async ({ client, workerPort }) => {
    const started = performance.now();
    const parentIds: string[] = [];
    for (let sent = 0; sent < parents; sent += 1_000) {
      const n = Math.min(1_000, parents - sent);
      const batch = Array.from({ length: n }, (_, i) => ({
        taskType: 'stamp',
        payload: { text: `parent-${sent + i}` },
      }));
      parentIds.push(...(await client.submitMany(batch)));
    }
    const joins: FlowJobSpec[] = [];
    for (let from = 0; from < parentIds.length; from += MAX_PARENTS) {
      joins.push({
        ref: `join-${joins.length}`,
        taskType: 'stamp',
        payload: { text: `join-${joins.length}` },
        // Ahead of the parents still queued: the hand-off, not the queue, is measured.
        priority: 'HIGH',
        dependsOn: parentIds.slice(from, from + MAX_PARENTS),
      });
    }
    const final: FlowJobSpec = {
      ref: 'final',
      taskType: 'stamp',
      payload: { text: 'final' },
      dependsOn: joins.map((join) => join.ref),
    };
    const flow = await client.submitFlow({ jobs: [...joins, final] });
    const submitMs = performance.now() - started;
    const running = performance.now();
    const workers = startWorkers(workerPort);
    try {
      const finalId = flow.jobs.final as string;
      await waitCompleted(client, finalId);
      const runMs = performance.now() - running;
      const byJob = handOffs(await allIn(client, 'COMPLETED'));
      const joinIds = joins.map((join) => flow.jobs[join.ref] as string);
      return {
        parents,
        submitMs,
        joinCore: summary(joinIds.map((id) => byJob.get(id)?.core ?? NaN)),
        joinWire: summary(joinIds.map((id) => byJob.get(id)?.wire ?? NaN)),
        final: byJob.get(finalId) ?? { core: NaN, wire: NaN },
        runMs,
      };
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
  });
}

/** The layered DAG: `layers` x `width` jobs, one SUBMIT_FLOW. */
export function layeredFlow(layers: number, width: number): FlowJobSpec[] {
  const jobs: FlowJobSpec[] = [];
  for (let layer = 0; layer < layers; layer++) {
    for (let i = 0; i < width; i++) {
      const above = (j: number): string => `L${layer - 1}-${j % width}`;
      jobs.push({
        ref: `L${layer}-${i}`,
        taskType: 'stamp',
        payload: { text: `L${layer}-${i}` },
        ...(layer === 0 ? {} : { dependsOn: width === 1 ? [above(i)] : [above(i), above(i + 1)] }),
      });
    }
  }
  return jobs;
}

export async function layeredRun(dir: string, layers: number, width: number): Promise<LayeredRun> {
  const jobs = layers * width;
  const args = ['--database', `${dir}/layered-${jobs}.db`, '--max-active-jobs', String(jobs * 2)];
  return withCoordinator(args, async ({ client, workerPort, httpPort, pid }) => {
    const spec = layeredFlow(layers, width);
    const rssBeforeMiB = rssMiB(pid);
    const heapBeforeMiB = await heapMiB(httpPort);
    const started = performance.now();
    await client.submitFlow({ jobs: spec });
    const submitMs = performance.now() - started;
    const rssAfterMiB = rssMiB(pid);
    const heapAfterMiB = await heapMiB(httpPort);
    const running = performance.now();
    const workers = startWorkers(workerPort);
    try {
      await until(() => nothingLeft(client), {
        timeoutMs: 600_000,
        intervalMs: 20,
        what: 'every job of the flow ended',
      });
      const runMs = performance.now() - running;
      const byJob = handOffs(await allIn(client, 'COMPLETED'));
      return {
        jobs,
        layers,
        submitMs,
        rssBeforeMiB,
        rssAfterMiB,
        heapBeforeMiB,
        heapAfterMiB,
        handOffCore: summary([...byJob.values()].map((h) => h.core)),
        handOffWire: summary([...byJob.values()].map((h) => h.wire)),
        runMs,
      };
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
  });
}
