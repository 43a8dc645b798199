/**
 * Losing a worker session: its attempts are retried or failed (or, right
 * after a stall of our own, kept for the worker's next session), and its
 * connection is closed. Used by the messages, sweeps and registrations that
 * end a session.
 */
import { isRunning, type RunningJob } from './job.js';
import { failAttempt, requeueDue, schedule } from './job-lifecycle.js';
import type { CoreState } from './state.js';
import type { WorkerLossCause } from './types.js';
import type { WorkerSession } from './worker-registry.js';

/**
 * Ends a session: every attempt it held is retried or failed with
 * `worker <id> lost (<reason>)`, and its connection is closed. Attempts that
 * `keep` selects are not: they stay leased to the worker, in no session, and
 * are returned for the caller to place (kept, or taken back at once).
 */
export function loseWorker(
  s: CoreState,
  session: WorkerSession,
  cause: WorkerLossCause,
  lostBecause: string,
  keep: (job: RunningJob) => boolean = () => false,
): string[] {
  const runningJobs = session.running.size;
  const attemptCause = session.draining ? 'released' : 'worker_lost';
  const reason = session.draining ? `${lostBecause} while draining` : lostBecause;
  const kept: string[] = [];
  for (const jobId of [...session.running]) {
    const job = s.jobs.active(jobId);
    if (job === undefined || !isRunning(job) || job.lease.workerId !== session.workerId) {
      throw new Error(`worker ${session.workerId} holds job ${jobId} that is not running there`);
    }
    if (keep(job)) {
      s.workers.release(session, jobId);
      kept.push(jobId);
      continue;
    }
    failAttempt(s, job, attemptCause, `worker ${session.workerId} lost (${reason})`);
  }
  s.workers.remove(session);
  s.closeWorker(session.connId, `worker ${session.workerId} lost (${reason})`);
  s.emit({
    type: 'worker.lost',
    workerId: session.workerId,
    cause: session.draining ? 'drained' : cause,
    reason,
    runningJobs,
  });
  requeueDue(s); // its attempts are due at once
  schedule(s);
  return kept;
}

/**
 * Whether a session that ends now keeps its leases for the worker: only
 * right after a stall of our own (the worker may simply have judged us gone),
 * and not for a worker that was draining (its leaving was planned).
 */
export function keepsLeases(s: CoreState, session: WorkerSession): boolean {
  return s.recentlyStalled && !session.draining && session.running.size > 0;
}

/** Ends a session but keeps its leases for the worker's next session, for a heartbeat timeout. */
export function loseKeeping(
  s: CoreState,
  session: WorkerSession,
  cause: WorkerLossCause,
  reason: string,
): void {
  const jobIds = loseWorker(s, session, cause, reason, () => true);
  const untilMs = s.nowMs + s.config.heartbeatTimeoutMs;
  const { workerId } = session;
  const error = `worker ${workerId} lost (${reason})`;
  s.kept.keep(workerId, jobIds, s.nowMs, untilMs, { kind: 'lost', error });
  s.emit({ type: 'worker.leasesKept', workerId, jobs: jobIds.length, untilMs, reason });
}
