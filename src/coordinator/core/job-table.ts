/**
 * Every job the core holds, and the writes it owes the store.
 *
 * Memory holds the non-terminal jobs (`active`) and, briefly, jobs that just
 * became terminal but whose terminal row is not committed yet (`retiring`):
 * until then a read of the store would not see their end, so the core keeps
 * answering for them itself. Everything else is history, found in the store.
 *
 * Writes: a changed job or a finished attempt is marked dirty; `takeBatch()`
 * turns everything dirty into one {@link WriteBatch} and remembers those rows
 * as in flight until `committed()` says the store has them. The dirty and in
 * flight rows are the overlay a listing merges over what the store returns.
 *
 * Idempotency keys of active and retiring jobs are indexed here; older keys
 * are looked up in the store (see submission.ts).
 *
 * The last jobs whose end was committed stay a little longer, read-only
 * (`recent`, at most RECENT_JOBS of them and RECENT_BYTES of payloads and
 * results): a client that waits for a job right after it ended (the common
 * "submit, then wait" of a fast job) is answered from memory instead of a
 * read of the store. A purge forgets them all (a purged job must be unknown).
 */
import type {
  AttemptRecord,
  EventRecord,
  GroupHoldRecord,
  JobRecord,
  OutboxRow,
  QueueSettingsRecord,
  RemoteDependentRecord,
  RemoteParentRecord,
  ScheduleRecord,
  StepRecord,
  SignalRecord,
  StepWaitRecord,
  TriggerRecord,
  WriteBatch,
} from '../../store/store.js';
import { isTerminalState } from '../../protocol/messages.js';
import { toRecord, type CoreJob, type JobStep } from './job.js';

/** Most ended jobs kept for a late WAIT_JOB. */
export const RECENT_JOBS = 4_096;
/** Most characters of payloads and results those jobs hold together. */
export const RECENT_CHARS = 8 * 1024 * 1024;

interface InFlight {
  readonly record: JobRecord;
  readonly batchId: number;
}

export class JobTable {
  readonly #active = new Map<string, CoreJob>();
  readonly #retiring = new Map<string, CoreJob>();
  /** Ended jobs whose end is committed, oldest first (see the module comment). */
  readonly #recent = new Map<string, CoreJob>();
  #recentChars = 0;
  readonly #keys = new Map<string, CoreJob>();
  /** Keys held submissions asked the store about, with how many such lookups are out (see pinKey). */
  readonly #pinned = new Map<string, number>();
  #dirty = new Map<string, { job: CoreJob; isNew: boolean }>();
  #dirtyAttempts: AttemptRecord[] = [];
  #dirtyQueues = new Map<string, QueueSettingsRecord>();
  /** Steps written since the last batch, by `jobId index` (the newest version of each). */
  #dirtySteps = new Map<string, StepRecord>();
  #dirtyStepWaits: StepWaitRecord[] = [];
  /** Jobs whose stored steps are dropped (a rerun), before this batch's steps are written. */
  #clearedSteps = new Set<string>();
  /** Group holds set since the last batch, by queue and group. */
  #dirtyGroupHolds = new Map<string, GroupHoldRecord>();
  /** Signals written since the last batch, by `jobId seq` (the newest version of each). */
  #dirtySignals = new Map<string, SignalRecord>();
  #dirtyEvents: EventRecord[] = [];
  /** Triggers written (their row) or deleted (null) since the last batch. */
  #dirtyTriggers = new Map<string, TriggerRecord | null>();
  /** Stored group holds that ended before this time are to be deleted; null = none. */
  #groupHoldsEndedBeforeMs: number | null = null;
  /** Schedules written (their row) or deleted (null) since the last batch. */
  #dirtySchedules = new Map<string, ScheduleRecord | null>();
  /** Outbox messages sent, and ids of those applied, since the last batch (cross-shard.ts). */
  #outbox: OutboxRow[] = [];
  #outboxDone: number[] = [];
  /** Remote dependents added, and parents whose remote dependents were told, since the last batch. */
  #remoteDependents: RemoteDependentRecord[] = [];
  #remoteDependentsDone: string[] = [];
  /** Ended remote parents heard of since the last batch, by id. */
  #remoteParents = new Map<string, RemoteParentRecord>();
  readonly #inFlight = new Map<string, InFlight>();
  /** Job ids per batch id: what leaves `retiring` and `inFlight` when it commits. */
  readonly #retiringByBatch = new Map<number, string[]>();
  readonly #inFlightByBatch = new Map<number, string[]>();
  #nextBatchId = 1;
  #nextSeq: number;

  /** Told of every job inserted or saved (job events for subscribers). */
  readonly #onWrite: (job: CoreJob) => void;

  /** Told of every job that leaves memory (its terminal row committed). */
  readonly #onForget: (jobId: string) => void;

  constructor(
    nextSeq: number,
    onWrite: (job: CoreJob) => void = () => undefined,
    onForget: (jobId: string) => void = () => undefined,
  ) {
    this.#nextSeq = nextSeq;
    this.#onWrite = onWrite;
    this.#onForget = onForget;
  }

  /** Non-terminal jobs (admission control's count). */
  get activeCount(): number {
    return this.#active.size;
  }

  /** The seq the next new job gets (and takes it). */
  takeSeq(): number {
    return this.#nextSeq++;
  }

  /** Non-terminal jobs, in no particular order. */
  activeJobs(): IterableIterator<CoreJob> {
    return this.#active.values();
  }

  /** A non-terminal job. */
  active(jobId: string): CoreJob | undefined {
    return this.#active.get(jobId);
  }

  /** A job the core still answers for: active, or terminal with its end not yet committed. */
  get(jobId: string): CoreJob | undefined {
    return this.#active.get(jobId) ?? this.#retiring.get(jobId);
  }

  /** A job that ended and left memory a moment ago (read-only; see the module comment). */
  recent(jobId: string): CoreJob | undefined {
    return this.#recent.get(jobId);
  }

  /** Forgets the recently ended jobs (a purge may have deleted them). */
  forgetRecent(): void {
    this.#recent.clear();
    this.#recentChars = 0;
  }

  /** The active or retiring job holding an idempotency key (or one pinned, see pinKey). */
  byKey(key: string): CoreJob | undefined {
    return this.#keys.get(key);
  }

  /**
   * A submission is held while the store is asked about `key`. A job made
   * with the key meanwhile (by another submission) stays known to
   * {@link byKey} until {@link unpinKey}, even once it ended and left
   * memory: the store's answer may have been read before it existed, and
   * must not let a second job take the key.
   */
  pinKey(key: string): void {
    this.#pinned.set(key, (this.#pinned.get(key) ?? 0) + 1);
  }

  /** The held submission that pinned `key` was settled. */
  unpinKey(key: string): void {
    const left = (this.#pinned.get(key) ?? 0) - 1;
    if (left > 0) {
      this.#pinned.set(key, left);
      return;
    }
    this.#pinned.delete(key);
    const job = this.#keys.get(key);
    if (job !== undefined && !this.#active.has(job.jobId) && !this.#retiring.has(job.jobId)) {
      this.#keys.delete(key);
    }
  }

  /** A new job: active, and written with the next batch. */
  insert(job: CoreJob): void {
    this.#addActive(job);
    this.#dirty.set(job.jobId, { job, isNew: true });
    this.#onWrite(job);
  }

  /**
   * A new delayed job beyond the window (scheduled-window.ts): written with
   * the next batch but not active; memory answers for it only until that
   * batch commits, as for a retiring job.
   */
  insertFar(job: CoreJob): void {
    this.#retiring.set(job.jobId, job);
    if (job.idempotencyKey !== null) this.#keys.set(job.idempotencyKey, job);
    listFor(this.#retiringByBatch, this.#nextBatchId).push(job.jobId);
    this.#dirty.set(job.jobId, { job, isNew: true });
    this.#onWrite(job);
  }

  /**
   * A far job not committed yet becomes active after all (a request acts on
   * it); true if it was one. Terminal retiring jobs are left alone.
   */
  unpark(job: CoreJob): boolean {
    if (this.#retiring.get(job.jobId) !== job || job.state !== 'SCHEDULED') return false;
    this.#retiring.delete(job.jobId);
    this.#active.set(job.jobId, job);
    for (const jobIds of this.#retiringByBatch.values()) {
      const at = jobIds.indexOf(job.jobId);
      if (at >= 0) jobIds.splice(at, 1);
    }
    return true;
  }

  /** A job found in the store at recovery: active, nothing to write. */
  adopt(job: CoreJob): void {
    this.#addActive(job);
  }

  /** The job changed: its new version goes out with the next batch. */
  save(job: CoreJob): void {
    if (!this.#dirty.has(job.jobId)) this.#dirty.set(job.jobId, { job, isNew: false });
    this.#onWrite(job);
  }

  /** An attempt ended: its row goes out with the next batch. */
  saveAttempt(attempt: AttemptRecord): void {
    this.#dirtyAttempts.push(attempt);
  }

  /** A step was recorded or completed: its row goes out with the next batch. */
  saveStep(jobId: string, index: number, step: Readonly<JobStep>): void {
    const { name, result, atMs } = step;
    this.#dirtySteps.set(`${jobId} ${index}`, { jobId, index, name, result, atMs });
  }

  /** A job began to wait for another (`ctx.waitFor`): the link goes out with the next batch. */
  saveStepWait(jobId: string, targetId: string): void {
    this.#dirtyStepWaits.push({ jobId, targetId });
  }

  /** Every stored step of the job is dropped with the next batch (steps saved later stay). */
  clearSteps(jobId: string): void {
    this.#clearedSteps.add(jobId);
    for (const [key, step] of this.#dirtySteps) {
      if (step.jobId === jobId) this.#dirtySteps.delete(key);
    }
  }

  /** A queue's settings changed: the row goes out with the next batch. */
  saveQueue(record: QueueSettingsRecord): void {
    this.#dirtyQueues.set(record.name, record);
  }

  /** A handler held a group back: the hold goes out with the next batch. */
  saveGroupHold(hold: GroupHoldRecord): void {
    this.#dirtyGroupHolds.set(`${hold.queue}\u0000${hold.groupKey ?? ''}`, { ...hold });
  }

  /** A signal was sent or taken: its row goes out with the next batch. */
  saveSignal(signal: SignalRecord): void {
    this.#dirtySignals.set(`${signal.jobId} ${signal.seq}`, { ...signal });
  }

  /** An event was published: its row goes out with the next batch. */
  saveEvent(event: EventRecord): void {
    this.#dirtyEvents.push(event);
  }

  /** A trigger was set: its row goes out with the next batch. */
  saveTrigger(trigger: TriggerRecord): void {
    this.#dirtyTriggers.set(trigger.name, { ...trigger });
  }

  /** A trigger was deleted: that goes out with the next batch. */
  deleteTrigger(name: string): void {
    this.#dirtyTriggers.set(name, null);
  }

  /** The stored group holds that ended before `atMs` are deleted with the next batch. */
  deleteGroupHoldsEndedBefore(atMs: number): void {
    this.#groupHoldsEndedBeforeMs = atMs;
  }

  /** A message to another shard goes out with the next batch. */
  sendMessage(row: OutboxRow): void {
    this.#outbox.push(row);
  }

  /** A message to this shard was applied: it is deleted with the next batch. */
  messageApplied(id: number): void {
    this.#outboxDone.push(id);
  }

  /** A child in another shard waits for a job of ours: the row goes out with the next batch. */
  saveRemoteDependent(record: RemoteDependentRecord): void {
    this.#remoteDependents.push({ ...record });
  }

  /** A parent's remote dependents were told of its end: their rows go with the next batch. */
  remoteDependentsTold(parentId: string): void {
    this.#remoteDependentsDone.push(parentId);
  }

  /** A parent in another shard ended: its outcome goes out with the next batch. */
  saveRemoteParent(record: RemoteParentRecord): void {
    this.#remoteParents.set(record.parentId, { ...record });
  }

  /**
   * The id the next batch with writes will have: what this input writes
   * goes out in it (the outbox's bookkeeping of applied messages).
   */
  get pendingBatchId(): number {
    return this.#nextBatchId;
  }

  /** The job became terminal: it stops counting as active and retires once committed. */
  retire(job: CoreJob): void {
    this.#active.delete(job.jobId);
    this.#retiring.set(job.jobId, job);
    listFor(this.#retiringByBatch, this.#nextBatchId).push(job.jobId);
    this.save(job);
  }

  /** A schedule changed: its row goes out with the next batch (with the jobs it made). */
  saveSchedule(schedule: ScheduleRecord): void {
    this.#dirtySchedules.set(schedule.name, { ...schedule });
  }

  /** A schedule was deleted: that goes out with the next batch. */
  deleteSchedule(name: string): void {
    this.#dirtySchedules.set(name, null);
  }

  /** True when something is waiting to be written. */
  get hasWrites(): boolean {
    return (
      this.#dirty.size > 0 ||
      this.#dirtyAttempts.length > 0 ||
      this.#dirtySchedules.size > 0 ||
      this.#dirtyQueues.size > 0 ||
      this.#dirtySteps.size > 0 ||
      this.#dirtyStepWaits.length > 0 ||
      this.#clearedSteps.size > 0 ||
      this.#dirtyGroupHolds.size > 0 ||
      this.#groupHoldsEndedBeforeMs !== null ||
      this.#dirtySignals.size > 0 ||
      this.#dirtyEvents.length > 0 ||
      this.#dirtyTriggers.size > 0 ||
      this.#outbox.length > 0 ||
      this.#outboxDone.length > 0 ||
      this.#remoteDependents.length > 0 ||
      this.#remoteDependentsDone.length > 0 ||
      this.#remoteParents.size > 0
    );
  }

  /** Everything dirty as one batch (null when nothing is), now in flight. */
  takeBatch(): WriteBatch | null {
    if (!this.hasWrites) return null;
    const batchId = this.#nextBatchId++;
    const ids: string[] = [];
    const jobs: { job: JobRecord; isNew: boolean }[] = [];
    for (const { job, isNew } of this.#dirty.values()) {
      const record = toRecord(job);
      jobs.push({ job: record, isNew });
      this.#inFlight.set(job.jobId, { record, batchId });
      ids.push(job.jobId);
    }
    if (ids.length > 0) this.#inFlightByBatch.set(batchId, ids);
    const attempts = this.#dirtyAttempts;
    const schedules: ScheduleRecord[] = [];
    const deletedSchedules: string[] = [];
    for (const [name, row] of this.#dirtySchedules) {
      if (row === null) deletedSchedules.push(name);
      else schedules.push(row);
    }
    const queues = [...this.#dirtyQueues.values()];
    const steps = [...this.#dirtySteps.values()];
    const stepWaits = this.#dirtyStepWaits;
    const clearedSteps = [...this.#clearedSteps];
    if (steps.length > 0) this.#dirtySteps = new Map();
    if (stepWaits.length > 0) this.#dirtyStepWaits = [];
    if (clearedSteps.length > 0) this.#clearedSteps = new Set();
    this.#dirty = new Map();
    this.#dirtyAttempts = [];
    this.#dirtySchedules = new Map();
    if (queues.length > 0) this.#dirtyQueues = new Map();
    const groupHolds = [...this.#dirtyGroupHolds.values()];
    if (groupHolds.length > 0) this.#dirtyGroupHolds = new Map();
    const groupHoldsEndedBeforeMs = this.#groupHoldsEndedBeforeMs;
    this.#groupHoldsEndedBeforeMs = null;
    const signals = [...this.#dirtySignals.values()];
    if (signals.length > 0) this.#dirtySignals = new Map();
    const events = this.#dirtyEvents;
    if (events.length > 0) this.#dirtyEvents = [];
    const triggers: TriggerRecord[] = [];
    const deletedTriggers: string[] = [];
    for (const [name, row] of this.#dirtyTriggers) {
      if (row === null) deletedTriggers.push(name);
      else triggers.push(row);
    }
    if (this.#dirtyTriggers.size > 0) this.#dirtyTriggers = new Map();
    const links = this.#takeShardLinks();
    return {
      batchId,
      jobs,
      attempts,
      ...(schedules.length > 0 && { schedules }),
      ...(deletedSchedules.length > 0 && { deletedSchedules }),
      ...(queues.length > 0 && { queues }),
      ...(clearedSteps.length > 0 && { clearedSteps }),
      ...(steps.length > 0 && { steps }),
      ...(stepWaits.length > 0 && { stepWaits }),
      ...(groupHolds.length > 0 && { groupHolds }),
      ...(groupHoldsEndedBeforeMs !== null && { groupHoldsEndedBeforeMs }),
      ...(signals.length > 0 && { signals }),
      ...(events.length > 0 && { events }),
      ...(triggers.length > 0 && { triggers }),
      ...(deletedTriggers.length > 0 && { deletedTriggers }),
      ...links,
    };
  }

  /** The outbox messages and remote links owed, as the fields of a batch (only those with rows). */
  #takeShardLinks(): Pick<
    WriteBatch,
    'outbox' | 'outboxDone' | 'remoteDependents' | 'remoteDependentsDone' | 'remoteParents'
  > {
    const outbox = this.#outbox;
    const outboxDone = this.#outboxDone;
    const remoteDependents = this.#remoteDependents;
    const remoteDependentsDone = this.#remoteDependentsDone;
    const remoteParents = [...this.#remoteParents.values()];
    if (outbox.length > 0) this.#outbox = [];
    if (outboxDone.length > 0) this.#outboxDone = [];
    if (remoteDependents.length > 0) this.#remoteDependents = [];
    if (remoteDependentsDone.length > 0) this.#remoteDependentsDone = [];
    if (remoteParents.length > 0) this.#remoteParents = new Map();
    return {
      ...(outbox.length > 0 && { outbox }),
      ...(outboxDone.length > 0 && { outboxDone }),
      ...(remoteDependents.length > 0 && { remoteDependents }),
      ...(remoteDependentsDone.length > 0 && { remoteDependentsDone }),
      ...(remoteParents.length > 0 && { remoteParents }),
    };
  }

  /**
   * The store has every batch up to `batchId`. Retiring jobs of those batches
   * leave memory (and their keys the index). Returns the in-flight rows that
   * stopped being overlay, so pending listings can still merge them.
   */
  committed(batchId: number): JobRecord[] {
    const released: JobRecord[] = [];
    for (const [id, jobIds] of this.#inFlightByBatch) {
      if (id > batchId) continue;
      this.#inFlightByBatch.delete(id);
      for (const jobId of jobIds) {
        const entry = this.#inFlight.get(jobId);
        if (entry === undefined || entry.batchId !== id) continue;
        this.#inFlight.delete(jobId);
        released.push(entry.record);
      }
    }
    for (const [id, jobIds] of this.#retiringByBatch) {
      if (id > batchId) continue;
      this.#retiringByBatch.delete(id);
      for (const jobId of jobIds) this.#forget(jobId);
    }
    return released;
  }

  /** The newest version of every row the store may not have yet, by job id. */
  overlay(): Map<string, JobRecord> {
    const rows = new Map<string, JobRecord>();
    for (const [jobId, entry] of this.#inFlight) rows.set(jobId, entry.record);
    for (const [jobId, { job }] of this.#dirty) rows.set(jobId, toRecord(job));
    return rows;
  }

  /** Rows in the overlay right now (bounds how many stored rows it can hide). */
  get overlaySize(): number {
    return this.#inFlight.size + this.#dirty.size;
  }

  #remember(job: CoreJob): void {
    const old = this.#recent.get(job.jobId);
    if (old !== undefined) {
      this.#recent.delete(job.jobId);
      this.#recentChars -= charsOf(old);
    }
    this.#recent.set(job.jobId, job);
    this.#recentChars += charsOf(job);
    while (this.#recent.size > RECENT_JOBS || this.#recentChars > RECENT_CHARS) {
      const [oldestId, oldest] = this.#recent.entries().next().value as [string, CoreJob];
      this.#recent.delete(oldestId);
      this.#recentChars -= charsOf(oldest);
    }
  }

  #addActive(job: CoreJob): void {
    this.#active.set(job.jobId, job);
    if (job.idempotencyKey !== null) this.#keys.set(job.idempotencyKey, job);
  }

  #forget(jobId: string): void {
    const job = this.#retiring.get(jobId);
    if (job === undefined) return;
    this.#retiring.delete(jobId);
    // Only an end is remembered: a far delayed job parked in the store may still change.
    if (isTerminalState(job.state)) this.#remember(job);
    this.#onForget(jobId);
    const key = job.idempotencyKey;
    if (key !== null && this.#keys.get(key) === job && !this.#pinned.has(key)) {
      this.#keys.delete(key);
    }
  }
}

function listFor<K, V>(map: Map<K, V[]>, key: K): V[] {
  let list = map.get(key);
  if (list === undefined) map.set(key, (list = []));
  return list;
}

/** What an ended job holds beyond its fixed fields: its payload and result. */
function charsOf(job: CoreJob): number {
  return job.payloadJson.length + (job.result?.length ?? 0);
}
