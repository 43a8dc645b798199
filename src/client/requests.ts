/**
 * What a submission says about each of its jobs, and how that goes on the
 * wire. One mapping for every way of submitting: a job's options (or a
 * request spelled out field by field) become {@link JobFields}, checked
 * here, and those become a `SUBMIT_JOB`, an element of `SUBMIT_JOBS` or a job
 * of `SUBMIT_FLOW`, which carry the same fields.
 *
 * Extension fields (dependencies, queues, deduplication, expiry) are left out
 * of a message when unset, so that a submission that uses none of them is a
 * v1 request. The v1 fields (`maxAttempts`, `idempotencyKey`, `priority`)
 * are always there, null when unset, as a v1 coordinator expects them.
 *
 * Bad options are a `TypeError` (wrong kind or combination) or a
 * `RangeError` (out of bounds) before anything is sent; the coordinator
 * checks everything again and has the last word.
 */
import { groupKeyProblem, queueNameProblem } from '../protocol/queue-names.js';
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_DEDUP_KEY_LENGTH,
  MAX_DEDUP_WINDOW_MS,
  MAX_DELAY_MS,
  MAX_PARENTS,
  MAX_TASK_TIMEOUT_MS,
  MIN_TASK_TIMEOUT_MS,
} from '../protocol/limits.js';
import { DEDUP_MODES, PARENT_FAILURE_POLICIES } from '../protocol/messages.js';
import type {
  DedupMode,
  FlowJob,
  JsonObject,
  ParentFailurePolicy,
  Priority,
  SubmitFlow,
  SubmitJob,
  SubmitJobs,
  SubmitJobsElement,
} from '../protocol/messages.js';
import { KNOWN_STATES } from '../protocol/job-view.js';
import { submitElementToJson } from '../protocol/codec.js';
import { traceFields, type TraceContext } from '../protocol/trace-context.js';

/** Deduplication and expiry of a job: the same options in every form of submission. */
export interface DedupOptions {
  /**
   * A deduplication key, 1..256 characters, scoped to the job's queue (and
   * separate from idempotency keys): see `dedupMode` for what it does.
   */
  dedupKey?: string;
  /**
   * What a submission with a key already held does (default `active`):
   * `active` creates nothing while the key's job is not terminal; `throttle`
   * creates nothing for `dedupWindowMillis` after the key's job was created;
   * `debounce` (needs a delay) replaces the payload and run time of the
   * key's job while it has not started. The result says so
   * (`deduplicated`, `replaced`).
   */
  dedupMode?: DedupMode;
  /** `throttle`'s window, 1 ms..366 days; required with `throttle`, refused otherwise. */
  dedupWindowMillis?: number;
  /**
   * Epoch ms after which the job, if no attempt has started by then, never
   * starts: it ends CANCELLED with an error starting `EXPIRED:`. Not in the past.
   */
  expiresAtMillis?: number;
}

/** Per-job options of a submission. */
export interface JobOptions extends DedupOptions {
  /** Attempts allowed, 1..1000 (default: the coordinator's). */
  maxAttempts?: number;
  /** Base priority (default NORMAL). */
  priority?: Priority;
  /** Resubmitting the same key and submission returns the original job. */
  idempotencyKey?: string;
  /** This job's execution deadline per attempt, 1..86400000 ms (default: the coordinator's). */
  timeoutMillis?: number;
  /** The named queue (default `default`). */
  queue?: string;
  /** A group key within the queue (a tenant, a customer), 1..128 characters. */
  groupKey?: string;

  /** Ids of existing jobs this one waits for (1..1000): WAITING until all COMPLETED. */
  dependsOn?: readonly string[];
  /** What a parent ending FAILED or CANCELLED does to this job (default `cancel`). */
  onParentFailure?: ParentFailurePolicy;
  /** Run no earlier than this many ms from now (0..366 days; not with `runAt`): a SCHEDULED job. */
  delayMs?: number;
  /** Run no earlier than this time (a Date or epoch ms; at most 366 days ahead; past = now; not with `delayMs`). */
  runAt?: Date | number;
}

/** A submission spelled out field by field (any task type, a JSON object payload). */
export interface SubmitRequest {
  /** The task type, exactly as the worker declares it (built-ins upper-case). */
  taskType: string;
  payload: JsonObject;
  /** Absent, null or <= 0: the coordinator's default. */
  maxAttempts?: number | null;
  idempotencyKey?: string | null;
  /** Absent or null: NORMAL. */
  priority?: Priority | null;
  /** Per-attempt execution deadline, 1..86400000 ms; absent or null: the coordinator's. */
  timeoutMillis?: number | null;
  /** The named queue; absent or null: `default`. */
  queue?: string | null;
  /** A group key within the queue; absent or null: none. */
  groupKey?: string | null;
  /** A delayed job's due time (epoch ms); absent or null: not delayed. */
  runAtMillis?: number | null;
  /** Ids of existing jobs this one waits for (1..1000); absent, null or empty: none. */
  dependsOn?: readonly string[] | null;
  /** Absent or null: `cancel`. */
  onParentFailure?: ParentFailurePolicy | null;
  /** As {@link DedupOptions}; absent or null: none. */
  dedupKey?: string | null;
  dedupMode?: DedupMode | null;
  dedupWindowMillis?: number | null;
  expiresAtMillis?: number | null;
}

/** One job of {@link DtpClient.submitMany}: a submission with its options. */
export interface BatchJob extends JobOptions {
  taskType: string;
  payload: JsonObject;
}

/** One job of a flow ({@link DtpClient.submitFlow}). */
export interface FlowJobSpec extends DedupOptions {
  /** Its name within the flow (unique there); the result maps it to the job id. */
  ref: string;
  /** The task type, exactly as the worker declares it (built-ins upper-case). */
  taskType: string;
  payload: JsonObject;
  /** Refs of other jobs of the flow (forward refs are fine) or ids of existing jobs. */
  dependsOn?: readonly string[];
  maxAttempts?: number;
  priority?: Priority;
  timeoutMillis?: number;
  onParentFailure?: ParentFailurePolicy;
  /** A delayed job: not run before this time (epoch ms, at most 366 days ahead), nor before its parents. */
  runAtMillis?: number;
  /** The named queue (default `default`) and a group key within it, as {@link JobOptions}'. */
  queue?: string;
  groupKey?: string;
  /**
   * As SUBMIT_JOB's: a job this key already names, with the same submission
   * and the same parents, stands for this one (its id is given back, nothing
   * new is made); with a different one the whole flow is refused.
   */
  idempotencyKey?: string;
}

/** Every field of one job, checked, null where unset: what each submission message carries. */
export type JobFields = { [K in keyof SubmitRequest]-?: Exclude<SubmitRequest[K], undefined> };

function assertIntIn(name: string, value: number, min: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer in ${min}..${max}, got ${value}`);
  }
}

function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The fields of a job given by its options (validated; `nowMs` dates `delayMs`). */
export function jobFieldsOf(
  taskType: string,
  payload: unknown,
  options: JobOptions,
  nowMs = Date.now(),
): JobFields {
  if (typeof taskType !== 'string' || taskType === '') {
    throw new TypeError('task must be a non-empty string');
  }
  if (!isJsonObject(payload)) throw new TypeError('payload must be a JSON object');
  if (options.maxAttempts !== undefined) {
    assertIntIn('maxAttempts', options.maxAttempts, 1, MAX_ATTEMPTS_LIMIT);
  }
  if (options.timeoutMillis !== undefined) {
    assertIntIn('timeoutMillis', options.timeoutMillis, MIN_TASK_TIMEOUT_MS, MAX_TASK_TIMEOUT_MS);
  }
  checkQueueOptions(options.queue, options.groupKey);
  return checkedDedup(
    {
      taskType,
      payload,
      maxAttempts: options.maxAttempts ?? null,
      idempotencyKey: options.idempotencyKey ?? null,
      priority: options.priority ?? null,
      timeoutMillis: options.timeoutMillis ?? null,
      queue: options.queue ?? null,
      groupKey: options.groupKey ?? null,
      runAtMillis: runAtOf(options, nowMs),
      dependsOn: checkedParents(options.dependsOn),
      onParentFailure: checkedPolicy(options.onParentFailure),
      dedupKey: options.dedupKey ?? null,
      dedupMode: options.dedupMode ?? null,
      dedupWindowMillis: options.dedupWindowMillis ?? null,
      expiresAtMillis: options.expiresAtMillis ?? null,
    },
    nowMs,
  );
}

/**
 * The fields of a request spelled out field by field: taken as given (the
 * coordinator judges them), but for deduplication and expiry, checked as
 * {@link jobFieldsOf} checks them.
 */
export function requestFieldsOf(request: SubmitRequest, nowMs = Date.now()): JobFields {
  const dependsOn = request.dependsOn ?? null;
  return checkedDedup(
    {
      taskType: request.taskType,
      payload: request.payload,
      maxAttempts: request.maxAttempts ?? null,
      idempotencyKey: request.idempotencyKey ?? null,
      priority: request.priority ?? null,
      timeoutMillis: request.timeoutMillis ?? null,
      queue: request.queue ?? null,
      groupKey: request.groupKey ?? null,
      runAtMillis: request.runAtMillis ?? null,
      dependsOn: dependsOn === null || dependsOn.length === 0 ? null : dependsOn,
      onParentFailure: request.onParentFailure ?? null,
      dedupKey: request.dedupKey ?? null,
      dedupMode: request.dedupMode ?? null,
      dedupWindowMillis: request.dedupWindowMillis ?? null,
      expiresAtMillis: request.expiresAtMillis ?? null,
    },
    nowMs,
  );
}

/** A bad queue name or group key is a TypeError naming the option; nothing is sent. */
function checkQueueOptions(
  queue: string | null | undefined,
  groupKey: string | null | undefined,
): void {
  const badQueue = typeof queue === 'string' ? queueNameProblem(queue) : null;
  if (badQueue !== null) throw new TypeError(`queue ${badQueue}`);
  const badGroup = typeof groupKey === 'string' ? groupKeyProblem(groupKey) : null;
  if (badGroup !== null) throw new TypeError(`groupKey ${badGroup}`);
}

function checkedParents(dependsOn: readonly string[] | null | undefined): string[] | null {
  if (dependsOn === undefined || dependsOn === null) return null;
  if (!Array.isArray(dependsOn) || dependsOn.some((id) => typeof id !== 'string' || id === '')) {
    throw new TypeError('dependsOn must be an array of job ids');
  }
  if (dependsOn.length > MAX_PARENTS) {
    throw new RangeError(`dependsOn names ${dependsOn.length} jobs; at most ${MAX_PARENTS}`);
  }
  return dependsOn.length === 0 ? null : Array.from(dependsOn, String);
}

function checkedPolicy(policy: ParentFailurePolicy | null | undefined): ParentFailurePolicy | null {
  if (policy === undefined || policy === null) return null;
  if (!PARENT_FAILURE_POLICIES.includes(policy)) {
    throw new RangeError(`onParentFailure must be cancel or run, got ${String(policy)}`);
  }
  return policy;
}

/**
 * Why the deduplication and expiry fields cannot go together as given, or
 * null. Read by the CLI too, so that both say the same.
 */
export function dedupProblem(
  fields: Pick<
    JobFields,
    'dedupKey' | 'dedupMode' | 'dedupWindowMillis' | 'expiresAtMillis' | 'runAtMillis'
  >,
): { error: TypeError | RangeError } | null {
  const { dedupKey, dedupMode, dedupWindowMillis } = fields;
  const type = (message: string): { error: TypeError } => ({ error: new TypeError(message) });
  const range = (message: string): { error: RangeError } => ({ error: new RangeError(message) });
  if (dedupKey !== null) {
    if (typeof dedupKey !== 'string') return type('dedupKey must be a string');
    if (dedupKey.length < 1 || dedupKey.length > MAX_DEDUP_KEY_LENGTH) {
      return range(
        `dedupKey must be 1..${MAX_DEDUP_KEY_LENGTH} characters, got ${dedupKey.length}`,
      );
    }
  }
  if (dedupMode !== null) {
    if (!DEDUP_MODES.includes(dedupMode)) {
      return range(`dedupMode must be one of ${DEDUP_MODES.join(', ')}, got ${String(dedupMode)}`);
    }
    if (dedupKey === null) return type('dedupMode needs a dedupKey');
  }
  if (dedupWindowMillis !== null) {
    if (dedupMode !== 'throttle')
      return type('dedupWindowMillis goes only with dedupMode throttle');
    const ok = Number.isSafeInteger(dedupWindowMillis) && dedupWindowMillis >= 1;
    if (!ok || dedupWindowMillis > MAX_DEDUP_WINDOW_MS) {
      return range(`dedupWindowMillis must be an integer in 1..${MAX_DEDUP_WINDOW_MS}`);
    }
  }
  if (dedupMode === 'throttle' && dedupWindowMillis === null) {
    return type('dedupMode throttle needs dedupWindowMillis');
  }
  if (dedupMode === 'debounce' && fields.runAtMillis === null) {
    return type('dedupMode debounce needs a delay (delayMs or runAt)');
  }
  return null;
}

/** The fields, once deduplication and expiry are found consistent (else thrown). */
function checkedDedup(fields: JobFields, nowMs: number): JobFields {
  const problem = dedupProblem(fields);
  if (problem !== null) throw problem.error;
  const expiresAt = fields.expiresAtMillis;
  if (expiresAt !== null) {
    if (!Number.isSafeInteger(expiresAt) || expiresAt < 0) {
      throw new RangeError(`expiresAtMillis is not a valid time: ${String(expiresAt)}`);
    }
    if (expiresAt <= nowMs) throw new RangeError('expiresAtMillis is in the past');
  }
  return fields;
}

/** The due time of `delayMs`/`runAt` (epoch ms), null when neither is given. */
export function runAtOf(
  options: Pick<JobOptions, 'delayMs' | 'runAt'>,
  nowMs = Date.now(),
): number | null {
  const { delayMs, runAt } = options;
  if (delayMs !== undefined && runAt !== undefined) {
    throw new TypeError('give delayMs or runAt, not both');
  }
  if (delayMs !== undefined) {
    assertIntIn('delayMs', delayMs, 0, MAX_DELAY_MS);
    return nowMs + delayMs;
  }
  if (runAt === undefined) return null;
  const atMs = runAt instanceof Date ? runAt.getTime() : runAt;
  if (!Number.isSafeInteger(atMs) || atMs < 0)
    throw new RangeError(`runAt is not a valid time: ${String(runAt)}`);
  if (atMs > nowMs + MAX_DELAY_MS) throw new RangeError('runAt must be at most 366 days ahead');
  return atMs;
}

/** The extension fields that are set: the only ones a message carries. */
function extensionFields(fields: JobFields): Partial<SubmitJobsElement> {
  const out: Partial<SubmitJobsElement> = {};
  if (fields.dependsOn !== null && fields.dependsOn.length > 0) {
    out.dependsOn = [...fields.dependsOn];
  }
  if (fields.onParentFailure !== null) out.onParentFailure = fields.onParentFailure;
  // Left out for the default queue: a v1 coordinator then sees a v1 request.
  if (fields.queue !== null) out.queue = fields.queue;
  if (fields.groupKey !== null) out.groupKey = fields.groupKey;
  if (fields.dedupKey !== null) out.dedupKey = fields.dedupKey;
  if (fields.dedupMode !== null) out.dedupMode = fields.dedupMode;
  if (fields.dedupWindowMillis !== null) out.dedupWindowMillis = fields.dedupWindowMillis;
  if (fields.expiresAtMillis !== null) out.expiresAtMillis = fields.expiresAtMillis;
  return out;
}

/** One job's fields as SUBMIT_JOB and SUBMIT_JOBS carry them (without `type`, `knownStates`). */
function elementOf(fields: JobFields, trace: TraceContext | null): SubmitJobsElement {
  return {
    taskType: fields.taskType,
    payload: fields.payload,
    maxAttempts: fields.maxAttempts,
    idempotencyKey: fields.idempotencyKey,
    priority: fields.priority,
    timeoutMillis: fields.timeoutMillis,
    runAtMillis: fields.runAtMillis,
    ...traceFields(trace),
    ...extensionFields(fields),
  };
}

/** The SUBMIT_JOB message of a submission (with the submitter's trace context, if any). */
export function submitMessage(
  request: SubmitRequest,
  trace: TraceContext | null = null,
): SubmitJob {
  return submitJobOf(requestFieldsOf(request), trace);
}

/** The SUBMIT_JOB message of fields already checked (a resend is not checked again). */
export function submitJobOf(fields: JobFields, trace: TraceContext | null): SubmitJob {
  return { type: 'SUBMIT_JOB', ...elementOf(fields, trace), knownStates: [...KNOWN_STATES] };
}

/** The SUBMIT_JOBS message of a batch (the elements carry only the fields they set). */
export function submitJobsMessage(
  jobs: readonly SubmitRequest[],
  trace: TraceContext | null = null,
): SubmitJobs {
  return submitJobsOf(
    jobs.map((job) => requestFieldsOf(job)),
    trace,
  );
}

/** The SUBMIT_JOBS message of fields already checked. */
export function submitJobsOf(jobs: readonly JobFields[], trace: TraceContext | null): SubmitJobs {
  return {
    type: 'SUBMIT_JOBS',
    jobs: jobs.map((job) => submitElementToJson(elementOf(job, trace))),
  };
}

/** The options of a flow job's fields, by name (a document may hold other keys: not read). */
const FLOW_JOB_OPTIONS = [
  'dependsOn',
  'maxAttempts',
  'priority',
  'timeoutMillis',
  'onParentFailure',
  'queue',
  'groupKey',
  'idempotencyKey',
  'dedupKey',
  'dedupMode',
  'dedupWindowMillis',
  'expiresAtMillis',
] as const satisfies readonly (keyof FlowJobSpec & keyof JobOptions)[];

/** The fields of one job of a flow, checked as a submission's options are. */
function flowJobFields(job: FlowJobSpec, nowMs: number): JobFields {
  const options: Record<string, unknown> = {};
  for (const name of FLOW_JOB_OPTIONS) if (job[name] !== undefined) options[name] = job[name];
  if (job.runAtMillis !== undefined) options.runAt = job.runAtMillis;
  return jobFieldsOf(job.taskType, job.payload, options, nowMs);
}

/** The SUBMIT_FLOW message of a flow (its shape checked here; the rest by the coordinator). */
export function flowMessage(
  flow: { jobs: readonly FlowJobSpec[] },
  trace: TraceContext | null = null,
): SubmitFlow {
  if (typeof flow !== 'object' || flow === null || !Array.isArray(flow.jobs)) {
    throw new TypeError('a flow is { jobs: [...] }');
  }
  const nowMs = Date.now();
  const jobs = flow.jobs.map((job: FlowJobSpec, index): FlowJob => {
    if (typeof job.ref !== 'string' || job.ref === '') {
      throw new TypeError(`jobs[${index}].ref must be a non-empty string`);
    }
    let fields: JobFields;
    try {
      fields = flowJobFields(job, nowMs);
    } catch (err) {
      // Said of the job at fault, in the error's own kind.
      if (err instanceof TypeError || err instanceof RangeError) {
        err.message = `jobs[${index}] (ref ${JSON.stringify(job.ref)}): ${err.message}`;
      }
      throw err;
    }
    return { ref: job.ref, ...elementOf(fields, trace) };
  });
  return { type: 'SUBMIT_FLOW', jobs };
}
