/**
 * End-to-end throughput: real coordinator and workers as processes, the
 * bench command as a separate process, SHA256 jobs of a few bytes (so the
 * coordinator's path dominates, not the task). Closed loop: each connection
 * has one job in flight (`--in-flight 1`), or several with pipelining.
 */
import { runBenchCli, startCluster } from './harness.js';

export interface ThroughputRun {
  durability: string;
  concurrency: number;
  inFlight: number;
  jobsPerSec: number;
  ackP50Ms: number;
  ackP99Ms: number;
  e2eP50Ms: number;
  e2eP99Ms: number;
}

export async function throughput(
  dir: string,
  durability: 'normal' | 'full',
  concurrency: number,
  inFlight: number,
  jobs: number,
): Promise<ThroughputRun> {
  const cluster = await startCluster(
    [
      '--database',
      `${dir}/throughput-${durability}-${concurrency}-${inFlight}.db`,
      '--durability',
      durability,
    ],
    2,
    8,
  );
  try {
    const r = await runBenchCli(cluster.clientPort, [
      ...['--task', 'sha256', '--jobs', String(jobs), '--warmup', String(Math.min(jobs, 500))],
      ...['--concurrency', String(concurrency), '--in-flight', String(inFlight)],
    ]);
    const ack = r.submitAckMillis as { p50: number; p99: number };
    const e2e = r.endToEndMillis as { p50: number; p99: number };
    return {
      durability,
      concurrency,
      inFlight,
      jobsPerSec: r.throughputJobsPerSec as number,
      ackP50Ms: ack.p50,
      ackP99Ms: ack.p99,
      e2eP50Ms: e2e.p50,
      e2eP99Ms: e2e.p99,
    };
  } finally {
    await cluster.stop();
  }
}
