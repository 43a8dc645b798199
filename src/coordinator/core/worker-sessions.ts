/**
 * The worker side: messages of registered sessions, heartbeats, results, and
 * the sweeps that lose silent workers and end kept leases.
 *
 * Per connection: the first frame must be WORKER_REGISTER (else ERROR naming
 * it, then close); registration and taking held attempts back are in
 * worker-registration.ts. Once registered only HEARTBEAT, TASK_RESULT and
 * the extensions WORKER_DRAINING, TASK_PROGRESS, TASK_SUSPEND, HELD_ATTEMPTS
 * and the calls are legal, each naming the session's own worker id;
 * anything else loses the worker (worker-loss.ts). The calls of running
 * attempts (ENQUEUE_CHILD, RECORD_STEP, GET_STEPS) are answered in
 * worker-calls.ts; TASK_SUSPEND (steps.ts) ends an attempt as a result does.
 * A lost worker's running attempts are retried or failed, and its
 * connection closed.
 *
 * Two exceptions keep an attempt's lease across the end of its session:
 * - a session that ends while the coordinator is just out of a stall of its
 *   own (the worker judged it gone and redialled) keeps its leases for the
 *   worker for a grace period (kept-leases.ts): its results still count;
 * - a registration that lists what the worker still holds (`heldAttempts`,
 *   feature `reattach`) takes those leases back, from the session it
 *   replaces or from the kept ones (worker-registration.ts).
 *
 * Once the shell has read a connection's end (`workerEnding`), nothing is
 * assigned there any more, and a registration read from it is ignored.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import {
  clipError,
  MAX_PROGRESS_MESSAGE_BYTES,
  MAX_RESULT_BYTES,
  MAX_RETRY_AFTER_MS,
} from '../../protocol/limits.js';
import { handleWorkerCall, requestIdProblem } from './worker-calls.js';
import type {
  RateLimitedResult,
  TaskProgress,
  TaskResult,
  WorkerInput,
} from '../../protocol/messages.js';
import { isRunning } from './job.js';
import { isCurrentLease } from './lease.js';
import { revokeKept } from './interruption.js';
import {
  completeJob,
  failAttempt,
  rateLimitAttempt,
  requeueAttempt,
  requeueDue,
  schedule,
} from './job-lifecycle.js';
import type { CoreState } from './state.js';
import { handleSuspend } from './steps.js';
import type { WorkerSession } from './worker-registry.js';
import { keepsLeases, loseKeeping, loseWorker } from './worker-loss.js';
import {
  handleHeldAttempts,
  refuse,
  registerWorker,
  sweepHeldList,
} from './worker-registration.js';

export function handleWorkerMessage(s: CoreState, connId: number, msg: WorkerInput): void {
  if (s.closingConns.has(connId)) {
    // The connection is being closed (its worker was lost): nothing it says
    // counts any more, but a late result is worth a log line.
    if (msg.type === 'TASK_RESULT') {
      const reason = 'sent on the connection of a lost worker';
      s.emit({
        type: 'result.stale',
        jobId: msg.jobId,
        attemptId: msg.attemptId,
        workerId: msg.workerId,
        reason,
      });
    }
    return;
  }
  const session = s.workers.byConnection(connId);
  if (session === undefined && s.endingConns.has(connId)) {
    // Its end is read already: a session there could never be used.
    if (msg.type === 'WORKER_REGISTER') {
      s.emit({ type: 'worker.rejected', connId, reason: 'connection ended before it registered' });
    }
    return;
  }
  if (session === undefined) return handleFirstMessage(s, connId, msg);
  if (msg.type !== 'WORKER_REGISTER' && msg.workerId !== session.workerId) {
    const claimed = JSON.stringify(msg.workerId.slice(0, 80));
    const reason = `protocol violation: ${msg.type} names worker ${claimed}, not this session's`;
    loseWorker(s, session, 'protocol_violation', reason);
    return;
  }
  switch (msg.type) {
    case 'HEARTBEAT':
      session.lastHeartbeatMs = s.nowMs;
      session.suspected = false;
      // Leaves after this turn's commit: an ack also says "I can still commit".
      if (session.heartbeatAck) {
        s.send(connId, { type: 'HEARTBEAT_ACK', workerId: session.workerId });
      }
      return;
    case 'TASK_RESULT':
      return handleResult(s, session, msg);
    case 'TASK_PROGRESS':
      return handleProgress(s, session, msg);
    case 'ENQUEUE_CHILD':
    case 'RECORD_STEP':
    case 'GET_STEPS': {
      const problem = requestIdProblem(msg.requestId);
      if (problem !== null) {
        return void loseWorker(
          s,
          session,
          'protocol_violation',
          `protocol violation: ${msg.type} ${problem}`,
        );
      }
      return handleWorkerCall(s, session, msg);
    }
    case 'TASK_SUSPEND':
      return handleSuspend(s, session, msg);
    case 'HELD_ATTEMPTS':
      return handleHeldAttempts(s, session, msg);
    case 'WORKER_DRAINING':
      s.workers.markDraining(session);
      s.emit({
        type: 'worker.draining',
        workerId: session.workerId,
        runningJobs: session.running.size,
      });
      return;
    case 'WORKER_REGISTER':
      loseWorker(
        s,
        session,
        'protocol_violation',
        'protocol violation: WORKER_REGISTER after registration',
      );
      return;
  }
}

function handleFirstMessage(s: CoreState, connId: number, msg: WorkerInput): void {
  if (msg.type === 'WORKER_REGISTER') return registerWorker(s, connId, msg);
  refuse(
    s,
    connId,
    ErrorCode.NotRegistered,
    `The first message must be WORKER_REGISTER, got ${msg.type}`,
  );
}

/**
 * True when a result fits MAX_RESULT_BYTES as encoded: escapes (\" \\ \u0001)
 * make a result up to 6x larger in the JOB_STATUS / JOB_LIST frames that
 * carry it than its raw bytes. Each UTF-16 unit encodes to at most 6 bytes,
 * so a short result is known to fit without encoding it.
 */
function resultFits(result: string | null): boolean {
  if (result === null || result.length * 6 <= MAX_RESULT_BYTES) return true;
  return encodedBytes(result) <= MAX_RESULT_BYTES;
}

/** A string's size inside a JSON frame, without its quotes. */
function encodedBytes(text: string): number {
  return Buffer.byteLength(JSON.stringify(text)) - 2;
}

function handleResult(s: CoreState, session: WorkerSession, msg: TaskResult): void {
  const job = s.jobs.active(msg.jobId);
  const stale = (reason: string): void =>
    s.emit({
      type: 'result.stale',
      jobId: msg.jobId,
      attemptId: msg.attemptId,
      workerId: session.workerId,
      reason,
    });
  if (job === undefined) return stale('not an active job (unknown or already finished)');
  if (!isCurrentLease(job, msg.attemptId))
    return stale(`not the current lease (job is ${job.state})`);
  if (job.lease.workerId !== session.workerId) {
    return stale(`lease belongs to worker ${job.lease.workerId}`);
  }
  s.workers.noteResult(session, s.nowMs);
  if (msg.success && resultFits(msg.result)) {
    completeJob(s, job, msg.result ?? '', msg.resultFormat ?? null);
  } else if (msg.success) {
    failAttempt(
      s,
      job,
      'task_failure',
      `result too large (${encodedBytes(msg.result ?? '')} bytes; limit ${MAX_RESULT_BYTES})`,
    );
  } else if (msg.rateLimited != null) {
    const problem = rateLimitProblem(msg.rateLimited);
    if (problem !== null) {
      return void loseWorker(s, session, 'protocol_violation', `protocol violation: ${problem}`);
    }
    const error = clipError(
      msg.error ?? `RATE_LIMITED: retry after ${msg.rateLimited.retryAfterMillis} ms`,
    );
    rateLimitAttempt(s, job, msg.rateLimited, error);
  } else if (msg.requeue === true) {
    // Cut off through no doing of its own (we offer `requeue`): queued again, not counted.
    requeueAttempt(s, job, clipError(msg.error ?? 'attempt requeued by its worker'));
  } else {
    const error = clipError(msg.error ?? 'task failed without an error message');
    // `retryable: false` (we offer the extension) ends the job at once.
    failAttempt(s, job, msg.retryable === false ? 'non_retryable' : 'task_failure', error);
  }
  schedule(s);
}

/** What is wrong with a result's `rateLimited`, or null. */
function rateLimitProblem(limited: RateLimitedResult): string | null {
  const after = limited.retryAfterMillis;
  if (!(after >= 1 && after <= MAX_RETRY_AFTER_MS)) {
    return `TASK_RESULT rateLimited.retryAfterMillis must be 1..${MAX_RETRY_AFTER_MS}, got ${after}`;
  }
  return null;
}

/**
 * TASK_PROGRESS: kept in memory on the job (not written: progress is not
 * acknowledged state; it reaches the store with the job's next write) and
 * pushed to subscribers. Only the current lease's progress counts.
 */
function handleProgress(s: CoreState, session: WorkerSession, msg: TaskProgress): void {
  const ignore = (reason: string): void =>
    s.emit({ type: 'job.progress', jobId: msg.jobId, accepted: false, reason });
  const job = s.jobs.active(msg.jobId);
  if (job === undefined) return ignore('not an active job');
  if (!isCurrentLease(job, msg.attemptId) || job.lease.workerId !== session.workerId) {
    return ignore('not the current lease');
  }
  if (!(msg.fraction >= 0 && msg.fraction <= 1)) return ignore('fraction outside 0..1');
  if (msg.message !== null && Buffer.byteLength(msg.message) > MAX_PROGRESS_MESSAGE_BYTES) {
    return ignore(`message over ${MAX_PROGRESS_MESSAGE_BYTES} bytes`);
  }
  job.progress = { fraction: msg.fraction, message: msg.message, atMillis: s.nowMs };
  s.subscriptions.noteProgress(job);
  s.emit({ type: 'job.progress', jobId: msg.jobId, accepted: true, reason: null });
}

/** The shell has read a worker connection's end; its last frames follow. */
export function workerEnding(s: CoreState, connId: number): void {
  s.endingConns.add(connId);
  const session = s.workers.byConnection(connId);
  if (session !== undefined) s.workers.markEnding(session);
}

/** A worker connection ended or broke the protocol. */
export function workerGone(
  s: CoreState,
  connId: number,
  cause: 'connection_closed' | 'protocol_violation',
  reason: string,
): void {
  const session = s.workers.byConnection(connId);
  if (session !== undefined && cause === 'connection_closed' && keepsLeases(s, session)) {
    loseKeeping(s, session, cause, reason);
  } else if (session !== undefined) loseWorker(s, session, cause, reason);
  else if (cause === 'protocol_violation' && !s.closingConns.has(connId)) {
    refuse(
      s,
      connId,
      ErrorCode.NotRegistered,
      `${reason}; the first message must be WORKER_REGISTER`,
    );
  }
  if (cause === 'connection_closed') {
    s.closingConns.delete(connId);
    s.endingConns.delete(connId);
  }
}

/**
 * Loses workers silent for longer than the timeout; logs those silent for
 * half of it. After a stall of the coordinator's own loop (a pause longer
 * than several sweeps), the stalled time is not held against anyone: every
 * worker's silence is counted from the end of the stall.
 */
export function sweepHeartbeats(s: CoreState, stalledMs: number): void {
  const timeoutMs = s.config.heartbeatTimeoutMs;
  for (const session of [...s.workers.sessions()]) {
    if (stalledMs > 0) {
      session.lastHeartbeatMs = Math.min(s.nowMs, session.lastHeartbeatMs + stalledMs);
    }
    const silentMs = s.nowMs - session.lastHeartbeatMs;
    if (silentMs > timeoutMs) {
      loseWorker(s, session, 'heartbeat_timeout', `heartbeat timeout: none for ${silentMs} ms`);
      continue;
    } else if (silentMs > timeoutMs / 2 && !session.suspected) {
      session.suspected = true;
      s.emit({ type: 'worker.suspected', workerId: session.workerId, silentMs });
    }
    sweepHeldList(s, session, stalledMs);
    s.workers.closeIdlePrefetch(session, s.nowMs);
  }
}

/**
 * Revokes the kept leases whose grace period ended (the worker did not come
 * back for them). A stall of our own extends every grace period by its length.
 */
export function sweepKeptLeases(s: CoreState, stalledMs: number): void {
  if (stalledMs > 0) s.kept.extend(stalledMs, s.nowMs);
  for (const { workerId, jobs } of s.kept.takeExpired(s.nowMs)) {
    for (const [jobId, revocation] of jobs) {
      const job = s.jobs.active(jobId);
      if (job === undefined || !isRunning(job) || job.lease.workerId !== workerId) {
        throw new Error(`kept job ${jobId} is not leased to ${workerId}`);
      }
      revokeKept(s, job, revocation);
    }
  }
  requeueDue(s);
}
