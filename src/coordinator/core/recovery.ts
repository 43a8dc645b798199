/**
 * Restart recovery: rebuilds the core's memory from the store's active jobs.
 *
 * - QUEUED jobs are queued again in their original order and priority.
 * - RETRY_WAIT jobs keep their absolute eligibility time.
 * - RUNNING jobs were interrupted: the attempt counts. With attempts left the
 *   job is requeued (lease, worker and deadline cleared); otherwise it fails
 *   with "coordinator restarted during final attempt; outcome unknown".
 *   Persisted deadlines are a dead process's clock and are never trusted: the
 *   next assignment sets a fresh one.
 * Terminal jobs stay in the store only.
 */
import type { JobRecord } from '../../store/store.js';
import { transition } from './job-state.js';
import { clearLease } from './lease.js';
import { finishJob } from './job-lifecycle.js';
import type { CoreState } from './state.js';

export function recover(s: CoreState): void {
  const store = s.deps.store;
  s.nextSeq = store.maxSeq() + 1;
  for (const job of store.loadActiveJobs()) {
    s.jobs.set(job.jobId, job);
    if (job.idempotencyKey !== null) s.keys.set(job.idempotencyKey, job);
    s.activeCount++;
    switch (job.state) {
      case 'QUEUED':
        s.ready.push(job);
        break;
      case 'RETRY_WAIT':
        job.retryAtMs ??= s.nowMs; // never written by the core; tolerate it
        s.retries.push({ atMs: job.retryAtMs, jobId: job.jobId, attemptId: null });
        break;
      case 'RUNNING':
        recoverRunning(s, job);
        break;
      case 'COMPLETED':
      case 'FAILED':
      case 'CANCELLED':
        throw new Error(`store returned terminal job ${job.jobId} as active`);
    }
  }
}

function recoverRunning(s: CoreState, job: JobRecord): void {
  const workerId = job.workerId ?? 'unknown';
  clearLease(job);
  if (job.attempts >= job.maxAttempts) {
    job.error = `coordinator restarted during final attempt; outcome unknown (worker ${workerId}; all ${job.maxAttempts} attempts used)`;
    finishJob(s, job, 'FAILED');
    s.emit({ type: 'job.recovered', jobId: job.jobId, from: 'RUNNING', to: 'FAILED' });
    return;
  }
  job.error = `coordinator restarted during attempt ${job.attempts}; outcome unknown (worker ${workerId})`;
  transition(job, 'QUEUED', s.nowMs, { recovery: true });
  s.save(job);
  s.ready.push(job);
  s.emit({ type: 'job.recovered', jobId: job.jobId, from: 'RUNNING', to: 'QUEUED' });
}
