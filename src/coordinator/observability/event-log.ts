/**
 * One log line per core event, with key=value fields that tell the story of
 * every job and worker (`jobId=… workerId=… attempt=2/3 attemptId=…`).
 *
 * The table below has an entry for every event type; the compiler checks it.
 */
import type { Logger } from '../../observability/logger.js';
import type { CoreEvent } from '../core/types.js';

type Level = 'info' | 'warn';
type Line = [Level, string, Record<string, unknown>];
type Formatters = { [K in CoreEvent['type']]: (event: Extract<CoreEvent, { type: K }>) => Line };

const LINES: Formatters = {
  'worker.registered': (e) => [
    'info',
    'worker registered',
    { workerId: e.workerId, capacity: e.capacity, taskTypes: describeTaskTypes(e.taskTypes) },
  ],
  'worker.rejected': (e) => [
    'warn',
    'worker connection refused',
    { connId: e.connId, reason: e.reason },
  ],
  'worker.suspected': (e) => [
    'warn',
    'worker suspected dead',
    { workerId: e.workerId, silentMs: e.silentMs },
  ],
  'worker.lost': (e) => [
    e.cause === 'drained' ? 'info' : 'warn',
    'worker lost',
    { workerId: e.workerId, cause: e.cause, reason: e.reason, runningJobs: e.runningJobs },
  ],
  'worker.leasesKept': (e) => [
    'warn',
    "worker's attempts kept for its return: its connection ended just after this coordinator stalled",
    { workerId: e.workerId, jobs: e.jobs, untilMs: e.untilMs, reason: e.reason },
  ],
  'worker.leasesReclaimed': (e) => [
    'info',
    'worker took back the attempts it still held',
    { workerId: e.workerId, connId: e.connId, jobs: e.jobs },
  ],
  'worker.heldListEnded': (e) => [
    e.timedOut ? 'warn' : 'info',
    e.timedOut
      ? 'worker did not finish listing the attempts it holds in time; the rest are revoked'
      : 'worker listed the attempts it holds',
    { workerId: e.workerId, connId: e.connId, listed: e.listed, revoked: e.revoked },
  ],
  'jobs.purged': (e) => ['info', 'terminal jobs purged', { deleted: e.deleted, reason: e.reason }],
  'subscriber.dropped': (e) => [
    'warn',
    'subscriber dropped: it had left its job events unread, and a new subscriber needed its place',
    { connId: e.connId, address: e.address, stalledMs: e.stalledMs, budget: e.budget },
  ],
  'coordinator.stalled': (e) => [
    'warn',
    'coordinator stalled: its own loop did not run; silence during the stall is forgiven',
    { stalledMs: e.stalledMs },
  ],
  'worker.draining': (e) => [
    'info',
    'worker draining',
    { workerId: e.workerId, runningJobs: e.runningJobs },
  ],
  'job.submitted': (e) => [
    'info',
    'job submitted',
    {
      jobId: e.jobId,
      taskType: e.taskType,
      priority: e.priority,
      maxAttempts: e.maxAttempts,
      idempotencyKey: e.idempotencyKey ?? undefined,
    },
  ],
  'job.deduplicated': (e) => [
    'info',
    'duplicate submission answered with the existing job',
    { jobId: e.jobId, idempotencyKey: e.idempotencyKey },
  ],
  'job.dedupMatched': (e) => [
    'info',
    e.replaced
      ? "debounced submission replaced the payload of its key's job"
      : "submission answered with its deduplication key's job",
    { jobId: e.jobId, dedupKey: e.dedupKey, mode: e.mode },
  ],
  'job.signalled': (e) => [
    'info',
    e.resumed ? 'signal taken by the waiting job' : 'signal held for the job',
    { jobId: e.jobId, signal: e.name },
  ],
  'job.resumed': (e) => ['info', 'waiting job resumed', { jobId: e.jobId, by: e.by }],
  'event.published': (e) => [
    'info',
    'event published',
    { eventId: e.eventId, event: e.name, jobs: e.jobs, resumed: e.resumed },
  ],
  'job.debounced': (e) => ['info', 'debounced job moved', { jobId: e.jobId, runAtMs: e.runAtMs }],
  'job.expired': (e) => [
    'info',
    'job expired before an attempt started',
    { jobId: e.jobId, from: e.from, expiresAtMs: e.expiresAtMs },
  ],
  'job.rateLimited': (e) => [
    'info',
    'handler rate limited: job scheduled again, attempt not counted',
    {
      jobId: e.jobId,
      workerId: e.workerId,
      attempt: e.attempt,
      scope: e.scope,
      untilMs: e.untilMs,
      inARow: e.inARow,
    },
  ],
  'job.due': (e) => ['info', 'delayed job due', { jobId: e.jobId, lateMs: e.lateMs }],
  'schedule.fired': (e) => [
    'info',
    'schedule tick made a job',
    { schedule: e.name, jobId: e.jobId, tickMs: e.tickMs, lagMs: e.lagMs },
  ],
  'schedule.skipped': (e) => [
    'info',
    'schedule tick made no job',
    { schedule: e.name, tickMs: e.tickMs, reason: e.reason },
  ],
  'job.rejected': (e) => [
    'info',
    'submission rejected',
    { activeCount: e.activeCount, limit: e.limit },
  ],
  'job.assigned': (e) => [
    'info',
    'job assigned',
    {
      jobId: e.jobId,
      workerId: e.workerId,
      attempt: `${e.attempt}/${e.maxAttempts}`,
      attemptId: e.attemptId,
      queuedMs: e.queuedMs,
    },
  ],
  'job.retryScheduled': (e) => [
    'warn',
    'retry scheduled',
    {
      jobId: e.jobId,
      attempt: `${e.attempt}/${e.maxAttempts}`,
      delayMs: e.delayMs,
      cause: e.cause,
      error: e.error,
    },
  ],
  'job.requeued': (e) => ['info', 'job requeued', { jobId: e.jobId, attempts: e.attempts }],
  'job.attemptRequeued': (e) => [
    'warn',
    'attempt requeued by its worker, not counted',
    {
      jobId: e.jobId,
      workerId: e.workerId,
      attempt: e.attempt,
      attemptId: e.attemptId,
      requeues: e.requeues,
      error: e.error,
    },
  ],
  'job.released': (e) => ['info', 'job released by its parents', { jobId: e.jobId }],
  'job.suspended': (e) => [
    'info',
    'job suspended by its handler',
    {
      jobId: e.jobId,
      workerId: e.workerId,
      attempt: e.attempt,
      ...(e.untilMs !== null && { untilMs: e.untilMs }),
      ...(e.waitingFor !== null && { waitingFor: e.waitingFor }),
    },
  ],
  'job.completed': (e) => [
    'info',
    'job completed',
    { jobId: e.jobId, workerId: e.workerId, attempt: e.attempt, runMs: e.runMs },
  ],
  'job.failed': (e) => [
    'warn',
    'job failed',
    { jobId: e.jobId, attempts: e.attempts, cause: e.cause, error: e.error },
  ],
  'job.cancelled': (e) => ['info', 'job cancelled', { jobId: e.jobId, from: e.from }],
  'job.deadlineExceeded': (e) => [
    'warn',
    'execution deadline exceeded; attempt revoked',
    { jobId: e.jobId, workerId: e.workerId, attemptId: e.attemptId, timeoutMs: e.timeoutMs },
  ],
  'job.recovered': (e) => [
    'info',
    'job recovered after restart',
    { jobId: e.jobId, from: e.from, to: e.to },
  ],
  'job.progress': (e) => [
    'info',
    e.accepted ? 'progress reported' : 'progress ignored',
    { jobId: e.jobId, reason: e.reason ?? undefined },
  ],
  'result.stale': (e) => [
    'warn',
    'stale result rejected',
    { jobId: e.jobId, attemptId: e.attemptId, workerId: e.workerId, reason: e.reason },
  ],
  'call.stale': (e) => [
    'info',
    'stale call refused',
    {
      call: e.call,
      jobId: e.jobId,
      attemptId: e.attemptId,
      workerId: e.workerId,
      reason: e.reason,
    },
  ],
};

/** Longest list of task types written into one log line. */
const LOGGED_TASK_TYPES = 20;

/** `builtin` for a v1 worker, else the declared names (the first few, then a count). */
function describeTaskTypes(taskTypes: readonly string[] | null): string {
  if (taskTypes === null) return 'builtin (v1 worker)';
  const shown = taskTypes.slice(0, LOGGED_TASK_TYPES).join(',');
  const more = taskTypes.length - LOGGED_TASK_TYPES;
  return more > 0 ? `${shown},... (${more} more)` : shown;
}

/** Events whose line is never more than `info`: skipped without formatting when info is off. */
const INFO_ONLY: { readonly [K in CoreEvent['type']]: boolean } = {
  'worker.registered': true,
  'worker.rejected': false,
  'worker.suspected': false,
  'worker.lost': false,
  'worker.leasesKept': false,
  'worker.leasesReclaimed': true,
  'worker.heldListEnded': false,
  'jobs.purged': true,
  'subscriber.dropped': false,
  'coordinator.stalled': false,
  'worker.draining': true,
  'job.submitted': true,
  'job.deduplicated': true,
  'job.dedupMatched': true,
  'job.signalled': true,
  'job.resumed': true,
  'event.published': true,
  'job.debounced': true,
  'job.expired': true,
  'job.rateLimited': true,
  'job.due': true,
  'schedule.fired': true,
  'schedule.skipped': true,
  'job.rejected': true,
  'job.assigned': true,
  'job.retryScheduled': false,
  'job.requeued': true,
  'job.attemptRequeued': false,
  'job.released': true,
  'job.suspended': true,
  'job.completed': true,
  'job.failed': false,
  'job.cancelled': true,
  'job.deadlineExceeded': false,
  'job.recovered': true,
  'result.stale': false,
  'call.stale': true,
  'job.progress': true,
};

/** The level and text of an event's line (exported for tests). */
export function formatEvent(event: CoreEvent): Line {
  const format = LINES[event.type] as (e: CoreEvent) => Line;
  return format(event);
}

export function logEvent(log: Logger, event: CoreEvent): void {
  // The per-job lines cost nothing beyond this check when info is off.
  if (INFO_ONLY[event.type] && !log.isLevelEnabled('info')) return;
  // Progress comes several times a second per job: only the ignored ones are worth a line.
  if (event.type === 'job.progress' && event.accepted) return;
  const [level, message, fields] = formatEvent(event);
  log[level](fields, message);
}
