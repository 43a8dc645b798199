/**
 * How fast the system reacts, with real processes: the time from a worker's
 * death to its job running elsewhere (its connection closes: SIGKILL; or it
 * goes silent: SIGSTOP, found by the heartbeat timeout), and the time from a
 * cancel to the cancelled task's slot running the next job. The job's state
 * is polled every 2 ms, so figures are that precise. A cancel of computing
 * tasks: four PRIME_COUNT 50,000,000 running on a 4-slot worker, cancelled;
 * the time until the worker logged all four stopped, and the CPU time the
 * worker process used meanwhile (from /proc, in 10 ms ticks). And, in-process, the
 * hop every attempt makes through a task thread when the thread was idle:
 * the part of a job's idle latency that running task code off the worker's
 * main thread costs.
 */
import { DtpClient } from '../src/client/index.js';
import type { JobSnapshot } from '../src/protocol/messages.js';
import type { ScriptProcess } from '../test/helpers/processes.js';
import { until } from '../test/helpers/until.js';
import { TaskPool, type TaskRun } from '../src/worker/task-pool.js';
import { HOST, startCluster } from './harness.js';

const POLL_MS = 2;
/** Every cluster gets a database of its own (a reused one would recover the last run's job). */
let runs = 0;
const freshDb = (dir: string, name: string): string => `${dir}/latency-${name}-${++runs}.db`;
const HEARTBEAT_TIMEOUT_MS = 1_000;

export interface LatencyRun {
  /** SIGKILL of the worker running a job -> the job RUNNING on another worker. */
  killReassignMs: number;
  /** SIGSTOP of the worker running a job -> the job RUNNING on another worker. */
  stopReassignMs: number;
  /** CANCEL_JOB of a running SLEEP sent -> the next job RUNNING on the freed slot. */
  cancelToNextMs: number;
  /** Four CANCEL_JOB of running PRIME_COUNT 50,000,000 sent -> the worker logged all four stopped. */
  cancelComputingMs: number;
  /** CPU time of the worker process over that time. */
  cancelComputingCpuMs: number;
  /** Median of TaskPool.run(SHA256) -> its outcome, on a warm thread idle for 10 ms before each. */
  threadRoundTripMs: number;
  /** CPU per attempt through a busy pool of 4 slots, 16 in flight (poolCpuPerAttempt), µs. */
  poolCpuUs: number;
  /** The same through one shared thread of 64 slots, 128 in flight, µs. */
  sharedCpuUs: number;
}

async function runningOnOther(
  client: DtpClient,
  jobId: string,
  notOn: string,
  startedMs: number,
): Promise<number> {
  await until(
    async () => {
      const job = await client.status(jobId);
      return job.state === 'RUNNING' && job.workerId !== notOn;
    },
    { timeoutMs: 30_000, intervalMs: POLL_MS, what: `job ${jobId} elsewhere` },
  );
  return performance.now() - startedMs;
}

async function runningJob(client: DtpClient, jobId: string): Promise<JobSnapshot> {
  return until(
    async () => {
      const job = await client.status(jobId);
      return job.state === 'RUNNING' ? job : null;
    },
    { timeoutMs: 30_000, intervalMs: POLL_MS, what: `job ${jobId} to run` },
  );
}

/** Kills (or freezes) the worker running a long job; measures the reassignment. */
async function reassignAfter(signal: 'SIGKILL' | 'SIGSTOP', dir: string): Promise<number> {
  const cluster = await startCluster(
    [
      '--database',
      freshDb(dir, signal),
      '--heartbeat-timeout-millis',
      String(HEARTBEAT_TIMEOUT_MS),
      '--sweep-interval-millis',
      '20',
    ],
    2,
    1,
    ['--heartbeat-interval-millis', '100'],
  );
  const client = await DtpClient.connect({ host: HOST, port: cluster.clientPort });
  try {
    const { jobId } = await client.submit({
      taskType: 'SLEEP',
      payload: { durationMillis: 60_000 },
    });
    const job = await runningJob(client, jobId);
    // startCluster names its workers bench-1, bench-2, ... in order.
    const index = Number((job.workerId ?? '').replace('bench-', '')) - 1;
    const target = cluster.workers[index] as ScriptProcess;
    const startedMs = performance.now();
    target.signal(signal);
    const ms = await runningOnOther(client, jobId, job.workerId ?? '', startedMs);
    if (signal === 'SIGSTOP') target.signal('SIGCONT');
    return ms;
  } finally {
    await client.close();
    await cluster.stop();
  }
}

/** Cancels a running job and measures until a queued one runs in its slot. */
async function cancelToNext(dir: string): Promise<number> {
  const cluster = await startCluster(['--database', freshDb(dir, 'cancel')], 1, 1);
  const client = await DtpClient.connect({ host: HOST, port: cluster.clientPort });
  try {
    const { jobId } = await client.submit({
      taskType: 'SLEEP',
      payload: { durationMillis: 60_000 },
    });
    await runningJob(client, jobId);
    const next = await client.submit({ taskType: 'SLEEP', payload: { durationMillis: 1 } });
    const startedMs = performance.now();
    await client.cancel(jobId);
    await until(
      async () => {
        const job = await client.status(next.jobId);
        return job.state !== 'QUEUED';
      },
      { timeoutMs: 30_000, intervalMs: POLL_MS, what: 'the next job to start' },
    );
    return performance.now() - startedMs;
  } finally {
    await client.close();
    await cluster.stop();
  }
}

const PRIME_LIMIT_MAX = 50_000_000;

function lines(output: string, pattern: RegExp): number {
  return output.split('\n').filter((line) => pattern.test(line)).length;
}

/** Cancels four computing PRIME_COUNT on one 4-slot worker: time to stopped, and the CPU used meanwhile. */
async function cancelComputing(dir: string): Promise<{ ms: number; cpuMs: number }> {
  const cluster = await startCluster(['--database', freshDb(dir, 'cancel-cpu')], 1, 4);
  const client = await DtpClient.connect({ host: HOST, port: cluster.clientPort });
  const worker = cluster.workers[0] as ScriptProcess;
  try {
    const jobIds: string[] = [];
    for (let i = 0; i < 4; i++) {
      const payload = { limit: PRIME_LIMIT_MAX };
      jobIds.push((await client.submit({ taskType: 'PRIME_COUNT', payload })).jobId);
    }
    await until(() => lines(worker.output, /task started/) === 4, {
      timeoutMs: 30_000,
      intervalMs: POLL_MS,
      what: 'four counts running',
    });
    const startedMs = performance.now();
    const startCpuMs = worker.cpuMs();
    await Promise.all(jobIds.map((jobId) => client.cancel(jobId)));
    // A limit for a hang, not a speed check (the machine may be busy with other tests).
    await until(() => lines(worker.output, /task stopped/) === 4, {
      timeoutMs: 90_000,
      intervalMs: POLL_MS,
      what: 'four counts stopped',
    }).catch((err: unknown) => {
      process.stderr.write(`--- the worker said:\n${worker.output.slice(-4_000)}\n`);
      throw err;
    });
    return { ms: performance.now() - startedMs, cpuMs: worker.cpuMs() - startCpuMs };
  } finally {
    await client.close();
    await cluster.stop();
  }
}

/** The i-th SHA256 attempt of a pool benchmark, on the text `<label> <i>`. */
function sha256Attempt(label: string, i: number): TaskRun {
  return {
    taskType: 'SHA256',
    payload: { text: `${label} ${i}` },
    jobId: `job-${i}`,
    attemptId: `attempt-${i}`,
    attemptNumber: 1,
    maxAttempts: null,
    deadlineAtMs: null,
  };
}

/** Runs `count` SHA256 attempts one by one through a pool of one thread, each after 10 ms idle. */
async function threadRoundTrip(count: number): Promise<number> {
  const pool = new TaskPool({ capacity: 1 });
  const times: number[] = [];
  try {
    for (let i = -10; i < count; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      const startedMs = performance.now();
      const attempt = pool.run(sha256Attempt('round trip', i));
      await attempt.outcome;
      if (i >= 0) times.push(performance.now() - startedMs); // the first 10 warm the thread
    }
  } finally {
    await pool.close();
  }
  times.sort((a, b) => a - b);
  return times[Math.floor((times.length - 1) / 2)] ?? 0;
}

/**
 * CPU per attempt through a busy task pool: `count` SHA256 attempts, the
 * pool's capacity and queue (as a prefetching worker holds them) and its
 * shared threads as given, `inFlight` kept in flight, after a warm-up of
 * 1,000. The process's CPU time (the main thread and the task threads) over
 * the attempts, in µs each.
 */
async function poolCpuPerAttempt(
  count: number,
  shape: { capacity: number; threads?: number; inFlight: number },
): Promise<number> {
  const pool = new TaskPool({
    capacity: shape.capacity,
    queueLimit: 3 * shape.capacity,
    ...(shape.threads === undefined ? {} : { threads: shape.threads }),
  });
  const runAll = async (n: number, from: number): Promise<void> => {
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < n) {
        const i = from + next++;
        const outcome = await pool.run(sha256Attempt('busy pool', i)).outcome;
        if (!outcome.success) throw new Error(`SHA256 failed in the pool: ${outcome.error}`);
      }
    };
    await Promise.all(Array.from({ length: shape.inFlight }, lane));
  };
  try {
    await runAll(1_000, 0);
    const start = process.cpuUsage();
    await runAll(count, 1_000);
    const { user, system } = process.cpuUsage(start);
    return (user + system) / count;
  } finally {
    await pool.close();
  }
}

export async function latencies(dir: string, roundTrips = 300): Promise<LatencyRun> {
  return {
    killReassignMs: await reassignAfter('SIGKILL', dir),
    stopReassignMs: await reassignAfter('SIGSTOP', dir),
    cancelToNextMs: await cancelToNext(dir),
    ...(await cancelComputing(dir).then(({ ms, cpuMs }) => ({
      cancelComputingMs: ms,
      cancelComputingCpuMs: cpuMs,
    }))),
    threadRoundTripMs: await threadRoundTrip(roundTrips),
    poolCpuUs: await poolCpuPerAttempt(roundTrips * 70, { capacity: 4, inFlight: 16 }),
    sharedCpuUs: await poolCpuPerAttempt(roundTrips * 70, {
      capacity: 64,
      threads: 1,
      inFlight: 128,
    }),
  };
}

export { HEARTBEAT_TIMEOUT_MS };
