/**
 * Attempt leases. Every assignment hands out a fresh lease (a UUID, the
 * `attemptId`) with a deadline; a result counts only while its lease is the
 * job's current one. Revoking a lease (worker lost, deadline, cancel) is what
 * makes a late result from the old attempt harmless.
 */
import type { JobRecord } from '../../store/store.js';
import { transition } from './job-state.js';

/**
 * Starts a new attempt of a QUEUED job on `workerId`: one more attempt, a fresh
 * lease, and a deadline of now + the job's timeout. Attempts grow only here.
 */
export function grantLease(
  job: JobRecord,
  workerId: string,
  attemptId: string,
  nowMs: number,
): void {
  transition(job, 'RUNNING', nowMs);
  job.attempts += 1;
  job.workerId = workerId;
  job.attemptId = attemptId;
  job.deadlineAtMs = nowMs + job.timeoutMs;
  job.retryAtMs = null;
}

/** Clears the lease fields (the caller moves the job to its next state). */
export function clearLease(job: JobRecord): void {
  job.workerId = null;
  job.attemptId = null;
  job.deadlineAtMs = null;
}

/** A result is current only if the job is RUNNING under exactly this lease. */
export function isCurrentLease(job: Readonly<JobRecord>, attemptId: string): boolean {
  return job.state === 'RUNNING' && job.attemptId !== null && job.attemptId === attemptId;
}

/** The attempt overran its deadline: strictly later than the deadline. */
export function isPastDeadline(job: Readonly<JobRecord>, nowMs: number): boolean {
  return job.state === 'RUNNING' && job.deadlineAtMs !== null && nowMs > job.deadlineAtMs;
}
