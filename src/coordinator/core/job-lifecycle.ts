/**
 * A job's life after submission: assignment under a lease, the outcome of an
 * attempt (success, failure, loss, deadline), retries with back-off, terminal
 * states, and the sweeps that move timers forward. Every ended attempt is
 * recorded in the job's history (one row per attempt, written when it ends),
 * except a first attempt that succeeded: the job's COMPLETED row stands for it.
 */
import type {
  AttemptOutcome,
  JsonObject,
  RateLimitedResult,
  ResultFormat,
} from '../../protocol/messages.js';
import { DEFAULT_QUEUE } from '../../protocol/queue-names.js';
import { traceFields } from '../../protocol/trace-context.js';
import type { AttemptRecord } from '../../store/store.js';
import {
  EXPIRED_PREFIX,
  attemptImpliedByRow,
  coreJobSnapshot,
  isRunning,
  type CoreJob,
  type RunningJob,
} from './job.js';
import {
  finishedParentOf,
  parentAllows,
  parentFailureError,
  unknownParentError,
  type FinishedParent,
} from './dependencies.js';
import { tellRemoteDependents } from './shard-messages.js';
import { isTerminalState, transition } from './job-state.js';
import { grantLease } from './lease.js';
import { holdScheduled, releaseScheduled } from './delayed-jobs.js';
import { groupOf } from './ready-queue.js';
import { retryDelayMs } from './retry-policy.js';
import type { CoreState } from './state.js';
import type { AttemptFailureCause } from './types.js';
import type { WorkerSession } from './worker-registry.js';
import {
  WAIT_STEP,
  assignedSteps,
  attemptsUsed,
  outcomeOf,
  requeuesOf,
  resultsBytes,
  stepResultBytes,
  type WaitOutcome,
} from './step-records.js';
import {
  MAX_FREE_REQUEUES,
  MAX_RATE_LIMITED_IN_A_ROW,
  MAX_STEP_RESULT_BYTES,
  MAX_STEP_RESULTS_BYTES,
} from '../../protocol/limits.js';

/** How each failure cause is recorded in the attempt history. */
const OUTCOME_OF: { readonly [C in AttemptFailureCause]: AttemptOutcome } = {
  worker_lost: 'WORKER_LOST',
  released: 'RELEASED',
  deadline: 'DEADLINE',
  task_failure: 'FAILED',
  non_retryable: 'FAILED',
  restart: 'INTERRUPTED',
};

/** Assigns QUEUED jobs, best first, while some worker has a free slot for them. */
export function schedule(s: CoreState): void {
  while (s.workers.freeSlots > 0) {
    const job = s.ready.popBest(s.nowMs, s.workers);
    if (job === undefined) return;
    // No attempt starts after the job's expiry, even before the timed input that expires it.
    if (hasExpired(s, job)) {
      expireJob(s, job, true);
      continue;
    }
    const session = s.workers.pickFor(job.taskType, job.queue);
    if (session === undefined) throw new Error(`no worker for ${job.taskType} after canRun`);
    assign(s, job, session);
  }
}

function assign(s: CoreState, job: CoreJob, session: WorkerSession): void {
  const attemptId = s.deps.newId();
  const queuedMs = s.nowMs - job.updatedAtMs;
  const running = grantLease(job, session.workerId, attemptId, s.nowMs);
  s.queues.noteStart(job.queue, groupOf(job), s.nowMs);
  s.workers.occupy(session, job.jobId);
  s.deadlines.push({ atMs: running.lease.deadlineAtMs, jobId: job.jobId, attemptId });
  s.jobs.save(job);
  s.send(session.connId, {
    type: 'TASK_ASSIGN',
    jobId: job.jobId,
    attemptId,
    attemptNumber: job.attempts,
    taskType: job.taskType,
    payload: JSON.parse(job.payloadJson) as JsonObject,
    timeoutMillis: job.timeoutMs,
    maxAttempts: job.maxAttempts,
    ...(session.parents && job.dependsOn !== null ? { parents: s.graph.parentsFor(job) } : {}),
    ...(session.traceContext === true ? tracingFields(job) : {}),
    ...assignedSteps(job, session),
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

/**
 * What a worker that asked for trace context gets with an assignment: the
 * job's context, and its queue for the attempt's span (`dtp.queue`; absent
 * = `default`, as in a JobSnapshot).
 */
function tracingFields(job: CoreJob): {
  traceparent?: string;
  tracestate?: string;
  queue?: string;
} {
  const fields = traceFields(job.traceContext);
  return job.queue === DEFAULT_QUEUE ? fields : { ...fields, queue: job.queue };
}

/**
 * Ends the current attempt: frees the worker's slot and records the attempt
 * in the history. The caller then moves the job on, which drops the lease.
 * Returns the worker id the attempt ran on.
 */
function endAttempt(
  s: CoreState,
  job: RunningJob,
  outcome: AttemptOutcome,
  error: string | null,
): string {
  const { workerId, attemptId, startedAtMs } = job.lease;
  const session = s.workers.get(workerId);
  if (session !== undefined) s.workers.release(session, job.jobId);
  s.kept.release(workerId, job.jobId);
  endLease(s, job);
  const attempt: AttemptRecord = {
    jobId: job.jobId,
    attemptNumber: job.attempts,
    attemptId,
    workerId,
    startedAtMs,
    finishedAtMs: s.nowMs,
    outcome,
    error,
  };
  job.history.push(attempt);
  // A first attempt that succeeded is stored in the job's COMPLETED row itself.
  if (!attemptImpliedByRow(attempt)) s.jobs.saveAttempt(attempt);
  return workerId;
}

/** An attempt's lease ended: it stops counting toward its queue's and group's concurrency. */
function endLease(s: CoreState, job: CoreJob): void {
  const group = groupOf(job);
  s.queues.noteEnd(job.queue, group);
  if (s.queues.settingsOf(job.queue).groupConcurrency !== null) s.ready.unpark(job.queue, group);
}

/**
 * Moves a job to a terminal state: it leaves the active set (the store keeps
 * it), frees its admission slot, and answers everyone waiting for it.
 */
export function finishJob(
  s: CoreState,
  job: CoreJob,
  to: 'COMPLETED' | 'FAILED' | 'CANCELLED',
): void {
  transition(job, { to }, s.nowMs);
  job.retryAtMs = null;
  s.jobs.retire(job);
  s.dedup.ended(job, s.nowMs);
  answerWaits(s, job);
  settleDependents(s, job);
  tellRemoteDependents(s, job);
  wakeWaiters(s, job);
}

/**
 * A job ended: its dependents learn it (see dependencies.ts). Cancelling a
 * dependent ends it too, so the cascade goes on from a work list until no
 * ended job has dependents left to settle.
 */
function settleDependents(s: CoreState, ended: CoreJob): void {
  if (ended.dependsOn !== null) s.graph.release(ended);
  s.settling.push(ended);
  if (s.settlingNow) return;
  s.settlingNow = true;
  try {
    for (let job = s.settling.pop(); job !== undefined; job = s.settling.pop()) {
      const parent = finishedParentOf(job);
      for (const dependentId of s.graph.takeDependents(
        job.jobId,
        parent,
        (id) => s.jobs.active(id) !== undefined,
      )) {
        const dependent = s.jobs.active(dependentId);
        if (dependent !== undefined) settleOne(s, dependent, parent);
      }
    }
  } finally {
    s.settlingNow = false;
  }
}

/**
 * A parent of another shard ended (cross-shard.ts): its dependents here
 * settle exactly as for a parent of ours; a parent no shard has (null)
 * cancels them. Returns how many dependents here had waited for it (none
 * when this end was heard before).
 */
export function settleParentElsewhere(
  s: CoreState,
  parentId: string,
  parent: FinishedParent | null,
): number {
  const dependents = s.graph.takeDependents(
    parentId,
    parent,
    (id) => s.jobs.active(id) !== undefined,
  );
  for (const dependentId of dependents) {
    const dependent = s.jobs.active(dependentId);
    if (dependent === undefined) continue; // a cascade of this very end ended it
    if (parent !== null) {
      settleOne(s, dependent, parent);
      continue;
    }
    dependent.error = unknownParentError(parentId);
    cancelJob(s, dependent);
  }
  return dependents.length;
}

function settleOne(s: CoreState, dependent: CoreJob, parent: FinishedParent): void {
  if (!parentAllows(parent, dependent)) {
    dependent.error = parentFailureError(parent);
    cancelJob(s, dependent);
    return;
  }
  if (s.graph.resolveOne(dependent.jobId) > 0 || dependent.state !== 'WAITING') return;
  releaseWaiting(s, dependent);
}

/**
 * A WAITING job whose parents all let it go on: queued now, or SCHEDULED
 * when it was also delayed and its time has not come.
 */
export function releaseWaiting(s: CoreState, job: CoreJob): void {
  if (job.runAtMs !== null && job.runAtMs > s.nowMs) {
    transition(job, { to: 'SCHEDULED' }, s.nowMs);
    s.jobs.save(job);
    holdScheduled(s, job);
  } else {
    transition(job, { to: 'QUEUED' }, s.nowMs);
    s.jobs.save(job);
    s.ready.push(job);
  }
  s.emit({ type: 'job.released', jobId: job.jobId });
}

function answerWaits(s: CoreState, job: CoreJob): void {
  const waits = s.waits.takeForJob(job.jobId);
  if (waits.length === 0) return;
  const snapshot = coreJobSnapshot(job);
  for (const wait of waits)
    s.reply(wait.connId, wait.requestId, { type: 'JOB_STATUS', job: snapshot });
}

/**
 * The current attempt did not succeed (or never will): ends it, then retries
 * after back-off, or fails the job when every attempt is used or when the
 * failure is one no retry can fix (cause `non_retryable`: the worker said so).
 */
export function failAttempt(
  s: CoreState,
  job: RunningJob,
  cause: AttemptFailureCause,
  error: string,
): void {
  endAttempt(s, job, OUTCOME_OF[cause], error);
  failJobOrRetry(s, job, cause, error);
}

/** Retries a job whose attempt ended badly, or fails it for good. */
export function failJobOrRetry(
  s: CoreState,
  job: CoreJob,
  cause: AttemptFailureCause,
  error: string,
): void {
  if (cause === 'non_retryable' || attemptsUsed(job) >= job.maxAttempts) {
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
  // An attempt whose worker went away (lost, or drained and left) is retried
  // at once: nothing suggests the job itself is at fault, and a crashed
  // worker's job should run elsewhere now, not after a back-off. The attempt
  // still counts, so a job that crashes every worker runs out of attempts.
  const delayMs =
    cause === 'released' || cause === 'worker_lost'
      ? 0
      : retryDelayMs(job.attempts, s.config.retryBaseDelayMs, s.config.retryMaxDelayMs);
  job.error = error;
  transition(job, { to: 'RETRY_WAIT' }, s.nowMs);
  job.retryAtMs = s.nowMs + delayMs;
  s.jobs.save(job);
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

/**
 * The worker requeued the attempt (`TASK_RESULT.requeue`): it was cut off
 * through no doing of its own. The attempt ends REQUEUED and the job is
 * QUEUED at once, the attempt not counted toward maxAttempts, while the job
 * has had fewer than {@link MAX_FREE_REQUEUES} such attempts; past that a
 * requeue is a failed attempt like any other (it counts, after back-off), so
 * a job whose attempts keep killing their threads cannot loop for ever.
 */
export function requeueAttempt(s: CoreState, job: RunningJob, error: string): void {
  const requeues = requeuesOf(job);
  if (requeues >= MAX_FREE_REQUEUES) {
    const counted = `${error} (requeued ${MAX_FREE_REQUEUES} times already: this attempt counts)`;
    failAttempt(s, job, 'task_failure', counted);
    return;
  }
  const { workerId, attemptId } = job.lease;
  endAttempt(s, job, 'REQUEUED', error);
  job.error = error;
  transition(job, { to: 'QUEUED', requeue: true }, s.nowMs);
  job.retryAtMs = null;
  s.jobs.save(job);
  s.ready.push(job);
  s.emit({
    type: 'job.attemptRequeued',
    jobId: job.jobId,
    workerId,
    attemptId,
    attempt: job.attempts,
    requeues: requeues + 1,
    error,
  });
}

/**
 * The handler was rate limited (`TASK_RESULT.rateLimited`, a
 * RateLimitedError): the attempt ends RATE_LIMITED, not counted toward
 * maxAttempts, and the job is SCHEDULED at now + `retryAfterMs`. Scope
 * `group` or `queue` also holds back every start of the job's group or
 * queue until then (durable: the hold is stored). A job rate limited
 * {@link MAX_RATE_LIMITED_IN_A_ROW} times in a row fails, so a handler
 * that always says so cannot hold its job for ever.
 */
export function rateLimitAttempt(
  s: CoreState,
  job: RunningJob,
  limited: RateLimitedResult,
  error: string,
): void {
  const inARow = rateLimitedInARow(job) + 1;
  if (inARow >= MAX_RATE_LIMITED_IN_A_ROW) {
    endAttempt(s, job, 'FAILED', error);
    job.error = `${error} (rate limited ${inARow} times in a row)`;
    finishJob(s, job, 'FAILED');
    s.emit({
      type: 'job.failed',
      jobId: job.jobId,
      attempts: job.attempts,
      cause: 'task_failure',
      error: job.error,
    });
    return;
  }
  const untilMs = s.nowMs + limited.retryAfterMillis;
  const workerId = endAttempt(s, job, 'RATE_LIMITED', error);
  job.error = error;
  transition(job, { to: 'SCHEDULED' }, s.nowMs);
  job.runAtMs = untilMs;
  job.retryAtMs = null;
  s.jobs.save(job);
  holdScheduled(s, job);
  if (limited.scope === 'queue') {
    const row = s.queues.holdQueue(job.queue, untilMs, s.nowMs);
    if (row !== null) s.jobs.saveQueue(row);
  } else if (limited.scope === 'group') {
    if (s.queues.holdGroup(job.queue, job.groupKey, untilMs, s.nowMs)) {
      s.jobs.saveGroupHold({ queue: job.queue, groupKey: job.groupKey, untilMs });
      s.holdsMayBeStored = true;
    }
  }
  s.emit({
    type: 'job.rateLimited',
    jobId: job.jobId,
    workerId,
    attempt: job.attempts,
    scope: limited.scope,
    untilMs,
    inARow,
  });
}

/** How many of the job's last attempts in a row ended RATE_LIMITED. */
export function rateLimitedInARow(job: Readonly<CoreJob>): number {
  let count = 0;
  for (let i = job.history.length - 1; i >= 0; i--) {
    if (job.history[i]?.outcome !== 'RATE_LIMITED') break;
    count++;
  }
  return count;
}

/** The current attempt succeeded. */
export function completeJob(
  s: CoreState,
  job: RunningJob,
  result: string,
  resultFormat: ResultFormat | null,
): void {
  const runMs = s.nowMs - job.lease.startedAtMs;
  const workerId = endAttempt(s, job, 'SUCCEEDED', null);
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

/** Asks the worker of a running attempt (best effort) to stop it. */
export function sendCancel(s: CoreState, job: RunningJob): void {
  const session = s.workers.get(job.lease.workerId);
  if (session !== undefined && session.running.has(job.jobId)) {
    s.send(session.connId, {
      type: 'TASK_CANCEL',
      jobId: job.jobId,
      attemptId: job.lease.attemptId,
    });
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
    const job = s.jobs.active(due.jobId);
    if (job === undefined || job.state !== 'RETRY_WAIT' || job.retryAtMs !== due.atMs) continue;
    transition(job, { to: 'QUEUED' }, s.nowMs);
    job.retryAtMs = null;
    s.jobs.save(job);
    s.ready.push(job);
    s.emit({ type: 'job.requeued', jobId: job.jobId, attempts: job.attempts });
  }
}

/** True when the job's expiry (expiry.ts) has passed at the core's current time. */
export function hasExpired(s: CoreState, job: Readonly<CoreJob>): boolean {
  return job.expiresAtMs != null && job.expiresAtMs <= s.nowMs;
}

/**
 * Ends a job that expired before an attempt started (expiry.ts).
 * `picked`: the scheduler has just taken it out of the ready queue (so the
 * queue's count of it is already gone).
 */
export function expireJob(s: CoreState, job: CoreJob, picked = false): void {
  const from = job.state;
  const expiresAtMs = job.expiresAtMs as number;
  job.error = `${EXPIRED_PREFIX}not started by ${new Date(expiresAtMs).toISOString()}`;
  if (picked) {
    finishJob(s, job, 'CANCELLED');
    s.emit({ type: 'job.cancelled', jobId: job.jobId, from });
  } else {
    cancelJob(s, job);
  }
  s.emit({ type: 'job.expired', jobId: job.jobId, from, expiresAtMs });
}

/** Cancels a non-terminal job; returns false if it was already terminal. */
export function cancelJob(s: CoreState, job: CoreJob): boolean {
  if (isTerminalState(job.state)) return false;
  const from = job.state;
  if (isRunning(job)) {
    sendCancel(s, job);
    endAttempt(s, job, 'CANCELLED', 'cancelled');
  }
  if (from === 'SCHEDULED') releaseScheduled(s);
  if (from === 'QUEUED') s.ready.cancelled(job);
  finishJob(s, job, 'CANCELLED');
  s.emit({ type: 'job.cancelled', jobId: job.jobId, from });
  return true;
}

/**
 * The handler slept or waited (steps.ts): the attempt ends without failing
 * and its slot is free; the caller moves the job to SCHEDULED or WAITING.
 */
export function suspendAttempt(s: CoreState, job: RunningJob): void {
  endAttempt(s, job, 'SUSPENDED', null);
}

/** Ends a restarted coordinator's interrupted attempt (recovery only). */
export function interruptAttempt(s: CoreState, job: RunningJob, error: string): void {
  endAttempt(s, job, 'INTERRUPTED', error);
}

/**
 * A WAITING job's wait ends: its step gets the outcome (the result left out
 * when it would pass the job's bound) and the job is queued again.
 */
export function endWait(s: CoreState, job: CoreJob, outcome: WaitOutcome): void {
  const index = job.steps.length - 1;
  const step = job.steps[index];
  if (job.state !== 'WAITING' || step === undefined || step.name !== WAIT_STEP) {
    throw new Error(`job ${job.jobId} ends a wait it is not in (${job.state})`);
  }
  let text = JSON.stringify(outcome);
  const room = MAX_STEP_RESULTS_BYTES - (resultsBytes(job) - stepResultBytes(step.result));
  if (stepResultBytes(text) > Math.min(room, MAX_STEP_RESULT_BYTES)) {
    text = JSON.stringify({ ...outcome, result: null, omitted: true });
  }
  step.result = text;
  s.jobs.saveStep(job.jobId, index, step);
  job.waitingFor = null;
  releaseWaiting(s, job);
}

/** A job ended: the jobs waiting for it (`ctx.waitFor`) go on. */
export function wakeWaiters(s: CoreState, ended: Readonly<CoreJob>): void {
  const waiters = s.stepWaits.get(ended.jobId);
  if (waiters === undefined) return;
  s.stepWaits.delete(ended.jobId);
  for (const jobId of waiters) {
    const job = s.jobs.active(jobId);
    if (job === undefined || job.state !== 'WAITING' || job.waitingFor !== ended.jobId) continue;
    endWait(s, job, outcomeOf(ended));
  }
}
