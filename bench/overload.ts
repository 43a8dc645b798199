/**
 * The overload experiment: 3 workers × capacity 4, 240 SLEEP jobs of 500 ms
 * (a smoke run: 50 ms) burst from 8 connections (all submitted at once), once
 * with admission control effectively off (limit 10,000) and once with
 * `--max-active-jobs 24`.
 * Bounding the active jobs should cut the end-to-end p99 of the accepted jobs
 * roughly tenfold while completing jobs at the same rate.
 */
import { runBenchCli, startCluster } from './harness.js';

export interface OverloadRun {
  limit: number;
  accepted: number;
  rejected: number;
  completed: number;
  throughputJobsPerSec: number;
  p50Ms: number;
  p99Ms: number;
}

async function once(limit: number, dir: string, sleepMs: number): Promise<OverloadRun> {
  const cluster = await startCluster(
    [
      '--database',
      `${dir}/overload-${limit}.db`,
      '--max-active-jobs',
      String(limit),
      '--sweep-interval-millis',
      '50',
    ],
    3,
    4,
  );
  try {
    const r = await runBenchCli(cluster.clientPort, [
      ...['--task', 'sleep', '--sleep-millis', String(sleepMs), '--jobs', '240'],
      // The warmup starts every worker's task threads, so the measured jobs do
      // not pay for thread start-up.
      ...['--concurrency', '8', '--in-flight', '30', '--warmup', '12'],
    ]);
    const e2e = r.endToEndMillis as { p50: number; p99: number };
    return {
      limit,
      accepted: r.accepted as number,
      rejected: r.rejected as number,
      completed: r.completed as number,
      throughputJobsPerSec: r.throughputJobsPerSec as number,
      p50Ms: e2e.p50,
      p99Ms: e2e.p99,
    };
  } finally {
    await cluster.stop();
  }
}

export async function overloadExperiment(dir: string, sleepMs = 500): Promise<OverloadRun[]> {
  return [await once(10_000, dir, sleepMs), await once(24, dir, sleepMs)];
}
