/**
 * Deleting history: PURGE_JOBS on request, and background retention
 * (`retainTerminalMs`).
 *
 * Only terminal jobs are ever deleted, with their attempts, and only rows the
 * store has committed (a job whose end is not committed is still active in
 * the store's eyes). Deletion happens in small steps (`PURGE_STEP_ROWS` per
 * store call) so that it never holds the store for long; a request is
 * answered with the total once a step deletes fewer than a full step.
 * Background retention runs one step at a time, cycling through the three
 * terminal states, and rests between rounds that found nothing to delete.
 * Idempotency keys of deleted jobs are forgotten with them.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import { isTerminalState, type PurgeJobs } from '../../protocol/messages.js';
import type { PendingRead } from './pending-reads.js';
import type { CoreState } from './state.js';

/** Rows one purge step deletes at most. */
export const PURGE_STEP_ROWS = 500;
/** Pause of background retention after a round that deleted less than a step, in ms. */
export const RETENTION_REST_MS = 10_000;

type PurgeRead = Extract<PendingRead, { kind: 'purge' }>;

function step(s: CoreState, read: PurgeRead): void {
  s.read(
    {
      op: 'purge',
      query: { state: read.state, finishedBeforeMs: read.finishedBeforeMs, limit: PURGE_STEP_ROWS },
    },
    read,
  );
}

/** PURGE_JOBS: terminal states only. */
export function purgeOnRequest(
  s: CoreState,
  connId: number,
  requestId: number,
  msg: PurgeJobs,
): void {
  if (!isTerminalState(msg.state)) {
    s.replyError(
      connId,
      requestId,
      ErrorCode.InvalidRequest,
      `Invalid request: only terminal jobs can be purged (COMPLETED, FAILED or CANCELLED), not ${msg.state}`,
    );
    return;
  }
  if (msg.olderThanMillis < 0) {
    s.replyError(
      connId,
      requestId,
      ErrorCode.InvalidRequest,
      'Invalid request: olderThanMillis must be >= 0',
    );
    return;
  }
  step(s, {
    kind: 'purge',
    request: { connId, requestId, deletedSoFar: 0 },
    state: msg.state,
    finishedBeforeMs: s.nowMs - msg.olderThanMillis,
  });
}

/** On each tick: start the next background step when one is due. */
export function retentionTick(s: CoreState): void {
  const retainMs = s.config.retainTerminalMs;
  const cursor = s.retention;
  if (retainMs === null || cursor.running || s.nowMs < cursor.nextStepAtMs) return;
  cursor.running = true;
  step(s, {
    kind: 'purge',
    request: null,
    state: cursor.state,
    finishedBeforeMs: s.nowMs - retainMs,
  });
}

/** A purge step came back. */
export function purgeDone(s: CoreState, read: PurgeRead, deleted: number): void {
  const full = deleted >= PURGE_STEP_ROWS;
  if (deleted > 0) s.jobs.forgetRecent();
  if (read.request === null) {
    const cursor = s.retention;
    cursor.running = false;
    if (deleted > 0) s.emit({ type: 'jobs.purged', deleted, reason: 'retention' });
    cursor.nextStepAtMs = cursor.stepEnded(full) ? s.nowMs + RETENTION_REST_MS : s.nowMs;
    retentionTick(s);
    return;
  }
  const total = read.request.deletedSoFar + deleted;
  if (full) {
    step(s, { ...read, request: { ...read.request, deletedSoFar: total } });
    return;
  }
  if (total > 0) s.emit({ type: 'jobs.purged', deleted: total, reason: 'request' });
  s.reply(read.request.connId, read.request.requestId, { type: 'JOBS_PURGED', deleted: total });
}

/** A purge step failed: a request gets the error; retention tries again later. */
export function purgeFailed(s: CoreState, read: PurgeRead, message: string): void {
  if (read.request === null) {
    s.retention.running = false;
    s.retention.nextStepAtMs = s.nowMs + RETENTION_REST_MS;
    return;
  }
  s.replyError(
    read.request.connId,
    read.request.requestId,
    ErrorCode.StoreReadFailed,
    `Purge failed: ${message}`,
  );
}
