/**
 * The worker side: registration, heartbeats, results, and losing a worker.
 *
 * Per connection: the first frame must be WORKER_REGISTER (else ERROR naming
 * it, then close). Once registered only HEARTBEAT, TASK_RESULT and the
 * WORKER_DRAINING extension are legal, each naming the session's own worker
 * id; anything else loses the worker. The calls of running attempts
 * (ENQUEUE_CHILD, RECORD_STEP, GET_STEPS) are answered in worker-calls.ts;
 * TASK_SUSPEND (steps.ts) ends an attempt as a result does. A lost worker's running attempts are
 * retried or failed, and its connection closed.
 *
 * Two exceptions keep an attempt's lease across the end of its session:
 * - a session that ends while the coordinator is just out of a stall of its
 *   own (the worker judged it gone and redialled) keeps its leases for the
 *   worker for a grace period (kept-leases.ts): its results still count;
 * - a registration that lists what the worker still holds (`heldAttempts`,
 *   feature `reattach`) takes those leases back, from the session it
 *   replaces or from the kept ones; every other lease of that worker is
 *   revoked at once, and a listed attempt whose lease is not current gets a
 *   TASK_CANCEL.
 *
 * Once the shell has read a connection's end (`workerEnding`), nothing is
 * assigned there any more, and a registration read from it is ignored.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import {
  MAX_CAPACITY,
  MAX_HELD_ATTEMPTS,
  MAX_HELD_ID_LENGTH,
  MAX_PREFETCH_PER_SLOT,
  maxPrefetch,
  clipError,
  MAX_PROGRESS_MESSAGE_BYTES,
  MAX_RESULT_BYTES,
  MAX_TASK_TYPES_PER_WORKER,
  MAX_WORKER_ID_LENGTH,
} from '../../protocol/limits.js';
import { isValidTaskType } from '../../protocol/task-types.js';
import { isValidQueueName, MAX_QUEUES_PER_WORKER } from '../../protocol/queue-names.js';
import { COORDINATOR_FEATURES } from './offered-features.js';
import { handleWorkerCall, requestIdProblem } from './worker-calls.js';
import type {
  HeldAttempt,
  TaskProgress,
  TaskResult,
  WorkerRegister,
  WorkerToCoordinator,
} from '../../protocol/messages.js';
import { isRunning, type RunningJob } from './job.js';
import { isCurrentLease } from './lease.js';
import { revokeKept } from './interruption.js';
import type { Revocation } from './kept-leases.js';
import { completeJob, failAttempt, requeueDue, schedule } from './job-lifecycle.js';
import type { CoreState } from './state.js';
import type { WorkerLossCause } from './types.js';
import { handleSuspend } from './steps.js';
import type { WorkerSession } from './worker-registry.js';

export function handleWorkerMessage(s: CoreState, connId: number, msg: WorkerToCoordinator): void {
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

function handleFirstMessage(s: CoreState, connId: number, msg: WorkerToCoordinator): void {
  if (msg.type !== 'WORKER_REGISTER') {
    refuse(
      s,
      connId,
      ErrorCode.NotRegistered,
      `The first message must be WORKER_REGISTER, got ${msg.type}`,
    );
    return;
  }
  const problem = registrationProblem(msg);
  if (problem !== null) return refuse(s, connId, ErrorCode.InvalidRegistration, problem);
  const held = msg.heldAttempts ?? null;
  const previous = s.workers.get(msg.workerId);
  const fromPrevious = previous === undefined ? [] : replace(s, previous, held);
  const session: WorkerSession = {
    workerId: msg.workerId,
    connId,
    capacity: msg.capacity,
    prefetch: msg.prefetch ?? 0,
    prefetching: false,
    lastResultMs: null,
    slotMs: null,
    taskTypes: msg.taskTypes === null ? null : new Set(msg.taskTypes),
    queues: msg.queues === undefined || msg.queues === null ? null : new Set(msg.queues),
    running: new Set(),
    lastHeartbeatMs: s.nowMs,
    suspected: false,
    draining: false,
    ending: false,
    heartbeatAck: msg.heartbeatAck === true,
    parents: msg.parents === true,
    traceContext: msg.traceContext === true,
    steps: msg.steps === true,
  };
  s.workers.add(session);
  s.send(connId, {
    type: 'WORKER_REGISTERED',
    workerId: msg.workerId,
    features: [...COORDINATOR_FEATURES],
  });
  s.emit({
    type: 'worker.registered',
    workerId: msg.workerId,
    capacity: msg.capacity,
    connId,
    taskTypes: session.taskTypes === null ? null : [...session.taskTypes],
    traceContext: session.traceContext === true,
  });
  if (held !== null) reclaim(s, session, held, fromPrevious);
  schedule(s);
}

/**
 * A registration takes over the id of a live session. Returns the jobs of
 * that session the new registration listed as held (their leases stay, for
 * {@link reclaim}); the others are revoked, or, right after a stall of our
 * own and without a list, kept for the worker.
 */
function replace(s: CoreState, previous: WorkerSession, held: HeldAttempt[] | null): string[] {
  // Told before it is closed, so that worker stops instead of registering
  // again and knocking this one out in turn. A worker that reconnects after
  // its own connection died never reads this: it went to the dead one.
  s.send(previous.connId, {
    type: 'ERROR',
    code: ErrorCode.WorkerReplaced,
    message: `Worker replaced: a newer registration took over the id ${JSON.stringify(previous.workerId.slice(0, 80))}`,
  });
  const reason = 'worker re-registered';
  if (held !== null) {
    const listed = new Map(held.map((h) => [h.jobId, h.attemptId]));
    return loseWorker(s, previous, 'replaced', reason, (job) => {
      return listed.get(job.jobId) === job.lease.attemptId;
    });
  }
  if (keepsLeases(s, previous)) loseKeeping(s, previous, 'replaced', reason);
  else loseWorker(s, previous, 'replaced', reason);
  return [];
}

/**
 * A registration listed what the worker still holds: the listed attempts
 * whose lease is current and names it (kept, or taken from the session it
 * replaced) join the new session; every other lease still naming the worker
 * is revoked (it does not have that attempt); a listed attempt whose lease
 * is not current is cancelled on the worker.
 */
function reclaim(
  s: CoreState,
  session: WorkerSession,
  held: readonly HeldAttempt[],
  fromPrevious: readonly string[],
): void {
  const kept = new Map(s.kept.take(session.workerId) ?? []);
  const candidates = new Set([...fromPrevious, ...kept.keys()]);
  const replaced: Revocation = {
    kind: 'lost',
    error: `worker ${session.workerId} lost (worker re-registered)`,
  };
  const listed = new Map<string, string>();
  let reclaimed = 0;
  for (const { jobId, attemptId } of held) {
    listed.set(jobId, attemptId);
    const job = s.jobs.active(jobId);
    const current = job !== undefined && isCurrentLease(job, attemptId);
    if (current && candidates.has(jobId) && s.workers.adopt(session, jobId)) {
      candidates.delete(jobId);
      reclaimed++;
    } else if (!current) {
      s.send(session.connId, { type: 'TASK_CANCEL', jobId, attemptId });
    }
  }
  for (const jobId of candidates) {
    const job = s.jobs.active(jobId);
    if (job === undefined || !isRunning(job) || job.lease.workerId !== session.workerId) {
      throw new Error(`kept job ${jobId} is not leased to ${session.workerId}`);
    }
    const attemptId = job.lease.attemptId;
    revokeKept(s, job, kept.get(jobId) ?? replaced);
    // Listed but beyond what one session may hold: the worker must stop it.
    if (listed.get(jobId) === attemptId) {
      s.send(session.connId, { type: 'TASK_CANCEL', jobId, attemptId });
    }
  }
  if (reclaimed > 0) {
    s.emit({
      type: 'worker.leasesReclaimed',
      workerId: session.workerId,
      connId: session.connId,
      jobs: reclaimed,
    });
  }
  requeueDue(s);
}

function registrationProblem(msg: WorkerRegister): string | null {
  if (msg.workerId.trim().length === 0) return 'WORKER_REGISTER: workerId must not be blank';
  if (msg.workerId.length > MAX_WORKER_ID_LENGTH) {
    return `WORKER_REGISTER: workerId must be at most ${MAX_WORKER_ID_LENGTH} characters`;
  }
  if (msg.capacity < 1 || msg.capacity > MAX_CAPACITY) {
    return `WORKER_REGISTER: capacity must be 1..${MAX_CAPACITY}, got ${msg.capacity}`;
  }
  const prefetch = msg.prefetch ?? 0;
  if (prefetch < 0 || prefetch > maxPrefetch(msg.capacity)) {
    return `WORKER_REGISTER: prefetch must be 0..${maxPrefetch(msg.capacity)} (${MAX_PREFETCH_PER_SLOT} x capacity), got ${prefetch}`;
  }
  return (
    taskTypesProblem(msg.taskTypes) ??
    heldAttemptsProblem(msg.heldAttempts ?? null) ??
    queuesProblem(msg.queues ?? null)
  );
}

/** A declared list of queues must be non-empty, bounded, and of valid names. */
function queuesProblem(queues: readonly string[] | null): string | null {
  if (queues === null) return null;
  if (queues.length === 0 || queues.length > MAX_QUEUES_PER_WORKER) {
    return `WORKER_REGISTER: queues must list 1..${MAX_QUEUES_PER_WORKER} queue names, got ${queues.length}`;
  }
  const invalid = queues.find((name) => !isValidQueueName(name));
  if (invalid !== undefined) {
    return `WORKER_REGISTER: queues holds an invalid queue name ${JSON.stringify(invalid.slice(0, 80))}`;
  }
  return null;
}

function heldAttemptsProblem(held: readonly HeldAttempt[] | null): string | null {
  if (held === null) return null;
  if (held.length > MAX_HELD_ATTEMPTS) {
    return `WORKER_REGISTER: heldAttempts may list at most ${MAX_HELD_ATTEMPTS} attempts, got ${held.length}`;
  }
  const long = held.find(
    (h) => h.jobId.length > MAX_HELD_ID_LENGTH || h.attemptId.length > MAX_HELD_ID_LENGTH,
  );
  return long === undefined
    ? null
    : `WORKER_REGISTER: heldAttempts ids must be at most ${MAX_HELD_ID_LENGTH} characters`;
}

/** A declared list must hold at most the limit of valid task type names. */
function taskTypesProblem(taskTypes: readonly string[] | null): string | null {
  if (taskTypes === null) return null;
  if (taskTypes.length > MAX_TASK_TYPES_PER_WORKER) {
    return `WORKER_REGISTER: taskTypes may list at most ${MAX_TASK_TYPES_PER_WORKER} task types, got ${taskTypes.length}`;
  }
  const invalid = taskTypes.find((name) => !isValidTaskType(name));
  if (invalid !== undefined) {
    return `WORKER_REGISTER: taskTypes holds an invalid task type name ${JSON.stringify(invalid.slice(0, 80))}`;
  }
  return null;
}

function refuse(s: CoreState, connId: number, code: ErrorCode, message: string): void {
  s.send(connId, { type: 'ERROR', message, code });
  s.closeWorker(connId, message);
  s.emit({ type: 'worker.rejected', connId, reason: message });
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
  // Measured as encoded: escapes (\" \\ \u0001) make a result up to 6x larger
  // in the JOB_STATUS / JOB_LIST frames that carry it than its raw bytes.
  const resultBytes = msg.result === null ? 0 : Buffer.byteLength(JSON.stringify(msg.result)) - 2;
  if (msg.success && resultBytes <= MAX_RESULT_BYTES) {
    completeJob(s, job, msg.result ?? '', msg.resultFormat ?? null);
  } else if (msg.success) {
    failAttempt(
      s,
      job,
      'task_failure',
      `result too large (${resultBytes} bytes; limit ${MAX_RESULT_BYTES})`,
    );
  } else {
    const error = clipError(msg.error ?? 'task failed without an error message');
    // `retryable: false` (we offer the extension) ends the job at once.
    failAttempt(s, job, msg.retryable === false ? 'non_retryable' : 'task_failure', error);
  }
  schedule(s);
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

/**
 * Ends a session: every attempt it held is retried or failed with
 * `worker <id> lost (<reason>)`, and its connection is closed. Attempts that
 * `keep` selects are not: they stay leased to the worker, in no session, and
 * are returned for the caller to place (kept, or taken back at once).
 */
export function loseWorker(
  s: CoreState,
  session: WorkerSession,
  cause: WorkerLossCause,
  lostBecause: string,
  keep: (job: RunningJob) => boolean = () => false,
): string[] {
  const runningJobs = session.running.size;
  const attemptCause = session.draining ? 'released' : 'worker_lost';
  const reason = session.draining ? `${lostBecause} while draining` : lostBecause;
  const kept: string[] = [];
  for (const jobId of [...session.running]) {
    const job = s.jobs.active(jobId);
    if (job === undefined || !isRunning(job) || job.lease.workerId !== session.workerId) {
      throw new Error(`worker ${session.workerId} holds job ${jobId} that is not running there`);
    }
    if (keep(job)) {
      s.workers.release(session, jobId);
      kept.push(jobId);
      continue;
    }
    failAttempt(s, job, attemptCause, `worker ${session.workerId} lost (${reason})`);
  }
  s.workers.remove(session);
  s.closeWorker(session.connId, `worker ${session.workerId} lost (${reason})`);
  s.emit({
    type: 'worker.lost',
    workerId: session.workerId,
    cause: session.draining ? 'drained' : cause,
    reason,
    runningJobs,
  });
  requeueDue(s); // its attempts are due at once
  schedule(s);
  return kept;
}

/**
 * Whether a session that ends now keeps its leases for the worker: only
 * right after a stall of our own (the worker may simply have judged us gone),
 * and not for a worker that was draining (its leaving was planned).
 */
function keepsLeases(s: CoreState, session: WorkerSession): boolean {
  return s.recentlyStalled && !session.draining && session.running.size > 0;
}

/** Ends a session but keeps its leases for the worker's next session, for a heartbeat timeout. */
function loseKeeping(
  s: CoreState,
  session: WorkerSession,
  cause: WorkerLossCause,
  reason: string,
): void {
  const jobIds = loseWorker(s, session, cause, reason, () => true);
  const untilMs = s.nowMs + s.config.heartbeatTimeoutMs;
  const { workerId } = session;
  const error = `worker ${workerId} lost (${reason})`;
  s.kept.keep(workerId, jobIds, s.nowMs, untilMs, { kind: 'lost', error });
  s.emit({ type: 'worker.leasesKept', workerId, jobs: jobIds.length, untilMs, reason });
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
