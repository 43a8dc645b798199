/**
 * RERUN_JOBS: a redrive of dead letters. The FAILED jobs of one queue
 * (optionally of one task type, finished since a time) are read from the
 * store, newest first, at most `limit` per request, and each is QUEUED again
 * as the same job: a fresh attempt budget (`maxAttempts` becomes the
 * attempts made so far that counted, plus the budget), its attempts so far kept as its
 * history, its queue, group, priority and payload unchanged.
 *
 * FAILED jobs are history (the core holds only active ones), so the request
 * is a read first. A row that changed while the read was out (it is in the
 * core again, or in the overlay of rows not yet committed, or committed
 * meanwhile) is skipped: the store's copy may be stale, and a later request
 * sees the new one. The re-queued jobs are written with this input's batch;
 * the reply leaves after that commit, like every reply.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import {
  DEFAULT_RERUN_LIMIT,
  MAX_ATTEMPTS_LIMIT,
  MAX_FILTER_VALUE_LENGTH,
  MAX_RERUN_LIMIT,
} from '../../protocol/limits.js';
import type { RerunJobs } from '../../protocol/messages.js';
import { queueNameProblem } from '../../protocol/queue-names.js';
import type { AttemptRecord, JobRecord } from '../../store/store.js';
import {
  fromRecord,
  impliedAttempts,
  rateLimitedAmong,
  requeuedAmong,
  type CoreJob,
} from './job.js';
import { schedule } from './job-lifecycle.js';
import { transition } from './job-state.js';
import type { PendingRead } from './pending-reads.js';
import type { CoreState } from './state.js';

/** What is wrong with the request, naming the field; null when nothing is. */
function rerunProblem(msg: RerunJobs): string | null {
  const badQueue = queueNameProblem(msg.queue);
  if (badQueue !== null) return `queue ${badQueue}`;
  if (msg.state !== 'FAILED') {
    return `state must be FAILED (only failed jobs are re-run), got ${JSON.stringify(msg.state)}`;
  }
  const taskType = msg.taskType ?? null;
  if (taskType !== null && (taskType.length === 0 || taskType.length > MAX_FILTER_VALUE_LENGTH)) {
    return `taskType must be 1..${MAX_FILTER_VALUE_LENGTH} characters`;
  }
  const since = msg.finishedSinceMillis ?? null;
  if (since !== null && since < 0) return 'finishedSinceMillis must be at least 0';
  const limit = msg.limit ?? null;
  if (limit !== null && (limit < 1 || limit > MAX_RERUN_LIMIT)) {
    return `limit must be 1..${MAX_RERUN_LIMIT}`;
  }
  const budget = msg.maxAttempts ?? null;
  if (budget !== null && (budget < 1 || budget > MAX_ATTEMPTS_LIMIT)) {
    return `maxAttempts must be 1..${MAX_ATTEMPTS_LIMIT}`;
  }
  return null;
}

export function rerunJobs(s: CoreState, connId: number, requestId: number, msg: RerunJobs): void {
  const problem = rerunProblem(msg);
  if (problem !== null) {
    s.replyError(connId, requestId, ErrorCode.InvalidRequest, `Invalid request: ${problem}`);
    return;
  }
  const limit = msg.limit ?? DEFAULT_RERUN_LIMIT;
  s.read(
    {
      op: 'list',
      // One row more than asked: whether more jobs match.
      query: {
        beforeSeq: null,
        states: ['FAILED'],
        taskType: msg.taskType ?? null,
        limit: limit + 1,
        queue: msg.queue,
        finishedSinceMs: msg.finishedSinceMillis ?? null,
      },
      withAttempts: true,
    },
    {
      kind: 'rerun',
      connId,
      requestId,
      limit,
      budget: msg.maxAttempts ?? s.config.defaultMaxAttempts,
      seen: new Map(),
    },
  );
}

/** The store listed the FAILED jobs: queue them again and answer. */
export function rerunRead(
  s: CoreState,
  read: Extract<PendingRead, { kind: 'rerun' }>,
  rows: readonly JobRecord[],
  attempts: readonly AttemptRecord[],
): void {
  const history = new Map<string, AttemptRecord[]>();
  for (const attempt of attempts) {
    const list = history.get(attempt.jobId) ?? [];
    list.push(attempt);
    history.set(attempt.jobId, list);
  }
  const overlay = s.jobs.overlay();
  // Re-queued jobs are active again: admission control's bound holds.
  const room = Math.max(0, s.config.maxActiveJobs - s.jobs.activeCount);
  let more = rows.length > read.limit;
  const jobIds: string[] = [];
  for (const row of rows.slice(0, read.limit)) {
    const changed =
      s.jobs.get(row.jobId) !== undefined || overlay.has(row.jobId) || read.seen.has(row.jobId);
    if (changed || row.state !== 'FAILED' || row.attempts >= MAX_ATTEMPTS_LIMIT) continue;
    if (jobIds.length >= room) {
      more = true;
      break;
    }
    requeue(s, row, impliedAttempts(row, history.get(row.jobId) ?? []), read.budget);
    jobIds.push(row.jobId);
  }
  s.reply(read.connId, read.requestId, {
    type: 'JOBS_RERUN',
    rerun: jobIds.length,
    jobIds,
    more,
  });
  schedule(s);
}

/** Of these attempts, those that did not count toward maxAttempts. */
function uncountedAmong(history: readonly AttemptRecord[]): number {
  const suspended = history.filter((attempt) => attempt.outcome === 'SUSPENDED').length;
  return suspended + requeuedAmong(history) + rateLimitedAmong(history);
}

/** A stored FAILED job back in the core, QUEUED, with `budget` more attempts. */
function requeue(s: CoreState, row: JobRecord, history: AttemptRecord[], budget: number): void {
  const job: CoreJob = {
    ...fromRecord(row, history),
    // Suspended, requeued and rate-limited attempts stay in its history and keep not counting.
    maxAttempts: Math.min(MAX_ATTEMPTS_LIMIT, row.attempts - uncountedAmong(history) + budget),
  };
  transition(job, { to: 'QUEUED', redrive: true }, s.nowMs);
  job.retryAtMs = null;
  job.progress = null;
  // A rerun is asked for now: an expiry that passed must not end it at once.
  job.expiresAtMs = null;
  s.jobs.adopt(job);
  // Its handler may have made children before: they are read before it makes any.
  s.children.markUnloaded(job.jobId);
  s.jobs.save(job);
  // A rerun runs the handler from its start: steps recorded before are dropped.
  s.jobs.clearSteps(job.jobId);
  s.ready.push(job);
  s.emit({ type: 'job.requeued', jobId: job.jobId, attempts: job.attempts });
}
