/**
 * The Store: where the coordinator's jobs live durably, behind an
 * asynchronous, batch-shaped interface.
 *
 * The core never calls a store. It hands the shell a {@link WriteBatch} of
 * rows to write, and the shell commits it with {@link Store.commit}; the
 * replies and assignments produced with that batch are released only once
 * that promise resolves. Batches commit in the order they are given (a store
 * may merge several queued batches into one transaction: group commit).
 * Reads of history ({@link StoreRead}) see committed rows only; the core
 * overlays what it has not committed yet.
 *
 * Implementations: {@link MemoryStore} (tests, simulation, `:memory:`),
 * SqliteStore (the default), and further backends with the same contract.
 */
import { ErrorCode } from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';
import type {
  DedupMode,
  JobProgress,
  AttemptOutcome,
  JobState,
  ParentFailurePolicy,
  Priority,
  ResultFormat,
  ScheduleCatchUp,
  ScheduleOverlap,
  TerminalState,
} from '../protocol/messages.js';
import type { TraceContext } from '../protocol/trace-context.js';

/** One job, exactly as persisted. */
export interface JobRecord {
  /** Submission order, 1-based, unique; also the paging key (newest = highest). */
  seq: number;
  jobId: string;
  taskType: string;
  /** The submitted payload as JSON text. */
  payloadJson: string;
  state: JobState;
  priority: Priority;
  /** Attempts started so far (incremented only at assignment). */
  attempts: number;
  maxAttempts: number;
  /** Execution deadline of each attempt, fixed at submission, in ms. */
  timeoutMs: number;
  idempotencyKey: string | null;
  /** The current lease: set only while RUNNING. */
  workerId: string | null;
  attemptId: string | null;
  deadlineAtMs: number | null;
  /** When a RETRY_WAIT job becomes QUEUED again (absolute, coordinator clock). */
  retryAtMs: number | null;
  result: string | null;
  /** How to read `result` (null = text). */
  resultFormat: ResultFormat | null;
  error: string | null;
  createdAtMs: number;
  updatedAtMs: number;
  /** When the latest attempt started; null before the first. */
  startedAtMs: number | null;
  /** When the job became terminal; null while it is not. */
  finishedAtMs: number | null;
  /** The jobs this one waits for, in the order given; null = none. Fixed at submission. */
  dependsOn: string[] | null;
  /** What a parent's failure does to it; null = none given (`cancel`). Fixed at submission. */
  onParentFailure: ParentFailurePolicy | null;
  /**
   * The latest progress its handler reported; absent = none. Not written on
   * every report: it reaches the store with the job's next write (the
   * attempt's end, usually).
   */
  progress?: JobProgress | null;
  /** When a delayed job is (or was) due; null for a job that was not delayed. */
  runAtMs: number | null;
  /** The schedule whose tick made this job; null otherwise. */
  scheduleName: string | null;
  /** The submitter's W3C trace context; absent or null = none. Fixed at submission. */
  traceContext?: TraceContext | null;
  /** The named queue (immutable; `default` for jobs stored before queues existed). */
  queue: string;
  /** The group key within the queue (immutable); null = none. */
  groupKey: string | null;
  /** The job whose handler enqueued this one (`ctx.enqueue`); absent or null = none. Immutable. */
  parentJobId?: string | null;
  /**
   * With `parentJobId`: the call's key among that parent's children (`k:<key>`
   * or `o:<n>`), unique per parent. Immutable.
   */
  childKey?: string | null;
  /**
   * The steps its handler recorded (names and times, in order), for its
   * snapshot: given by the core's rows and by a single-job read (`job`);
   * absent elsewhere. Never written from here: steps travel as
   * {@link WriteBatch.steps}.
   */
  steps?:
    | readonly {
        readonly name: string;
        readonly atMs: number;
        /** The UTF-8 length of its recorded JSON text (0 for a wait not ended). */
        readonly resultBytes: number;
      }[]
    | null;
  /**
   * How many of its attempts ended REQUEUED (not counted toward
   * maxAttempts), for its snapshot: given by the core's rows and by a
   * single-job read (`job`), counted from its attempts; absent elsewhere and
   * when none. Never written: the attempts are.
   */
  requeues?: number | null;
  /** How many of its attempts ended RATE_LIMITED (not counted either): as `requeues`. */
  rateLimited?: number | null;
  /** Its deduplication key within its queue (dedup.ts); absent or null = none. Immutable. */
  dedupKey?: string | null;
  /** With `dedupKey`: how it deduplicates. Immutable. */
  dedupMode?: DedupMode | null;
  /**
   * With `dedupMode` `throttle`: the end of the window its creation opened
   * (createdAtMs + window). Recovery brings back the ended jobs whose window
   * is still open. Immutable.
   */
  dedupUntilMs?: number | null;
  /** When it expires unless an attempt has started; absent or null = never. Immutable. */
  expiresAtMs?: number | null;
  /** Its attempts in a row that a handler ended rate limited (reset by any other end); absent = 0. */
  rateLimitedInARow?: number | null;
}

/**
 * A signal sent to a job (SIGNAL_JOB), kept until a `ctx.waitForSignal` of
 * its name takes it. Keyed by (jobId, seq).
 */
export interface SignalRecord {
  jobId: string;
  /** Increasing per job, in the order the signals came (any safe integer: 64 bits stored). */
  seq: number;
  name: string;
  /** Its payload as JSON text. */
  payloadJson: string;
  atMs: number;
  /** True once a wait took it (the wait's step, written in the same batch, holds it from then on). */
  consumed: boolean;
}

/** A published event (PUBLISH_EVENT), kept so that its id answers the same again. Keyed by eventId. */
export interface EventRecord {
  eventId: string;
  name: string;
  key: string | null;
  payloadJson: string;
  atMs: number;
  /** The jobs its triggers created, in order. */
  jobIds: string[];
  /** Waiting jobs it woke. */
  resumed: number;
}

/** A trigger (SET_TRIGGER): each event of `event` creates one job of `taskType`. Keyed by name. */
export interface TriggerRecord {
  name: string;
  event: string;
  taskType: string;
  queue: string;
  priority: Priority | null;
  maxAttempts: number | null;
  createdAtMs: number;
  updatedAtMs: number;
}

/**
 * A group of a queue that a handler held back (RateLimitedError, scope
 * `group`): nothing of it starts before `untilMs`. Keyed by (queue, groupKey).
 */
export interface GroupHoldRecord {
  queue: string;
  /** Null = the queue's jobs without a group key. */
  groupKey: string | null;
  untilMs: number;
}

/** One child job of a parent, as the dedupe index needs it. */
export interface ChildLink {
  parentJobId: string;
  childKey: string;
  jobId: string;
}

/** One recorded step of a job (durable steps), keyed by (jobId, index). */
export interface StepRecord {
  jobId: string;
  /** 0-based position among the job's steps. */
  index: number;
  name: string;
  /** The step's value as JSON text; null for a wait that has not ended yet. */
  result: string | null;
  atMs: number;
}

/** A job suspended to wait for another job's end (`ctx.waitFor`). */
export interface StepWaitRecord {
  /** The waiting job. */
  jobId: string;
  /** The job it waits for. */
  targetId: string;
}

/** One queue's settings, exactly as persisted (a row exists once a setting was made). */
export interface QueueSettingsRecord {
  name: string;
  paused: boolean;
  concurrency: number | null;
  rateMax: number | null;
  rateIntervalMs: number | null;
  groupConcurrency: number | null;
  groupRateMax: number | null;
  groupRateIntervalMs: number | null;
  updatedAtMs: number;
  /** Until when a handler held the whole queue back (RateLimitedError, scope `queue`); absent or null = not. */
  heldUntilMs?: number | null;
}

/** One recurring schedule, exactly as persisted. */
export interface ScheduleRecord {
  name: string;
  taskType: string;
  /** A cron expression (5 or 6 fields), or null for a fixed interval. */
  cron: string | null;
  /** The fixed interval in ms, or null for cron. */
  everyMs: number | null;
  /** IANA time zone of `cron`; null for a fixed interval. */
  timezone: string | null;
  payloadJson: string;
  maxAttempts: number | null;
  priority: Priority | null;
  timeoutMs: number | null;
  overlap: ScheduleOverlap;
  catchUp: ScheduleCatchUp;
  paused: boolean;
  /** The next tick (coordinator clock); null while paused. */
  nextRunAtMs: number | null;
  /** The tick of the last job it made; null before the first. */
  lastRunAtMs: number | null;
  lastJobId: string | null;
  createdAtMs: number;
  updatedAtMs: number;
  /** The named queue of its jobs (`default` for schedules from before queues). */
  queue: string;
}

/** One attempt of a job (job history). */
export interface AttemptRecord {
  jobId: string;
  /** 1-based. */
  attemptNumber: number;
  attemptId: string;
  workerId: string;
  startedAtMs: number;
  finishedAtMs: number | null;
  outcome: AttemptOutcome;
  error: string | null;
}

/** The writes of one batch; the store applies them in one transaction. */
export interface WriteBatch {
  /** Increasing by one per batch that has writes. */
  readonly batchId: number;
  /** New jobs (`isNew`) and new versions of existing ones; one entry per job. */
  readonly jobs: readonly { readonly job: Readonly<JobRecord>; readonly isNew: boolean }[];
  /** New attempts and new versions of existing ones (keyed by attemptId). */
  readonly attempts: readonly Readonly<AttemptRecord>[];
  /** New schedules and new versions of existing ones (keyed by name); absent = none. */
  readonly schedules?: readonly Readonly<ScheduleRecord>[];
  /** Names of schedules to delete (after `schedules` are written); absent = none. */
  readonly deletedSchedules?: readonly string[];
  /** New versions of queue settings (keyed by name); absent = none. */
  readonly queues?: readonly Readonly<QueueSettingsRecord>[];
  /** Jobs whose stored steps are all deleted (a rerun), before `steps` are written; absent = none. */
  readonly clearedSteps?: readonly string[];
  /** New steps and new versions of existing ones (keyed by jobId and index); absent = none. */
  readonly steps?: readonly Readonly<StepRecord>[];
  /**
   * Waits begun (`ctx.waitFor`): stored with the dependencies, so recovery
   * brings the waited-for job's row (as a parent's) and purge keeps it.
   */
  readonly stepWaits?: readonly Readonly<StepWaitRecord>[];
  /** Groups held back, new or later (keyed by queue and group key); absent = none. */
  readonly groupHolds?: readonly Readonly<GroupHoldRecord>[];
  /** Delete the group holds that ended before this time (after `groupHolds`); absent = none. */
  readonly groupHoldsEndedBeforeMs?: number;
  /** New signals and new versions of existing ones (keyed by jobId and seq); absent = none. */
  readonly signals?: readonly Readonly<SignalRecord>[];
  /** New events (an event is written once); absent = none. */
  readonly events?: readonly Readonly<EventRecord>[];
  /** New triggers and new versions of existing ones (keyed by name); absent = none. */
  readonly triggers?: readonly Readonly<TriggerRecord>[];
  /** Names of triggers to delete (after `triggers` are written); absent = none. */
  readonly deletedTriggers?: readonly string[];
  /**
   * Messages to other shards' cores (the cluster's outbox, `dtp.shard_outbox`;
   * PostgreSQL only), inserted in this order: each exists exactly when the
   * change that sends it is committed. Absent = none.
   */
  readonly outbox?: readonly Readonly<OutboxRow>[];
  /**
   * Ids of outbox messages to this shard that this batch applied: deleted in
   * the same transaction, so a message is gone exactly when the change that
   * applies it is committed. Absent = none.
   */
  readonly outboxDone?: readonly number[];
  /** Children in other shards that wait for a job of this one (new rows); absent = none. */
  readonly remoteDependents?: readonly Readonly<RemoteDependentRecord>[];
  /**
   * Parents whose remote dependents were all told of their end: their rows
   * go (after `remoteDependents` are written). Absent = none.
   */
  readonly remoteDependentsDone?: readonly string[];
  /** Ended parents in other shards, as this shard's children heard of them (keyed by id); absent = none. */
  readonly remoteParents?: readonly Readonly<RemoteParentRecord>[];
}

/**
 * What one shard's core tells another's (docs/ARCHITECTURE.md, "Across
 * shards: the outbox"). Every application of a message is idempotent: a
 * message may be delivered again after a restart or a takeover.
 */
export type OutboxBody =
  /**
   * A flow submitted to another shard made these jobs of the target shard:
   * their rows as the flow made them (ids already naming the target shard;
   * `seq` is the target's to give), parents first. A job already there was
   * applied before. `watchers`: the sender's children of those jobs (the
   * same flow's), applied as `watch`es once the jobs exist.
   */
  | {
      readonly type: 'createJobs';
      readonly jobs: readonly JobRecord[];
      readonly watchers?: readonly RemoteDependentRecord[];
    }
  /**
   * `childId`, in shard `childShard`, waits for `parentId`, a job of the
   * target shard: a child of it (`dependsOn`), or a job in `ctx.waitFor`.
   */
  | {
      readonly type: 'watch';
      readonly parentId: string;
      readonly childId: string;
      readonly childShard: number;
    }
  /**
   * `parentId` ended (state null: the target shard has no such job);
   * `childIds`: the target shard's jobs that the sender knew to wait for it
   * (children of `dependsOn`, and jobs in `ctx.waitFor`). `error`: the
   * job's error when it has one (absent: none, and in messages written
   * before it was carried).
   */
  | {
      readonly type: 'parentEnded';
      readonly parentId: string;
      readonly taskType: string;
      readonly state: TerminalState | null;
      readonly result: string | null;
      readonly resultFormat: ResultFormat | null;
      readonly error?: string | null;
      readonly childIds: readonly string[];
    };

/** One message to write to the outbox. */
export interface OutboxRow {
  readonly targetShard: number;
  readonly body: OutboxBody;
}

/** One message read from the outbox (`id`: its place, increasing in the order of insertion). */
export interface OutboxMessage extends OutboxRow {
  readonly id: number;
}

/** A child in another shard waiting for a job of this shard. Keyed by (parentId, childId). */
export interface RemoteDependentRecord {
  parentId: string;
  childId: string;
  childShard: number;
}

/** A parent in another shard that ended, as this shard's children heard of it. Keyed by parentId. */
export interface RemoteParentRecord {
  parentId: string;
  taskType: string;
  state: TerminalState;
  result: string | null;
  resultFormat: ResultFormat | null;
}

export interface ListQuery {
  /** Only rows with seq below this (the cursor); null = from the newest. */
  beforeSeq: number | null;
  /** Only rows in one of these states; null = all. */
  states: readonly JobState[] | null;
  /** Only rows of this task type; null = all. */
  taskType: string | null;
  /** At most this many rows. */
  limit: number;
  /** Only rows of this named queue; null or absent = all. */
  queue?: string | null;
  /** Only rows that finished at or after this time (epoch ms); null or absent = all. */
  finishedSinceMs?: number | null;
}

/**
 * Deletes terminal jobs (and their attempts) of one state that finished
 * before a time. A job that a non-terminal job depends on is kept: its
 * dependent still needs its result.
 */
export interface PurgeQuery {
  /**
   * Purging COMPLETED jobs also deletes the events published before
   * `finishedBeforeMs` (their ids no longer answer), the oldest first and at
   * most {@link PURGE_EVENTS_PER_ROW} × `limit` of them per call (the next
   * calls take the rest); any purge deletes the signals of the jobs it
   * deletes. `deleted` counts jobs only.
   */
  state: TerminalState;
  /** Only jobs whose finishedAtMs is strictly below this. */
  finishedBeforeMs: number;
  /** At most this many jobs per call (background retention works in small steps). */
  limit: number;
}

/**
 * Events a purge call deletes at most per job row of its `limit`: an event
 * row is small, and a step must stay short even after a long time without
 * purges, while keeping up with events published faster than jobs end.
 */
export const PURGE_EVENTS_PER_ROW = 20;

/** A read of history, requested by the core as an effect. */
export type StoreRead =
  | { op: 'job'; jobId: string; withAttempts: boolean }
  | { op: 'jobByKey'; key: string }
  /** One published event by its id. */
  | { op: 'event'; eventId: string }
  /** `withAttempts`: also the attempts of the rows returned (any order). */
  | { op: 'list'; query: ListQuery; withAttempts?: boolean }
  | { op: 'purge'; query: PurgeQuery }
  /** Several jobs by id (parents named by a submission); unknown ids are left out. */
  | { op: 'jobs'; jobIds: readonly string[] }
  /** The child links of these parents (any order). */
  | { op: 'children'; parentJobIds: readonly string[] }
  /** The newest jobs a schedule made (by seq, newest first). */
  | { op: 'scheduleJobs'; scheduleName: string; limit: number }
  /** Stored jobs counted by queue and state (every queue, or one). */
  | { op: 'queueCounts'; queue: string | null }
  /**
   * The next window of delayed jobs: SCHEDULED jobs without parents whose
   * (runAtMs, seq) comes after `after` and whose runAtMs is at most
   * `untilMs`, in that order, at most `limit` of them.
   */
  | {
      op: 'scheduledWindow';
      after: { atMs: number; seq: number };
      untilMs: number;
      limit: number;
    };

/** The answer to a {@link StoreRead}, tagged with the same `op`. */
export type StoreReadResult =
  /** `children`: the ids of the job's children, oldest first (absent = none). */
  | { op: 'job'; job: JobRecord | null; attempts: AttemptRecord[] | null; children?: string[] }
  | { op: 'jobByKey'; job: JobRecord | null }
  | { op: 'event'; event: EventRecord | null }
  | { op: 'list'; jobs: JobRecord[]; attempts?: AttemptRecord[] }
  | { op: 'purge'; deleted: number }
  | { op: 'jobs'; jobs: JobRecord[] }
  | { op: 'children'; links: ChildLink[] }
  | { op: 'scheduleJobs'; jobs: JobRecord[] }
  | { op: 'queueCounts'; counts: QueueCount[] }
  | { op: 'scheduledWindow'; jobs: JobRecord[] };

/**
 * Which delayed jobs recovery loads: those due by `untilMs`, at most `limit`
 * (earliest first, by runAtMs then seq). SCHEDULED jobs with parents are
 * always loaded (their parents' rows come with them).
 */
export interface ScheduledWindowQuery {
  untilMs: number;
  limit: number;
}

/** How many stored jobs of one queue are in one state. */
export interface QueueCount {
  queue: string;
  state: JobState;
  count: number;
}

/** What restart recovery starts from. */
export interface RecoveredState {
  /** Every non-terminal job, in submission order. */
  activeJobs: JobRecord[];
  /** The attempts of those jobs, in any order. */
  activeAttempts: AttemptRecord[];
  /** The recorded steps of those jobs, in any order; absent = none. */
  activeSteps?: StepRecord[];
  /** Highest seq ever stored (0 when empty). */
  maxSeq: number;
  /** Every schedule (absent from a store without any: none). */
  schedules?: ScheduleRecord[];
  /** Every queue's stored settings (absent: a store without queue settings). */
  queueSettings?: QueueSettingsRecord[];
  /**
   * The terminal jobs that active jobs depend on (their results go to the
   * dependents' handlers), and those active jobs wait for (`stepWaits`);
   * absent = none.
   */
  parentJobs?: JobRecord[];
  /** The child links of every job in `activeJobs` (any order); absent = none. */
  childLinks?: ChildLink[];
  /**
   * The epoch (fencing token) of the leadership term this recovery starts,
   * with a store shared by several coordinators (PostgreSQL); absent with
   * one coordinator (SQLite). Every term takes the next epoch, so the
   * attempts it finds running were started under an earlier one.
   */
  epoch?: number;
  /**
   * Recovery was asked for a window of delayed jobs: the query, and how many
   * SCHEDULED jobs the store holds beyond it (not in `activeJobs`). Absent:
   * every SCHEDULED job is in `activeJobs`.
   */
  scheduledWindow?: ScheduledWindowQuery & { farCount: number };
  /**
   * Ended jobs whose `throttle` window is still open at the `nowMs` given
   * to {@link Store.recover} (every ended job with a window when none was
   * given); absent = none.
   */
  throttledJobs?: JobRecord[];
  /** Every stored group hold (the core forgets the ended ones); absent = none. */
  groupHolds?: GroupHoldRecord[];
  /** The signals of the jobs in `activeJobs` that no wait has taken (any order); absent = none. */
  activeSignals?: SignalRecord[];
  /** Every trigger; absent = none. */
  triggers?: TriggerRecord[];
  /** Every child in another shard waiting for a job of this shard; absent = none. */
  remoteDependents?: RemoteDependentRecord[];
  /** The ended parents in other shards that active jobs depend on (any order); absent = none. */
  remoteParents?: RemoteParentRecord[];
}

export interface Store {
  /** A short description for logs (`sqlite data/coordinator.db`). */
  readonly description: string;
  /**
   * Everything recovery needs; with `window`, only the delayed jobs in it
   * (the others stay in the store, counted); with `nowMs`, only the
   * throttle windows still open then.
   */
  recover(window?: ScheduledWindowQuery, nowMs?: number): Promise<RecoveredState>;
  /**
   * Makes the batch durable, atomically, after every batch given before it.
   * Rejects with {@link StoreError}; after a rejection nothing later commits.
   */
  commit(batch: WriteBatch): Promise<void>;
  /** Runs one read of committed history. Rejects with {@link StoreError}. */
  read(read: StoreRead): Promise<StoreReadResult>;
  /** Idempotent. Waits for commits already given. */
  close(): Promise<void>;
  /**
   * Up to `limit` messages of the cluster's outbox to `shard` whose id is
   * above `afterId`, by id (PostgreSQL only: shards exist nowhere else).
   * Ids are given at insert, so a message with a lower id may still commit
   * after one with a higher id was read: a reader that must miss none reads
   * from the lowest id it has not applied (messages applied are deleted).
   */
  readOutbox?(shard: number, afterId: number, limit: number): Promise<OutboxMessage[]>;
  /**
   * Looks for damage in the stored data without holding up the store (the
   * SQLite store reads the whole file on a thread of its own); resolves with
   * the problems found, none when sound. Optional: backends whose engine
   * checks itself need not offer it.
   */
  checkIntegrity?(): Promise<string[]>;
}

/** A write or read the storage could not do (disk full, I/O error, ...). */
export class StoreError extends DtpError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.StoreFailed, message, options);
  }
}
