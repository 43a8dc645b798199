/**
 * Several batches given while a transaction ran, merged into the arguments
 * of one `dtp.commit_batch` call (schema.ts): applying the merge must leave
 * the same rows as applying the batches one after another.
 */
import {
  StoreError,
  type AttemptRecord,
  type EventRecord,
  type JobRecord,
  type OutboxRow,
  type QueueSettingsRecord,
  type RemoteDependentRecord,
  type RemoteParentRecord,
  type ScheduleRecord,
  type SignalRecord,
  type StepRecord,
  type StepWaitRecord,
  type TriggerRecord,
  type WriteBatch,
} from '../store.js';

/** A group hold as commit_batch takes it: a null `untilMs` deletes it. */
export interface MergedGroupHold {
  queue: string;
  groupKey: string | null;
  untilMs: number | null;
}

export interface MergedBatches {
  inserts: Readonly<JobRecord>[];
  updates: Readonly<JobRecord>[];
  attempts: Readonly<AttemptRecord>[];
  schedules: Readonly<ScheduleRecord>[];
  deletedSchedules: string[];
  queues: Readonly<QueueSettingsRecord>[];
  clearedSteps: string[];
  steps: Readonly<StepRecord>[];
  stepWaits: Readonly<StepWaitRecord>[];
  groupHolds: MergedGroupHold[];
  groupHoldsEndedBeforeMs: number | null;
  signals: Readonly<SignalRecord>[];
  events: Readonly<EventRecord>[];
  triggers: Readonly<TriggerRecord>[];
  deletedTriggers: string[];
  outbox: Readonly<OutboxRow>[];
  outboxDone: number[];
  remoteDependents: Readonly<RemoteDependentRecord>[];
  remoteDependentsDone: string[];
  remoteParents: Readonly<RemoteParentRecord>[];
}

/**
 * Several batches as one write: the latest version of each job (an insert
 * stays an insert), attempt and signal, in first-seen order. Group holds:
 * the last word on each (a hold, or null once a later batch's bound ended
 * it) and the latest bound, which commit_batch applies to the stored holds
 * before writing these (schema.ts, holdsSql). Schedules and triggers: the
 * last word on each, a row or a deletion. Events are each written once.
 * Outbox messages, sent and applied, and remote dependents: all of them, in
 * order (commit_batch inserts the dependents before it deletes those of
 * ended parents; shardLinksSql in schema.ts); remote parents: the latest
 * row of each.
 */
export function mergeBatches(batches: readonly WriteBatch[]): MergedBatches {
  const jobs = new Map<string, { job: Readonly<JobRecord>; isNew: boolean }>();
  const attempts = new Map<string, Readonly<AttemptRecord>>();
  /** The last word on each schedule: its row, or null once deleted. */
  const schedules = new Map<string, Readonly<ScheduleRecord> | null>();
  const queues = new Map<string, Readonly<QueueSettingsRecord>>();
  const clearedSteps = new Set<string>();
  const steps = new Map<string, Readonly<StepRecord>>();
  const stepWaits: Readonly<StepWaitRecord>[] = [];
  const holds = new Map<string, MergedGroupHold>();
  let endedBeforeMs: number | null = null;
  const signals = mergeSignals(batches);
  for (const batch of batches) {
    for (const { queue, groupKey, untilMs } of batch.groupHolds ?? []) {
      holds.set(`${queue}\u0000${groupKey ?? ''}`, { queue, groupKey, untilMs });
    }
    const bound = batch.groupHoldsEndedBeforeMs;
    if (bound !== undefined) {
      endedBeforeMs = Math.max(endedBeforeMs ?? bound, bound);
      for (const hold of holds.values()) {
        if (hold.untilMs !== null && hold.untilMs < bound) hold.untilMs = null;
      }
    }
    // A later batch's clearing drops the steps earlier batches of the group wrote.
    for (const jobId of batch.clearedSteps ?? []) {
      clearedSteps.add(jobId);
      for (const [key, step] of steps) if (step.jobId === jobId) steps.delete(key);
    }
    for (const step of batch.steps ?? []) steps.set(`${step.jobId}\u0000${step.index}`, step);
    stepWaits.push(...(batch.stepWaits ?? []));
    for (const q of batch.queues ?? []) queues.set(q.name, q);
    for (const entry of batch.jobs) {
      const seen = jobs.get(entry.job.jobId);
      if (seen !== undefined && entry.isNew) {
        throw new StoreError(`job ${entry.job.jobId} is inserted twice`);
      }
      jobs.set(entry.job.jobId, { job: entry.job, isNew: seen?.isNew ?? entry.isNew });
    }
    for (const attempt of batch.attempts) {
      attempts.set(`${attempt.jobId}\u0000${attempt.attemptNumber}`, attempt);
    }
    for (const schedule of batch.schedules ?? []) schedules.set(schedule.name, schedule);
    for (const name of batch.deletedSchedules ?? []) schedules.set(name, null);
  }
  const inserts: Readonly<JobRecord>[] = [];
  const updates: Readonly<JobRecord>[] = [];
  for (const { job, isNew } of jobs.values()) (isNew ? inserts : updates).push(job);
  const written = lastWords(schedules);
  return {
    inserts,
    updates,
    attempts: [...attempts.values()],
    schedules: written.rows,
    deletedSchedules: written.deleted,
    queues: [...queues.values()],
    clearedSteps: [...clearedSteps],
    steps: [...steps.values()],
    stepWaits,
    groupHolds: [...holds.values()],
    groupHoldsEndedBeforeMs: endedBeforeMs,
    ...signals,
    ...mergeShardLinks(batches),
  };
}

/** The outbox messages and remote links of the batches merged. */
function mergeShardLinks(
  batches: readonly WriteBatch[],
): Pick<
  MergedBatches,
  'outbox' | 'outboxDone' | 'remoteDependents' | 'remoteDependentsDone' | 'remoteParents'
> {
  const remoteParents = new Map<string, Readonly<RemoteParentRecord>>();
  const merged: ReturnType<typeof mergeShardLinks> = {
    outbox: [],
    outboxDone: [],
    remoteDependents: [],
    remoteDependentsDone: [],
    remoteParents: [],
  };
  for (const batch of batches) {
    merged.outbox.push(...(batch.outbox ?? []));
    merged.outboxDone.push(...(batch.outboxDone ?? []));
    merged.remoteDependents.push(...(batch.remoteDependents ?? []));
    merged.remoteDependentsDone.push(...(batch.remoteDependentsDone ?? []));
    // One row each: an upsert may not touch a row twice in one statement.
    for (const parent of batch.remoteParents ?? []) remoteParents.set(parent.parentId, parent);
  }
  merged.remoteParents = [...remoteParents.values()];
  return merged;
}

/** The signals, events and triggers of the batches merged. */
function mergeSignals(
  batches: readonly WriteBatch[],
): Pick<MergedBatches, 'signals' | 'events' | 'triggers' | 'deletedTriggers'> {
  const signals = new Map<string, Readonly<SignalRecord>>();
  const events = new Map<string, Readonly<EventRecord>>();
  /** The last word on each trigger: its row, or null once deleted. */
  const triggers = new Map<string, Readonly<TriggerRecord> | null>();
  for (const batch of batches) {
    for (const signal of batch.signals ?? []) {
      signals.set(`${signal.jobId}\u0000${signal.seq}`, signal);
    }
    for (const event of batch.events ?? []) {
      if (events.has(event.eventId)) {
        throw new StoreError(`event ${event.eventId} is written twice`);
      }
      events.set(event.eventId, event);
    }
    for (const trigger of batch.triggers ?? []) triggers.set(trigger.name, trigger);
    for (const name of batch.deletedTriggers ?? []) triggers.set(name, null);
  }
  const written = lastWords(triggers);
  return {
    signals: [...signals.values()],
    events: [...events.values()],
    triggers: written.rows,
    deletedTriggers: written.deleted,
  };
}

/** Rows keyed by name, split into those written and the names deleted (null). */
function lastWords<T>(byName: ReadonlyMap<string, T | null>): { rows: T[]; deleted: string[] } {
  const rows: T[] = [];
  const deleted: string[] = [];
  for (const [name, row] of byName) {
    if (row === null) deleted.push(name);
    else rows.push(row);
  }
  return { rows, deleted };
}
