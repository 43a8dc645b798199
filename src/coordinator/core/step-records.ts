/**
 * Durable steps as data: the reserved step names, the bounds counted the
 * way results are, what an assignment carries, and a wait's outcome. No
 * state changes here (steps.ts handles the messages, job-lifecycle.ts ends
 * waits when the job waited for ends).
 */
import { MAX_FRAME_BYTES } from '../../protocol/framing.js';
import {
  MAX_ASSIGNED_PARENT_RESULT_BYTES,
  MAX_ASSIGNED_STEP_BYTES,
  MAX_STEP_NAME_JSON_BYTES,
  MAX_STEP_NAME_LENGTH,
} from '../../protocol/limits.js';
import type { RecordedStep, TaskAssign } from '../../protocol/messages.js';
import type { JobRecord } from '../../store/store.js';
import { rateLimitedAmong, requeuedAmong, type CoreJob, type JobStep } from './job.js';
import { WAIT_STEP, isSuspensionStep } from './step-names.js';
import type { WorkerSession } from './worker-registry.js';

export { SLEEP_STEP, WAIT_STEP } from './step-names.js';

/** Step names a handler may not use: these are the coordinator's. */
export const RESERVED_STEP_PREFIX = 'dtp.';

/** Room kept in a frame for everything but the steps' results. */
export const STEP_ENVELOPE_BYTES = 64 * 1024;

/** A step's result size as the bounds count it: its JSON string encoding without the quotes. */
export function stepResultBytes(result: string | null): number {
  return result === null ? 0 : Buffer.byteLength(JSON.stringify(result)) - 2;
}

/** What a problem with a step name is, or null when it is a name a handler may use. */
export function stepNameProblem(name: string): string | null {
  if (name.length === 0 || name.trim() !== name) {
    return 'a step name must be non-empty, without leading or trailing blanks';
  }
  if (
    name.length > MAX_STEP_NAME_LENGTH ||
    Buffer.byteLength(JSON.stringify(name)) > MAX_STEP_NAME_JSON_BYTES
  ) {
    return `a step name must be at most ${MAX_STEP_NAME_LENGTH} characters and ${MAX_STEP_NAME_JSON_BYTES} bytes as JSON`;
  }
  if (name.startsWith(RESERVED_STEP_PREFIX)) {
    return `step names starting with "${RESERVED_STEP_PREFIX}" are reserved`;
  }
  return null;
}

/** Attempts that ended in a suspension: they do not count toward maxAttempts. */
export function suspensionsOf(job: Readonly<CoreJob>): number {
  let n = 0;
  for (const step of job.steps) if (isSuspensionStep(step.name)) n++;
  return n;
}

/**
 * Attempts that ended REQUEUED (`TASK_RESULT.requeue`): they do not count
 * toward maxAttempts. A requeue past MAX_FREE_REQUEUES ends FAILED instead
 * (it counts), so this is at most that bound.
 */
export function requeuesOf(job: Readonly<CoreJob>): number {
  return requeuedAmong(job.history);
}

/** Attempts of the job its handler ended rate limited (not counted toward maxAttempts). */
export function rateLimitedOf(job: Readonly<CoreJob>): number {
  return rateLimitedAmong(job.history);
}

/** Attempts of the job that count toward its maxAttempts. */
export function attemptsUsed(job: Readonly<CoreJob>): number {
  return job.attempts - suspensionsOf(job) - requeuesOf(job) - rateLimitedOf(job);
}

export function resultsBytes(job: Readonly<CoreJob>): number {
  let bytes = 0;
  for (const step of job.steps) bytes += stepResultBytes(step.result);
  return bytes;
}

/** Steps from `from` while their results fit `budget` (the first one always, with `atLeastOne`). */
export function stepsFrom(
  job: Readonly<CoreJob>,
  from: number,
  budget: number,
  atLeastOne: boolean,
): RecordedStep[] {
  const out: RecordedStep[] = [];
  let left = budget;
  for (let i = from; i < job.steps.length; i++) {
    const step = job.steps[i] as JobStep;
    const size = Buffer.byteLength(JSON.stringify(step.result)) + step.name.length * 6 + 64;
    if (size > left && !(atLeastOne && out.length === 0)) break;
    left -= size;
    out.push({ name: step.name, result: step.result, atMillis: step.atMs });
  }
  return out;
}

/** The steps fields of an assignment, for a worker that asked for steps. */
export function assignedSteps(
  job: Readonly<CoreJob>,
  session: WorkerSession,
): Pick<TaskAssign, 'steps' | 'stepCount'> {
  if (session.steps !== true || job.steps.length === 0) return {};
  const budget = Math.min(
    MAX_ASSIGNED_STEP_BYTES,
    MAX_FRAME_BYTES -
      STEP_ENVELOPE_BYTES -
      MAX_ASSIGNED_PARENT_RESULT_BYTES -
      Buffer.byteLength(job.payloadJson),
  );
  return { steps: stepsFrom(job, 0, Math.max(0, budget), false), stepCount: job.steps.length };
}

export interface WaitOutcome {
  jobId: string;
  state: string | null;
  result: string | null;
  resultFormat: string | null;
  error: string | null;
  omitted?: true;
}

export function outcomeOf(job: Readonly<CoreJob> | Readonly<JobRecord>): WaitOutcome {
  const completed = job.state === 'COMPLETED';
  return {
    jobId: job.jobId,
    state: job.state,
    result: completed ? job.result : null,
    resultFormat: completed ? job.resultFormat : null,
    error: job.error,
  };
}

/** A waited-for job the store does not have (never existed, or purged). */
export function unknownOutcome(jobId: string): WaitOutcome {
  return { jobId, state: null, result: null, resultFormat: null, error: 'unknown job' };
}

/** The job a recovered WAITING job waits for: its last step is a wait without an outcome. */
export function pendingWaitOf(steps: readonly JobStep[]): string | null {
  const last = steps.at(-1);
  if (last === undefined || last.name !== WAIT_STEP || last.result === null) return null;
  const value = JSON.parse(last.result) as { jobId?: unknown; state?: unknown };
  return 'state' in value || typeof value.jobId !== 'string' ? null : value.jobId;
}
