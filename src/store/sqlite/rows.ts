/**
 * Rows of the SQLite schema <-> the store's records, shared by the writer
 * thread and the main thread's reader. Jobs travel to the writer as arrays
 * of column values (cheaper to clone and to bind than objects).
 */
import type {
  AttemptOutcome,
  DedupMode,
  JobProgress,
  JobState,
  ParentFailurePolicy,
  Priority,
  ResultFormat,
  ScheduleCatchUp,
  ScheduleOverlap,
} from '../../protocol/messages.js';
import type { TraceContext } from '../../protocol/trace-context.js';
import type {
  AttemptRecord,
  GroupHoldRecord,
  JobRecord,
  QueueSettingsRecord,
  ScheduleRecord,
} from '../store.js';

export const JOB_COLUMNS = [
  'seq',
  'job_id',
  'task_type',
  'payload',
  'state',
  'priority',
  'attempts',
  'max_attempts',
  'timeout_ms',
  'idempotency_key',
  'worker_id',
  'attempt_id',
  'deadline_at_ms',
  'retry_at_ms',
  'result',
  'result_format',
  'error',
  'created_at_ms',
  'updated_at_ms',
  'started_at_ms',
  'finished_at_ms',
  'depends_on',
  'on_parent_failure',
  'progress',
  'run_at_ms',
  'schedule_name',
  'trace_context',
  'queue',
  'group_key',
  'parent_job_id',
  'child_key',
  'dedup_key',
  'dedup_mode',
  'dedup_until_ms',
  'expires_at_ms',
  'rate_limited_in_a_row',
] as const;

/** The columns an update may change, in the order {@link jobUpdateValues} gives them. */
export const JOB_MUTABLE_COLUMNS = [
  'state',
  'attempts',
  'worker_id',
  'attempt_id',
  'deadline_at_ms',
  'retry_at_ms',
  'result',
  'result_format',
  'error',
  'updated_at_ms',
  'started_at_ms',
  'finished_at_ms',
  'progress',
  'run_at_ms',
  // A re-run of a FAILED job gives it a fresh attempt budget.
  'max_attempts',
  // A debounced submission replaces the payload of the job it names.
  'payload',
  // Fixed at submission but written with every update all the same: a
  // stored row is always the whole record the core last gave.
  'dedup_key',
  'dedup_mode',
  'dedup_until_ms',
  'expires_at_ms',
  'rate_limited_in_a_row',
] as const;

export const ATTEMPT_COLUMNS = [
  'job_id',
  'attempt_number',
  'attempt_id',
  'worker_id',
  'started_at_ms',
  'finished_at_ms',
  'outcome',
  'error',
] as const;

export type SqlValue = string | number | null;

export function jobInsertValues(job: Readonly<JobRecord>): SqlValue[] {
  return [
    job.seq,
    job.jobId,
    job.taskType,
    job.payloadJson,
    job.state,
    job.priority,
    job.attempts,
    job.maxAttempts,
    job.timeoutMs,
    job.idempotencyKey,
    job.workerId,
    job.attemptId,
    job.deadlineAtMs,
    job.retryAtMs,
    job.result,
    job.resultFormat,
    job.error,
    job.createdAtMs,
    job.updatedAtMs,
    job.startedAtMs,
    job.finishedAtMs,
    job.dependsOn === null ? null : JSON.stringify(job.dependsOn),
    job.onParentFailure,
    progressText(job),
    job.runAtMs,
    job.scheduleName,
    job.traceContext === null || job.traceContext === undefined
      ? null
      : JSON.stringify(job.traceContext),
    job.queue,
    job.groupKey,
    job.parentJobId ?? null,
    job.childKey ?? null,
    ...dedupValues(job),
  ];
}

/** The columns of migration 11, in {@link JOB_COLUMNS} order (absent = null, 0 for the count). */
function dedupValues(job: Readonly<JobRecord>): SqlValue[] {
  return [
    job.dedupKey ?? null,
    job.dedupMode ?? null,
    job.dedupUntilMs ?? null,
    job.expiresAtMs ?? null,
    job.rateLimitedInARow ?? 0,
  ];
}

/** The rows of the dependency table a new job adds: `[parentId, jobId]` each. */
export function dependencyValues(job: Readonly<JobRecord>): SqlValue[][] {
  return (job.dependsOn ?? []).map((parentId) => [parentId, job.jobId]);
}

/** The mutable columns, then the seq (the WHERE of the update). */
export function jobUpdateValues(job: Readonly<JobRecord>): SqlValue[] {
  return [
    job.state,
    job.attempts,
    job.workerId,
    job.attemptId,
    job.deadlineAtMs,
    job.retryAtMs,
    job.result,
    job.resultFormat,
    job.error,
    job.updatedAtMs,
    job.startedAtMs,
    job.finishedAtMs,
    progressText(job),
    job.runAtMs,
    job.maxAttempts,
    job.payloadJson,
    ...dedupValues(job),
    job.seq,
  ];
}

export function attemptValues(attempt: Readonly<AttemptRecord>): SqlValue[] {
  return [
    attempt.jobId,
    attempt.attemptNumber,
    attempt.attemptId,
    attempt.workerId,
    attempt.startedAtMs,
    attempt.finishedAtMs,
    attempt.outcome,
    attempt.error,
  ];
}

export interface JobRow {
  seq: number;
  job_id: string;
  task_type: string;
  payload: string;
  state: string;
  priority: string;
  attempts: number;
  max_attempts: number;
  timeout_ms: number;
  idempotency_key: string | null;
  worker_id: string | null;
  attempt_id: string | null;
  deadline_at_ms: number | null;
  retry_at_ms: number | null;
  result: string | null;
  result_format: string | null;
  error: string | null;
  created_at_ms: number;
  updated_at_ms: number;
  started_at_ms: number | null;
  finished_at_ms: number | null;
  depends_on: string | null;
  on_parent_failure: string | null;
  /** JSON of a JobProgress; null = none (and in rows of older schemas). */
  progress: string | null;
  run_at_ms: number | null;
  schedule_name: string | null;
  /** JSON of a TraceContext; null = none (and in rows of older schemas). */
  trace_context: string | null;
  queue: string;
  group_key: string | null;
  /** Null in rows of older schemas, and for jobs that are not children. */
  parent_job_id: string | null;
  child_key: string | null;
  /** Null in rows of older schemas, and for jobs without a key (so are the next three). */
  dedup_key: string | null;
  dedup_mode: string | null;
  dedup_until_ms: number | null;
  expires_at_ms: number | null;
  /** 0 in rows of older schemas. */
  rate_limited_in_a_row: number;
}

export interface AttemptRow {
  job_id: string;
  attempt_number: number;
  attempt_id: string;
  worker_id: string;
  started_at_ms: number;
  finished_at_ms: number | null;
  outcome: string;
  error: string | null;
}

export function jobFromRow(row: JobRow): JobRecord {
  return {
    seq: row.seq,
    jobId: row.job_id,
    taskType: row.task_type,
    payloadJson: row.payload,
    state: row.state as JobState,
    priority: row.priority as Priority,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    timeoutMs: row.timeout_ms,
    idempotencyKey: row.idempotency_key,
    workerId: row.worker_id,
    attemptId: row.attempt_id,
    deadlineAtMs: row.deadline_at_ms,
    retryAtMs: row.retry_at_ms,
    result: row.result,
    resultFormat: row.result_format as ResultFormat | null,
    error: row.error,
    createdAtMs: row.created_at_ms,
    updatedAtMs: row.updated_at_ms,
    startedAtMs: row.started_at_ms,
    finishedAtMs: row.finished_at_ms,
    dependsOn: row.depends_on === null ? null : (JSON.parse(row.depends_on) as string[]),
    onParentFailure: row.on_parent_failure as ParentFailurePolicy | null,
    progress: row.progress === null ? null : (JSON.parse(row.progress) as JobProgress),
    runAtMs: row.run_at_ms,
    scheduleName: row.schedule_name,
    traceContext:
      row.trace_context === null ? null : (JSON.parse(row.trace_context) as TraceContext),
    queue: row.queue,
    groupKey: row.group_key,
    parentJobId: row.parent_job_id,
    childKey: row.child_key,
    dedupKey: row.dedup_key,
    dedupMode: row.dedup_mode as DedupMode | null,
    dedupUntilMs: row.dedup_until_ms,
    expiresAtMs: row.expires_at_ms,
    rateLimitedInARow: row.rate_limited_in_a_row,
  };
}

function progressText(job: Readonly<JobRecord>): string | null {
  return job.progress === null || job.progress === undefined ? null : JSON.stringify(job.progress);
}

export function attemptFromRow(row: AttemptRow): AttemptRecord {
  return {
    jobId: row.job_id,
    attemptNumber: row.attempt_number,
    attemptId: row.attempt_id,
    workerId: row.worker_id,
    startedAtMs: row.started_at_ms,
    finishedAtMs: row.finished_at_ms,
    outcome: row.outcome as AttemptOutcome,
    error: row.error,
  };
}

export const QUEUE_COLUMNS = [
  'name',
  'paused',
  'concurrency',
  'rate_max',
  'rate_interval_ms',
  'group_concurrency',
  'group_rate_max',
  'group_rate_interval_ms',
  'updated_at_ms',
  'held_until_ms',
] as const;

export interface QueueRow {
  name: string;
  paused: number;
  concurrency: number | null;
  rate_max: number | null;
  rate_interval_ms: number | null;
  group_concurrency: number | null;
  group_rate_max: number | null;
  group_rate_interval_ms: number | null;
  updated_at_ms: number;
  /** Null in rows of older schemas. */
  held_until_ms: number | null;
}

export function queueValues(q: Readonly<QueueSettingsRecord>): SqlValue[] {
  return [
    q.name,
    q.paused ? 1 : 0,
    q.concurrency,
    q.rateMax,
    q.rateIntervalMs,
    q.groupConcurrency,
    q.groupRateMax,
    q.groupRateIntervalMs,
    q.updatedAtMs,
    q.heldUntilMs ?? null,
  ];
}

export function queueFromRow(row: QueueRow): QueueSettingsRecord {
  return {
    name: row.name,
    paused: row.paused !== 0,
    concurrency: row.concurrency,
    rateMax: row.rate_max,
    rateIntervalMs: row.rate_interval_ms,
    groupConcurrency: row.group_concurrency,
    groupRateMax: row.group_rate_max,
    groupRateIntervalMs: row.group_rate_interval_ms,
    updatedAtMs: row.updated_at_ms,
    heldUntilMs: row.held_until_ms,
  };
}

/**
 * A group hold's row key: the jobs without a group key are held under ''
 * (a real group key is never empty), so (queue, group_key) stays a primary key.
 */
const NO_GROUP = '';

export interface GroupHoldRow {
  queue: string;
  group_key: string;
  until_ms: number;
}

/** `[queue, group_key, until_ms]`. */
export function groupHoldValues(hold: Readonly<GroupHoldRecord>): SqlValue[] {
  return [hold.queue, hold.groupKey ?? NO_GROUP, hold.untilMs];
}

export function groupHoldFromRow(row: GroupHoldRow): GroupHoldRecord {
  return {
    queue: row.queue,
    groupKey: row.group_key === NO_GROUP ? null : row.group_key,
    untilMs: row.until_ms,
  };
}

/** The SQL text of the column list. */
export function columnList(columns: readonly string[], prefix = ''): string {
  return columns.map((c) => prefix + c).join(', ');
}

export const SCHEDULE_COLUMNS = [
  'name',
  'task_type',
  'cron',
  'every_ms',
  'timezone',
  'payload',
  'max_attempts',
  'priority',
  'timeout_ms',
  'overlap',
  'catch_up',
  'paused',
  'next_run_at_ms',
  'last_run_at_ms',
  'last_job_id',
  'created_at_ms',
  'updated_at_ms',
  'queue',
] as const;

export interface ScheduleRow {
  name: string;
  task_type: string;
  cron: string | null;
  every_ms: number | null;
  timezone: string | null;
  payload: string;
  max_attempts: number | null;
  priority: string | null;
  timeout_ms: number | null;
  overlap: string;
  catch_up: string;
  paused: number;
  next_run_at_ms: number | null;
  last_run_at_ms: number | null;
  last_job_id: string | null;
  created_at_ms: number;
  updated_at_ms: number;
  queue: string;
}

export function scheduleValues(schedule: Readonly<ScheduleRecord>): SqlValue[] {
  return [
    schedule.name,
    schedule.taskType,
    schedule.cron,
    schedule.everyMs,
    schedule.timezone,
    schedule.payloadJson,
    schedule.maxAttempts,
    schedule.priority,
    schedule.timeoutMs,
    schedule.overlap,
    schedule.catchUp,
    schedule.paused ? 1 : 0,
    schedule.nextRunAtMs,
    schedule.lastRunAtMs,
    schedule.lastJobId,
    schedule.createdAtMs,
    schedule.updatedAtMs,
    schedule.queue,
  ];
}

export function scheduleFromRow(row: ScheduleRow): ScheduleRecord {
  return {
    name: row.name,
    taskType: row.task_type,
    cron: row.cron,
    everyMs: row.every_ms,
    timezone: row.timezone,
    payloadJson: row.payload,
    maxAttempts: row.max_attempts,
    priority: row.priority as Priority | null,
    timeoutMs: row.timeout_ms,
    overlap: row.overlap as ScheduleOverlap,
    catchUp: row.catch_up as ScheduleCatchUp,
    paused: row.paused !== 0,
    nextRunAtMs: row.next_run_at_ms,
    lastRunAtMs: row.last_run_at_ms,
    lastJobId: row.last_job_id,
    createdAtMs: row.created_at_ms,
    updatedAtMs: row.updated_at_ms,
    queue: row.queue,
  };
}
