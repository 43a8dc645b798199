/**
 * Attempts a restart found running, and kept attempts whose worker did not
 * come back: how each ends.
 *
 * A restarted coordinator (or a new leader of a shared store) does not end
 * the attempts it finds running: it keeps their leases for their workers
 * for a heartbeat timeout (kept-leases.ts), so they go on counting toward
 * their queue's and group's concurrency and a worker that reattaches keeps
 * its attempt. Only an attempt whose worker is not back by then is ended
 * here, as interrupted: the attempt counts, it is recorded as INTERRUPTED,
 * and the job is queued again at once, or fails on its final attempt. A
 * kept attempt gets a fresh deadline at recovery; if that passes before its
 * worker is back, it too ends as interrupted (nothing says the attempt ran
 * too long: nobody has heard of it since the restart).
 */
import { finishJob, failAttempt, interruptAttempt, sendCancel } from './job-lifecycle.js';
import { isCurrentLease } from './lease.js';
import { transition } from './job-state.js';
import type { RunningJob } from './job.js';
import type { Revocation } from './kept-leases.js';
import type { CoreState } from './state.js';
import { attemptsUsed } from './step-records.js';

/** Ends a kept attempt whose worker did not come back for it, as its revocation says. */
export function revokeKept(s: CoreState, job: RunningJob, revocation: Revocation): void {
  if (revocation.kind === 'lost') failAttempt(s, job, 'worker_lost', revocation.error);
  else endInterrupted(s, job, revocation.interruption);
}

/**
 * Ends an attempt that `interruption` ("coordinator restarted", "leader
 * changed (epoch 1 → 2)") cut off: queued again with attempts left, failed
 * on the final one ("outcome unknown" either way).
 */
export function endInterrupted(s: CoreState, job: RunningJob, interruption: string): void {
  const workerId = job.lease.workerId;
  const interrupted = `${interruption} during attempt ${job.attempts}; outcome unknown (worker ${workerId})`;
  interruptAttempt(s, job, interrupted);
  if (attemptsUsed(job) >= job.maxAttempts) {
    job.error = `${interruption} during final attempt; outcome unknown (worker ${workerId}; all ${job.maxAttempts} attempts used)`;
    finishJob(s, job, 'FAILED');
    s.emit({ type: 'job.recovered', jobId: job.jobId, from: 'RUNNING', to: 'FAILED' });
    return;
  }
  job.error = interrupted;
  transition(job, { to: 'QUEUED', recovery: true }, s.nowMs);
  s.jobs.save(job);
  s.ready.push(job);
  s.emit({ type: 'job.recovered', jobId: job.jobId, from: 'RUNNING', to: 'QUEUED' });
}

/**
 * Revokes attempts whose deadline has passed (strictly) and retries or fails
 * them; an attempt a restart kept for a worker that is not back yet ends as
 * interrupted instead.
 */
export function expireDeadlines(s: CoreState): void {
  for (
    let due = s.deadlines.peek();
    due !== undefined && s.nowMs > due.atMs;
    due = s.deadlines.peek()
  ) {
    s.deadlines.pop();
    const job = s.jobs.active(due.jobId);
    if (job === undefined || due.attemptId === null || !isCurrentLease(job, due.attemptId)) {
      continue;
    }
    const { workerId, attemptId } = job.lease;
    const kept = s.kept.revocationOf(workerId, job.jobId);
    if (kept?.kind === 'interrupted') {
      endInterrupted(s, job, kept.interruption);
      continue;
    }
    sendCancel(s, job);
    s.emit({
      type: 'job.deadlineExceeded',
      jobId: job.jobId,
      workerId,
      attemptId,
      timeoutMs: job.timeoutMs,
    });
    failAttempt(
      s,
      job,
      'deadline',
      `execution deadline exceeded (${job.timeoutMs} ms) on worker ${workerId}`,
    );
  }
}
