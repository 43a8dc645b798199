/**
 * SUBMIT_JOB: validation, idempotency, admission control, and the new job.
 *
 * Order matters and is the contract: (1) the request is validated (task
 * type name, limits, per-job timeout), and so is a built-in task's payload
 * (a custom type's payload is validated by the worker that runs it); (2) a
 * known idempotency key is answered (even at the limit); (3) admission
 * control may reject; (4) the job is created and staged. Nothing is created
 * or stored for an invalid or rejected submission.
 */
import { isDeepStrictEqual } from 'node:util';
import { describeError } from '../../protocol/errors.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  MAX_TASK_TIMEOUT_MS,
  MIN_TASK_TIMEOUT_MS,
} from '../../protocol/limits.js';
import {
  BUILTIN_TASK_TYPES,
  CUSTOM_TASK_TYPE_PATTERN,
  isBuiltinTaskType,
  isValidTaskType,
} from '../../protocol/task-types.js';
import type { JsonObject, Priority, SubmitJob } from '../../protocol/messages.js';
import type { JobRecord } from '../../store/store.js';
import { schedule } from './job-lifecycle.js';
import { jobSnapshot, type CoreState } from './state.js';

interface Normalized {
  maxAttempts: number;
  priority: Priority;
  /** Per-attempt execution deadline, in ms. */
  timeoutMs: number;
}

interface Refusal {
  code: ErrorCode;
  message: string;
}

const invalidRequest = (detail: string): Refusal => ({
  code: ErrorCode.InvalidRequest,
  message: `Invalid request: ${detail}`,
});

/** The submission's effective settings, or why it is refused. */
function normalize(s: CoreState, msg: SubmitJob): Normalized | Refusal {
  if (!isValidTaskType(msg.taskType)) {
    return {
      code: ErrorCode.InvalidTaskType,
      message:
        `Invalid task type: ${JSON.stringify(msg.taskType.slice(0, 80))}; expected a built-in ` +
        `(${BUILTIN_TASK_TYPES.join(', ')}) or a name matching ${String(CUSTOM_TASK_TYPE_PATTERN)} ` +
        'that is not a built-in name or CLI shortcut in any case',
    };
  }
  const maxAttempts =
    msg.maxAttempts === null || msg.maxAttempts <= 0
      ? s.config.defaultMaxAttempts
      : msg.maxAttempts;
  if (maxAttempts > MAX_ATTEMPTS_LIMIT)
    return invalidRequest(`maxAttempts must be at most ${MAX_ATTEMPTS_LIMIT}`);
  const key = msg.idempotencyKey;
  if (key !== null && (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH)) {
    return invalidRequest(`idempotencyKey must be 1..${MAX_IDEMPOTENCY_KEY_LENGTH} characters`);
  }
  const timeoutMs = msg.timeoutMillis ?? s.config.taskTimeoutMs;
  if (timeoutMs < MIN_TASK_TIMEOUT_MS || timeoutMs > MAX_TASK_TIMEOUT_MS) {
    return invalidRequest(
      `timeoutMillis must be ${MIN_TASK_TIMEOUT_MS}..${MAX_TASK_TIMEOUT_MS}, got ${timeoutMs}`,
    );
  }
  return { maxAttempts, priority: msg.priority ?? 'NORMAL', timeoutMs };
}

function errorCodeOf(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : ErrorCode.InvalidPayload;
}

function sameSubmission(job: Readonly<JobRecord>, msg: SubmitJob, wanted: Normalized): boolean {
  if (job.taskType !== msg.taskType || job.maxAttempts !== wanted.maxAttempts) return false;
  if (job.priority !== wanted.priority || job.timeoutMs !== wanted.timeoutMs) return false;
  // Compare with the payload as it would be stored: the JSON round trip turns
  // -0 into 0 (deep-strict equality tells them apart), so the resubmission of
  // an identical request must go through it too.
  return isDeepStrictEqual(JSON.parse(job.payloadJson), JSON.parse(JSON.stringify(msg.payload)));
}

export function submit(s: CoreState, connId: number, requestId: number, msg: SubmitJob): void {
  const wanted = normalize(s, msg);
  if ('code' in wanted) {
    s.replyError(connId, requestId, wanted.code, wanted.message);
    return;
  }
  try {
    // Custom types are validated by the worker that runs them.
    if (isBuiltinTaskType(msg.taskType)) s.deps.validator.validate(msg.taskType, msg.payload);
  } catch (err) {
    s.replyError(connId, requestId, errorCodeOf(err), describeError(err));
    return;
  }
  if (msg.idempotencyKey !== null && answerKnownKey(s, connId, requestId, msg, wanted)) return;
  if (s.activeCount >= s.config.maxActiveJobs) {
    reject(s, connId, requestId);
    return;
  }
  const job = createJob(s, msg, wanted);
  s.reply(connId, requestId, {
    type: 'JOB_SUBMITTED',
    jobId: job.jobId,
    job: jobSnapshot(job),
    servingWorkers: s.workers.servingCount(job.taskType),
  });
  schedule(s);
}

/** True if the key is known (and answered): same submission -> its job; else ERROR. */
function answerKnownKey(
  s: CoreState,
  connId: number,
  requestId: number,
  msg: SubmitJob,
  wanted: Normalized,
): boolean {
  const key = msg.idempotencyKey as string;
  const existing = s.keys.get(key) ?? s.deps.store.getJobByIdempotencyKey(key);
  if (existing === undefined) return false;
  if (!sameSubmission(existing, msg, wanted)) {
    s.replyError(
      connId,
      requestId,
      ErrorCode.IdempotencyConflict,
      `Idempotency key ${JSON.stringify(key)} is already used by job ${existing.jobId} with a different submission`,
    );
    return true;
  }
  s.emit({ type: 'job.deduplicated', jobId: existing.jobId, idempotencyKey: key });
  s.reply(connId, requestId, {
    type: 'JOB_SUBMITTED',
    jobId: existing.jobId,
    job: jobSnapshot(existing),
    servingWorkers: s.workers.servingCount(existing.taskType),
  });
  return true;
}

function reject(s: CoreState, connId: number, requestId: number): void {
  const limit = s.config.maxActiveJobs;
  s.emit({ type: 'job.rejected', activeCount: s.activeCount, limit });
  s.reply(connId, requestId, {
    type: 'SUBMIT_REJECTED',
    reason: `too many active jobs (${s.activeCount} of ${limit}); retry later`,
    activeCount: s.activeCount,
    limit,
    retryable: true,
  });
}

function createJob(s: CoreState, msg: SubmitJob, wanted: Normalized): JobRecord {
  const job: JobRecord = {
    seq: s.nextSeq++,
    jobId: s.deps.newId(),
    taskType: msg.taskType,
    payloadJson: JSON.stringify(msg.payload satisfies JsonObject),
    state: 'QUEUED',
    priority: wanted.priority,
    attempts: 0,
    maxAttempts: wanted.maxAttempts,
    timeoutMs: wanted.timeoutMs,
    idempotencyKey: msg.idempotencyKey,
    workerId: null,
    attemptId: null,
    deadlineAtMs: null,
    retryAtMs: null,
    result: null,
    resultFormat: null,
    error: null,
    createdAtMs: s.nowMs,
    updatedAtMs: s.nowMs,
  };
  s.jobs.set(job.jobId, job);
  if (job.idempotencyKey !== null) s.keys.set(job.idempotencyKey, job);
  s.activeCount++;
  s.deps.store.insertJob(job);
  s.ready.push(job);
  s.emit({
    type: 'job.submitted',
    jobId: job.jobId,
    taskType: job.taskType,
    priority: job.priority,
    maxAttempts: job.maxAttempts,
    idempotencyKey: job.idempotencyKey,
  });
  return job;
}
