/**
 * Attacks on the coordinator's shared budgets, measured against a working
 * cluster (coordinator.sh and worker.sh as processes of their own, the floods
 * from a flood-peer process, default limits unless said):
 *
 * - large-frame flood: 300 connections per port from 127.0.0.2 that each
 *   declare a 1 MiB frame and send 1,000,000 bytes of it (300 MB per port,
 *   more than the 256 MiB budget), while a worker returns 300 KB results and
 *   a client submits 300 KB payloads from 127.0.0.1: jobs completed and
 *   failed, a job's end-to-end time, a large submission's acknowledgement,
 *   and the coordinator's RSS, against the same without the flood;
 * - idle flood against a client (client tokens on): 5,000 idle connections
 *   from the client's own address; how long a client takes to connect,
 *   authenticate and get a submission acknowledged, and how many of its
 *   tries succeed, against the same without the flood.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DtpClient } from '../src/client/index.js';
import { Flood } from '../test/helpers/flood.js';
import { ROOT, ScriptProcess } from '../test/helpers/processes.js';
import { until } from '../test/helpers/until.js';
import { HOST, median, rssMiB, startQuietCoordinator } from './harness.js';

const LARGE_RESULTS = join(ROOT, 'dist', 'test', 'fixtures', 'large-results.js');
const RESULT_BYTES = 300_000;
const TOKEN = 'bench-attack-token-0123456789abcdef';

export interface LargeFrameRun {
  flood: boolean;
  completed: number;
  failed: number;
  /** Median submit-to-COMPLETED of the result jobs, in ms. */
  jobMs: number;
  /** Median acknowledgement of a 300 KB submission, in ms. */
  largeSubmitMs: number;
  rssMiB: number;
}

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const value = await work();
  return [value, performance.now() - started];
}

/** One run of the large-frame story; `connections` per port (0 = no flood). */
export async function largeFrameFlood(connections: number, jobs: number): Promise<LargeFrameRun> {
  const c = await startQuietCoordinator(['--database', ':memory:']);
  const worker = ScriptProcess.start('worker.sh', [
    ...['--coordinator-host', HOST, '--coordinator-port', String(c.workerPort)],
    ...[
      '--id',
      'attack-victim',
      '--capacity',
      '4',
      '--tasks',
      LARGE_RESULTS,
      '--log-level',
      'warn',
    ],
  ]);
  const floods: Flood[] = [];
  const client = await DtpClient.connect({ host: HOST, port: c.clientPort });
  try {
    await until(async () => (await client.workers()).length === 1, {
      timeoutMs: 30_000,
      what: 'the worker',
    });
    if (connections > 0) {
      for (const port of [c.workerPort, c.clientPort]) {
        const plan = { port, host: HOST, localAddress: '127.0.0.2', count: connections };
        floods.push(
          Flood.start({ ...plan, mode: 'half-frame', bytes: 1_000_000, holdMs: 120_000 }),
        );
      }
      for (const f of floods) await f.until((s) => s.opened >= connections, 'the flood', 60_000);
      await client.workers(); // a round trip behind the flood
    }
    const jobTimes: number[] = [];
    let completed = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: jobs }, async () => {
        const [done, ms] = await timed(async () => {
          const job = await client.submit('blob', { bytes: RESULT_BYTES }, { maxAttempts: 1 });
          return client.wait(job.jobId, 120_000);
        });
        if (done.state === 'COMPLETED') completed++;
        else failed++;
        jobTimes.push(ms);
      }),
    );
    const submitTimes: number[] = [];
    for (let i = 0; i < 5; i++) {
      const payload = { text: `${i}`.repeat(RESULT_BYTES) };
      const [, ms] = await timed(() => client.submit('blob', payload, { maxAttempts: 1 }));
      submitTimes.push(ms);
    }
    return {
      flood: connections > 0,
      completed,
      failed,
      jobMs: median(jobTimes),
      largeSubmitMs: median(submitTimes),
      rssMiB: rssMiB(c.proc.pid),
    };
  } finally {
    await client.close();
    for (const f of floods) await f.stop();
    await Promise.all([worker.stop(), c.proc.stop()]);
  }
}

export interface IdleFloodRun {
  flood: boolean;
  tries: number;
  succeeded: number;
  /** Median and slowest connect + AUTH + one acknowledged submission, in ms. */
  medianMs: number;
  maxMs: number;
}

/** Clients with a token against `connections` idle connections from their own address. */
export async function idleFlood(
  dir: string,
  connections: number,
  tries: number,
): Promise<IdleFloodRun> {
  const tokens = join(dir, 'attack-tokens');
  writeFileSync(tokens, `${TOKEN}\n`, { mode: 0o600 });
  // Its readiness probe only connects: no request, so no token needed.
  const c = await startQuietCoordinator(['--database', ':memory:', '--client-token-file', tokens]);
  let flood: Flood | null = null;
  try {
    if (connections > 0) {
      flood = Flood.start({
        port: c.clientPort,
        host: HOST,
        mode: 'idle',
        count: connections,
        holdMs: 60_000,
      });
      await flood.until((s) => s.opened + s.closed >= connections, 'the idle flood', 60_000);
    }
    const times: number[] = [];
    let succeeded = 0;
    for (let i = -1; i < tries; i++) {
      const [ok, ms] = await timed(async () => {
        try {
          const client = await DtpClient.connect({ host: HOST, port: c.clientPort, token: TOKEN });
          try {
            await client.submit('SHA256', { text: `try ${i}` });
          } finally {
            await client.close();
          }
          return true;
        } catch {
          return false;
        }
      });
      if (i < 0) continue; // a warm-up try
      if (ok) succeeded++;
      times.push(ms);
    }
    const maxMs = Math.max(...times);
    return { flood: connections > 0, tries, succeeded, medianMs: median(times), maxMs };
  } finally {
    await flood?.stop();
    await c.proc.stop();
  }
}

function row(cells: (string | number)[]): string {
  return `| ${cells.join(' | ')} |`;
}

/** The tables of `npm run bench -- security`; `scale` < 1 shrinks the floods (smoke). */
export async function attackBudgetTables(dir: string, scale: number): Promise<string[]> {
  const perPort = Math.max(2, Math.round(300 * scale));
  const jobs = Math.max(2, Math.round(20 * scale));
  const lines = [
    '',
    row([
      `large-frame flood (${perPort} × 1 MB per port), ${jobs} jobs with 300 KB results`,
      'completed',
      'failed',
      'job ms (median)',
      '300 KB submit ms (median)',
      'coordinator RSS MiB',
    ]),
    row(['---', '---', '---', '---', '---', '---']),
  ];
  for (const connections of [0, perPort]) {
    const r = await largeFrameFlood(connections, jobs);
    lines.push(
      row([
        r.flood ? 'during the flood' : 'no flood',
        r.completed,
        r.failed,
        r.jobMs.toFixed(1),
        r.largeSubmitMs.toFixed(1),
        r.rssMiB,
      ]),
    );
  }
  const idle = Math.max(10, Math.round(5_000 * scale));
  const tries = 20;
  lines.push(
    '',
    row([
      `client with a token, ${idle} idle connections from its own address`,
      'succeeded',
      'connect + AUTH + submit ms (median)',
      'slowest ms',
    ]),
    row(['---', '---', '---', '---']),
  );
  for (const connections of [0, idle]) {
    const r = await idleFlood(dir, connections, tries);
    lines.push(
      row([
        r.flood ? 'during the flood' : 'no flood',
        `${r.succeeded}/${r.tries}`,
        r.medianMs.toFixed(1),
        r.maxMs.toFixed(1),
      ]),
    );
  }
  return lines;
}
