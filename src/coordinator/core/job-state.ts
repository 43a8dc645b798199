/**
 * The job state machine. This file is the only place a job's `state` changes.
 *
 *   SCHEDULED   -> QUEUED (its run-at time came), CANCELLED
 *   WAITING     -> QUEUED, SCHEDULED (its parents completed), CANCELLED
 *   QUEUED      -> RUNNING (assigned), CANCELLED
 *   RUNNING     -> COMPLETED, FAILED, RETRY_WAIT, CANCELLED,
 *                  SCHEDULED, WAITING (the handler slept or waits: steps.ts),
 *                  QUEUED (only when recovering from a coordinator restart, or
 *                  when the worker requeued the attempt: `TASK_RESULT.requeue`)
 *   RETRY_WAIT  -> QUEUED (back-off elapsed), CANCELLED
 *   COMPLETED, FAILED, CANCELLED: terminal, no exits; only a redrive
 *                  (rerun.ts) takes a FAILED job back to QUEUED.
 *
 * A job has a lease exactly while it is RUNNING: entering RUNNING takes one,
 * every exit from RUNNING drops it. `transition()` applies both together.
 */
import { JOB_STATES, isTerminalState, type JobState } from '../../protocol/messages.js';
import type { CoreJob, Lease } from './job.js';

export { JOB_STATES, isTerminalState, type JobState };

const LEGAL: Readonly<Record<JobState, readonly JobState[]>> = {
  SCHEDULED: ['QUEUED', 'CANCELLED'],
  WAITING: ['QUEUED', 'SCHEDULED', 'CANCELLED'],
  QUEUED: ['RUNNING', 'CANCELLED'],
  RUNNING: ['COMPLETED', 'FAILED', 'RETRY_WAIT', 'QUEUED', 'CANCELLED', 'SCHEDULED', 'WAITING'],
  RETRY_WAIT: ['QUEUED', 'CANCELLED'],
  COMPLETED: [],
  FAILED: [],
  CANCELLED: [],
};

/**
 * True when `from -> to` is a legal move (RUNNING -> QUEUED needs
 * `recovery` or `requeue`; FAILED -> QUEUED, the one way out of a terminal
 * state, needs `redrive`).
 */
export function isLegalTransition(
  from: JobState,
  to: JobState,
  recovery = false,
  redrive = false,
  requeue = false,
): boolean {
  if (from === 'FAILED' && to === 'QUEUED') return redrive;
  if (from === 'RUNNING' && to === 'QUEUED' && !recovery && !requeue) return false;
  return LEGAL[from].includes(to);
}

/** A move the state machine forbids: always a bug in the caller. */
export class IllegalTransitionError extends Error {
  constructor(jobId: string, from: JobState, to: JobState) {
    super(`illegal job transition ${from} -> ${to} for job ${jobId}`);
    this.name = 'IllegalTransitionError';
  }
}

type Move =
  | { to: 'RUNNING'; lease: Lease }
  | { to: Exclude<JobState, 'RUNNING'>; recovery?: boolean; redrive?: boolean; requeue?: boolean };

/**
 * Moves a job at `nowMs`, asserting the move is legal. Entering RUNNING
 * installs the lease; leaving it drops the lease. `recovery` allows
 * RUNNING -> QUEUED, which only restart recovery may do, and so does
 * `requeue`, for an attempt its worker requeued.
 */
export function transition(job: CoreJob, move: Move, nowMs: number): void {
  const recovery = move.to !== 'RUNNING' && move.recovery === true;
  const redrive = move.to !== 'RUNNING' && move.redrive === true;
  const requeue = move.to !== 'RUNNING' && move.requeue === true;
  if (!isLegalTransition(job.state, move.to, recovery, redrive, requeue)) {
    throw new IllegalTransitionError(job.jobId, job.state, move.to);
  }
  job.state = move.to;
  job.lease = move.to === 'RUNNING' ? move.lease : null;
  job.updatedAtMs = nowMs;
  if (move.to === 'RUNNING') job.startedAtMs = move.lease.startedAtMs;
  if (isTerminalState(move.to)) job.finishedAtMs = nowMs;
  if (redrive) job.finishedAtMs = null;
}
