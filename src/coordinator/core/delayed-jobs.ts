/**
 * Delayed jobs: SCHEDULED until their due time (`runAtMs`, coordinator
 * clock), then QUEUED.
 *
 * The core owns no timer. Every SCHEDULED job it holds is in one heap by
 * (due time, seq); at the start of each input the jobs that are due move to
 * QUEUED, in that order, and after each input the core says when it next
 * needs an input of its own (a `wakeAt` effect: the earliest due time among
 * delayed jobs and schedule ticks). The shell keeps one timer for that
 * instant and feeds a `wake` input when it fires (term-clock.ts), so a due
 * job starts as soon as a worker is free, never a sweep period later.
 *
 * Removal is lazy: a cancelled job stays in the heap until it reaches the
 * head, where it is skipped. SCHEDULED jobs do not count toward
 * `maxActiveJobs`; they are bounded by `maxScheduledJobs`.
 */
import type { CoreJob } from './job.js';
import { transition } from './job-state.js';
import type { CoreState } from './state.js';

/** Holds a SCHEDULED job until its time (a new one, or one found at recovery). */
export function holdScheduled(s: CoreState, job: CoreJob): void {
  const atMs = job.runAtMs;
  if (job.state !== 'SCHEDULED' || atMs === null) {
    throw new Error(`job ${job.jobId} held as delayed in state ${job.state} (runAt ${atMs})`);
  }
  s.scheduled.push({ atMs, seq: job.seq, jobId: job.jobId });
  s.scheduledCount++;
}

/** A SCHEDULED job left that state by another path (cancelled): it no longer counts. */
export function releaseScheduled(s: CoreState): void {
  s.scheduledCount--;
}

/** Moves every delayed job that is due (runAtMs <= now) to QUEUED; returns how many. */
export function promoteDue(s: CoreState): number {
  let promoted = 0;
  for (
    let due = s.scheduled.peek();
    due !== undefined && due.atMs <= s.nowMs;
    due = s.scheduled.peek()
  ) {
    s.scheduled.pop();
    const job = s.jobs.active(due.jobId);
    if (job === undefined || job.state !== 'SCHEDULED' || job.runAtMs !== due.atMs) continue;
    transition(job, { to: 'QUEUED' }, s.nowMs);
    s.scheduledCount--;
    s.jobs.save(job);
    s.ready.push(job);
    s.emit({ type: 'job.due', jobId: job.jobId, lateMs: s.nowMs - due.atMs });
    promoted++;
  }
  return promoted;
}

/** The earliest due time among the delayed jobs held; null when none is. */
export function nextDueAtMs(s: CoreState): number | null {
  return s.scheduled.peek()?.atMs ?? null;
}
