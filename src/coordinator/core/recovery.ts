/**
 * Restart recovery: rebuilds the core's memory from the store's active jobs.
 *
 * - QUEUED jobs are queued again in their original order and priority.
 * - RETRY_WAIT jobs keep their absolute eligibility time.
 * - SCHEDULED jobs keep their due time; overdue ones become QUEUED with the
 *   first input, in due-time order (delayed-jobs.ts).
 * - RUNNING jobs may still run on their workers: each lease is kept for its
 *   worker for a heartbeat timeout (it counts toward its queue's and group's
 *   concurrency meanwhile) with a fresh deadline (the stored one is a dead
 *   process's clock). A worker that registers again listing the attempt
 *   goes on with it; a result from it counts. An attempt still kept after
 *   that was interrupted (interruption.ts): the attempt counts, and is
 *   recorded in the history as INTERRUPTED. With attempts left the job is
 *   requeued; otherwise it fails with "coordinator restarted during final
 *   attempt; outcome unknown". With a shared store (PostgreSQL) a new term
 *   is a new leader, and the text names the epochs instead: "leader changed
 *   (epoch 1 → 2) during attempt 1".
 * - WAITING jobs wait again for their parents that are still active; the
 *   ended parents' rows (`parentJobs`) give their dependents' handlers the
 *   results. A job waiting in `ctx.waitFor` waits again, or goes on with the
 *   outcome of the job it waited for if that one ended (steps.ts); for a
 *   job of another shard it waits again (its `parentEnded` will come).
 * - Every active job gets its recorded steps back (`activeSteps`).
 * - SCHEDULED jobs beyond the window the store was asked for stay there,
 *   counted (scheduled-window.ts).
 * - The children of active jobs (`childLinks`) fill the child index, so a
 *   handler's ENQUEUE_CHILD after the restart finds the child made before.
 * - A shard's links with the others (cross-shard.ts): the children of other
 *   shards that wait for its jobs (`remoteDependents`), known before any
 *   job moves (one that recovery ends tells them); a parent of another
 *   shard is ended when its end was heard (`remoteParents`), open otherwise
 *   (its `watch` was committed with the child: its `parentEnded` will come).
 * Terminal jobs stay in the store only.
 */
import type { JobRecord, RecoveredState, RemoteParentRecord } from '../../store/store.js';
import { otherShardOf } from './shard-messages.js';
import {
  finishedParentOf,
  parentAllows,
  parentFailureError,
  type FinishedParent,
} from './dependencies.js';
import {
  fromRecord,
  isRunning,
  type CoreJob,
  type HeldSignal,
  type JobStep,
  type RunningJob,
} from './job.js';
import { renewDeadline } from './lease.js';
import { pendingWaitOf } from './step-records.js';
import { recoverWait } from './steps.js';
import { holdScheduled } from './delayed-jobs.js';
import { watchExpiry } from './expiry.js';
import { putTrigger, recoverAwaiting } from './signals.js';
import { recoverWindow } from './scheduled-window.js';
import { cancelJob, releaseWaiting } from './job-lifecycle.js';
import { isTerminalState } from './job-state.js';
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
  const stepsByJob = new Map<string, JobStep[]>();
  for (const step of [...(stored.activeSteps ?? [])].sort((a, b) => a.index - b.index)) {
    const list = stepsByJob.get(step.jobId) ?? [];
    list.push({ name: step.name, result: step.result, atMs: step.atMs });
    stepsByJob.set(step.jobId, list);
  }
  for (const trigger of stored.triggers ?? []) putTrigger(s, trigger);
  const signalsByJob = new Map<string, HeldSignal[]>();
  for (const signal of stored.activeSignals ?? []) {
    if (signal.consumed) continue;
    const list = signalsByJob.get(signal.jobId) ?? [];
    list.push({
      seq: signal.seq,
      name: signal.name,
      payloadJson: signal.payloadJson,
      atMs: signal.atMs,
    });
    signalsByJob.set(signal.jobId, list);
  }
  const jobs = stored.activeJobs.map((row) => {
    const job = fromRecord(row, attemptsByJob.get(row.jobId) ?? []);
    job.steps = stepsByJob.get(row.jobId) ?? [];
    if (job.state === 'WAITING') job.waitingFor = pendingWaitOf(job.steps);
    const signals = signalsByJob.get(row.jobId);
    if (signals !== undefined) job.signals = signals.sort((a, b) => a.seq - b.seq);
    s.jobs.adopt(job);
    s.dedup.took(job);
    watchExpiry(s, job);
    return job;
  });
  // Throttle windows of ended jobs that are still open, and the holds handlers set.
  for (const row of stored.throttledJobs ?? []) s.dedup.ended(row, s.nowMs);
  for (const hold of stored.groupHolds ?? []) {
    s.queues.holdGroup(hold.queue, hold.groupKey, hold.untilMs, s.nowMs);
  }
  // Ended ones are deleted by the first clean-up.
  if ((stored.groupHolds ?? []).length > 0) s.holdsMayBeStored = true;
  // The children of the active jobs: the dedupe of their handlers' ENQUEUE_CHILD.
  for (const link of stored.childLinks ?? []) s.children.add(link);
  // Children of other shards waiting for our jobs: before any job moves.
  for (const record of stored.remoteDependents ?? []) s.links.addDependent(record);
  // The graph is whole before any job moves: a job that recovery fails
  // settles its dependents like any other end.
  const parentRows = new Map((stored.parentJobs ?? []).map((row) => [row.jobId, row]));
  const remoteParents = new Map(
    (stored.remoteParents ?? []).map((record) => [record.parentId, record]),
  );
  const blocked = new Map<string, FinishedParent>();
  for (const job of jobs) {
    const blocker = attachRecovered(s, job, parentRows, remoteParents);
    if (blocker !== undefined) blocked.set(job.jobId, blocker);
  }
  const kept = new Map<string, string[]>();
  for (const job of jobs) {
    if (isTerminalState(job.state)) continue; // a cascade of this recovery ended it
    const blocker = blocked.get(job.jobId);
    if (blocker !== undefined) recoverBlocked(s, job, blocker);
    else if (job.waitingFor !== null) recoverWait(s, job, parentRows);
    else if (job.state === 'WAITING' && recoverAwaiting(s, job)) continue;
    else recoverJob(s, job, kept);
  }
  keepRecovered(s, kept, interruption);
  // The later delayed jobs stayed in the store: where memory's window ends.
  recoverWindow(s, stored);
}

/**
 * Puts a recovered job's parents into the graph: the active ones are open,
 * the others ended (their rows came with the recovery). A parent found in
 * neither was deleted behind the store's back; it counts as ended.
 */
function attachRecovered(
  s: CoreState,
  job: CoreJob,
  parentRows: ReadonlyMap<string, JobRecord>,
  remoteParents: ReadonlyMap<string, RemoteParentRecord>,
): FinishedParent | undefined {
  if (job.dependsOn === null) return undefined;
  const open: string[] = [];
  const finished: FinishedParent[] = [];
  for (const parentId of job.dependsOn) {
    if (otherShardOf(s, parentId) !== null) {
      const ended = remoteParents.get(parentId);
      if (ended === undefined) open.push(parentId);
      else {
        const { taskType, state, result, resultFormat } = ended;
        finished.push({ jobId: parentId, taskType, state, result, resultFormat });
      }
      continue;
    }
    const row = parentRows.get(parentId);
    if (s.jobs.active(parentId) !== undefined) open.push(parentId);
    else if (row !== undefined) finished.push(finishedParentOf(row));
  }
  // Only a WAITING job can still be held back by its parents.
  if (job.state !== 'WAITING')
    return s.graph.attach(
      job,
      [],
      finished.filter((p) => parentAllows(p, job)),
    );
  return s.graph.attach(job, open, finished);
}

/** A WAITING job whose parent had failed (written before this build's atomic cascade, say). */
function recoverBlocked(s: CoreState, job: CoreJob, blocker: FinishedParent): void {
  job.error = parentFailureError(blocker);
  cancelJob(s, job);
  s.emit({ type: 'job.recovered', jobId: job.jobId, from: 'WAITING', to: 'CANCELLED' });
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

function recoverJob(s: CoreState, job: CoreJob, kept: Map<string, string[]>): void {
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
      recoverRunning(s, job, kept);
      return;
    case 'SCHEDULED':
      // Overdue ones (their time passed while no coordinator ran) are
      // promoted by the first input, in due-time order.
      if (job.runAtMs === null)
        throw new Error(`store returned SCHEDULED job ${job.jobId} without runAtMs`);
      holdScheduled(s, job);
      return;
    case 'WAITING':
      // Its parents are in the graph already; one whose parents all ended
      // (none is written so, but tolerate it) is released now.
      if (s.graph.openParents(job.jobId) === 0) releaseWaiting(s, job);
      return;
    case 'COMPLETED':
    case 'FAILED':
    case 'CANCELLED':
      throw new Error(`store returned terminal job ${job.jobId} as active`);
  }
}

/**
 * An attempt the restart found running: its lease is kept for its worker
 * (kept-leases.ts), collected by {@link keepRecovered}; it counts toward its
 * queue's concurrency again and gets a fresh deadline.
 */
function recoverRunning(s: CoreState, job: RunningJob, kept: Map<string, string[]>): void {
  // Its lease goes on in this term (not a new start: no rate window counts it).
  s.queues.noteStart(job.queue, groupOf(job), s.nowMs, false);
  const deadlineAtMs = renewDeadline(job, s.nowMs);
  s.deadlines.push({ atMs: deadlineAtMs, jobId: job.jobId, attemptId: job.lease.attemptId });
  s.jobs.save(job);
  const list = kept.get(job.lease.workerId) ?? [];
  list.push(job.jobId);
  kept.set(job.lease.workerId, list);
}

/**
 * Keeps the recovered running attempts for their workers for a heartbeat
 * timeout: a worker that registers again listing one (`heldAttempts`) goes
 * on with it, a result from the worker counts, and whatever is still kept
 * then ends as interrupted (interruption.ts).
 */
function keepRecovered(s: CoreState, kept: Map<string, string[]>, interruption: string): void {
  const untilMs = s.nowMs + s.config.heartbeatTimeoutMs;
  for (const [workerId, jobIds] of kept) {
    s.kept.keep(workerId, jobIds, s.nowMs, untilMs, { kind: 'interrupted', interruption });
    s.emit({
      type: 'worker.leasesKept',
      workerId,
      jobs: jobIds.length,
      untilMs,
      reason: interruption,
    });
  }
}
