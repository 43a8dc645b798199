/**
 * The job state machine. This file is the only place a job's `state` changes.
 *
 *   QUEUED      -> RUNNING (assigned), CANCELLED
 *   RUNNING     -> COMPLETED, FAILED, RETRY_WAIT, CANCELLED,
 *                  QUEUED (only when recovering from a coordinator restart)
 *   RETRY_WAIT  -> QUEUED (back-off elapsed), CANCELLED
 *   COMPLETED, FAILED, CANCELLED: terminal, no exits.
 */
import { JOB_STATES, isTerminalState, type JobState } from '../../protocol/messages.js';
import type { JobRecord } from '../../store/store.js';

export { JOB_STATES, isTerminalState, type JobState };

const LEGAL: Readonly<Record<JobState, readonly JobState[]>> = {
  QUEUED: ['RUNNING', 'CANCELLED'],
  RUNNING: ['COMPLETED', 'FAILED', 'RETRY_WAIT', 'QUEUED', 'CANCELLED'],
  RETRY_WAIT: ['QUEUED', 'CANCELLED'],
  COMPLETED: [],
  FAILED: [],
  CANCELLED: [],
};

/** True when `from -> to` is a legal move (RUNNING -> QUEUED needs `recovery`). */
export function isLegalTransition(from: JobState, to: JobState, recovery = false): boolean {
  if (from === 'RUNNING' && to === 'QUEUED' && !recovery) return false;
  return LEGAL[from].includes(to);
}

/** A move the state machine forbids: always a bug in the caller. */
export class IllegalTransitionError extends Error {
  constructor(jobId: string, from: JobState, to: JobState) {
    super(`illegal job transition ${from} -> ${to} for job ${jobId}`);
    this.name = 'IllegalTransitionError';
  }
}

/**
 * Moves a job to `to` at `nowMs`, asserting the move is legal.
 * `recovery` allows RUNNING -> QUEUED, which only restart recovery may do.
 */
export function transition(
  job: JobRecord,
  to: JobState,
  nowMs: number,
  options: { recovery?: boolean } = {},
): void {
  if (!isLegalTransition(job.state, to, options.recovery ?? false)) {
    throw new IllegalTransitionError(job.jobId, job.state, to);
  }
  job.state = to;
  job.updatedAtMs = nowMs;
}
