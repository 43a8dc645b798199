/**
 * A job as the core holds it in memory, and its conversions to the stored
 * row and to the snapshot clients see.
 *
 * The lease of an attempt (worker, attempt id, deadline) is one object that
 * exists exactly while the job is RUNNING; {@link RunningJob} is the type
 * that says so, and {@link isRunning} the only way to obtain one, so no code
 * reads a lease field through a cast.
 */
import type {
  AttemptSnapshot,
  DedupMode,
  JobProgress,
  JobSnapshot,
  JobState,
  ParentFailurePolicy,
  Priority,
  ResultFormat,
} from '../../protocol/messages.js';
import type { TraceContext } from '../../protocol/trace-context.js';
import { DEFAULT_QUEUE } from '../../protocol/queue-names.js';
import type { AttemptRecord, JobRecord } from '../../store/store.js';
import { isSuspensionStep } from './step-names.js';

/** One step its handler recorded (durable steps, steps.ts). */
export interface JobStep {
  readonly name: string;
  /** The step's value as JSON text; null only for a wait that has not ended. */
  result: string | null;
  readonly atMs: number;
}

/** A signal sent to the job that no `ctx.waitForSignal` has taken yet (signals.ts). */
export interface HeldSignal {
  readonly seq: number;
  readonly name: string;
  readonly payloadJson: string;
  readonly atMs: number;
}

/** What a WAITING job's `ctx.waitForSignal` or `ctx.waitForEvent` waits for (signals.ts). */
export interface Awaiting {
  readonly kind: 'signal' | 'event';
  readonly name: string;
  /** An event's key it must carry; null = any (always null for a signal). */
  readonly key: string | null;
  /** When the wait gives up; null = never. */
  readonly untilMs: number | null;
}

/** The current attempt of a RUNNING job. */
export interface Lease {
  readonly workerId: string;
  /** A fresh id per assignment: a result counts only under the current one. */
  readonly attemptId: string;
  readonly startedAtMs: number;
  readonly deadlineAtMs: number;
}

export interface CoreJob {
  readonly seq: number;
  readonly jobId: string;
  readonly taskType: string;
  /** Replaced only by a debounced submission while the job has not started (dedup.ts). */
  payloadJson: string;
  readonly priority: Priority;
  readonly maxAttempts: number;
  readonly timeoutMs: number;
  readonly idempotencyKey: string | null;
  readonly createdAtMs: number;
  /** The named queue it belongs to. */
  readonly queue: string;
  /** Its group key within the queue; null = none (those jobs form one group). */
  readonly groupKey: string | null;
  /** Changed only by job-state.ts `transition()`. */
  state: JobState;
  /** Non-null exactly while RUNNING (asserted by `transition()`). */
  lease: Lease | null;
  attempts: number;
  retryAtMs: number | null;
  result: string | null;
  resultFormat: ResultFormat | null;
  error: string | null;
  updatedAtMs: number;
  startedAtMs: number | null;
  finishedAtMs: number | null;
  /** The latest progress of the current (or last) attempt; null = none reported. */
  progress: JobProgress | null;
  /** When a delayed job is (or was) due; null for a job that was not delayed. */
  runAtMs: number | null;
  /** The schedule whose tick made this job; null otherwise. */
  readonly scheduleName: string | null;
  /** Every attempt so far, oldest first (the history `status --attempts` shows). */
  readonly history: AttemptRecord[];
  /** The jobs it waits for (see dependencies.ts); null = none. */
  readonly dependsOn: string[] | null;
  readonly onParentFailure: ParentFailurePolicy | null;
  /** The submitter's trace context, handed to its attempts; absent or null = none. */
  readonly traceContext?: TraceContext | null;
  /** The steps its handler recorded, in order (steps.ts); empty = none. */
  steps: JobStep[];
  /** The job a WAITING job's `ctx.waitFor` waits for; null = none (steps.ts). */
  waitingFor: string | null;
  /** The job whose handler enqueued this one (children.ts); absent or null = none. */
  readonly parentJobId?: string | null;
  /** With `parentJobId`: its key among that parent's children. */
  readonly childKey?: string | null;
  /** Its deduplication key within its queue and how it deduplicates (dedup.ts); absent or null = none. */
  readonly dedupKey?: string | null;
  readonly dedupMode?: DedupMode | null;
  /** `throttle`: the end of the window its creation opened. */
  readonly dedupUntilMs?: number | null;
  /** When it expires unless an attempt is running (expiry.ts); absent or null = never. A rerun clears it. */
  expiresAtMs?: number | null;
  /** The signal or event a WAITING job waits for; absent or null = none (signals.ts). */
  awaiting?: Awaiting | null;
  /** Signals sent to it not taken yet, oldest first; absent = none (signals.ts). */
  signals?: HeldSignal[];
}

export type RunningJob = CoreJob & { readonly state: 'RUNNING'; readonly lease: Lease };

export function isRunning(job: CoreJob): job is RunningJob {
  return job.state === 'RUNNING' && job.lease !== null;
}

/** The job's row as the store keeps it (a fresh object). */
export function toRecord(job: Readonly<CoreJob>): JobRecord {
  const lease = job.lease;
  // A COMPLETED row keeps the worker and attempt that completed it: with the
  // row's start and end times it stands for that attempt (see impliedAttempts).
  const completedBy = job.state === 'COMPLETED' ? job.history.at(-1) : undefined;
  return {
    seq: job.seq,
    jobId: job.jobId,
    taskType: job.taskType,
    payloadJson: job.payloadJson,
    state: job.state,
    priority: job.priority,
    attempts: job.attempts,
    maxAttempts: job.maxAttempts,
    timeoutMs: job.timeoutMs,
    idempotencyKey: job.idempotencyKey,
    workerId: lease?.workerId ?? completedBy?.workerId ?? null,
    attemptId: lease?.attemptId ?? completedBy?.attemptId ?? null,
    deadlineAtMs: lease?.deadlineAtMs ?? null,
    retryAtMs: job.retryAtMs,
    result: job.result,
    resultFormat: job.resultFormat,
    error: job.error,
    createdAtMs: job.createdAtMs,
    updatedAtMs: job.updatedAtMs,
    startedAtMs: job.startedAtMs,
    finishedAtMs: job.finishedAtMs,
    dependsOn: job.dependsOn,
    onParentFailure: job.onParentFailure,
    progress: job.progress,
    runAtMs: job.runAtMs,
    scheduleName: job.scheduleName,
    traceContext: job.traceContext ?? null,
    queue: job.queue,
    groupKey: job.groupKey,
    parentJobId: job.parentJobId ?? null,
    childKey: job.childKey ?? null,
    dedupKey: job.dedupKey ?? null,
    dedupMode: job.dedupMode ?? null,
    dedupUntilMs: job.dedupUntilMs ?? null,
    expiresAtMs: job.expiresAtMs ?? null,
    ...(job.steps.length > 0 && {
      steps: job.steps.map(({ name, atMs, result }) => ({
        name,
        atMs,
        resultBytes: result === null ? 0 : Buffer.byteLength(result),
      })),
    }),
    ...requeuesField(job.history),
    ...rateLimitedField(job.history),
  };
}

/** How many of these attempts ended REQUEUED (not counted toward maxAttempts). */
export function requeuedAmong(attempts: readonly Readonly<AttemptRecord>[]): number {
  let requeues = 0;
  for (const attempt of attempts) if (attempt.outcome === 'REQUEUED') requeues++;
  return requeues;
}

/** `{ requeues }` when some of these attempts ended REQUEUED; else nothing. */
export function requeuesField(
  attempts: readonly Readonly<AttemptRecord>[],
): Pick<JobRecord, 'requeues'> {
  const requeues = requeuedAmong(attempts);
  return requeues > 0 ? { requeues } : {};
}

/** How many of these attempts its handler ended rate limited (not counted toward maxAttempts). */
export function rateLimitedAmong(attempts: readonly Readonly<AttemptRecord>[]): number {
  let count = 0;
  for (const attempt of attempts) if (attempt.outcome === 'RATE_LIMITED') count++;
  return count;
}

/** `{ rateLimited }` when some of these attempts ended RATE_LIMITED; else nothing. */
function rateLimitedField(
  attempts: readonly Readonly<AttemptRecord>[],
): Pick<JobRecord, 'rateLimited'> {
  const rateLimited = rateLimitedAmong(attempts);
  return rateLimited > 0 ? { rateLimited } : {};
}

/**
 * A job from its stored row (restart recovery). The lease of a RUNNING row
 * is kept as stored; recovery decides what happens to it.
 */
export function fromRecord(row: Readonly<JobRecord>, history: AttemptRecord[]): CoreJob {
  const lease =
    row.state === 'RUNNING' && row.workerId !== null && row.attemptId !== null
      ? {
          workerId: row.workerId,
          attemptId: row.attemptId,
          startedAtMs: row.startedAtMs ?? row.updatedAtMs,
          deadlineAtMs: row.deadlineAtMs ?? row.updatedAtMs,
        }
      : null;
  return {
    seq: row.seq,
    jobId: row.jobId,
    taskType: row.taskType,
    payloadJson: row.payloadJson,
    priority: row.priority,
    maxAttempts: row.maxAttempts,
    timeoutMs: row.timeoutMs,
    idempotencyKey: row.idempotencyKey,
    createdAtMs: row.createdAtMs,
    queue: row.queue,
    groupKey: row.groupKey,
    state: row.state,
    lease,
    attempts: row.attempts,
    retryAtMs: row.retryAtMs,
    result: row.result,
    resultFormat: row.resultFormat,
    error: row.error,
    updatedAtMs: row.updatedAtMs,
    startedAtMs: row.startedAtMs,
    finishedAtMs: row.finishedAtMs,
    dependsOn: row.dependsOn,
    onParentFailure: row.onParentFailure,
    progress: row.progress ?? null,
    runAtMs: row.runAtMs,
    scheduleName: row.scheduleName,
    traceContext: row.traceContext ?? null,
    parentJobId: row.parentJobId ?? null,
    childKey: row.childKey ?? null,
    dedupKey: row.dedupKey ?? null,
    dedupMode: row.dedupMode ?? null,
    dedupUntilMs: row.dedupUntilMs ?? null,
    expiresAtMs: row.expiresAtMs ?? null,
    history: history.sort((a, b) => a.attemptNumber - b.attemptNumber),
    steps: [],
    waitingFor: null,
  };
}

/**
 * True for the attempt that gets no row of its own in the store: a first
 * attempt that succeeded. The COMPLETED job row already holds everything it
 * would (worker, attempt id, start and end), and it is by far the most
 * common attempt, so leaving its row out keeps history off the hot path.
 */
export function attemptImpliedByRow(attempt: Readonly<AttemptRecord>): boolean {
  return attempt.outcome === 'SUCCEEDED' && attempt.attemptNumber === 1;
}

/**
 * The attempts of a stored job, with the one its COMPLETED row stands for
 * put back (see {@link attemptImpliedByRow}). Rows written before that rule
 * (no worker on a COMPLETED row) come back as stored.
 */
export function impliedAttempts(
  row: Readonly<JobRecord>,
  attempts: readonly AttemptRecord[],
): AttemptRecord[] {
  const found = [...attempts];
  if (
    row.state !== 'COMPLETED' ||
    row.attempts !== 1 ||
    row.workerId === null ||
    row.attemptId === null ||
    found.some((a) => a.attemptNumber === 1)
  ) {
    return found;
  }
  found.push({
    jobId: row.jobId,
    attemptNumber: 1,
    attemptId: row.attemptId,
    workerId: row.workerId,
    startedAtMs: row.startedAtMs ?? row.updatedAtMs,
    finishedAtMs: row.finishedAtMs ?? row.updatedAtMs,
    outcome: 'SUCCEEDED',
    error: null,
  });
  return found;
}

/** The snapshot clients see, of a job in memory or of a stored row. */
export function jobSnapshot(job: Readonly<JobRecord>): JobSnapshot {
  const snapshot: JobSnapshot = {
    jobId: job.jobId,
    taskType: job.taskType,
    state: job.state,
    attempts: job.attempts,
    maxAttempts: job.maxAttempts,
    workerId: job.state === 'RUNNING' ? job.workerId : null,
    result: job.state === 'COMPLETED' ? job.result : null,
    error: job.error,
    createdAtMillis: job.createdAtMs,
    updatedAtMillis: job.updatedAtMs,
    priority: job.priority,
    startedAtMillis: job.startedAtMs,
    finishedAtMillis: job.finishedAtMs,
    timeoutMillis: job.timeoutMs,
  };
  if (job.state === 'COMPLETED' && job.resultFormat !== null) {
    snapshot.resultFormat = job.resultFormat;
  }
  if (job.idempotencyKey !== null) snapshot.idempotencyKey = job.idempotencyKey;
  if (job.dependsOn !== null) snapshot.dependsOn = [...job.dependsOn];
  if (job.progress !== null && job.progress !== undefined) snapshot.progress = job.progress;
  if (job.runAtMs !== null) snapshot.runAtMillis = job.runAtMs;
  if (job.scheduleName !== null) snapshot.scheduleName = job.scheduleName;
  // Absent = `default`, so a job of the default queue looks as it did in v1.
  if (job.queue !== DEFAULT_QUEUE) snapshot.queue = job.queue;
  if (job.groupKey !== null) snapshot.groupKey = job.groupKey;
  if (job.steps !== undefined && job.steps !== null && job.steps.length > 0) {
    snapshot.steps = job.steps.map(({ name, atMs, resultBytes }) => ({
      name,
      atMillis: atMs,
      resultBytes,
    }));
    const suspensions = job.steps.filter((step) => isSuspensionStep(step.name)).length;
    if (suspensions > 0) snapshot.suspensions = suspensions;
  }
  if (job.parentJobId !== null && job.parentJobId !== undefined) {
    snapshot.parentJobId = job.parentJobId;
  }
  if (job.requeues != null && job.requeues > 0) snapshot.requeues = job.requeues;
  if (job.rateLimited != null && job.rateLimited > 0) snapshot.rateLimited = job.rateLimited;
  if (job.dedupKey != null) {
    snapshot.dedupKey = job.dedupKey;
    snapshot.dedupMode = job.dedupMode ?? 'active';
  }
  if (job.expiresAtMs != null) snapshot.expiresAtMillis = job.expiresAtMs;
  if (isExpired(job)) snapshot.expired = true;
  return snapshot;
}

/** The error an expired job ends with starts with this (expiry.ts). */
export const EXPIRED_PREFIX = 'EXPIRED: ';

/** True for a job that ended CANCELLED because it expired before an attempt started. */
export function isExpired(job: Pick<JobRecord, 'state' | 'error' | 'expiresAtMs'>): boolean {
  return (
    job.state === 'CANCELLED' &&
    job.expiresAtMs != null &&
    job.error !== null &&
    job.error.startsWith(EXPIRED_PREFIX)
  );
}

/** The snapshot of a job held in memory (with what only memory knows: its wait and held signals). */
export function coreJobSnapshot(job: Readonly<CoreJob>): JobSnapshot {
  const snapshot = jobSnapshot(toRecord(job));
  if (job.state === 'WAITING') {
    const awaiting = job.awaiting ?? null;
    if (awaiting?.kind === 'signal') {
      snapshot.waitingFor = { signal: awaiting.name, untilMillis: awaiting.untilMs };
    } else if (awaiting?.kind === 'event') {
      snapshot.waitingFor = {
        event: awaiting.name,
        key: awaiting.key,
        untilMillis: awaiting.untilMs,
      };
    } else if (job.waitingFor !== null) {
      snapshot.waitingFor = { jobId: job.waitingFor, untilMillis: null };
    }
  }
  const held = job.signals?.length ?? 0;
  if (held > 0) snapshot.signalsHeld = held;
  return snapshot;
}

export function attemptSnapshot(attempt: Readonly<AttemptRecord>): AttemptSnapshot {
  return {
    attemptNumber: attempt.attemptNumber,
    attemptId: attempt.attemptId,
    workerId: attempt.workerId,
    startedAtMillis: attempt.startedAtMs,
    finishedAtMillis: attempt.finishedAtMs,
    outcome: attempt.outcome,
    error: attempt.error,
  };
}
