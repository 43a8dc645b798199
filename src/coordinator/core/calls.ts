/**
 * The lease fence and the refusal of calls from running attempts (the
 * worker-port call mechanism; worker-calls.ts dispatches them).
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type { WorkerCall } from '../../protocol/messages.js';
import type { RunningJob } from './job.js';
import { isCurrentLease } from './lease.js';
import type { CoreState } from './state.js';
import type { WorkerSession } from './worker-registry.js';

/** A call that passed the fence: the session, the job under the current lease, the message. */
export interface FencedCall<M extends WorkerCall> {
  readonly session: WorkerSession;
  readonly job: RunningJob;
  readonly msg: M;
}

/** Why a call's `requestId` cannot be answered; null when it is fine. */
export function requestIdProblem(requestId: number): string | null {
  return Number.isSafeInteger(requestId) && requestId > 0
    ? null
    : `requestId must be a positive integer, got ${requestId}`;
}

/** Answers a call with an ERROR that fails that call only. */
export function refuseCall(
  s: CoreState,
  session: WorkerSession,
  requestId: number,
  code: ErrorCode,
  message: string,
): void {
  s.send(session.connId, { type: 'ERROR', code, message, requestId });
}

/**
 * Checks the lease of a call; on a stale one answers `STALE_ATTEMPT` and
 * returns null.
 */
export function fenceCall(
  s: CoreState,
  session: WorkerSession,
  msg: WorkerCall,
): RunningJob | null {
  const job = s.jobs.active(msg.jobId);
  const stale = (why: string): null => {
    refuseCall(s, session, msg.requestId, ErrorCode.StaleAttempt, `${msg.type}: ${why}`);
    s.emit({
      type: 'call.stale',
      call: msg.type,
      jobId: msg.jobId,
      attemptId: msg.attemptId,
      workerId: session.workerId,
      reason: why,
    });
    return null;
  };
  if (job === undefined) return stale('not an active job (unknown or already finished)');
  if (!isCurrentLease(job, msg.attemptId)) {
    return stale(`attempt ${msg.attemptId} is not the current lease (job is ${job.state})`);
  }
  if (job.lease.workerId !== session.workerId) {
    return stale(`the lease belongs to worker ${job.lease.workerId}`);
  }
  return job;
}
