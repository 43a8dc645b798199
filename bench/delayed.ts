/**
 * A million delayed jobs: a SQLite database holding `count` SCHEDULED jobs
 * due over the next 30 days (from one hour ahead on), written with the store
 * directly in batches of 10,000 (the same rows SUBMIT_JOB with `runAtMillis`
 * writes, much faster than a million submissions). Measured on it, with the
 * coordinator as a separate process: restart to ready (spawn until the client
 * port answers, the recovery bench's method), the coordinator's recovery
 * time and RSS; then the throughput of a stream of ready jobs (SUBMIT_JOBS
 * of 500, 3 workers of 4) with and without the delayed jobs, alternating.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { DtpClient } from '../src/client/index.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { JobRecord } from '../src/store/store.js';
import { until } from '../test/helpers/until.js';
import { HOST, rssMiB, startCluster } from './harness.js';
import { measureRecovery, type RecoveryRun } from './recovery.js';

const DAY_MS = 86_400_000;

/** Writes `count` SCHEDULED jobs due evenly from now + 1 h to now + 30 days. */
export async function writeDelayed(path: string, count: number): Promise<void> {
  const store = await SqliteStore.open({ path });
  const now = Date.now();
  const first = now + 3_600_000;
  const spanMs = 30 * DAY_MS - 3_600_000;
  let jobs: { job: JobRecord; isNew: boolean }[] = [];
  let batchId = 1;
  for (let seq = 1; seq <= count; seq++) {
    const job: JobRecord = {
      seq,
      jobId: `00000000-0000-4000-9000-${seq.toString(16).padStart(12, '0')}`,
      taskType: 'SHA256',
      payloadJson: `{"text":"reminder ${seq}"}`,
      state: 'SCHEDULED',
      priority: 'NORMAL',
      attempts: 0,
      maxAttempts: 3,
      timeoutMs: 600_000,
      idempotencyKey: null,
      workerId: null,
      attemptId: null,
      deadlineAtMs: null,
      retryAtMs: null,
      result: null,
      resultFormat: null,
      error: null,
      createdAtMs: now,
      updatedAtMs: now,
      startedAtMs: null,
      finishedAtMs: null,
      dependsOn: null,
      onParentFailure: null,
      runAtMs: first + Math.floor((spanMs * (seq - 1)) / count),
      scheduleName: null,
      queue: 'default',
      groupKey: null,
    };
    jobs.push({ job, isNew: true });
    if (jobs.length === 10_000) {
      await store.commit({ batchId: batchId++, jobs, attempts: [] });
      jobs = [];
    }
  }
  if (jobs.length > 0) await store.commit({ batchId: batchId++, jobs, attempts: [] });
  await store.close();
}

export interface StreamRun {
  /** Ready jobs done per second, first submission to last completion. */
  donePerSec: number;
  /** The coordinator's RSS once the stream is done, MiB. */
  rssMiB: number;
  /** CPU time of the coordinator process per ready job, ms (less sensitive to other load). */
  coordinatorCpuMsPerJob: number;
}

async function allDone(client: DtpClient): Promise<boolean> {
  for (const state of ['QUEUED', 'RUNNING', 'RETRY_WAIT'] as const) {
    if ((await client.listPage({ state, limit: 1 })).jobs.length > 0) return false;
  }
  return true;
}

/** `jobs` ready SHA256 jobs through 2 producers in SUBMIT_JOBS of 500, on the database at `path`. */
export async function readyStream(path: string, jobs: number): Promise<StreamRun> {
  const cluster = await startCluster(
    ['--database', path, '--max-active-jobs', String(jobs * 2)],
    3,
    4,
  );
  const watcher = await DtpClient.connect({ host: HOST, port: cluster.clientPort });
  try {
    const started = performance.now();
    const cpuBeforeMs = cluster.coordinator.cpuMs();
    const share = Math.ceil(jobs / 2);
    await Promise.all(
      [0, 1].map(async (p) => {
        const client = await DtpClient.connect({ host: HOST, port: cluster.clientPort });
        try {
          for (let sent = 0; sent < share; sent += 500) {
            const n = Math.min(500, share - sent);
            await client.submitMany(
              Array.from({ length: n }, (_, i) => ({
                taskType: 'SHA256',
                payload: { text: `ready-${p}-${sent + i}` },
              })),
            );
          }
        } finally {
          await client.close();
        }
      }),
    );
    await until(() => allDone(watcher), { timeoutMs: 600_000, intervalMs: 20, what: 'all jobs' });
    const doneMs = performance.now() - started;
    return {
      donePerSec: ((share * 2) / doneMs) * 1000,
      rssMiB: rssMiB(cluster.coordinator.pid),
      coordinatorCpuMsPerJob: (cluster.coordinator.cpuMs() - cpuBeforeMs) / (share * 2),
    };
  } finally {
    await watcher.close();
    await cluster.stop();
  }
}

export interface DelayedResult {
  count: number;
  restarts: RecoveryRun[];
  without: StreamRun[];
  with: StreamRun[];
}

/** The whole benchmark: `repeats` restarts, then `repeats` streams each way, alternating. */
export async function delayedBench(
  dir: string,
  count: number,
  readyJobs: number,
  repeats: number,
): Promise<DelayedResult> {
  const path = join(dir, `delayed-${count}.db`);
  await writeDelayed(path, count);
  const result: DelayedResult = { count, restarts: [], without: [], with: [] };
  try {
    for (let i = 0; i < repeats; i++) result.restarts.push(await measureRecovery(path, count));
    for (let i = 0; i < repeats; i++) {
      const empty = join(dir, `ready-${i}.db`);
      result.without.push(await readyStream(empty, readyJobs));
      rmSync(empty, { force: true });
      result.with.push(await readyStream(path, readyJobs));
    }
  } finally {
    rmSync(path, { force: true });
  }
  return result;
}
