/**
 * How fast the system reacts, with real processes: the time from a worker's
 * death to its job running elsewhere (its connection closes: SIGKILL; or it
 * goes silent: SIGSTOP, found by the heartbeat timeout), and the time from a
 * cancel to the cancelled task's slot running the next job. The job's state
 * is polled every 2 ms, so figures are that precise.
 */
import { DtpClient } from '../src/client/index.js';
import type { JobSnapshot } from '../src/protocol/messages.js';
import type { ScriptProcess } from '../test/helpers/processes.js';
import { until } from '../test/helpers/until.js';
import { HOST, startCluster } from './harness.js';

const POLL_MS = 2;
const HEARTBEAT_TIMEOUT_MS = 1_000;

export interface LatencyRun {
  /** SIGKILL of the worker running a job -> the job RUNNING on another worker. */
  killReassignMs: number;
  /** SIGSTOP of the worker running a job -> the job RUNNING on another worker. */
  stopReassignMs: number;
  /** CANCEL_JOB of a running SLEEP sent -> the next job RUNNING on the freed slot. */
  cancelToNextMs: number;
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
      `${dir}/latency-${signal}.db`,
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
  const cluster = await startCluster(['--database', `${dir}/latency-cancel.db`], 1, 1);
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

export async function latencies(dir: string): Promise<LatencyRun> {
  return {
    killReassignMs: await reassignAfter('SIGKILL', dir),
    stopReassignMs: await reassignAfter('SIGSTOP', dir),
    cancelToNextMs: await cancelToNext(dir),
  };
}

export { HEARTBEAT_TIMEOUT_MS };
