/**
 * Restart cost as history grows: a database with N jobs (1 % still queued,
 * the rest completed) is written directly, then a real coordinator process is
 * started on it. We record the time from spawning the process until its
 * client port answers (what an operator waits for), the coordinator's own
 * recovery time (store opened and memory rebuilt), and its resident memory.
 */
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { JobRecord } from '../src/store/store.js';
import { rssMiB, startQuietCoordinator } from './harness.js';

/** Writes `rows` jobs; every hundredth is still QUEUED. */
export async function writeHistory(path: string, rows: number): Promise<void> {
  const store = await SqliteStore.open({ path });
  const now = Date.now() - 86_400_000;
  let jobs: { job: JobRecord; isNew: boolean }[] = [];
  let batchId = 1;
  for (let seq = 1; seq <= rows; seq++) {
    const queued = seq % 100 === 0;
    const job: JobRecord = {
      seq,
      jobId: `00000000-0000-4000-8000-${seq.toString(16).padStart(12, '0')}`,
      taskType: 'SHA256',
      payloadJson: `{"text":"history ${seq}"}`,
      state: queued ? 'QUEUED' : 'COMPLETED',
      priority: 'NORMAL',
      attempts: queued ? 0 : 1,
      maxAttempts: 3,
      timeoutMs: 600_000,
      idempotencyKey: null,
      workerId: null,
      attemptId: null,
      deadlineAtMs: null,
      retryAtMs: null,
      result: queued ? null : 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      resultFormat: null,
      error: null,
      createdAtMs: now + seq,
      updatedAtMs: now + seq,
      startedAtMs: queued ? null : now + seq,
      finishedAtMs: queued ? null : now + seq,
      dependsOn: null,
      onParentFailure: null,
      runAtMs: null,
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

export interface RecoveryRun {
  rows: number;
  readyMs: number;
  recoveryMs: number;
  activeJobs: number;
  rssMiB: number;
}

/** Starts a coordinator on an existing database and measures it. */
export async function measureRecovery(path: string, rows: number): Promise<RecoveryRun> {
  const started = performance.now();
  const c = await startQuietCoordinator(['--database', path, '--log-level', 'info']);
  const readyMs = Math.round(performance.now() - started);
  try {
    const line = await c.proc.waitForOutput(/activeJobs=(\d+) recoveryMs=(\d+)/);
    return {
      rows,
      readyMs,
      recoveryMs: Number(line[2]),
      activeJobs: Number(line[1]),
      rssMiB: rssMiB(c.proc.pid),
    };
  } finally {
    await c.proc.stop();
  }
}
