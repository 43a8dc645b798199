/**
 * An in-memory {@link Store} for tests, the deterministic simulation, and
 * `--database :memory:` (not durable).
 *
 * Everything happens synchronously inside each call; the `*Now` methods are
 * the synchronous forms that a test harness or the simulation uses to drive a
 * core without an event loop. A batch is durable as soon as `commit` is
 * called, so "the process crashed before the commit" is modelled by never
 * committing it. {@link MemoryStore.failCommits} makes commits fail, to test
 * how a failed write is handled.
 *
 * Shards: a store stands for one shard's tables, so it keeps the remote
 * dependents and parents (its own tables) like any other rows. The outbox
 * is the cluster's, shared by the shards: stores given the same
 * {@link MemoryOutbox} write and read it as PostgreSQL's shards share
 * `dtp.shard_outbox` (the core tests of shards wire two cores so). A store
 * without one refuses a batch that sends or applies a message: shards do
 * not exist there, and a message dropped silently would be a lost change.
 */
import { isTerminalState } from '../protocol/messages.js';
import {
  PURGE_EVENTS_PER_ROW,
  StoreError,
  type AttemptRecord,
  type ChildLink,
  type EventRecord,
  type GroupHoldRecord,
  type JobRecord,
  type ListQuery,
  type OutboxMessage,
  type OutboxRow,
  type PurgeQuery,
  type QueueCount,
  type QueueSettingsRecord,
  type RecoveredState,
  type RemoteDependentRecord,
  type RemoteParentRecord,
  type ScheduleRecord,
  type ScheduledWindowQuery,
  type SignalRecord,
  type StepRecord,
  type Store,
  type StoreRead,
  type StoreReadResult,
  type TriggerRecord,
  type WriteBatch,
} from './store.js';

/**
 * The cluster's outbox in memory, shared by the stores of several shards
 * (see the module comment): rows numbered in the order they are written,
 * deleted by the batch that applies them.
 */
export class MemoryOutbox {
  #nextId = 1;
  readonly #rows = new Map<number, OutboxMessage>();

  /** Writes the rows (part of a commit), numbering them in order. */
  insert(rows: readonly Readonly<OutboxRow>[]): void {
    for (const row of rows) {
      const id = this.#nextId++;
      this.#rows.set(id, structuredClone({ id, targetShard: row.targetShard, body: row.body }));
    }
  }

  /** Deletes the messages (part of a commit); ids not there are ignored. */
  delete(ids: readonly number[]): void {
    for (const id of ids) this.#rows.delete(id);
  }

  /** Up to `limit` messages to `shard` after `afterId`, by id (copies). */
  read(shard: number, afterId: number, limit: number): OutboxMessage[] {
    return [...this.#rows.values()]
      .filter((m) => m.targetShard === shard && m.id > afterId)
      .sort((a, b) => a.id - b.id)
      .slice(0, limit)
      .map((m) => structuredClone(m));
  }

  /** Every message still there (copies), by id. */
  all(): OutboxMessage[] {
    return [...this.#rows.values()].sort((a, b) => a.id - b.id).map((m) => structuredClone(m));
  }
}

export interface MemoryStoreOptions {
  /** The cluster's outbox this shard shares with others; absent = no shards. */
  outbox?: MemoryOutbox;
}

export class MemoryStore implements Store {
  readonly description = 'memory (not durable)';
  readonly #outbox: MemoryOutbox | null;
  /** Remote dependents by parent, then child (the child's shard). */
  readonly #remoteDependents = new Map<string, Map<string, number>>();
  readonly #remoteParents = new Map<string, RemoteParentRecord>();
  readonly #jobs = new Map<string, JobRecord>();
  readonly #byKey = new Map<string, string>();
  /** `parentJobId` + NUL + `childKey` -> the child's id (unique, like the SQL stores' index). */
  readonly #byChildKey = new Map<string, string>();
  readonly #attempts = new Map<string, AttemptRecord>();
  /** Per job, the ids of its attempts (a job read takes them without a scan). */
  readonly #attemptsByJob = new Map<string, Set<string>>();
  /** Per parent job, the ids of its children (a job read names them without a scan). */
  readonly #childrenOf = new Map<string, Set<string>>();
  readonly #queues = new Map<string, QueueSettingsRecord>();
  readonly #schedules = new Map<string, ScheduleRecord>();
  /** Recorded steps by job, in index order. */
  readonly #steps = new Map<string, StepRecord[]>();
  /** Waits begun (`ctx.waitFor`): waiting job -> the jobs it waited for. */
  readonly #stepWaits = new Map<string, Set<string>>();
  /** Group holds by queue + NUL + group key ('' for the jobs without one). */
  readonly #groupHolds = new Map<string, GroupHoldRecord>();
  /** Signals by job, then by their seq. */
  readonly #signals = new Map<string, Map<number, SignalRecord>>();
  readonly #events = new Map<string, EventRecord>();
  readonly #triggers = new Map<string, TriggerRecord>();
  #failure: string | null = null;
  #readFailure: string | null = null;
  /** Number of batches committed. */
  commits = 0;

  constructor(options: MemoryStoreOptions = {}) {
    this.#outbox = options.outbox ?? null;
  }

  readOutbox(shard: number, afterId: number, limit: number): Promise<OutboxMessage[]> {
    return Promise.resolve(this.readOutboxNow(shard, afterId, limit));
  }

  /** The synchronous form of {@link readOutbox} (none without a shared outbox). */
  readOutboxNow(shard: number, afterId: number, limit: number): OutboxMessage[] {
    if (this.#readFailure !== null) throw new StoreError(`read failed: ${this.#readFailure}`);
    return this.#outbox?.read(shard, afterId, limit) ?? [];
  }

  recover(window?: ScheduledWindowQuery, nowMs?: number): Promise<RecoveredState> {
    return Promise.resolve(this.recoverNow(window, nowMs));
  }

  commit(batch: WriteBatch): Promise<void> {
    try {
      this.commitNow(batch);
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  read(read: StoreRead): Promise<StoreReadResult> {
    try {
      return Promise.resolve(this.readNow(read));
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  recoverNow(window?: ScheduledWindowQuery, nowMs?: number): RecoveredState {
    let activeJobs = [...this.#jobs.values()]
      .filter((job) => !isTerminalState(job.state))
      .sort((a, b) => a.seq - b.seq)
      .map((job) => ({ ...job }));
    let scheduledWindow: RecoveredState['scheduledWindow'];
    if (window !== undefined) {
      const near = new Set(
        this.#scheduledAfter({ atMs: -Infinity, seq: 0 }, window.untilMs, window.limit).map(
          (job) => job.jobId,
        ),
      );
      // Parents of active jobs are loaded too: the graph needs them; and so
      // are the jobs active jobs wait for, sleeping jobs (with steps), and
      // jobs with a deduplication key (the core decides on keys from memory).
      for (const job of activeJobs) {
        for (const id of job.dependsOn ?? []) near.add(id);
        for (const id of this.#stepWaits.get(job.jobId) ?? []) near.add(id);
        // Keyed jobs (the core's index of keys is memory only) and jobs that
        // ran before (a rate-limited one: its attempts come with it).
        // And jobs holding signals no wait took (the core keeps them with the job).
        const kept = job.dedupKey != null || job.attempts > 0 || this.#holdsSignals(job.jobId);
        if (this.#steps.has(job.jobId) || kept) near.add(job.jobId);
      }
      const isFar = (job: JobRecord): boolean =>
        job.state === 'SCHEDULED' && job.dependsOn === null && !near.has(job.jobId);
      const farCount = activeJobs.filter(isFar).length;
      activeJobs = activeJobs.filter((job) => !isFar(job));
      scheduledWindow = { ...window, farCount };
    }
    const active = new Set(activeJobs.map((job) => job.jobId));
    const activeAttempts = [...this.#attempts.values()]
      .filter((attempt) => active.has(attempt.jobId))
      .map((attempt) => ({ ...attempt }));
    const activeSteps = activeJobs.flatMap((job) =>
      (this.#steps.get(job.jobId) ?? []).map((step) => ({ ...step })),
    );
    let maxSeq = 0;
    for (const job of this.#jobs.values()) maxSeq = Math.max(maxSeq, job.seq);
    const queueSettings = [...this.#queues.values()]
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .map((q) => ({ ...q }));
    const parentJobs = [...this.#neededParents()]
      .map((jobId) => this.#jobs.get(jobId))
      .filter((job): job is JobRecord => job !== undefined && isTerminalState(job.state))
      .map((job) => ({ ...job }));
    const schedules = this.committedSchedules();
    const childLinks = this.#childLinks(new Set(activeJobs.map((job) => job.jobId)));
    const throttledJobs = [...this.#jobs.values()]
      .filter(
        (job) =>
          isTerminalState(job.state) &&
          job.dedupUntilMs != null &&
          (nowMs === undefined || job.dedupUntilMs > nowMs),
      )
      .sort((a, b) => a.seq - b.seq)
      .map((job) => ({ ...job }));
    const groupHolds = [...this.#groupHolds.values()]
      .sort(
        (a, b) => compareText(a.queue, b.queue) || compareText(a.groupKey ?? '', b.groupKey ?? ''),
      )
      .map((hold) => ({ ...hold }));
    const activeSignals = activeJobs.flatMap((job) =>
      [...(this.#signals.get(job.jobId)?.values() ?? [])]
        .filter((signal) => !signal.consumed)
        .sort((a, b) => a.seq - b.seq)
        .map((signal) => ({ ...signal })),
    );
    const triggers = [...this.#triggers.values()]
      .sort((a, b) => compareText(a.name, b.name))
      .map((trigger) => ({ ...trigger }));
    const remoteDependents: RemoteDependentRecord[] = [];
    for (const [parentId, children] of this.#remoteDependents) {
      for (const [childId, childShard] of children) {
        remoteDependents.push({ parentId, childId, childShard });
      }
    }
    const needed = this.#neededParents();
    const remoteParents = [...this.#remoteParents.values()]
      .filter((parent) => needed.has(parent.parentId))
      .map((parent) => ({ ...parent }));
    return {
      activeJobs,
      activeAttempts,
      ...(activeSteps.length > 0 && { activeSteps }),
      maxSeq,
      parentJobs,
      childLinks,
      schedules,
      queueSettings,
      throttledJobs,
      groupHolds,
      activeSignals,
      triggers,
      ...(remoteDependents.length > 0 && { remoteDependents }),
      ...(remoteParents.length > 0 && { remoteParents }),
      ...(scheduledWindow !== undefined && { scheduledWindow }),
    };
  }

  /** True when the job holds a signal no wait has taken. */
  #holdsSignals(jobId: string): boolean {
    for (const signal of this.#signals.get(jobId)?.values() ?? []) {
      if (!signal.consumed) return true;
    }
    return false;
  }

  /** SCHEDULED jobs without parents after `after` by (runAtMs, seq), due by `untilMs`. */
  #scheduledAfter(
    after: { atMs: number; seq: number },
    untilMs: number,
    limit: number,
  ): JobRecord[] {
    const runAt = (job: JobRecord): number => job.runAtMs ?? 0;
    return [...this.#jobs.values()]
      .filter(
        (job) =>
          job.state === 'SCHEDULED' &&
          job.dependsOn === null &&
          runAt(job) <= untilMs &&
          (runAt(job) > after.atMs || (runAt(job) === after.atMs && job.seq > after.seq)),
      )
      .sort((a, b) => runAt(a) - runAt(b) || a.seq - b.seq)
      .slice(0, limit)
      .map((job) => ({ ...job }));
  }

  /** Committed schedules (copies), by name. */
  committedSchedules(): ScheduleRecord[] {
    return [...this.#schedules.values()]
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .map((schedule) => ({ ...schedule }));
  }

  /** Applies a batch at once (throws {@link StoreError} when commits fail). */
  commitNow(batch: WriteBatch): void {
    if (this.#failure !== null) throw new StoreError(`commit failed: ${this.#failure}`);
    for (const { job, isNew } of batch.jobs) {
      if (isNew === this.#jobs.has(job.jobId)) {
        throw new StoreError(
          `${isNew ? 'insert of existing' : 'update of missing'} job ${job.jobId}`,
        );
      }
      if (isNew && job.idempotencyKey !== null && this.#byKey.has(job.idempotencyKey)) {
        throw new StoreError(`idempotency key ${job.idempotencyKey} is already stored`);
      }
      const childKey = childKeyOf(job);
      if (isNew && childKey !== null && this.#byChildKey.has(childKey)) {
        throw new StoreError(`child key ${job.childKey} of ${job.parentJobId} is already stored`);
      }
    }
    this.#checkEvents(batch);
    const messages = (batch.outbox?.length ?? 0) + (batch.outboxDone?.length ?? 0);
    if (messages > 0 && this.#outbox === null) {
      throw new StoreError(
        'a batch sends or applies outbox messages, but this store has no shards',
      );
    }
    for (const { job } of batch.jobs) {
      this.#jobs.set(job.jobId, { ...job });
      if (job.parentJobId != null) addTo(this.#childrenOf, job.parentJobId, job.jobId);
      if (job.idempotencyKey !== null) this.#byKey.set(job.idempotencyKey, job.jobId);
      const childKey = childKeyOf(job);
      if (childKey !== null) this.#byChildKey.set(childKey, job.jobId);
    }
    for (const attempt of batch.attempts) {
      this.#attempts.set(attempt.attemptId, { ...attempt });
      addTo(this.#attemptsByJob, attempt.jobId, attempt.attemptId);
    }
    for (const schedule of batch.schedules ?? [])
      this.#schedules.set(schedule.name, { ...schedule });
    for (const name of batch.deletedSchedules ?? []) this.#schedules.delete(name);
    for (const q of batch.queues ?? []) this.#queues.set(q.name, { ...q });
    for (const jobId of batch.clearedSteps ?? []) this.#steps.delete(jobId);
    for (const step of batch.steps ?? []) {
      const list = this.#steps.get(step.jobId) ?? [];
      if (step.index > list.length) {
        throw new StoreError(`step ${step.index} of job ${step.jobId} comes after ${list.length}`);
      }
      list[step.index] = { ...step };
      this.#steps.set(step.jobId, list);
    }
    for (const { jobId, targetId } of batch.stepWaits ?? []) {
      const targets = this.#stepWaits.get(jobId) ?? new Set<string>();
      targets.add(targetId);
      this.#stepWaits.set(jobId, targets);
    }
    for (const hold of batch.groupHolds ?? []) {
      this.#groupHolds.set(`${hold.queue}\u0000${hold.groupKey ?? ''}`, { ...hold });
    }
    const endedBeforeMs = batch.groupHoldsEndedBeforeMs;
    if (endedBeforeMs !== undefined) {
      for (const [key, hold] of this.#groupHolds) {
        if (hold.untilMs < endedBeforeMs) this.#groupHolds.delete(key);
      }
    }
    this.#applySignals(batch);
    this.#applyShardLinks(batch);
    this.commits++;
  }

  /** The outbox rows written and deleted, the remote dependents and parents of a batch. */
  #applyShardLinks(batch: WriteBatch): void {
    this.#outbox?.insert(batch.outbox ?? []);
    this.#outbox?.delete(batch.outboxDone ?? []);
    for (const { parentId, childId, childShard } of batch.remoteDependents ?? []) {
      const children = this.#remoteDependents.get(parentId) ?? new Map<string, number>();
      if (!children.has(childId)) children.set(childId, childShard);
      this.#remoteDependents.set(parentId, children);
    }
    for (const parentId of batch.remoteDependentsDone ?? []) {
      this.#remoteDependents.delete(parentId);
    }
    for (const parent of batch.remoteParents ?? []) {
      this.#remoteParents.set(parent.parentId, { ...parent });
    }
  }

  /** Committed remote dependents of a parent: child id -> its shard (a copy). */
  committedRemoteDependents(parentId: string): Map<string, number> {
    return new Map(this.#remoteDependents.get(parentId) ?? []);
  }

  /** Refuses a batch that writes an event id already stored (or twice). */
  #checkEvents(batch: WriteBatch): void {
    const ids = new Set<string>();
    for (const { eventId } of batch.events ?? []) {
      if (this.#events.has(eventId) || ids.has(eventId)) {
        throw new StoreError(`event ${eventId} is already stored`);
      }
      ids.add(eventId);
    }
  }

  /** Signals, events and triggers of a batch (the triggers deleted after those written). */
  #applySignals(batch: WriteBatch): void {
    for (const signal of batch.signals ?? []) {
      const held = this.#signals.get(signal.jobId) ?? new Map<number, SignalRecord>();
      held.set(signal.seq, { ...signal });
      this.#signals.set(signal.jobId, held);
    }
    for (const event of batch.events ?? []) {
      this.#events.set(event.eventId, { ...event, jobIds: [...event.jobIds] });
    }
    for (const trigger of batch.triggers ?? []) this.#triggers.set(trigger.name, { ...trigger });
    for (const name of batch.deletedTriggers ?? []) this.#triggers.delete(name);
  }

  readNow(read: StoreRead): StoreReadResult {
    if (this.#readFailure !== null) throw new StoreError(`read failed: ${this.#readFailure}`);
    switch (read.op) {
      case 'event': {
        const event = this.#events.get(read.eventId);
        return {
          op: 'event',
          event: event === undefined ? null : { ...event, jobIds: [...event.jobIds] },
        };
      }
      case 'job': {
        const job = this.#jobs.get(read.jobId);
        const children =
          job === undefined ? [] : this.#childLinks(new Set([job.jobId])).map((l) => l.jobId);
        return {
          op: 'job',
          job: job === undefined ? null : this.#withDetails(job),
          attempts: read.withAttempts && job !== undefined ? this.#attemptsOf(job.jobId) : null,
          ...(children.length > 0 && { children }),
        };
      }
      case 'children':
        return { op: 'children', links: this.#childLinks(new Set(read.parentJobIds)) };
      case 'jobByKey': {
        const jobId = this.#byKey.get(read.key);
        const job = jobId === undefined ? undefined : this.#jobs.get(jobId);
        return { op: 'jobByKey', job: job === undefined ? null : { ...job } };
      }
      case 'list': {
        const jobs = this.#list(read.query);
        if (read.withAttempts !== true) return { op: 'list', jobs };
        return { op: 'list', jobs, attempts: jobs.flatMap((job) => this.#attemptsOf(job.jobId)) };
      }
      case 'purge':
        return { op: 'purge', deleted: this.#purge(read.query) };
      case 'jobs':
        return {
          op: 'jobs',
          jobs: read.jobIds
            .map((jobId) => this.#jobs.get(jobId))
            .filter((job): job is JobRecord => job !== undefined)
            .map((job) => ({ ...job })),
        };
      case 'scheduleJobs':
        return {
          op: 'scheduleJobs',
          jobs: [...this.#jobs.values()]
            .filter((job) => job.scheduleName === read.scheduleName)
            .sort((a, b) => b.seq - a.seq)
            .slice(0, read.limit)
            .map((job) => ({ ...job })),
        };
      case 'queueCounts':
        return { op: 'queueCounts', counts: this.#queueCounts(read.queue) };
      case 'scheduledWindow':
        return {
          op: 'scheduledWindow',
          jobs: this.#scheduledAfter(read.after, read.untilMs, read.limit),
        };
    }
  }

  /** The links of the children of `parents`, oldest child first. */
  #childLinks(parents: ReadonlySet<string>): ChildLink[] {
    return [...parents]
      .flatMap((parent) => [...(this.#childrenOf.get(parent) ?? [])])
      .map((jobId) => this.#jobs.get(jobId))
      .filter((job): job is JobRecord => job !== undefined)
      .sort((a, b) => a.seq - b.seq)
      .map((job) => ({
        parentJobId: job.parentJobId as string,
        childKey: job.childKey ?? '',
        jobId: job.jobId,
      }));
  }

  #queueCounts(queue: string | null): QueueCount[] {
    const counts = new Map<string, QueueCount>();
    for (const job of this.#jobs.values()) {
      if (queue !== null && job.queue !== queue) continue;
      const key = `${job.queue}\n${job.state}`;
      const entry = counts.get(key) ?? { queue: job.queue, state: job.state, count: 0 };
      entry.count++;
      counts.set(key, entry);
    }
    return [...counts.values()];
  }

  /** Committed queue settings (copies), by name. */
  committedQueues(): QueueSettingsRecord[] {
    return [...this.#queues.values()].map((q) => ({ ...q }));
  }

  /** Makes every later commit fail (null: commits work again). */
  failCommits(reason: string | null): void {
    this.#failure = reason;
  }

  /** Makes every later read fail (null: reads work again). */
  failReads(reason: string | null): void {
    this.#readFailure = reason;
  }

  /** Committed rows (copies), for invariant checks. */
  committedJobs(): JobRecord[] {
    return [...this.#jobs.values()].map((job) => ({ ...job }));
  }

  /**
   * The committed rows themselves, for checks that run after every step of
   * the simulation: a commit replaces a row, never changes it in place, so a
   * row read here stays as it was committed.
   */
  committedJobRows(): IterableIterator<Readonly<JobRecord>> {
    return this.#jobs.values();
  }

  /** One committed row (a copy). */
  committedJob(jobId: string): JobRecord | undefined {
    const job = this.#jobs.get(jobId);
    return job === undefined ? undefined : { ...job };
  }

  /** The committed row holding an idempotency key (a copy). */
  committedJobByKey(key: string): JobRecord | undefined {
    const jobId = this.#byKey.get(key);
    return jobId === undefined ? undefined : this.committedJob(jobId);
  }

  /** Highest committed seq (0 when empty). */
  maxSeq(): number {
    let max = 0;
    for (const job of this.#jobs.values()) max = Math.max(max, job.seq);
    return max;
  }

  /** Committed attempts of a job, oldest first (copies). */
  committedAttempts(jobId: string): AttemptRecord[] {
    return this.#attemptsOf(jobId);
  }

  /** Committed steps of a job, in order (copies). */
  committedSteps(jobId: string): StepRecord[] {
    return (this.#steps.get(jobId) ?? []).map((step) => ({ ...step }));
  }

  #attemptsOf(jobId: string): AttemptRecord[] {
    return [...(this.#attemptsByJob.get(jobId) ?? [])]
      .map((attemptId) => this.#attempts.get(attemptId))
      .filter((attempt): attempt is AttemptRecord => attempt !== undefined)
      .sort((a, b) => a.attemptNumber - b.attemptNumber)
      .map((attempt) => ({ ...attempt }));
  }

  #list(query: ListQuery): JobRecord[] {
    return [...this.#jobs.values()]
      .filter((job) => query.beforeSeq === null || job.seq < query.beforeSeq)
      .filter((job) => query.states === null || query.states.includes(job.state))
      .filter((job) => query.taskType === null || job.taskType === query.taskType)
      .filter(
        (job) => query.queue === undefined || query.queue === null || job.queue === query.queue,
      )
      .filter(
        (job) =>
          query.finishedSinceMs === undefined ||
          query.finishedSinceMs === null ||
          (job.finishedAtMs !== null && job.finishedAtMs >= query.finishedSinceMs),
      )
      .sort((a, b) => b.seq - a.seq)
      .slice(0, query.limit)
      .map((job) => ({ ...job }));
  }

  /** Ids of the jobs some non-terminal job depends on or waits for. */
  #neededParents(): Set<string> {
    const needed = new Set<string>();
    for (const job of this.#jobs.values()) {
      if (isTerminalState(job.state)) continue;
      for (const parentId of job.dependsOn ?? []) needed.add(parentId);
      for (const targetId of this.#stepWaits.get(job.jobId) ?? []) needed.add(targetId);
    }
    return needed;
  }

  #purge(query: PurgeQuery): number {
    const needed = this.#neededParents();
    const doomed = [...this.#jobs.values()]
      .filter(
        (job) =>
          job.state === query.state &&
          job.finishedAtMs !== null &&
          job.finishedAtMs < query.finishedBeforeMs &&
          !needed.has(job.jobId),
      )
      .sort((a, b) => a.seq - b.seq)
      .slice(0, query.limit);
    for (const job of doomed) {
      this.#jobs.delete(job.jobId);
      if (job.parentJobId != null) removeFrom(this.#childrenOf, job.parentJobId, job.jobId);
      if (job.idempotencyKey !== null) this.#byKey.delete(job.idempotencyKey);
      const childKey = childKeyOf(job);
      if (childKey !== null) this.#byChildKey.delete(childKey);
      for (const attemptId of this.#attemptsByJob.get(job.jobId) ?? []) {
        this.#attempts.delete(attemptId);
      }
      this.#attemptsByJob.delete(job.jobId);
      this.#steps.delete(job.jobId);
      this.#stepWaits.delete(job.jobId);
      this.#signals.delete(job.jobId);
    }
    if (query.state === 'COMPLETED') this.#purgeEvents(query);
    this.#purgeRemoteParents(doomed);
    return doomed.length;
  }

  /** The outcomes of remote parents that no stored job depends on any more (after a purge). */
  #purgeRemoteParents(doomed: readonly JobRecord[]): void {
    const unlinked = new Set(doomed.flatMap((job) => job.dependsOn ?? []));
    if (unlinked.size === 0) return;
    for (const job of this.#jobs.values()) {
      for (const parentId of job.dependsOn ?? []) unlinked.delete(parentId);
    }
    for (const parentId of unlinked) this.#remoteParents.delete(parentId);
  }

  /** Deletes the oldest events published before the bound, a step's worth at most. */
  #purgeEvents(query: PurgeQuery): void {
    const old = [...this.#events.values()]
      .filter((event) => event.atMs < query.finishedBeforeMs)
      .sort((a, b) => a.atMs - b.atMs)
      .slice(0, query.limit * PURGE_EVENTS_PER_ROW);
    for (const event of old) this.#events.delete(event.eventId);
  }

  /**
   * A job's row with what a single-job read adds: its steps, and its
   * REQUEUED and RATE_LIMITED attempts counted.
   */
  #withDetails(job: Readonly<JobRecord>): JobRecord {
    const steps = this.#steps.get(job.jobId);
    let requeues = 0;
    let rateLimited = 0;
    for (const attemptId of this.#attemptsByJob.get(job.jobId) ?? []) {
      const outcome = this.#attempts.get(attemptId)?.outcome;
      if (outcome === 'REQUEUED') requeues++;
      else if (outcome === 'RATE_LIMITED') rateLimited++;
    }
    const row: JobRecord = {
      ...job,
      ...(steps !== undefined && {
        steps: steps.map(({ name, atMs, result }) => ({
          name,
          atMs,
          resultBytes: result === null ? 0 : Buffer.byteLength(result),
        })),
      }),
    };
    // Counted from the attempts, as the SQL stores do (not the row's own copy).
    if (requeues > 0) row.requeues = requeues;
    else delete row.requeues;
    if (rateLimited > 0) row.rateLimited = rateLimited;
    else delete row.rateLimited;
    return row;
  }
}

/** Orders text by code unit (recovery lists holds in a repeatable order). */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The unique (parent, key) of a child job; null for a job that is not one. */
function childKeyOf(job: Readonly<JobRecord>): string | null {
  if (job.parentJobId == null || job.childKey == null) return null;
  return `${job.parentJobId}\u0000${job.childKey}`;
}

/** Adds `value` to the set at `key`. */
function addTo(index: Map<string, Set<string>>, key: string, value: string): void {
  const set = index.get(key);
  if (set === undefined) index.set(key, new Set([value]));
  else set.add(value);
}

/** Removes `value` from the set at `key`, and the set once empty. */
function removeFrom(index: Map<string, Set<string>>, key: string, value: string): void {
  const set = index.get(key);
  if (set === undefined) return;
  set.delete(value);
  if (set.size === 0) index.delete(key);
}
