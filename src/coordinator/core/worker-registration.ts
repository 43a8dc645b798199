/**
 * Registration: the first frame of a worker connection, and what the worker
 * still holds from an earlier one.
 *
 * A valid WORKER_REGISTER (registration-checks.ts) is answered
 * WORKER_REGISTERED; an invalid one gets ERROR INVALID_REGISTRATION and its
 * connection is closed. A registration under the id of a live session
 * replaces that session. The session's capacity is `slots` when the worker
 * sent it (feature `slots`), else `capacity`.
 *
 * Taking attempts back (`heldAttempts`, feature `reattach`): every listed
 * attempt whose lease is current and names the worker (kept after a stall
 * or a restart, or held by the session replaced) joins the new session, up
 * to capacity + prefetch, beyond which it is revoked and cancelled; a listed
 * attempt whose lease is not current gets a TASK_CANCEL; every other lease
 * still naming the worker is revoked once the list is complete.
 *
 * A list longer than a registration frame holds (feature `moreHeld`): a
 * registration with `moreHeld: true` lists the first attempts, and
 * HELD_ATTEMPTS messages the rest, the last with `more: false`. Meanwhile
 * the session is open but assigned nothing (its `heldList`), and the leases
 * not listed yet are kept for the worker (kept-leases.ts). The list ends
 * with its last message, or at the latest a heartbeat timeout after the
 * registration; then what was not listed is revoked.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import { MAX_HELD_ATTEMPTS_TOTAL } from '../../protocol/limits.js';
import type { HeldAttempt, HeldAttempts, WorkerRegister } from '../../protocol/messages.js';
import { revokeKept } from './interruption.js';
import { isRunning } from './job.js';
import { requeueDue, schedule } from './job-lifecycle.js';
import type { Revocation } from './kept-leases.js';
import { isCurrentLease } from './lease.js';
import { COORDINATOR_FEATURES } from './offered-features.js';
import { heldListProblem, registrationProblem, slotsOf } from './registration-checks.js';
import type { CoreState } from './state.js';
import { keepsLeases, loseKeeping, loseWorker } from './worker-loss.js';
import type { WorkerSession } from './worker-registry.js';

/** Leases that a held list may still claim, each with how it ends if it is not. */
type Candidates = Map<string, Revocation>;

/** The first frame of a connection was WORKER_REGISTER: registers the worker, or refuses it. */
export function registerWorker(s: CoreState, connId: number, msg: WorkerRegister): void {
  const problem = registrationProblem(msg);
  if (problem !== null) return refuse(s, connId, ErrorCode.InvalidRegistration, problem);
  const moreHeld = msg.moreHeld === true;
  const held = msg.heldAttempts ?? (moreHeld ? [] : null);
  const previous = s.workers.get(msg.workerId);
  const fromPrevious = previous === undefined ? [] : replace(s, previous, held, moreHeld);
  const session = newSession(s, connId, msg, moreHeld);
  s.workers.add(session);
  s.send(connId, {
    type: 'WORKER_REGISTERED',
    workerId: msg.workerId,
    features: [...COORDINATOR_FEATURES],
  });
  s.emit({
    type: 'worker.registered',
    workerId: msg.workerId,
    capacity: session.capacity,
    connId,
    taskTypes: session.taskTypes === null ? null : [...session.taskTypes],
    traceContext: session.traceContext === true,
  });
  if (held !== null) reclaim(s, session, held, fromPrevious);
  schedule(s);
}

function newSession(
  s: CoreState,
  connId: number,
  msg: WorkerRegister,
  moreHeld: boolean,
): WorkerSession {
  return {
    workerId: msg.workerId,
    connId,
    capacity: slotsOf(msg),
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
    heldList: moreHeld
      ? {
          untilMs: s.nowMs + s.config.heartbeatTimeoutMs,
          listed: msg.heldAttempts?.length ?? 0,
        }
      : null,
    heartbeatAck: msg.heartbeatAck === true,
    parents: msg.parents === true,
    traceContext: msg.traceContext === true,
    steps: msg.steps === true,
  };
}

/**
 * A registration takes over the id of a live session. Returns the jobs of
 * that session the new registration may still claim (their leases stay, for
 * {@link reclaim}): those it listed, or all of them when more of its list
 * is to come; the others are revoked, or, right after a stall of our own
 * and without a list, kept for the worker.
 */
function replace(
  s: CoreState,
  previous: WorkerSession,
  held: readonly HeldAttempt[] | null,
  moreHeld: boolean,
): string[] {
  // Told before it is closed, so that worker stops instead of registering
  // again and knocking this one out in turn. A worker that reconnects after
  // its own connection died never reads this: it went to the dead one.
  s.send(previous.connId, {
    type: 'ERROR',
    code: ErrorCode.WorkerReplaced,
    message: `Worker replaced: a newer registration took over the id ${JSON.stringify(previous.workerId.slice(0, 80))}`,
  });
  const reason = 'worker re-registered';
  if (moreHeld) return loseWorker(s, previous, 'replaced', reason, () => true);
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
 * A registration listed what the worker still holds: the leases it may
 * claim are those kept for it and those of the session it replaced.
 */
function reclaim(
  s: CoreState,
  session: WorkerSession,
  held: readonly HeldAttempt[],
  fromPrevious: readonly string[],
): void {
  const candidates: Candidates = new Map();
  const replaced: Revocation = {
    kind: 'lost',
    error: `worker ${session.workerId} lost (worker re-registered)`,
  };
  for (const jobId of fromPrevious) candidates.set(jobId, replaced);
  for (const [jobId, revocation] of s.kept.take(session.workerId) ?? []) {
    candidates.set(jobId, revocation);
  }
  takeBack(s, session, held, candidates);
  settleUnlisted(s, session, candidates);
}

/**
 * The listed attempts whose lease is current and one of the candidates
 * join the session while it has room (beyond: revoked, and cancelled on
 * the worker); a listed attempt whose lease is not current is cancelled.
 * Each one claimed leaves `candidates`.
 */
function takeBack(
  s: CoreState,
  session: WorkerSession,
  held: readonly HeldAttempt[],
  candidates: Candidates,
): void {
  let reclaimed = 0;
  for (const { jobId, attemptId } of held) {
    const job = s.jobs.active(jobId);
    if (job === undefined || !isCurrentLease(job, attemptId)) {
      s.send(session.connId, { type: 'TASK_CANCEL', jobId, attemptId });
      continue;
    }
    const revocation = candidates.get(jobId);
    if (revocation === undefined || !isRunning(job)) continue;
    candidates.delete(jobId);
    if (s.workers.adopt(session, jobId)) {
      reclaimed++;
      continue;
    }
    // Beyond what one session may hold: the worker must stop it.
    revokeKept(s, job, revocation);
    s.send(session.connId, { type: 'TASK_CANCEL', jobId, attemptId });
  }
  if (reclaimed > 0) {
    s.emit({
      type: 'worker.leasesReclaimed',
      workerId: session.workerId,
      connId: session.connId,
      jobs: reclaimed,
    });
  }
}

/**
 * The leases a list did not claim: kept for the worker while more of its
 * list is to come (until the list's deadline), revoked once it is complete
 * (the worker does not hold those attempts).
 */
function settleUnlisted(s: CoreState, session: WorkerSession, candidates: Candidates): void {
  const list = session.heldList;
  for (const [jobId, revocation] of candidates) {
    const job = s.jobs.active(jobId);
    if (job === undefined || !isRunning(job) || job.lease.workerId !== session.workerId) {
      throw new Error(`kept job ${jobId} is not leased to ${session.workerId}`);
    }
    if (list === null) revokeKept(s, job, revocation);
    else s.kept.keep(session.workerId, [jobId], s.nowMs, list.untilMs, revocation);
  }
  requeueDue(s);
}

/**
 * HELD_ATTEMPTS: more of what a worker that registered with `moreHeld`
 * holds. Outside such a list, past its bounds, or with ids too long, it is
 * a violation that loses the worker.
 */
export function handleHeldAttempts(s: CoreState, session: WorkerSession, msg: HeldAttempts): void {
  const list = session.heldList;
  const problem =
    list === null
      ? 'HELD_ATTEMPTS without a list announced (moreHeld) or after its last part'
      : (heldListProblem('HELD_ATTEMPTS', msg.heldAttempts) ??
        (list.listed + msg.heldAttempts.length > MAX_HELD_ATTEMPTS_TOTAL
          ? `HELD_ATTEMPTS: a list may hold at most ${MAX_HELD_ATTEMPTS_TOTAL} attempts in all`
          : null));
  if (problem !== null || list === null) {
    loseWorker(s, session, 'protocol_violation', `protocol violation: ${problem}`);
    return;
  }
  list.listed += msg.heldAttempts.length;
  const candidates: Candidates = new Map(s.kept.take(session.workerId) ?? []);
  takeBack(s, session, msg.heldAttempts, candidates);
  if (!msg.more) endHeldList(s, session, false, candidates);
  else settleUnlisted(s, session, candidates);
  schedule(s);
}

/**
 * Ends a session's held list (its last part came, or its deadline passed):
 * the leases still kept for the worker are revoked, and the session takes
 * assignments from now on.
 */
function endHeldList(
  s: CoreState,
  session: WorkerSession,
  timedOut: boolean,
  candidates: Candidates = new Map(s.kept.take(session.workerId) ?? []),
): void {
  const listed = session.heldList?.listed ?? 0;
  s.workers.endHeldList(session);
  const revoked = candidates.size;
  settleUnlisted(s, session, candidates);
  s.emit({
    type: 'worker.heldListEnded',
    workerId: session.workerId,
    connId: session.connId,
    listed,
    revoked,
    timedOut,
  });
}

/** From the sweep: ends the held lists whose deadline has passed (stalled time not counted). */
export function sweepHeldList(s: CoreState, session: WorkerSession, stalledMs: number): void {
  const list = session.heldList;
  if (list === null) return;
  if (stalledMs > 0) list.untilMs += stalledMs;
  if (s.nowMs > list.untilMs) endHeldList(s, session, true);
}

/** Refuses a connection that did not register properly: ERROR with `code`, then close. */
export function refuse(s: CoreState, connId: number, code: ErrorCode, message: string): void {
  s.send(connId, { type: 'ERROR', message, code });
  s.closeWorker(connId, message);
  s.emit({ type: 'worker.rejected', connId, reason: message });
}
