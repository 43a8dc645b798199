/**
 * A complete, plausible `JobRecord` for tests: a QUEUED job with defaults
 * everywhere, changed only where a test says so; the same as a core job;
 * and batches of them to commit.
 */
import { fromRecord, type CoreJob } from '../../src/coordinator/core/job.js';
import type { AttemptRecord, JobRecord, WriteBatch } from '../../src/store/store.js';

let nextBatch = 1;

/** A batch with the next batch id (one counter for every test of a process). */
export function batchOf(
  jobs: { job: JobRecord; isNew: boolean }[],
  attempts: AttemptRecord[] = [],
): WriteBatch {
  return { batchId: nextBatch++, jobs, attempts };
}

export function jobRecord(seq: number, overrides: Partial<JobRecord> = {}): JobRecord {
  return {
    seq,
    jobId: `job-${seq}`,
    taskType: 'SHA256',
    payloadJson: JSON.stringify({ text: `t${seq}` }),
    state: 'QUEUED',
    priority: 'NORMAL',
    attempts: 0,
    maxAttempts: 3,
    timeoutMs: 60_000,
    idempotencyKey: null,
    workerId: null,
    attemptId: null,
    deadlineAtMs: null,
    retryAtMs: null,
    result: null,
    resultFormat: null,
    error: null,
    createdAtMs: 1_000 + seq,
    updatedAtMs: 1_000 + seq,
    startedAtMs: null,
    finishedAtMs: null,
    dependsOn: null,
    onParentFailure: null,
    progress: null,
    runAtMs: null,
    scheduleName: null,
    traceContext: null,
    queue: 'default',
    groupKey: null,
    parentJobId: null,
    childKey: null,
    dedupKey: null,
    dedupMode: null,
    dedupUntilMs: null,
    expiresAtMs: null,
    rateLimitedInARow: 0,
    ...overrides,
  };
}

/** The same job as the core holds it in memory (no attempt history). */
export function coreJob(seq: number, overrides: Partial<JobRecord> = {}): CoreJob {
  return fromRecord(jobRecord(seq, overrides), []);
}
