/**
 * Restart recovery: rebuilds the core's memory from the store's active jobs.
 *
 * - QUEUED jobs are queued again in their original order and priority.
 * - RETRY_WAIT jobs keep their absolute eligibility time.
 * - SCHEDULED jobs keep their due time; overdue ones become QUEUED with the
 *   first input, in due-time order (delayed-jobs.ts).
 * - RUNNING jobs were interrupted: the attempt counts, and is recorded in the
 *   history as INTERRUPTED. With attempts left the job is requeued;
 *   otherwise it fails with "coordinator restarted during final attempt;
 *   outcome unknown". With a shared store (PostgreSQL) a new term is a new
 *   leader, and the text names the epochs instead: "leader changed (epoch
 *   1 → 2) during attempt 1". Persisted deadlines are a dead process's clock
 *   and are never trusted: the next assignment sets a fresh one.
 * Terminal jobs stay in the store only.
 */
import type { RecoveredState } from '../../store/store.js';
import { fromRecord, isRunning, type CoreJob, type RunningJob } from './job.js';
import { holdScheduled } from './delayed-jobs.js';
import { finishJob, interruptAttempt } from './job-lifecycle.js';
import { transition } from './job-state.js';
import { groupOf } from './ready-queue.js';
import type { CoreState } from './state.js';

export function recover(s: CoreState, stored: RecoveredState): void {
  const attemptsByJob = new Map<string, RecoveredState['activeAttempts']>();
  for (const attempt of stored.activeAttempts) {
    const list = attemptsByJob.get(attempt.jobId) ?? [];
    list.push(attempt);
    attemptsByJob.set(attempt.jobId, list);
  }
  // Schedules resume where the store says: a tick whose time passed is due now.
  for (const schedule of stored.schedules ?? []) s.schedules.put({ ...schedule });
  for (const settings of stored.queueSettings ?? []) s.queues.load(settings, s.nowMs);
  const interruption = interruptionOf(stored.epoch);
  for (const row of stored.activeJobs) {
    const job = fromRecord(row, attemptsByJob.get(row.jobId) ?? []);
    s.jobs.adopt(job);
    recoverJob(s, job, interruption);
  }
}

/**
 * What ended the attempts found running: a restart of the one coordinator,
 * or (a shared store) the lease passing from the previous epoch to this one.
 */
function interruptionOf(epoch: number | undefined): string {
  return epoch === undefined || epoch < 2
    ? 'coordinator restarted'
    : `leader changed (epoch ${epoch - 1} → ${epoch})`;
}

function recoverJob(s: CoreState, job: CoreJob, interruption: string): void {
  switch (job.state) {
    case 'QUEUED':
      s.ready.push(job);
      return;
    case 'RETRY_WAIT':
      job.retryAtMs ??= s.nowMs; // never written by the core; tolerate it
      s.retries.push({ atMs: job.retryAtMs, jobId: job.jobId, attemptId: null });
      return;
    case 'RUNNING':
      if (!isRunning(job))
        throw new Error(`store returned RUNNING job ${job.jobId} without a lease`);
      recoverRunning(s, job, interruption);
      return;
    case 'SCHEDULED':
      // Overdue ones (their time passed while no coordinator ran) are
      // promoted by the first input, in due-time order.
      if (job.runAtMs === null)
        throw new Error(`store returned SCHEDULED job ${job.jobId} without runAtMs`);
      holdScheduled(s, job);
      return;
    case 'WAITING':
      // Nothing makes this state yet; the feature that does recovers it.
      throw new Error(`store returned ${job.state} job ${job.jobId}, which this build cannot run`);
    case 'COMPLETED':
    case 'FAILED':
    case 'CANCELLED':
      throw new Error(`store returned terminal job ${job.jobId} as active`);
  }
}

function recoverRunning(s: CoreState, job: RunningJob, interruption: string): void {
  const workerId = job.lease.workerId;
  const interrupted = `${interruption} during attempt ${job.attempts}; outcome unknown (worker ${workerId})`;
  // Its lease counted until now (it ends here): not a start of this term.
  s.queues.noteStart(job.queue, groupOf(job), s.nowMs, false);
  interruptAttempt(s, job, interrupted);
  if (job.attempts >= job.maxAttempts) {
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
