/**
 * Durable steps: what a handler recorded (`ctx.step`), and its suspensions
 * (`ctx.sleep`, `ctx.waitFor`).
 *
 * Each job holds its recorded steps in order. A step is recorded by the
 * current attempt only (RECORD_STEP names its lease), at the next index, and
 * is answered once durable; a later attempt gets the steps with its
 * assignment (as many as fit; GET_STEPS gives the rest) and the worker
 * replays them instead of running them again.
 *
 * A suspension (TASK_SUSPEND) ends the attempt without failing it and is
 * itself a step, recorded in the same commit:
 *   `dtp.sleep`   {untilMillis}    the job is SCHEDULED until then (the
 *                                  delayed-job heap, delayed-jobs.ts);
 *   `dtp.waitFor` {jobId}          the job is WAITING until that job ends;
 *                                  the commit that ends it fills the step
 *                                  with {jobId, state, result, resultFormat,
 *                                  error} and queues the waiter.
 * A suspended attempt is recorded as SUSPENDED and does not count toward
 * `maxAttempts`: the number of attempts used is the number started minus
 * the suspensions, which are exactly the reserved steps recorded.
 *
 * Waits are indexed here by the job waited for (waiting jobs may have ended
 * since: checked when it ends). The link is also stored with the
 * dependencies, so a restart finds the waited-for job's row if it ended and
 * purge keeps that row while the waiter lives.
 *
 * A wait for a job of another shard (its id names that shard) is a `watch`
 * of it, sent in the commit of the suspension, as a child's for a parent
 * elsewhere (shard-messages.ts); that shard answers with a `parentEnded`
 * naming the waiter once the job has ended (at once if it had), and the
 * wait ends with the outcome it carries (`endWaitsElsewhere`).
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import { MAX_FRAME_BYTES } from '../../protocol/framing.js';
import {
  MAX_DELAY_MS,
  MAX_JOB_ID_LENGTH,
  MAX_STEP_RESULT_BYTES,
  MAX_STEP_RESULTS_BYTES,
  MAX_STEPS_PER_JOB,
} from '../../protocol/limits.js';
import type { GetSteps, RecordStep, TaskSuspend } from '../../protocol/messages.js';
import { isTerminalState } from '../../protocol/messages.js';
import type { JobRecord } from '../../store/store.js';
import { holdScheduled } from './delayed-jobs.js';
import type { CoreJob, RunningJob } from './job.js';
import { isCurrentLease } from './lease.js';
import { endWait, failAttempt, schedule } from './job-lifecycle.js';
import {
  STEP_ENVELOPE_BYTES,
  outcomeOf,
  resultsBytes,
  stepNameProblem,
  stepResultBytes,
  stepsFrom,
  unknownOutcome,
  type WaitOutcome,
} from './step-records.js';
import { otherShardOf, watchElsewhere } from './shard-messages.js';
import { appendStep, suspend } from './suspension.js';
import { WaitRefused, waitForEvent, waitForSignal, waitProblem } from './signals.js';
import { refuseCall, type FencedCall } from './calls.js';
import type { CoreState } from './state.js';
import type { WorkerSession } from './worker-registry.js';

/** The current lease of the job a message of this session names, or null. */
function leasedTo(
  s: CoreState,
  session: WorkerSession,
  jobId: string,
  attemptId: string,
): RunningJob | null {
  const job = s.jobs.active(jobId);
  if (job === undefined || !isCurrentLease(job, attemptId)) return null;
  return job.lease.workerId === session.workerId ? job : null;
}

/** RECORD_STEP (fenced already): appends the step; the reply leaves once it is durable. */
export function recordStep(s: CoreState, call: FencedCall<RecordStep>): void {
  const { session, job, msg } = call;
  const refuse = (code: ErrorCode, message: string): void =>
    refuseCall(s, session, msg.requestId, code, `RECORD_STEP: ${message}`);
  const nameProblem = stepNameProblem(msg.name);
  if (nameProblem !== null) return refuse(ErrorCode.InvalidRequest, nameProblem);
  if (msg.index !== job.steps.length) {
    return refuse(
      ErrorCode.StepOutOfOrder,
      `index ${msg.index} is not the next step (${job.steps.length} are recorded)`,
    );
  }
  if (job.steps.length >= MAX_STEPS_PER_JOB) {
    return refuse(ErrorCode.LimitExceeded, `a job may record at most ${MAX_STEPS_PER_JOB} steps`);
  }
  if (!isJsonText(msg.result)) return refuse(ErrorCode.InvalidRequest, 'result is not JSON text');
  const bytes = stepResultBytes(msg.result);
  if (bytes > MAX_STEP_RESULT_BYTES) {
    return refuse(
      ErrorCode.LimitExceeded,
      `a step result may be at most ${MAX_STEP_RESULT_BYTES} bytes (got ${bytes})`,
    );
  }
  if (resultsBytes(job) + bytes > MAX_STEP_RESULTS_BYTES) {
    return refuse(
      ErrorCode.LimitExceeded,
      `a job's step results may total at most ${MAX_STEP_RESULTS_BYTES} bytes`,
    );
  }
  appendStep(s, job, { name: msg.name, result: msg.result, atMs: s.nowMs });
  s.send(session.connId, {
    type: 'STEP_RECORDED',
    requestId: msg.requestId,
    jobId: job.jobId,
    index: msg.index,
  });
}

function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** GET_STEPS (fenced already): the steps from an index, as many as fit one frame (at least one). */
export function getSteps(s: CoreState, call: FencedCall<GetSteps>): void {
  const { session, job, msg } = call;
  if (msg.fromIndex < 0 || msg.fromIndex > job.steps.length) {
    return refuseCall(
      s,
      session,
      msg.requestId,
      ErrorCode.StepOutOfOrder,
      `GET_STEPS: fromIndex ${msg.fromIndex} is outside 0..${job.steps.length}`,
    );
  }
  const steps = stepsFrom(job, msg.fromIndex, MAX_FRAME_BYTES - STEP_ENVELOPE_BYTES, true);
  s.send(session.connId, {
    type: 'STEPS',
    requestId: msg.requestId,
    jobId: job.jobId,
    steps,
    more: msg.fromIndex + steps.length < job.steps.length,
  });
}

/** TASK_SUSPEND: ends the attempt without failing it; the job sleeps or waits. */
export function handleSuspend(s: CoreState, session: WorkerSession, msg: TaskSuspend): void {
  const job = leasedTo(s, session, msg.jobId, msg.attemptId);
  if (job === null) {
    s.emit({
      type: 'result.stale',
      jobId: msg.jobId,
      attemptId: msg.attemptId,
      workerId: session.workerId,
      reason: 'TASK_SUSPEND not under the current lease',
    });
    return;
  }
  const problem = suspendProblem(job, msg);
  if (problem !== null) {
    failAttempt(s, job, 'non_retryable', `TASK_SUSPEND: ${problem}`);
    schedule(s);
    return;
  }
  s.workers.noteResult(session, s.nowMs);
  try {
    if (msg.sleepMillis !== undefined && msg.sleepMillis !== null) {
      sleep(s, job, msg.sleepMillis);
    } else if (msg.waitForSignal != null) {
      waitForSignal(s, job, msg.waitForSignal);
    } else if (msg.waitForEvent != null) {
      waitForEvent(s, job, msg.waitForEvent);
    } else {
      waitFor(s, job, msg.waitForJobId as string);
    }
  } catch (err) {
    if (!(err instanceof WaitRefused)) throw err;
    failAttempt(s, job, 'non_retryable', `TASK_SUSPEND: ${err.message}`);
  }
  schedule(s);
}

function suspendProblem(job: Readonly<CoreJob>, msg: TaskSuspend): string | null {
  const sleeps = msg.sleepMillis !== undefined && msg.sleepMillis !== null;
  const waits = msg.waitForJobId !== undefined && msg.waitForJobId !== null;
  const given = [sleeps, waits, msg.waitForSignal != null, msg.waitForEvent != null];
  if (given.filter(Boolean).length !== 1) {
    return 'give exactly one of sleepMillis, waitForJobId, waitForSignal and waitForEvent';
  }
  if (msg.waitForSignal != null) {
    const problem = waitProblem(msg.waitForSignal, 'waitForSignal');
    if (problem !== null) return problem;
  }
  if (msg.waitForEvent != null) {
    const problem = waitProblem(msg.waitForEvent, 'waitForEvent');
    if (problem !== null) return problem;
  }
  if (
    sleeps &&
    !((msg.sleepMillis as number) >= 0 && (msg.sleepMillis as number) <= MAX_DELAY_MS)
  ) {
    return `sleepMillis must be 0..${MAX_DELAY_MS}`;
  }
  if (waits) {
    const target = msg.waitForJobId as string;
    if (target.length === 0 || target.length > MAX_JOB_ID_LENGTH) {
      return `waitForJobId must be 1..${MAX_JOB_ID_LENGTH} characters`;
    }
    if (target === job.jobId) return 'a job cannot wait for itself';
  }
  if (job.steps.length >= MAX_STEPS_PER_JOB) {
    return `a job may record at most ${MAX_STEPS_PER_JOB} steps (sleeps and waits included)`;
  }
  return null;
}

function sleep(s: CoreState, job: RunningJob, sleepMillis: number): void {
  const untilMs = s.nowMs + sleepMillis;
  suspend(s, job, 'SCHEDULED', untilMs, null);
  job.runAtMs = untilMs;
  s.jobs.save(job);
  holdScheduled(s, job);
}

function waitFor(s: CoreState, job: RunningJob, targetId: string): void {
  const shard = otherShardOf(s, targetId);
  if (shard !== null) {
    // A job of another shard: its shard tells this one of its end (at once
    // if it has ended), in a `parentEnded` naming this job.
    beginWait(s, job, targetId);
    watchElsewhere(s, shard, targetId, job.jobId);
    return;
  }
  const target = s.jobs.get(targetId);
  if (target === undefined) {
    // Not in memory: ended long ago, far in the future, or unknown. The
    // store says which; until then the attempt stays as it is.
    s.read(
      { op: 'job', jobId: targetId, withAttempts: false },
      { kind: 'stepWait', jobId: job.jobId, attemptId: job.lease.attemptId, targetId },
    );
    return;
  }
  beginWait(s, job, targetId);
  if (isTerminalState(target.state)) endWait(s, job, outcomeOf(target));
}

/** The store's answer about a job a suspending attempt waits for. */
export function stepWaitRead(
  s: CoreState,
  read: { jobId: string; attemptId: string; targetId: string },
  row: JobRecord | null,
): void {
  const job = s.jobs.active(read.jobId);
  if (job === undefined || !isCurrentLease(job, read.attemptId)) return;
  // It may have come into memory meanwhile (a window read, say).
  const target = s.jobs.get(read.targetId);
  beginWait(s, job, read.targetId);
  if (target !== undefined) {
    if (isTerminalState(target.state)) endWait(s, job, outcomeOf(target));
  } else if (row === null) endWait(s, job, unknownOutcome(read.targetId));
  else if (isTerminalState(row.state)) endWait(s, job, outcomeOf(row));
  schedule(s);
}

/** The store could not say: the attempt fails (retryable), as a failed handler would. */
export function stepWaitReadFailed(
  s: CoreState,
  read: { jobId: string; attemptId: string; targetId: string },
  message: string,
): void {
  const job = s.jobs.active(read.jobId);
  if (job === undefined || !isCurrentLease(job, read.attemptId)) return;
  failAttempt(s, job, 'task_failure', `waitFor ${read.targetId}: could not read it: ${message}`);
  schedule(s);
}

function beginWait(s: CoreState, job: RunningJob, targetId: string): void {
  suspend(s, job, 'WAITING', null, targetId);
  job.waitingFor = targetId;
  s.jobs.save(job);
  s.jobs.saveStepWait(job.jobId, targetId);
  holdWait(s, job.jobId, targetId);
}

/** Indexes a WAITING job under the job it waits for (also at recovery). */
export function holdWait(s: CoreState, jobId: string, targetId: string): void {
  let waiters = s.stepWaits.get(targetId);
  if (waiters === undefined) s.stepWaits.set(targetId, (waiters = new Set()));
  waiters.add(jobId);
}

/**
 * A job of another shard ended (cross-shard.ts, `parentEnded`): the jobs it
 * names (`jobIds`) that wait for it go on with its outcome. A job named that
 * no longer waits for it (cancelled meanwhile, or this end heard again) is
 * left as it is.
 */
export function endWaitsElsewhere(
  s: CoreState,
  targetId: string,
  jobIds: readonly string[],
  outcome: WaitOutcome,
): void {
  const waiters = s.stepWaits.get(targetId);
  for (const jobId of jobIds) {
    waiters?.delete(jobId);
    const job = s.jobs.active(jobId);
    if (job === undefined || job.state !== 'WAITING' || job.waitingFor !== targetId) continue;
    endWait(s, job, outcome);
  }
  if (waiters?.size === 0) s.stepWaits.delete(targetId);
}

/**
 * Recovery: the waiting job's wait is indexed again, or ended when the job
 * it waits for ended (its row came as a parent's) or is not in the store.
 * A job of another shard is waited for again: the `watch` went in the
 * commit of the suspension, so its end is told (or, told and not applied
 * yet, told again); once applied, the wait step holds the outcome and the
 * job no longer waits.
 */
export function recoverWait(
  s: CoreState,
  job: CoreJob,
  parentRows: ReadonlyMap<string, JobRecord>,
): void {
  const targetId = job.waitingFor as string;
  if (s.jobs.active(targetId) !== undefined || otherShardOf(s, targetId) !== null) {
    return holdWait(s, job.jobId, targetId);
  }
  const row = parentRows.get(targetId);
  endWait(s, job, row === undefined ? unknownOutcome(targetId) : outcomeOf(row));
}
