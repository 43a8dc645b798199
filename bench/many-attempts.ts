/**
 * One worker that holds many attempts at once: a coordinator and one worker
 * process (`worker.sh --capacity C`), `jobs` SLEEP jobs of `sleepMs` each
 * (an attempt that awaits a timer, the shape of I/O), submitted in batches.
 * Measured: the wall time from the first submission to the last completion,
 * the worker process's peak resident memory and peak thread count (sampled
 * from /proc every 50 ms), and how many jobs took more than one attempt.
 */
import { readdirSync } from 'node:fs';
import { DtpClient } from '../src/client/index.js';
import { HOST, rssMiB, startCluster } from './harness.js';

export interface ManyAttemptsRun {
  jobs: number;
  capacity: number;
  wallMs: number;
  peakRssMiB: number;
  peakThreads: number;
  /** Jobs that ended with more than one attempt (a retry). */
  retried: number;
  failed: number;
}

/** Threads of a process now (/proc/<pid>/task). */
function threadCount(pid: number): number {
  return readdirSync(`/proc/${pid}/task`).length;
}

/** Samples a process's memory and threads every 50 ms until stopped; the peaks. */
function sampler(pid: number): { stop: () => { rssMiB: number; threads: number } } {
  let rss = 0;
  let threads = 0;
  const sample = (): void => {
    try {
      rss = Math.max(rss, rssMiB(pid));
      threads = Math.max(threads, threadCount(pid));
    } catch {
      // the process is gone: the peaks so far stand
    }
  };
  sample();
  const timer = setInterval(sample, 50);
  return {
    stop: () => {
      clearInterval(timer);
      sample();
      return { rssMiB: rss, threads };
    },
  };
}

export async function manyAttempts(
  jobs: number,
  capacity: number,
  sleepMs: number,
  workerArgs: string[] = [],
): Promise<ManyAttemptsRun> {
  const cluster = await startCluster(
    ['--database', ':memory:', '--max-active-jobs', String(Math.max(10_000, jobs))],
    1,
    capacity,
    ['--log-level', 'warn', ...workerArgs],
  );
  const worker = cluster.workers[0];
  if (worker === undefined) throw new Error('no worker started');
  const client = await DtpClient.connect({ host: HOST, port: cluster.clientPort });
  try {
    const peaks = sampler(worker.pid);
    const startedMs = performance.now();
    const ids: string[] = [];
    for (let from = 0; from < jobs; from += 1_000) {
      const batch = Array.from({ length: Math.min(1_000, jobs - from) }, () => ({
        taskType: 'SLEEP',
        payload: { durationMillis: sleepMs },
      }));
      ids.push(...(await client.submitMany(batch)));
    }
    let retried = 0;
    let failed = 0;
    // Waits held 200 at a time: the last completion, not a queue of replies, ends the run.
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < ids.length) {
        const job = await client.wait(ids[next++] as string, 600_000);
        if (job.state !== 'COMPLETED') failed++;
        if (job.attempts > 1) retried++;
      }
    };
    await Promise.all(Array.from({ length: 200 }, lane));
    const wallMs = performance.now() - startedMs;
    const { rssMiB: peakRssMiB, threads: peakThreads } = peaks.stop();
    return { jobs, capacity, wallMs, peakRssMiB, peakThreads, retried, failed };
  } finally {
    await client.close();
    await cluster.stop();
  }
}
