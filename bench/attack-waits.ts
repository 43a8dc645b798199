/**
 * Pending waits as an attack: a flood-peer process opens many client
 * connections and sends each a burst of WAIT_JOB requests (timeout 1 h) on
 * jobs that stay queued (no worker runs them), on a coordinator process of
 * its own with the default caps. Measured: the coordinator's RSS before,
 * with every wait it accepted pending, and after the flood's connections
 * closed (right after the last wait was dropped, and again a few seconds
 * later); how many waits it held at the peak; and the round trip of a victim
 * client's GET_JOB_STATUS, every 20 ms, throughout.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DtpClient } from '../src/client/index.js';
import { Flood, rssBytes } from '../test/helpers/flood.js';
import { startCoordinatorProcess } from '../test/helpers/processes.js';
import { until } from '../test/helpers/until.js';
import { HOST, median } from './harness.js';

const MIB = 1024 * 1024;
/** How long the RSS is watched after the flood closed, for memory given back late, in ms. */
const SETTLE_MS = 5_000;

export interface WaitAttack {
  connections: number;
  waitsPerConnection: number;
  /** Waits the coordinator held at the peak (its dtp_pending_waits gauge). */
  heldWaits: number;
  baseMiB: number;
  duringMiB: number;
  /** Right after the last wait was dropped, and SETTLE_MS later. */
  afterCloseMiB: number;
  settledMiB: number;
  victimRequests: number;
  victimMedianMs: number;
  victimP99Ms: number;
  victimMaxMs: number;
}

async function pendingWaits(httpPort: number): Promise<number> {
  const text = await (await fetch(`http://${HOST}:${httpPort}/metrics`)).text();
  const match = /^dtp_pending_waits (\d+)$/m.exec(text);
  if (match === null) throw new Error('no dtp_pending_waits in /metrics');
  return Number(match[1]);
}

/** GET_JOB_STATUS every 20 ms until stopped; the round trips, in ms. */
function victim(client: DtpClient, jobId: string): { stop(): Promise<number[]> } {
  const times: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      await client.status(jobId);
      times.push(performance.now() - started);
      await sleep(20);
    }
  })();
  // Stopped (and awaited) before the client closes; an error surfaces from stop().
  loop.catch(() => undefined);
  return {
    stop: async () => {
      running = false;
      await loop;
      return times;
    },
  };
}

/** `scale` shrinks the flood (a smoke run); 1 = 200 connections of 10,000 waits. */
export async function waitAttack(scale = 1, extraArgs: string[] = []): Promise<WaitAttack> {
  const connections = Math.max(2, Math.round(200 * scale));
  const waitsPerConnection = Math.max(10, Math.round(10_000 * scale));
  const c = await startCoordinatorProcess([
    '--database',
    ':memory:',
    '--http-port',
    '0',
    ...extraArgs,
  ]);
  const httpMatch = /httpPort[=:"]+(\d+)/.exec(c.proc.output);
  if (httpMatch === null) throw new Error('the coordinator logged no httpPort');
  const httpPort = Number(httpMatch[1]);
  const rss = async (): Promise<number> => Math.round((await rssBytes(c.proc.pid)) / MIB);
  const client = await DtpClient.connect({ host: HOST, port: c.clientPort });
  try {
    const jobIds: string[] = [];
    for (let i = 0; i < 10; i++) {
      jobIds.push(
        (await client.submit({ taskType: 'SLEEP', payload: { durationMillis: 1 } })).jobId,
      );
    }
    const baseMiB = await rss();
    const watch = victim(client, jobIds[0] as string);
    const flood = Flood.start({
      port: c.clientPort,
      host: HOST,
      localAddress: '127.0.0.2',
      mode: 'waits',
      count: connections,
      waits: waitsPerConnection,
      jobIds,
      waitTimeoutMs: 3_600_000,
      holdMs: 600_000,
    });
    let heldWaits = 0;
    let duringMiB = 0;
    try {
      await flood
        .until((s) => (s.written ?? 0) >= connections, 'the waits written', 300_000)
        .catch((err: unknown) => {
          throw new Error(`${String(err)}; flood ${JSON.stringify(flood.stats)}`);
        });
      // Every wait is in once the count stops growing.
      let last = -1;
      await until(
        async () => {
          const now = await pendingWaits(httpPort);
          const steady = now === last;
          last = now;
          return steady;
        },
        { timeoutMs: 300_000, intervalMs: 500, what: 'the pending waits to stop growing' },
      );
      heldWaits = last;
      duringMiB = await rss();
    } finally {
      await flood.stop();
    }
    await until(async () => (await pendingWaits(httpPort)) === 0, {
      timeoutMs: 300_000,
      intervalMs: 50,
      what: 'every wait of the flood dropped',
    });
    const afterCloseMiB = await rss();
    await sleep(SETTLE_MS);
    const settledMiB = await rss();
    const times = await watch.stop();
    return {
      connections,
      waitsPerConnection,
      heldWaits,
      baseMiB,
      duringMiB,
      afterCloseMiB,
      settledMiB,
      victimRequests: times.length,
      victimMedianMs: median(times),
      victimP99Ms: [...times].sort((a, b) => a - b)[Math.floor(times.length * 0.99)] ?? 0,
      victimMaxMs: Math.max(...times),
    };
  } finally {
    await client.close();
    await c.proc.stop();
  }
}

/** The figures of one run as a Markdown table. */
export function waitAttackTable(r: WaitAttack): string[] {
  const rows: [string, string | number][] = [
    ['waits sent', `${r.connections} connections x ${r.waitsPerConnection.toLocaleString('en')}`],
    ['waits held at the peak', r.heldWaits.toLocaleString('en')],
    ['RSS before, MiB', r.baseMiB],
    ['RSS with the waits held, MiB', r.duringMiB],
    ['RSS once the flood closed, MiB', r.afterCloseMiB],
    [`RSS ${SETTLE_MS / 1000} s later, MiB`, r.settledMiB],
    ['victim GET_JOB_STATUS every 20 ms: requests', r.victimRequests],
    [
      'victim round trip, median / p99 / max, ms',
      `${r.victimMedianMs.toFixed(2)} / ${r.victimP99Ms.toFixed(1)} / ${r.victimMaxMs.toFixed(0)}`,
    ],
  ];
  return [
    '| waits flood (one run) | value |',
    '| --- | --- |',
    ...rows.map(([k, v]) => `| ${k} | ${v} |`),
  ];
}
