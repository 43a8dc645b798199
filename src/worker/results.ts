/**
 * How an attempt's outcome goes back to the coordinator: TASK_RESULT, or
 * TASK_SUSPEND for a handler that slept or waits, using each extension only
 * with a coordinator that offered it.
 *
 * - A suspension without `steps` (or a signal or event wait without
 *   `signals`): a failed, retryable result.
 * - `retryable: false` only with `retryable` (a v1 coordinator retries anyway).
 * - An attempt cut off through no doing of its own (`requeue`): with the
 *   `requeue` feature a failed result with `requeue: true`, which the
 *   coordinator does not count; without, a plain failed, retryable result.
 * - A handler's RateLimitedError: `rateLimited` (its wait and scope) only
 *   with `rateLimits`; without, the same failed, retryable result, its error
 *   (`RATE_LIMITED: ...`) saying why, and the attempt counts.
 * - A result too large for a frame is replaced by a failure saying so.
 */
import type { FramedConnection } from '../net/framed-connection.js';
import { describeError } from '../protocol/errors.js';
import type { Feature } from '../protocol/features.js';
import { clipError } from '../protocol/limits.js';
import type { TaskResult } from '../protocol/messages.js';
import type { TaskOutcome } from './task-pool.js';

/** Which attempt a result belongs to. */
export interface ResultIds {
  readonly jobId: string;
  readonly attemptId: string;
}

/** Sends an outcome on `connection`; returns the TASK_RESULT that left (null: a suspension, or nothing left). */
export function sendOutcome(
  connection: FramedConnection,
  workerId: string,
  ids: ResultIds,
  outcome: TaskOutcome,
  features: ReadonlySet<Feature>,
): TaskResult | null {
  if (!outcome.success && outcome.suspend !== undefined) {
    const suspend = outcome.suspend;
    const needs = 'waitForSignal' in suspend || 'waitForEvent' in suspend ? 'signals' : 'steps';
    if (features.has('steps') && features.has(needs)) {
      connection.send({ type: 'TASK_SUSPEND', workerId, ...ids, ...suspend });
      return null;
    }
    // A coordinator without them (we re-registered elsewhere): the attempt fails, retryable.
    outcome = {
      success: false,
      error:
        needs === 'signals'
          ? 'the handler waited for a signal or event, and this coordinator does not offer signals'
          : 'the handler slept or waited, and this coordinator does not offer durable steps',
      cancelled: false,
      retryable: true,
    };
  }
  return sendOrReport(connection, resultMessage(workerId, ids, outcome, features));
}

export function resultMessage(
  workerId: string,
  ids: ResultIds,
  outcome: TaskOutcome,
  features: ReadonlySet<Feature>,
): TaskResult {
  const message: TaskResult = {
    type: 'TASK_RESULT',
    workerId,
    jobId: ids.jobId,
    attemptId: ids.attemptId,
    success: outcome.success,
    result: outcome.success ? outcome.result : null,
    error: outcome.success ? null : clipError(outcome.error),
  };
  // Optional fields: left out unless they say something (and unless the
  // coordinator offered to act on them).
  if (outcome.success && outcome.resultFormat === 'json') message.resultFormat = 'json';
  if (!outcome.success && !outcome.retryable && features.has('retryable')) {
    message.retryable = false;
  }
  if (!outcome.success && outcome.requeue === true && features.has('requeue')) {
    message.requeue = true;
  }
  if (!outcome.success && outcome.rateLimited !== undefined && features.has('rateLimits')) {
    message.rateLimited = { ...outcome.rateLimited };
  }
  return message;
}

/** Sends a result; one too big for a frame is replaced by a failure saying so. */
function sendOrReport(connection: FramedConnection, message: TaskResult): TaskResult | null {
  try {
    return connection.send(message) ? message : null;
  } catch (err) {
    const failure: TaskResult = {
      type: 'TASK_RESULT',
      workerId: message.workerId,
      jobId: message.jobId,
      attemptId: message.attemptId,
      success: false,
      result: null,
      error: `result could not be sent: ${describeError(err)}`,
    };
    return connection.send(failure) ? failure : null;
  }
}
