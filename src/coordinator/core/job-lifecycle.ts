/**
 * A job's life after submission: assignment under a lease, the outcome of an
 * attempt (success, failure, loss, deadline), retries with back-off, terminal
 * states, and the sweeps that move timers forward.
 */
import { isTerminalState, type JsonObject, type ResultFormat } from '../../protocol/messages.js';
import type { JobRecord } from '../../store/store.js';
import { transition } from './job-state.js';
import { clearLease, grantLease, isCurrentLease } from './lease.js';
import { retryDelayMs } from './retry-policy.js';
import { jobSnapshot, type CoreState } from './state.js';
import type { AttemptFailureCause } from './types.js';
import type { WorkerSession } from './worker-registry.js';

/** Assigns QUEUED jobs, best first, while some worker has a free slot for them. */
export function schedule(s: CoreState): void {
  while (s.workers.freeSlots > 0) {
    const job = s.ready.popBest(s.nowMs, s.workers);
    if (job === undefined) return;
    const session = s.workers.pickFor(job.taskType);
    if (session === undefined) throw new Error(`no worker for ${job.taskType} after canRun`);
    assign(s, job, session);
  }
}

function assign(s: CoreState, job: JobRecord, session: WorkerSession): void {
  const attemptId = s.deps.newId();
  const queuedMs = s.nowMs - job.updatedAtMs;
  grantLease(job, session.workerId, attemptId, s.nowMs);
  s.workers.occupy(session, job.jobId);
  s.deadlines.push({ atMs: job.deadlineAtMs as number, jobId: job.jobId, attemptId });
  s.save(job);
  s.send(session.connId, {
    type: 'TASK_ASSIGN',
    jobId: job.jobId,
    attemptId,
    attemptNumber: job.attempts,
    taskType: job.taskType,
    payload: JSON.parse(job.payloadJson) as JsonObject,
    timeoutMillis: job.timeoutMs,
    maxAttempts: job.maxAttempts,
  });
  s.emit({
    type: 'job.assigned',
    jobId: job.jobId,
    workerId: session.workerId,
    attempt: job.attempts,
    maxAttempts: job.maxAttempts,
    attemptId,
    queuedMs,
  });
}

/** Frees the worker slot of a RUNNING job and clears its lease. Returns the worker id. */
export function releaseLease(s: CoreState, job: JobRecord): string {
  const workerId = job.workerId as string;
  const session = s.workers.get(workerId);
  if (session !== undefined) s.workers.release(session, job.jobId);
  clearLease(job);
  return workerId;
}

/**
 * Moves a job to a terminal state: it leaves memory (the store keeps it),
 * frees its admission slot, and answers everyone waiting for it.
 */
export function finishJob(
  s: CoreState,
  job: JobRecord,
  to: 'COMPLETED' | 'FAILED' | 'CANCELLED',
): void {
  transition(job, to, s.nowMs);
  job.retryAtMs = null;
  s.activeCount--;
  s.jobs.delete(job.jobId);
  if (job.idempotencyKey !== null) s.keys.delete(job.idempotencyKey);
  s.save(job);
  answerWaits(s, job);
}

function answerWaits(s: CoreState, job: JobRecord): void {
  const waits = s.waits.takeForJob(job.jobId);
  if (waits.length === 0) return;
  const snapshot = jobSnapshot(job);
  for (const wait of waits)
    s.reply(wait.connId, wait.requestId, { type: 'JOB_STATUS', job: snapshot });
}

/**
 * An attempt did not succeed (lease already released): retry after back-off,
 * or fail the job when every attempt is used or when the failure is one no
 * retry can fix (cause `non_retryable`: the worker said so).
 */
export function failAttempt(
  s: CoreState,
  job: JobRecord,
  cause: AttemptFailureCause,
  error: string,
): void {
  if (cause === 'non_retryable' || job.attempts >= job.maxAttempts) {
    job.error =
      cause === 'non_retryable' ? error : `${error} (all ${job.maxAttempts} attempts used)`;
    finishJob(s, job, 'FAILED');
    s.emit({
      type: 'job.failed',
      jobId: job.jobId,
      attempts: job.attempts,
      cause,
      error: job.error,
    });
    return;
  }
  // A released attempt (its worker drained and left) is retried at once: the
  // worker said goodbye, nothing suggests the job itself is at fault.
  const delayMs =
    cause === 'released'
      ? 0
      : retryDelayMs(job.attempts, s.config.retryBaseDelayMs, s.config.retryMaxDelayMs);
  job.error = error;
  transition(job, 'RETRY_WAIT', s.nowMs);
  job.retryAtMs = s.nowMs + delayMs;
  s.save(job);
  s.retries.push({ atMs: job.retryAtMs, jobId: job.jobId, attemptId: null });
  s.emit({
    type: 'job.retryScheduled',
    jobId: job.jobId,
    attempt: job.attempts,
    maxAttempts: job.maxAttempts,
    delayMs,
    cause,
    error,
  });
}

/** The current attempt succeeded; `resultFormat` `json` = the result is JSON text. */
export function completeJob(
  s: CoreState,
  job: JobRecord,
  result: string,
  resultFormat: ResultFormat | null = null,
): void {
  const runMs = s.nowMs - ((job.deadlineAtMs as number) - job.timeoutMs);
  const workerId = releaseLease(s, job);
  job.result = result;
  job.resultFormat = resultFormat ?? 'text';
  finishJob(s, job, 'COMPLETED');
  s.emit({
    type: 'job.completed',
    jobId: job.jobId,
    workerId,
    attempt: job.attempts,
    runMs,
    endToEndMs: s.nowMs - job.createdAtMs,
  });
}

/** Revokes a running attempt and asks its worker (best effort) to stop it. */
export function revokeAttempt(s: CoreState, job: JobRecord): string {
  const session = s.workers.get(job.workerId as string);
  if (session !== undefined && session.running.has(job.jobId)) {
    s.send(session.connId, {
      type: 'TASK_CANCEL',
      jobId: job.jobId,
      attemptId: job.attemptId as string,
    });
  }
  return releaseLease(s, job);
}

/** Revokes attempts whose deadline has passed (strictly) and retries or fails them. */
export function expireDeadlines(s: CoreState): void {
  for (
    let due = s.deadlines.peek();
    due !== undefined && s.nowMs > due.atMs;
    due = s.deadlines.peek()
  ) {
    s.deadlines.pop();
    const job = s.jobs.get(due.jobId);
    if (job === undefined || !isCurrentLease(job, due.attemptId as string)) continue;
    const attemptId = job.attemptId as string;
    const workerId = revokeAttempt(s, job);
    s.emit({
      type: 'job.deadlineExceeded',
      jobId: job.jobId,
      workerId,
      attemptId,
      timeoutMs: job.timeoutMs,
    });
    failAttempt(
      s,
      job,
      'deadline',
      `execution deadline exceeded (${job.timeoutMs} ms) on worker ${workerId}`,
    );
  }
}

/** Moves RETRY_WAIT jobs whose back-off has elapsed back to QUEUED. */
export function requeueDue(s: CoreState): void {
  for (
    let due = s.retries.peek();
    due !== undefined && s.nowMs >= due.atMs;
    due = s.retries.peek()
  ) {
    s.retries.pop();
    const job = s.jobs.get(due.jobId);
    if (job === undefined || job.state !== 'RETRY_WAIT' || job.retryAtMs !== due.atMs) continue;
    transition(job, 'QUEUED', s.nowMs);
    job.retryAtMs = null;
    s.save(job);
    s.ready.push(job);
    s.emit({ type: 'job.requeued', jobId: job.jobId, attempts: job.attempts });
  }
}

/** Cancels a non-terminal job; returns false if it was already terminal. */
export function cancelJob(s: CoreState, job: JobRecord): boolean {
  if (isTerminalState(job.state)) return false;
  const from = job.state;
  if (from === 'RUNNING') revokeAttempt(s, job);
  finishJob(s, job, 'CANCELLED');
  s.emit({ type: 'job.cancelled', jobId: job.jobId, from });
  return true;
}
