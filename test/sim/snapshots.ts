/**
 * Job snapshots as clients see them: collecting every snapshot an input's
 * replies carry, and the rules each one must satisfy on its own.
 */
import type { Effect } from '../../src/coordinator/core/types.js';
import { JOB_STATES, type JobSnapshot, type JobState } from '../../src/protocol/messages.js';
import { MAX_FREE_REQUEUES } from '../../src/protocol/limits.js';
import { EXPIRED_PREFIX } from '../../src/coordinator/core/job.js';
import { isSuspensionStep } from '../../src/coordinator/core/step-names.js';

export interface SnapshotSeen {
  jobId: string;
  state: JobState;
  attempts: number;
  snapshot: JobSnapshot;
  /** Which reply carried it, for messages. */
  where: string;
}

/** Every job snapshot in the replies among `effects`, in effect order. */
export function collectSnapshots(effects: readonly Effect[]): SnapshotSeen[] {
  const seen: SnapshotSeen[] = [];
  const add = (snapshot: JobSnapshot, where: string): void => {
    seen.push({
      jobId: snapshot.jobId,
      state: snapshot.state,
      attempts: snapshot.attempts,
      snapshot,
      where,
    });
  };
  for (const effect of effects) {
    if (effect.kind !== 'reply') continue;
    const msg = effect.msg;
    const where = `${msg.type} to ${effect.connId}/${effect.requestId}`;
    switch (msg.type) {
      case 'JOB_SUBMITTED':
        if (msg.job !== null) add(msg.job, where);
        break;
      case 'JOB_STATUS':
      case 'JOB_CANCEL':
        add(msg.job, where);
        break;
      case 'JOB_LIST':
        for (const job of msg.jobs) add(job, where);
        break;
      case 'SUBMIT_REJECTED':
      case 'SHARD_LIST':
      case 'JOBS_SUBMITTED':
      case 'WORKER_LIST':
      case 'ERROR':
      case 'AUTH_OK':
      case 'JOBS_PURGED':
      case 'JOBS_RERUN':
      case 'QUEUE_LIST':
      case 'QUEUE_INFO':
      case 'FLOW_SUBMITTED':
      case 'SUBSCRIBED':
      case 'JOB_EVENT':
      case 'EVENTS_MISSED':
      case 'SCHEDULE_INFO':
      case 'SCHEDULE_LIST':
      case 'SCHEDULE_DELETED':
      case 'JOB_SIGNALLED':
      case 'EVENT_PUBLISHED':
      case 'TRIGGER_INFO':
      case 'TRIGGER_LIST':
      case 'TRIGGER_DELETED':
        break;
    }
  }
  return seen;
}

/**
 * What is wrong with a snapshot taken on its own, or null. `rateLimited`:
 * its attempts that ended rate limited, as the model counts them (a
 * snapshot does not say).
 */
export function snapshotProblem(job: JobSnapshot, rateLimited = 0): string | null {
  if (!(JOB_STATES as readonly string[]).includes(job.state))
    return `state ${job.state} is not one of the six`;
  if ((job.state === 'RUNNING') !== (job.workerId !== null)) {
    return `state ${job.state} with workerId ${job.workerId}`;
  }
  if ((job.state === 'COMPLETED') !== (job.result !== null)) {
    return `state ${job.state} with result ${job.result}`;
  }
  // Attempts that ended in a sleep or a wait (listed as steps) do not count,
  // nor those requeued by their worker for free.
  const suspended = (job.steps ?? []).filter((step) => isSuspensionStep(step.name)).length;
  const requeues = job.requeues ?? 0;
  const used = job.attempts - suspended - requeues - rateLimited;
  if (requeues > MAX_FREE_REQUEUES) return `${requeues} free requeues`;
  if (!Number.isInteger(job.attempts) || used < 0 || used > job.maxAttempts) {
    return `attempts ${job.attempts} (${suspended} suspended, ${requeues} requeued) of maxAttempts ${job.maxAttempts}`;
  }
  if (job.state === 'QUEUED' && used === job.maxAttempts) {
    return `QUEUED with every attempt (${job.attempts}) used`;
  }
  const expired =
    job.state === 'CANCELLED' &&
    job.expiresAtMillis != null &&
    (job.error ?? '').startsWith(EXPIRED_PREFIX);
  if ((job.expired === true) !== expired) {
    return `expired ${job.expired} in state ${job.state}, error ${JSON.stringify(job.error)}, expiry ${job.expiresAtMillis}`;
  }
  if ((job.dedupKey == null) !== (job.dedupMode == null)) {
    return `dedupKey ${job.dedupKey} with dedupMode ${job.dedupMode}`;
  }
  if (job.updatedAtMillis < job.createdAtMillis) {
    return `updated (${job.updatedAtMillis}) before created (${job.createdAtMillis})`;
  }
  return null;
}
