/**
 * Expiry (`expiresAtMillis`): a job that no attempt has started by then
 * (QUEUED, SCHEDULED, WAITING, or between retries) ends CANCELLED with an
 * error that starts `EXPIRED:`; its dependents treat it as any cancelled
 * parent. A running attempt is never stopped by expiry: if it ends without
 * ending the job (a retry, a sleep, a rate limit), the job expires then.
 *
 * As for delayed jobs, the core owns no timer: every job in memory with an
 * expiry has an entry in one heap by expiry time, the due ones are taken at
 * each timed input, and the earliest is part of the wake-up the core asks
 * for. Removal is lazy (an entry whose job ended or left memory is skipped).
 * A far delayed job (in the store only) is due before it expires (a
 * submission that expires before its run time is refused), so it is in
 * memory, with its entry, by then. And the scheduler looks at the expiry of
 * each job it picks, so no attempt starts after it even between two timed
 * inputs.
 */
import type { CoreJob } from './job.js';
import { isTerminalState } from './job-state.js';
import { expireJob, hasExpired } from './job-lifecycle.js';
import type { CoreState } from './state.js';

export { hasExpired };

/** Gives a job in memory its expiry entry (a new job, or one loaded from the store). */
export function watchExpiry(s: CoreState, job: Readonly<CoreJob>): void {
  const atMs = job.expiresAtMs;
  if (atMs == null || isTerminalState(job.state)) return;
  s.expiries.push({ atMs, jobId: job.jobId, attemptId: null });
}

/** Ends the jobs whose expiry came (a running one when its attempt ends without ending it). */
export function expireDue(s: CoreState): void {
  for (
    let due = s.expiries.peek();
    due !== undefined && due.atMs <= s.nowMs;
    due = s.expiries.peek()
  ) {
    s.expiries.pop();
    const job = s.jobs.active(due.jobId);
    if (job === undefined || job.expiresAtMs !== due.atMs) continue;
    if (job.state === 'RUNNING') s.expiredWhileRunning.add(job.jobId);
    else expireJob(s, job);
  }
}

/**
 * After each input: the jobs whose expiry passed while an attempt ran and
 * whose attempt has ended without ending them expire now.
 */
export function settleExpiredWhileRunning(s: CoreState): void {
  if (s.expiredWhileRunning.size === 0) return;
  for (const jobId of s.expiredWhileRunning) {
    const job = s.jobs.active(jobId);
    if (job !== undefined && job.state === 'RUNNING') continue;
    s.expiredWhileRunning.delete(jobId);
    if (job !== undefined && hasExpired(s, job)) expireJob(s, job);
  }
}

/** The earliest expiry held (maybe of a job that has ended: a wake-up then does nothing). */
export function nextExpiryAtMs(s: CoreState): number | null {
  return s.expiries.peek()?.atMs ?? null;
}
