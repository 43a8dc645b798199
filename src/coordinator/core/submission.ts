/**
 * SUBMIT_JOB: validation, idempotency, admission control, and the new job.
 *
 * Order matters and is the contract: (1) the request and payload are
 * validated; (2) a known idempotency key is answered (even at the limit);
 * (3) admission control may reject; (4) the job is created. Nothing is
 * created or stored for an invalid or rejected submission.
 *
 * Keys of active (and just-finished) jobs are in memory. An unknown key may
 * belong to an old job only the store remembers, so the submission is held
 * while the store is asked; later submissions with the same key queue behind
 * it, so two of them can never both create a job.
 */
import { isDeepStrictEqual } from 'node:util';
import { ErrorCode, isErrorCode } from '../../protocol/error-codes.js';
import { describeError } from '../../protocol/errors.js';
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_DEDUP_KEY_LENGTH,
  MAX_DEDUP_WINDOW_MS,
  MAX_DELAY_MS,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  MAX_JOB_ID_LENGTH,
  MAX_PARENTS,
  MAX_TASK_TIMEOUT_MS,
  MIN_TASK_TIMEOUT_MS,
} from '../../protocol/limits.js';
import type { JsonObject, SubmitJob, SubmitJobsElement } from '../../protocol/messages.js';
import { traceContextOf, traceContextProblem } from '../../protocol/trace-context.js';
import {
  BUILTIN_TASK_TYPES,
  CUSTOM_TASK_TYPE_PATTERN,
  isBuiltinTaskType,
  isValidTaskType,
} from '../../protocol/task-types.js';
import type { JobRecord } from '../../store/store.js';
import { DEFAULT_QUEUE, groupKeyProblem, queueNameProblem } from '../../protocol/queue-names.js';
import { coreJobSnapshot, jobSnapshot, toRecord, type CoreJob } from './job.js';
import {
  finishedParentOf,
  parentFailureError,
  unknownParentError,
  type FinishedParent,
} from './dependencies.js';
import { otherShardOf, watchRemoteParents } from './shard-messages.js';
import { holdScheduled } from './delayed-jobs.js';
import { isFar, loadFar, memoryJob, parkFar } from './scheduled-window.js';
import { isTerminalState } from './job-state.js';
import { debounce, decideDedup, type DedupRequest } from './dedup.js';
import { watchExpiry } from './expiry.js';
import { cancelJob, releaseWaiting, schedule } from './job-lifecycle.js';
import type { HeldSubmission, NormalizedSubmission } from './pending-reads.js';
import type { CoreState } from './state.js';

/** The submission's effective settings, or what is wrong with it. */
function normalize(s: CoreState, msg: SubmitJobsElement): NormalizedSubmission | string {
  const maxAttempts =
    msg.maxAttempts === null || msg.maxAttempts <= 0
      ? s.config.defaultMaxAttempts
      : msg.maxAttempts;
  if (maxAttempts > MAX_ATTEMPTS_LIMIT) return `maxAttempts must be at most ${MAX_ATTEMPTS_LIMIT}`;
  const key = msg.idempotencyKey;
  if (key !== null && (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH)) {
    return `idempotencyKey must be 1..${MAX_IDEMPOTENCY_KEY_LENGTH} characters`;
  }
  const timeoutMs = msg.timeoutMillis ?? s.config.taskTimeoutMs;
  if (timeoutMs < MIN_TASK_TIMEOUT_MS || timeoutMs > MAX_TASK_TIMEOUT_MS) {
    return `timeoutMillis must be ${MIN_TASK_TIMEOUT_MS}..${MAX_TASK_TIMEOUT_MS}, got ${timeoutMs}`;
  }
  const queue = msg.queue ?? DEFAULT_QUEUE;
  const badQueue = queueNameProblem(queue);
  if (badQueue !== null) return `queue ${badQueue}`;
  const groupKey = msg.groupKey ?? null;
  const badGroup = groupKey === null ? null : groupKeyProblem(groupKey);
  if (badGroup !== null) return `groupKey ${badGroup}`;
  const runAtMs = msg.runAtMillis ?? null;
  if (runAtMs !== null && (runAtMs < 0 || runAtMs > s.nowMs + MAX_DELAY_MS)) {
    return `runAtMillis must be an epoch time at most ${MAX_DELAY_MS / 86_400_000} days ahead, got ${runAtMs}`;
  }
  const dependsOn = normalizeParents(msg.dependsOn ?? null);
  if (typeof dependsOn === 'string') return dependsOn;
  const traceProblem = traceContextProblem(msg);
  if (traceProblem !== null) return traceProblem;
  const dedup = normalizeDedup(msg, runAtMs, dependsOn);
  if (typeof dedup === 'string') return dedup;
  const expiresAtMs = msg.expiresAtMillis ?? null;
  if (expiresAtMs !== null) {
    const startsAtMs = Math.max(s.nowMs, runAtMs ?? 0);
    if (expiresAtMs <= s.nowMs) {
      return `expiresAtMillis ${expiresAtMs} has passed (the coordinator's time is ${s.nowMs})`;
    }
    if (expiresAtMs <= startsAtMs) {
      return `expiresAtMillis must be after the job's run time (${startsAtMs}), got ${expiresAtMs}`;
    }
    if (expiresAtMs > startsAtMs + MAX_DELAY_MS) {
      return `expiresAtMillis must be at most ${MAX_DELAY_MS / 86_400_000} days after the job's run time`;
    }
  }
  return {
    maxAttempts,
    priority: msg.priority ?? 'NORMAL',
    timeoutMs,
    queue,
    groupKey,
    runAtMs,
    dependsOn,
    onParentFailure: dependsOn === null ? null : (msg.onParentFailure ?? null),
    dedup,
    expiresAtMs,
  };
}

/** A submission's deduplication (null = none), or what is wrong with it. */
function normalizeDedup(
  msg: SubmitJobsElement,
  runAtMs: number | null,
  dependsOn: string[] | null,
): DedupRequest | null | string {
  const key = msg.dedupKey ?? null;
  const mode = msg.dedupMode ?? null;
  const windowMs = msg.dedupWindowMillis ?? null;
  if (key === null) {
    if (mode !== null || windowMs !== null)
      return 'dedupMode and dedupWindowMillis need a dedupKey';
    return null;
  }
  if (key.length === 0 || key.length > MAX_DEDUP_KEY_LENGTH) {
    return `dedupKey must be 1..${MAX_DEDUP_KEY_LENGTH} characters`;
  }
  const effective = mode ?? 'active';
  if (effective === 'throttle') {
    if (windowMs === null) return 'dedupMode throttle needs dedupWindowMillis';
    if (windowMs < 1 || windowMs > MAX_DEDUP_WINDOW_MS) {
      return `dedupWindowMillis must be 1..${MAX_DEDUP_WINDOW_MS}, got ${windowMs}`;
    }
  } else if (windowMs !== null) {
    return `dedupWindowMillis is for dedupMode throttle only (the mode is ${effective})`;
  }
  if (effective === 'debounce') {
    if (runAtMs === null) return 'dedupMode debounce needs a delay (runAtMillis)';
    if (dependsOn !== null) return 'dedupMode debounce is for jobs without parents';
  }
  return { key, mode: effective, windowMs };
}

/** The parents without duplicates, in the order given; null for none; or what is wrong. */
function normalizeParents(given: readonly string[] | null): string[] | null | string {
  if (given === null || given.length === 0) return null;
  const unique = [...new Set(given)];
  if (unique.length > MAX_PARENTS) {
    return `dependsOn names ${unique.length} jobs; at most ${MAX_PARENTS} parents per job`;
  }
  const bad = unique.find((id) => id.length === 0 || id.length > MAX_JOB_ID_LENGTH);
  if (bad !== undefined) return `dependsOn: ${JSON.stringify(bad.slice(0, 80))} is not a job id`;
  return unique;
}

function errorCodeOf(err: unknown): ErrorCode {
  const code = (err as { code?: unknown }).code;
  return isErrorCode(code) ? code : ErrorCode.InvalidPayload;
}

type Submitted = Pick<
  JobRecord,
  | 'taskType'
  | 'maxAttempts'
  | 'priority'
  | 'timeoutMs'
  | 'payloadJson'
  | 'queue'
  | 'groupKey'
  | 'dependsOn'
>;

export function sameSubmission(
  job: Submitted,
  msg: SubmitJobsElement,
  wanted: NormalizedSubmission,
): boolean {
  if (job.taskType !== msg.taskType || job.maxAttempts !== wanted.maxAttempts) return false;
  if (job.priority !== wanted.priority || job.timeoutMs !== wanted.timeoutMs) return false;
  if (job.queue !== wanted.queue || job.groupKey !== wanted.groupKey) return false;
  if (!isDeepStrictEqual(job.dependsOn, wanted.dependsOn)) return false;
  // Compare with the payload as it would be stored: the JSON round trip turns
  // -0 into 0 (deep-strict equality tells them apart), so the resubmission of
  // an identical request must go through it too.
  return isDeepStrictEqual(JSON.parse(job.payloadJson), JSON.parse(JSON.stringify(msg.payload)));
}

/** What is wrong with a submission, as its ERROR says it. */
export interface SubmissionProblem {
  readonly code: ErrorCode;
  readonly message: string;
}

/** The submission's effective settings, or why it is refused (nothing is created then). */
export function checkSubmission(
  s: CoreState,
  msg: SubmitJobsElement,
): NormalizedSubmission | SubmissionProblem {
  if (!isValidTaskType(msg.taskType)) {
    return {
      code: ErrorCode.InvalidTaskType,
      message:
        `Invalid task type: ${JSON.stringify(msg.taskType.slice(0, 80))}; expected a built-in ` +
        `(${BUILTIN_TASK_TYPES.join(', ')}) or a name matching ${String(CUSTOM_TASK_TYPE_PATTERN)} ` +
        'that is not a built-in name or CLI shortcut in any case',
    };
  }
  const wanted = normalize(s, msg);
  if (typeof wanted === 'string') {
    return { code: ErrorCode.InvalidRequest, message: `Invalid request: ${wanted}` };
  }
  if (isBuiltinTaskType(msg.taskType)) {
    try {
      s.deps.validator.validate(msg.taskType, msg.payload);
    } catch (err) {
      return { code: errorCodeOf(err), message: describeError(err) };
    }
  }
  return wanted;
}

export const isProblem = (
  checked: NormalizedSubmission | SubmissionProblem,
): checked is SubmissionProblem => 'code' in checked;

/** Handles one SUBMIT_JOB. */
export function submit(s: CoreState, connId: number, requestId: number, msg: SubmitJob): void {
  const wanted = checkSubmission(s, msg);
  if (isProblem(wanted)) {
    s.replyError(connId, requestId, wanted.code, wanted.message);
    return;
  }
  const held: HeldSubmission = { connId, requestId, msg, wanted };
  const key = msg.idempotencyKey;
  if (key === null) return admit(s, held);
  const known = s.jobs.byKey(key);
  if (known !== undefined) return answerKnownKey(s, held, toRecord(known));
  const queue = s.reads.heldFor(key);
  if (queue !== undefined) {
    queue.push(held);
    return;
  }
  s.reads.hold(key, held);
  s.jobs.pinKey(key);
  s.read({ op: 'jobByKey', key }, { kind: 'key', key });
}

/** The store answered a key lookup: settle every submission held for that key, in order. */
export function keyLookedUp(s: CoreState, key: string, stored: JobRecord | null): void {
  for (const held of s.reads.release(key)) {
    const known = s.jobs.byKey(key);
    if (known !== undefined) answerKnownKey(s, held, toRecord(known));
    else if (stored !== null) answerKnownKey(s, held, stored);
    else admit(s, held);
  }
  s.jobs.unpinKey(key);
}

/** A key lookup failed: its held submissions get an error; nothing was created. */
export function keyLookupFailed(s: CoreState, key: string, message: string): void {
  for (const held of s.reads.release(key)) {
    s.replyError(
      held.connId,
      held.requestId,
      ErrorCode.StoreReadFailed,
      `Could not check idempotency key: ${message}`,
    );
  }
  s.jobs.unpinKey(key);
}

/** Same submission -> the existing job; anything different -> ERROR. */
function answerKnownKey(s: CoreState, held: HeldSubmission, existing: JobRecord): void {
  const { connId, requestId, msg, wanted } = held;
  const key = msg.idempotencyKey as string;
  if (!sameSubmission(existing, msg, wanted)) {
    s.replyError(
      connId,
      requestId,
      ErrorCode.IdempotencyConflict,
      `Idempotency key ${JSON.stringify(key)} is already used by job ${existing.jobId} with a different submission`,
    );
    return;
  }
  s.emit({ type: 'job.deduplicated', jobId: existing.jobId, idempotencyKey: key });
  s.reply(connId, requestId, {
    type: 'JOB_SUBMITTED',
    jobId: existing.jobId,
    job: jobSnapshot(existing),
    servingWorkers: s.workers.servingCount(existing.taskType),
    ...pausedQueueField(s, existing.queue),
  });
}

/** JOB_SUBMITTED's `queuePaused`: present (true) only when the job's queue is paused now. */
export function pausedQueueField(s: CoreState, queue: string): { queuePaused?: true } {
  return s.queues.settingsOf(queue).paused ? { queuePaused: true } : {};
}

/** The admission limit a new job would exceed, or null when it is admitted. */
export function refusalOf(
  s: CoreState,
  delayed: boolean,
): { activeCount: number; limit: number; what: string } | null {
  if (delayed) {
    const limit = s.config.maxScheduledJobs;
    const count = s.scheduledCount + s.window.farCount;
    return count >= limit ? { activeCount: count, limit, what: 'scheduled jobs' } : null;
  }
  // SCHEDULED jobs count toward the active limit only once they are due.
  const activeCount = s.jobs.activeCount - s.scheduledCount;
  const limit = s.config.maxActiveJobs;
  return activeCount >= limit ? { activeCount, limit, what: 'active jobs' } : null;
}

/** What a submission's parents are now: still open, or ended (with their outcome). */
export interface ParentsFound {
  open: string[];
  finished: FinishedParent[];
  /** Named but held neither in memory nor in `stored`. */
  missing: string[];
  /**
   * Jobs of other shards (shard-messages.ts): open until their shard says
   * they ended; each is asked to (a `watch`) when the job is created.
   */
  remote: string[];
  /**
   * Jobs of other shards that learn of this child without a `watch`: a
   * flow's jobs made elsewhere by the same flow, whose `createJobs` names
   * their children here (cross-shard.ts). Open like `remote`.
   */
  announced?: string[];
}

export function findParents(
  parentIds: readonly string[],
  s: CoreState,
  stored: ReadonlyMap<string, JobRecord>,
): ParentsFound {
  const found: ParentsFound = { open: [], finished: [], missing: [], remote: [] };
  for (const parentId of parentIds) {
    if (otherShardOf(s, parentId) !== null) {
      found.remote.push(parentId);
      continue;
    }
    const job = memoryJob(s, parentId);
    const row = job === undefined ? stored.get(parentId) : undefined;
    if (job !== undefined && !isTerminalState(job.state)) found.open.push(parentId);
    // A far delayed job: memory takes it, to settle its dependents when it ends.
    else if (row !== undefined && row.state === 'SCHEDULED') {
      loadFar(s, row);
      found.open.push(parentId);
    } else if (job !== undefined) found.finished.push(finishedParentOf(job));
    else if (row !== undefined) found.finished.push(finishedParentOf(row));
    else found.missing.push(parentId);
  }
  return found;
}

/** The store answered for a submission's parents: create the job, or say which parent is unknown. */
export function parentsLookedUp(
  s: CoreState,
  held: HeldSubmission,
  asked: readonly string[],
  rows: readonly JobRecord[],
): void {
  const stored = new Map(rows.map((row) => [row.jobId, row]));
  const found = findParents(held.wanted.dependsOn ?? [], s, stored);
  const askedSet = new Set(asked);
  const unknown = found.missing.find((id) => askedSet.has(id));
  if (unknown !== undefined) return replyUnknownParent(s, held, unknown);
  // A parent held in memory when the store was asked may have left it since
  // (its end committed): ask again for those, once.
  if (found.missing.length > 0) {
    s.read({ op: 'jobs', jobIds: found.missing }, { kind: 'parents', held, asked: found.missing });
    return;
  }
  admit(s, held, found);
}

function replyUnknownParent(s: CoreState, held: HeldSubmission, parentId: string): void {
  s.replyError(
    held.connId,
    held.requestId,
    ErrorCode.UnknownJob,
    `Unknown job: ${parentId.slice(0, 200)} (named in dependsOn)`,
  );
}

/** Admission control, then the new job (its parents looked up first when it has any). */
function admit(s: CoreState, held: HeldSubmission, parents?: ParentsFound): void {
  const { connId, requestId, msg, wanted } = held;
  // Decided again after a read of parents: the key's job may have changed meanwhile.
  if (wanted.dedup !== null && answeredByKey(s, held)) return;
  const parentIds = held.wanted.dependsOn;
  if (parentIds !== null && parents === undefined) {
    const found = findParents(parentIds, s, new Map());
    if (found.missing.length > 0) {
      s.read(
        { op: 'jobs', jobIds: found.missing },
        { kind: 'parents', held, asked: found.missing },
      );
      return;
    }
    parents = found;
  }
  const runAtMs = dueAt(s, wanted);
  // A job with parents is WAITING (an active job) until they end, even when
  // it is also delayed: it is admitted as active.
  const delayed = runAtMs !== null && runAtMs > s.nowMs && wanted.dependsOn === null;
  if (rejected(s, connId, requestId, delayed)) return;
  const job = createJob(s, newJobOf(msg, wanted, runAtMs, s.nowMs), parents);
  s.reply(connId, requestId, {
    type: 'JOB_SUBMITTED',
    jobId: job.jobId,
    job: coreJobSnapshot(job),
    servingWorkers: s.workers.servingCount(job.taskType),
    ...pausedQueueField(s, job.queue),
    ...(wanted.dedup !== null && { deduplicated: false }),
  });
  schedule(s);
}

/**
 * A keyed submission the key's job answers (see dedup.ts): the reply names
 * it and nothing is created. Returns false when a new job is to be made.
 */
function answeredByKey(s: CoreState, held: HeldSubmission): boolean {
  const { connId, requestId, msg, wanted } = held;
  const matched = matchDedup(s, msg, wanted);
  if (matched === null) return false;
  const { jobId, job, replaced } = matched;
  s.reply(connId, requestId, {
    type: 'JOB_SUBMITTED',
    jobId,
    job: job === undefined ? null : coreJobSnapshot(job),
    servingWorkers: s.workers.servingCount(msg.taskType),
    ...pausedQueueField(s, wanted.queue),
    deduplicated: true,
    ...(replaced && { replaced: true }),
  });
  return true;
}

/** What a deduplicated submission names, once the key's job took it. */
export interface DedupMatch {
  readonly jobId: string;
  readonly job: CoreJob | undefined;
  readonly replaced: boolean;
}

/**
 * Decides a keyed submission (debouncing the key's job when that is the
 * decision); null when a new job is to be made.
 */
export function matchDedup(
  s: CoreState,
  msg: SubmitJobsElement,
  wanted: NormalizedSubmission,
): DedupMatch | null {
  const dedup = wanted.dedup;
  if (dedup === null) return null;
  const decision = decideDedup(s, wanted.queue, dedup);
  if (decision.kind === 'create') return null;
  const replaced = decision.kind === 'replace';
  if (replaced) {
    const payloadJson = JSON.stringify(msg.payload satisfies JsonObject);
    debounce(s, decision.job, payloadJson, dueAt(s, wanted) ?? s.nowMs);
  }
  const jobId = replaced ? decision.job.jobId : decision.jobId;
  s.emit({ type: 'job.dedupMatched', jobId, dedupKey: dedup.key, mode: dedup.mode, replaced });
  return { jobId, job: decision.job, replaced };
}

/**
 * Admission control for one new job: when a limit is reached, answers
 * SUBMIT_REJECTED (retryable) and returns true.
 */
export function rejected(
  s: CoreState,
  connId: number,
  requestId: number,
  delayed: boolean,
): boolean {
  const refusal = refusalOf(s, delayed);
  if (refusal === null) return false;
  const { activeCount, limit, what } = refusal;
  s.emit({ type: 'job.rejected', activeCount, limit });
  s.reply(connId, requestId, {
    type: 'SUBMIT_REJECTED',
    reason: `too many ${what} (${activeCount} of ${limit}); retry later`,
    activeCount,
    limit,
    retryable: true,
  });
  return true;
}

/** A submission's due time: null when not delayed; a time in the past means now. */
export function dueAt(s: CoreState, wanted: NormalizedSubmission): number | null {
  return wanted.runAtMs === null ? null : Math.max(wanted.runAtMs, s.nowMs);
}

/** The new job a checked submission makes. */
export function newJobOf(
  msg: SubmitJobsElement,
  wanted: NormalizedSubmission,
  runAtMs: number | null,
  nowMs: number,
): NewJob {
  return {
    taskType: msg.taskType,
    payloadJson: JSON.stringify(msg.payload satisfies JsonObject),
    priority: wanted.priority,
    maxAttempts: wanted.maxAttempts,
    timeoutMs: wanted.timeoutMs,
    idempotencyKey: msg.idempotencyKey,
    runAtMs,
    scheduleName: null,
    queue: wanted.queue,
    groupKey: wanted.groupKey,
    dependsOn: wanted.dependsOn,
    onParentFailure: wanted.onParentFailure,
    traceContext: traceContextOf(msg),
    dedupKey: wanted.dedup?.key ?? null,
    dedupMode: wanted.dedup?.mode ?? null,
    dedupUntilMs: dedupUntilOf(wanted.dedup, nowMs),
    expiresAtMs: wanted.expiresAtMs,
  };
}

/** The end of the throttle window a new job opens (null: not throttled). */
function dedupUntilOf(dedup: DedupRequest | null, nowMs: number): number | null {
  return dedup?.mode === 'throttle' && dedup.windowMs !== null ? nowMs + dedup.windowMs : null;
}

/** What a new job is made of (a submission's or a schedule tick's). */
export type NewJob = Pick<
  CoreJob,
  | 'taskType'
  | 'payloadJson'
  | 'priority'
  | 'maxAttempts'
  | 'timeoutMs'
  | 'idempotencyKey'
  | 'runAtMs'
  | 'scheduleName'
  | 'queue'
  | 'groupKey'
  | 'dependsOn'
  | 'onParentFailure'
  | 'traceContext'
  | 'parentJobId'
  | 'childKey'
  | 'dedupKey'
  | 'dedupMode'
  | 'dedupUntilMs'
  | 'expiresAtMs'
>;

/**
 * Creates a job (admission already passed): WAITING when it has parents (its
 * `parents` as looked up; settled at once when they have all ended),
 * SCHEDULED when its due time is ahead, QUEUED otherwise. The caller runs
 * `schedule(s)`.
 */
export function createJob(
  s: CoreState,
  spec: NewJob,
  parents?: ParentsFound,
  /** A job another shard made for this one (cross-shard.ts): its id and creation time. */
  made?: { readonly jobId: string; readonly createdAtMs: number },
): CoreJob {
  const delayed = spec.runAtMs !== null && spec.runAtMs > s.nowMs;
  const job = freshJob(spec, {
    seq: s.jobs.takeSeq(),
    jobId: made?.jobId ?? s.deps.newId(),
    createdAtMs: made?.createdAtMs ?? s.nowMs,
    nowMs: s.nowMs,
    state: parents !== undefined ? 'WAITING' : delayed ? 'SCHEDULED' : 'QUEUED',
  });
  // A keyed job stays in memory even when far: a lookup of its key that was
  // out before it was created answers "unknown" after its batch committed,
  // and only memory can still say the key is taken (see scheduled-window.ts).
  // So does a job with a deduplication key: the index of keys is memory only (dedup.ts).
  const far =
    parents === undefined &&
    delayed &&
    job.idempotencyKey === null &&
    (job.dedupKey ?? null) === null &&
    isFar(s, spec.runAtMs as number);
  if (far) parkFar(s, job);
  else s.jobs.insert(job);
  if (parents === undefined && delayed && !far) holdScheduled(s, job);
  else if (parents === undefined && !delayed) s.ready.push(job);
  if (!far) watchExpiry(s, job);
  s.dedup.took(job);
  s.emit({
    type: 'job.submitted',
    jobId: job.jobId,
    state: job.state,
    taskType: job.taskType,
    priority: job.priority,
    maxAttempts: job.maxAttempts,
    idempotencyKey: job.idempotencyKey,
    queue: job.queue,
    scheduleName: job.scheduleName,
    traceContext: job.traceContext ?? null,
  });
  if (parents !== undefined) attachParents(s, job, parents);
  return job;
}

/**
 * A new job's fields before it enters any table: its own (`fields`), then
 * nothing run yet, then the submission's. Also the row of a job this core
 * makes for another shard (cross-shard.ts).
 */
export function freshJob(
  spec: NewJob,
  fields: {
    readonly seq: number;
    readonly jobId: string;
    readonly createdAtMs: number;
    readonly nowMs: number;
    readonly state: CoreJob['state'];
  },
): CoreJob {
  // The spec's fields come last: V8 builds an object that starts with a
  // spread and then adds fields many times slower (measured: ~40x for
  // these fields), which a 10,000-job flow felt. Their names never overlap.
  return {
    seq: fields.seq,
    jobId: fields.jobId,
    createdAtMs: fields.createdAtMs,
    state: fields.state,
    lease: null,
    attempts: 0,
    retryAtMs: null,
    result: null,
    resultFormat: null,
    error: null,
    updatedAtMs: fields.nowMs,
    startedAtMs: null,
    finishedAtMs: null,
    progress: null,
    history: [],
    steps: [],
    waitingFor: null,
    ...spec,
  };
}

/**
 * A new WAITING job joins the graph: it stays WAITING while a parent is
 * open, is released at once (QUEUED, or SCHEDULED when delayed) when every
 * parent completed, and is cancelled at
 * once when a parent had already failed (unless it runs anyway).
 */
function attachParents(s: CoreState, job: CoreJob, parents: ParentsFound): void {
  // Only a job another shard made can name a parent here that no one has
  // (that shard could not check it): it is cancelled, as by a failed parent.
  const unknown = parents.missing[0];
  if (unknown !== undefined) {
    job.error = unknownParentError(unknown);
    cancelJob(s, job);
    return;
  }
  const announced = parents.announced ?? [];
  const open = [...parents.open, ...parents.remote, ...announced];
  const blocker = s.graph.attach(job, open, parents.finished);
  if (blocker !== undefined) {
    job.error = parentFailureError(blocker);
    cancelJob(s, job);
  } else if (open.length === 0) {
    releaseWaiting(s, job);
  } else {
    watchRemoteParents(s, job, parents.remote);
  }
}
