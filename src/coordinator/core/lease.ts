/**
 * Attempt leases. Every assignment hands out a fresh lease (a UUID, the
 * `attemptId`) with a deadline; a result counts only while its lease is the
 * job's current one. Revoking a lease (worker lost, deadline, cancel) is what
 * makes a late result from the old attempt harmless.
 */
import type { CoreJob, RunningJob } from './job.js';
import { isRunning } from './job.js';
import { transition } from './job-state.js';

/**
 * Starts a new attempt of a QUEUED job on `workerId`: one more attempt, a fresh
 * lease, and a deadline of now + the job's timeout. Attempts grow only here.
 */
export function grantLease(
  job: CoreJob,
  workerId: string,
  attemptId: string,
  nowMs: number,
): RunningJob {
  transition(
    job,
    {
      to: 'RUNNING',
      lease: { workerId, attemptId, startedAtMs: nowMs, deadlineAtMs: nowMs + job.timeoutMs },
    },
    nowMs,
  );
  job.attempts += 1;
  job.retryAtMs = null;
  // Progress belongs to an attempt: a new one starts from none.
  job.progress = null;
  return job as RunningJob;
}

/** The job is RUNNING under exactly this lease. */
export function isCurrentLease(job: CoreJob, attemptId: string): job is RunningJob {
  return isRunning(job) && job.lease.attemptId === attemptId;
}

/**
 * Gives a running attempt a new deadline, `nowMs` + its timeout (an
 * attempt a restart kept: the stored deadline was a dead process's clock).
 */
export function renewDeadline(job: RunningJob, nowMs: number): number {
  const deadlineAtMs = nowMs + job.timeoutMs;
  job.lease = { ...job.lease, deadlineAtMs };
  return deadlineAtMs;
}
