/**
 * The SQLite implementation of {@link Store}, on better-sqlite3.
 *
 * Journal mode WAL. `synchronous=NORMAL` (durability `normal`) commits survive
 * a crash of the process but not necessarily of the machine; `FULL` (durability
 * `full`) fsyncs the WAL on every commit and survives power loss.
 *
 * Where commits happen depends on that choice, so that the event loop never
 * waits for the disk:
 * - `full`: a writer thread (writer-thread.ts) owns the writing connection;
 *   every commit is an fsync there, and batches queued while one commits
 *   share the next transaction (group commit).
 * - `normal`: a commit writes to the WAL without waiting for the disk (tens
 *   of microseconds), so it runs inline on the main thread and its batch is
 *   durable against a process crash when `commit()` returns; the one fsync
 *   left, the checkpoint, runs on a background thread (checkpoint-thread.ts)
 *   and never on the event loop; it also rewinds the WAL under a steady
 *   load, which passive checkpoints alone never do. Handing each batch to a
 *   thread would cost two thread wake-ups per commit, which on a busy
 *   machine is most of a client's wait (see docs/MEASURED_BEHAVIOR.md).
 * Reads of history run on the main thread, on a connection of their own,
 * which in WAL mode sees the last committed state (point lookups by key take
 * microseconds).
 */
import { Worker } from 'node:worker_threads';
import type { Database, Statement } from 'better-sqlite3';
import { describeError } from '../../protocol/errors.js';
import {
  StoreError,
  type ChildLink,
  type JobRecord,
  type QueueCount,
  type ListQuery,
  type PurgeQuery,
  type RecoveredState,
  type ScheduledWindowQuery,
  type Store,
  type StoreRead,
  type StoreReadResult,
  type WriteBatch,
} from '../store.js';
import { openDatabase } from './open.js';
import {
  ATTEMPT_COLUMNS,
  JOB_COLUMNS,
  SCHEDULE_COLUMNS,
  attemptFromRow,
  attemptValues,
  columnList,
  queueFromRow,
  queueValues,
  QUEUE_COLUMNS,
  type QueueRow,
  jobFromRow,
  dependencyValues,
  groupHoldFromRow,
  groupHoldValues,
  type GroupHoldRow,
  jobInsertValues,
  jobUpdateValues,
  scheduleFromRow,
  scheduleValues,
  type AttemptRow,
  type JobRow,
  type ScheduleRow,
  type SqlValue,
} from './rows.js';
import { migrate } from './schema.js';
import {
  EVENT_COLUMNS,
  encodeSignalParts,
  eventFromRow,
  recoverSignalParts,
  type EventRow,
} from './signal-rows.js';
import type { EncodedBatch } from './writer.js';
import type { JobState } from '../../protocol/messages.js';
import { InlineWriterLink, ThreadWriterLink, type WriterLink } from './writer-links.js';
import type { CheckpointOptions } from './writer-protocol.js';

export interface SqliteStoreOptions {
  /** File path (parent folders are created). */
  path: string;
  /** `normal` (default) or `full` (fsync per commit). */
  durability?: 'normal' | 'full';
  /** Where commits run; default: inline for `normal`, a thread for `full`. */
  writer?: 'inline' | 'thread';
  /** Told the duration of every transaction the writer commits, in ms. */
  onCommit?: (durationMs: number) => void;
  /**
   * The inline writer's background checkpoints (checkpoint-thread.ts): how
   * often, and the WAL size beyond which they rewind it (defaults: 1 s, 4 MiB).
   */
  checkpoints?: CheckpointOptions;
}

interface StepRow {
  job_id: string;
  idx: number;
  name: string;
  result: string | null;
  at_ms: number;
}

const ACTIVE = "state IN ('QUEUED', 'RUNNING', 'RETRY_WAIT', 'SCHEDULED', 'WAITING')";
/** The active states but SCHEDULED (a delayed job has no attempts yet). */
const UNSCHEDULED = "state IN ('QUEUED', 'RUNNING', 'RETRY_WAIT', 'WAITING')";
const TERMINAL = "state IN ('COMPLETED', 'FAILED', 'CANCELLED')";

export class SqliteStore implements Store {
  readonly description: string;
  readonly #link: WriterLink;
  readonly #reader: Database;
  readonly #byId: Statement<[string], JobRow>;
  readonly #byKey: Statement<[string], JobRow>;
  readonly #attemptsOf: Statement<[string], AttemptRow>;
  readonly #byIds: Statement<[string], JobRow>;
  readonly #stepsOf: Statement<[string], { name: string; at_ms: number; result_bytes: number }>;
  readonly #uncountedOf: Statement<[string], { requeues: number; rateLimited: number }>;
  readonly #childrenOf: Statement<
    [string],
    { parent_job_id: string; child_key: string | null; job_id: string }
  >;
  readonly #eventById: Statement<[string], EventRow>;
  readonly #lists = new Map<string, Statement<(string | number)[], JobRow>>();
  #closing: Promise<void> | null = null;
  /** Integrity checks running on threads of their own. */
  readonly #checks = new Set<Worker>();

  readonly #path: string;

  private constructor(path: string, reader: Database, link: WriterLink) {
    this.description = `sqlite ${path}`;
    this.#path = path;
    this.#reader = reader;
    this.#link = link;
    this.#byId = reader.prepare(`SELECT ${columnList(JOB_COLUMNS)} FROM jobs WHERE job_id = ?`);
    this.#byKey = reader.prepare(
      `SELECT ${columnList(JOB_COLUMNS)} FROM jobs WHERE idempotency_key = ?`,
    );
    this.#byIds = reader.prepare(
      `SELECT ${columnList(JOB_COLUMNS)} FROM jobs WHERE job_id IN (SELECT value FROM json_each(?))`,
    );
    this.#stepsOf = reader.prepare(
      // length() of a BLOB counts bytes; of the TEXT itself it would count characters.
      'SELECT name, at_ms, coalesce(length(CAST(result AS BLOB)), 0) AS result_bytes FROM job_steps WHERE job_id = ? ORDER BY idx',
    );
    this.#uncountedOf = reader.prepare(
      `SELECT count(*) FILTER (WHERE outcome = 'REQUEUED') AS requeues,
         count(*) FILTER (WHERE outcome = 'RATE_LIMITED') AS rateLimited
       FROM attempts WHERE job_id = ? AND outcome IN ('REQUEUED', 'RATE_LIMITED')`,
    );
    this.#childrenOf = reader.prepare(
      `SELECT parent_job_id, child_key, job_id FROM jobs
        WHERE parent_job_id IN (SELECT value FROM json_each(?)) AND parent_job_id IS NOT NULL
        ORDER BY seq`,
    );
    this.#attemptsOf = reader.prepare(
      `SELECT ${columnList(ATTEMPT_COLUMNS)} FROM attempts WHERE job_id = ? ORDER BY attempt_number`,
    );
    this.#eventById = reader.prepare(
      `SELECT ${columnList(EVENT_COLUMNS)} FROM events WHERE event_id = ?`,
    );
  }

  /** The children of these parents (through the unique index of child keys), oldest first. */
  #childLinksOf(parentJobIds: readonly string[]): ChildLink[] {
    if (parentJobIds.length === 0) return [];
    return this.#childrenOf.all(JSON.stringify(parentJobIds)).map((row) => ({
      parentJobId: row.parent_job_id,
      childKey: row.child_key ?? '',
      jobId: row.job_id,
    }));
  }

  /** Opens (creating and migrating as needed) the database; rejects with {@link StoreError}. */
  static async open(options: SqliteStoreOptions): Promise<SqliteStore> {
    const { path, onCommit } = options;
    if (path === ':memory:' || path === '') {
      throw new StoreError('SqliteStore needs a file; use MemoryStore for :memory:');
    }
    const durability = options.durability ?? 'normal';
    const where = options.writer ?? (durability === 'full' ? 'thread' : 'inline');
    if (where === 'thread') {
      const link = await ThreadWriterLink.start(path, durability, onCommit);
      try {
        return new SqliteStore(path, openDatabase(path, durability, { readOnly: true }), link);
      } catch (err) {
        await link.close();
        throw err;
      }
    }
    const db = openDatabase(path, durability);
    try {
      migrate(db);
      return new SqliteStore(
        path,
        db,
        new InlineWriterLink(db, path, onCommit, options.checkpoints),
      );
    } catch (err) {
      db.close();
      throw err instanceof StoreError
        ? err
        : new StoreError(`cannot open database ${path}: ${describeError(err)}`, { cause: err });
    }
  }

  recover(window?: ScheduledWindowQuery, nowMs?: number): Promise<RecoveredState> {
    return this.#readNow(() => {
      const windowed = window === undefined ? null : this.#recoverWindow(window);
      const activeJobs =
        windowed?.activeJobs ??
        this.#reader
          .prepare<[], JobRow>(
            `SELECT ${columnList(JOB_COLUMNS)} FROM jobs WHERE ${ACTIVE} ORDER BY seq`,
          )
          .all()
          .map(jobFromRow);
      const activeAttempts = this.#reader
        .prepare<[], AttemptRow>(
          `SELECT ${columnList(ATTEMPT_COLUMNS, 'a.')} FROM attempts a
             JOIN jobs j ON j.job_id = a.job_id
            WHERE j.${windowed === null ? ACTIVE : `${UNSCHEDULED} OR (j.state = 'SCHEDULED' AND j.attempts > 0)`}`,
        )
        .all()
        .map(attemptFromRow);
      const activeSteps = this.#reader
        .prepare<[], StepRow>(
          `SELECT s.job_id, s.idx, s.name, s.result, s.at_ms FROM job_steps s
             JOIN jobs j ON j.job_id = s.job_id WHERE j.${ACTIVE}`,
        )
        .all()
        .map((row) => ({
          jobId: row.job_id,
          index: row.idx,
          name: row.name,
          result: row.result,
          atMs: row.at_ms,
        }));
      const max = this.#reader
        .prepare<[], { m: number | null }>('SELECT max(seq) AS m FROM jobs')
        .get();
      const queueSettings = this.#reader
        .prepare<[], QueueRow>(
          `SELECT ${columnList(QUEUE_COLUMNS)} FROM queue_settings ORDER BY name`,
        )
        .all()
        .map(queueFromRow);
      const parentJobs =
        windowed !== null
          ? this.#terminalParentsOf(activeJobs)
          : this.#reader
              .prepare<[], JobRow>(
                // Driven from the active jobs (already read) through the index of
                // dependencies (CROSS JOIN fixes SQLite's join order): no other
                // part of the jobs table is read, so a damaged page of old
                // history does not stop a restart.
                `SELECT DISTINCT ${columnList(JOB_COLUMNS, 'p.')} FROM jobs c
             CROSS JOIN job_dependencies d CROSS JOIN jobs p
            WHERE c.${ACTIVE} AND d.job_id = c.job_id AND p.job_id = d.parent_id
              AND p.${TERMINAL}`,
              )
              .all()
              .map(jobFromRow);
      const schedules = this.#reader
        .prepare<[], ScheduleRow>(
          `SELECT ${columnList(SCHEDULE_COLUMNS)} FROM schedules ORDER BY name`,
        )
        .all()
        .map(scheduleFromRow);
      const childLinks = this.#childLinksOf(activeJobs.map((job) => job.jobId));
      const throttledJobs = this.#reader
        .prepare<[number], JobRow>(
          // Through the partial index of throttle windows: the open ones are few.
          `SELECT ${columnList(JOB_COLUMNS)} FROM jobs INDEXED BY jobs_dedup_until
            WHERE dedup_until_ms > ? AND ${TERMINAL} ORDER BY seq`,
        )
        .all(nowMs ?? Number.MIN_SAFE_INTEGER)
        .map(jobFromRow);
      const groupHolds = this.#reader
        .prepare<[], GroupHoldRow>(
          'SELECT queue, group_key, until_ms FROM group_holds ORDER BY queue, group_key',
        )
        .all()
        .map(groupHoldFromRow);
      const loaded = new Set(activeJobs.map((job) => job.jobId));
      return {
        activeJobs,
        activeAttempts,
        ...(activeSteps.length > 0 && { activeSteps }),
        maxSeq: max?.m ?? 0,
        parentJobs,
        childLinks,
        schedules,
        queueSettings,
        throttledJobs,
        groupHolds,
        ...recoverSignalParts(this.#reader, loaded),
        ...(window !== undefined &&
          windowed !== null && { scheduledWindow: { ...window, farCount: windowed.farCount } }),
      };
    });
  }

  /**
   * The active jobs of a windowed recovery: every non-SCHEDULED one, the
   * SCHEDULED ones with parents, with steps or with a deduplication key,
   * and the earliest delayed jobs in the window (through the partial index
   * by due time); the rest are counted.
   */
  #recoverWindow(window: ScheduledWindowQuery): { activeJobs: JobRecord[]; farCount: number } {
    const cols = columnList(JOB_COLUMNS);
    const others = this.#reader
      .prepare<[], JobRow>(`SELECT ${cols} FROM jobs WHERE ${UNSCHEDULED}`)
      .all();
    // Delayed jobs with parents, and delayed parents (the graph needs both),
    // driven from the dependencies: the many other delayed jobs are not visited.
    const linked = this.#reader
      .prepare<[], JobRow>(
        `SELECT DISTINCT ${columnList(JOB_COLUMNS, 'j.')} FROM job_dependencies d
           CROSS JOIN jobs j WHERE j.job_id IN (d.job_id, d.parent_id) AND j.state = 'SCHEDULED'`,
      )
      .all();
    // Sleeping jobs (SCHEDULED with steps) are kept in memory whenever they are due.
    const sleeping = this.#reader
      .prepare<[], JobRow>(
        `SELECT ${columnList(JOB_COLUMNS, 'j.')} FROM (SELECT DISTINCT job_id FROM job_steps) st
           CROSS JOIN jobs j WHERE j.job_id = st.job_id AND j.state = 'SCHEDULED'`,
      )
      .all();
    // Delayed jobs with a deduplication key (the core decides on keys from
    // memory) or that ran before (a rate-limited one: its attempts come with it).
    const keyed = this.#reader
      .prepare<[], JobRow>(
        `SELECT ${columnList(JOB_COLUMNS)} FROM jobs INDEXED BY jobs_scheduled_kept
          WHERE state = 'SCHEDULED' AND (dedup_key IS NOT NULL OR attempts > 0)`,
      )
      .all();
    // Delayed jobs holding signals no wait took (the core keeps them with the job).
    const signalled = this.#reader
      .prepare<[], JobRow>(
        `SELECT ${columnList(JOB_COLUMNS, 'j.')} FROM
           (SELECT DISTINCT job_id FROM job_signals INDEXED BY job_signals_held
             WHERE consumed = 0) s
           CROSS JOIN jobs j WHERE j.job_id = s.job_id AND j.state = 'SCHEDULED'`,
      )
      .all();
    const near = this.#scheduledWindow({ atMs: -1, seq: 0 }, window.untilMs, window.limit);
    const total = this.#reader
      .prepare<[], { n: number }>(
        "SELECT count(*) AS n FROM jobs INDEXED BY jobs_scheduled_run_at WHERE state = 'SCHEDULED'",
      )
      .get();
    const scheduled = new Map<string, JobRow>();
    for (const row of [...linked, ...sleeping, ...keyed, ...signalled, ...near]) {
      scheduled.set(row.job_id, row);
    }
    const activeJobs = [...others, ...scheduled.values()]
      .sort((a, b) => a.seq - b.seq)
      .map(jobFromRow);
    return { activeJobs, farCount: (total?.n ?? 0) - scheduled.size };
  }

  /** Delayed jobs without parents after `after` by (run_at_ms, seq), due by `untilMs`. */
  #scheduledWindow(after: { atMs: number; seq: number }, untilMs: number, limit: number): JobRow[] {
    return this.#reader
      .prepare<[number, number, number, number], JobRow>(
        // The partial index by due time, by name: the planner would rather
        // take (state, seq) and visit every SCHEDULED row.
        `SELECT ${columnList(JOB_COLUMNS)} FROM jobs INDEXED BY jobs_scheduled_run_at
          WHERE state = 'SCHEDULED' AND depends_on IS NULL AND run_at_ms <= ?
            AND (run_at_ms, seq) > (?, ?)
          ORDER BY run_at_ms, seq LIMIT ?`,
      )
      .all(untilMs, after.atMs, after.seq, limit);
  }

  /** The terminal parents of these jobs (their results go to the dependents' handlers). */
  #terminalParentsOf(jobs: readonly JobRecord[]): JobRecord[] {
    const ids = new Set<string>();
    for (const job of jobs) for (const id of job.dependsOn ?? []) ids.add(id);
    if (ids.size === 0) return [];
    const terminal = new Set<string>(['COMPLETED', 'FAILED', 'CANCELLED']);
    return this.#byIds
      .all(JSON.stringify([...ids]))
      .map(jobFromRow)
      .filter((job) => terminal.has(job.state));
  }

  commit(batch: WriteBatch): Promise<void> {
    if (this.#closing !== null) return Promise.reject(new StoreError('store is closed'));
    const shardLinks = shardLinksOf(batch);
    if (shardLinks !== null) {
      // Shards exist on PostgreSQL only, and a core without a shard makes
      // none of these: one here is a bug, refused rather than dropped.
      return Promise.reject(
        new StoreError(`a SQLite store keeps no ${shardLinks}: no shards here`),
      );
    }
    const inserts: SqlValue[][] = [];
    const updates: SqlValue[][] = [];
    const dependencies: SqlValue[][] = [];
    for (const { job, isNew } of batch.jobs) {
      if (isNew) {
        inserts.push(jobInsertValues(job));
        if (job.dependsOn !== null) dependencies.push(...dependencyValues(job));
      } else updates.push(jobUpdateValues(job));
    }
    for (const { jobId, targetId } of batch.stepWaits ?? []) dependencies.push([targetId, jobId]);
    const attempts = batch.attempts.map(attemptValues);
    const schedules = (batch.schedules ?? []).map(scheduleValues);
    const deletedSchedules = [...(batch.deletedSchedules ?? [])];
    const encoded: EncodedBatch = {
      batchId: batch.batchId,
      inserts,
      updates,
      attempts,
      dependencies,
      schedules,
      deletedSchedules,
    };
    if (batch.queues !== undefined && batch.queues.length > 0) {
      encoded.queues = batch.queues.map(queueValues);
    }
    if (batch.clearedSteps !== undefined && batch.clearedSteps.length > 0) {
      encoded.clearedSteps = [...batch.clearedSteps];
    }
    if (batch.steps !== undefined && batch.steps.length > 0) {
      encoded.steps = batch.steps.map((st) => [st.jobId, st.index, st.name, st.result, st.atMs]);
    }
    if (batch.groupHolds !== undefined && batch.groupHolds.length > 0) {
      encoded.groupHolds = batch.groupHolds.map(groupHoldValues);
    }
    if (batch.groupHoldsEndedBeforeMs !== undefined) {
      encoded.groupHoldsEndedBeforeMs = batch.groupHoldsEndedBeforeMs;
    }
    return this.#link.commit({ ...encoded, ...encodeSignalParts(batch) });
  }

  read(read: StoreRead): Promise<StoreReadResult> {
    switch (read.op) {
      case 'event':
        return this.#readNow(() => {
          const row = this.#eventById.get(read.eventId);
          return { op: 'event', event: row === undefined ? null : eventFromRow(row) };
        });
      case 'job':
        return this.#readNow(() => {
          const row = this.#byId.get(read.jobId);
          const attempts =
            read.withAttempts && row !== undefined
              ? this.#attemptsOf.all(read.jobId).map(attemptFromRow)
              : null;
          const children =
            row === undefined ? [] : this.#childLinksOf([read.jobId]).map((l) => l.jobId);
          return {
            op: 'job',
            job: row === undefined ? null : this.#withSteps(row),
            attempts,
            ...(children.length > 0 && { children }),
          };
        });
      case 'children':
        return this.#readNow(() => ({
          op: 'children',
          links: this.#childLinksOf(read.parentJobIds),
        }));
      case 'jobByKey':
        return this.#readNow(() => {
          const row = this.#byKey.get(read.key);
          return { op: 'jobByKey', job: row === undefined ? null : jobFromRow(row) };
        });
      case 'list':
        return this.#readNow(() => {
          const jobs = this.#list(read.query);
          if (read.withAttempts !== true) return { op: 'list', jobs };
          const attempts = jobs.flatMap((job) =>
            this.#attemptsOf.all(job.jobId).map(attemptFromRow),
          );
          return { op: 'list', jobs, attempts };
        });
      case 'purge':
        return this.#purge(read.query).then((deleted) => ({ op: 'purge', deleted }));
      case 'jobs':
        return this.#readNow(() => ({
          op: 'jobs',
          jobs: this.#byIds.all(JSON.stringify(read.jobIds)).map(jobFromRow),
        }));
      case 'scheduleJobs':
        return this.#readNow(() => ({
          op: 'scheduleJobs',
          jobs: this.#reader
            .prepare<[string, number], JobRow>(
              `SELECT ${columnList(JOB_COLUMNS)} FROM jobs WHERE schedule_name = ?
                 ORDER BY seq DESC LIMIT ?`,
            )
            .all(read.scheduleName, read.limit)
            .map(jobFromRow),
        }));
      case 'queueCounts':
        return this.#readNow(() => ({ op: 'queueCounts', counts: this.#queueCounts(read.queue) }));
      case 'scheduledWindow':
        return this.#readNow(() => ({
          op: 'scheduledWindow',
          jobs: this.#scheduledWindow(read.after, read.untilMs, read.limit).map(jobFromRow),
        }));
    }
  }

  /**
   * A job's row with the names and times of its steps, its requeues and its
   * rate-limited attempts (for its snapshot).
   */
  #withSteps(row: JobRow): JobRecord {
    const job = jobFromRow(row);
    const uncounted = this.#uncountedOf.get(job.jobId);
    if (uncounted !== undefined && uncounted.requeues > 0) job.requeues = uncounted.requeues;
    if (uncounted !== undefined && uncounted.rateLimited > 0) {
      job.rateLimited = uncounted.rateLimited;
    }
    const steps = this.#stepsOf.all(job.jobId);
    if (steps.length > 0) {
      job.steps = steps.map((st) => ({
        name: st.name,
        atMs: st.at_ms,
        resultBytes: st.result_bytes,
      }));
    }
    return job;
  }

  #queueCounts(queue: string | null): QueueCount[] {
    const rows =
      queue === null
        ? this.#reader
            .prepare<[], { queue: string; state: string; n: number }>(
              'SELECT queue, state, count(*) AS n FROM jobs GROUP BY queue, state',
            )
            .all()
        : this.#reader
            .prepare<[string], { queue: string; state: string; n: number }>(
              'SELECT queue, state, count(*) AS n FROM jobs WHERE queue = ? GROUP BY queue, state',
            )
            .all(queue);
    return rows.map((r) => ({ queue: r.queue, state: r.state as JobState, count: r.n }));
  }

  checkIntegrity(): Promise<string[]> {
    const thread = new Worker(new URL('./integrity-thread.js', import.meta.url), {
      workerData: { path: this.#path, maxProblems: 10 },
    });
    thread.unref();
    this.#checks.add(thread);
    thread.once('exit', () => this.#checks.delete(thread));
    return new Promise((resolve) => {
      thread.once('message', (problems: string[]) => resolve(problems));
      thread.once('error', (err) => resolve([`integrity check failed: ${describeError(err)}`]));
      thread.once('exit', () => resolve([]));
    });
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      // A check still running is stopped: nothing of the database stays
      // open once close() has resolved.
      await Promise.all([...this.#checks].map((thread) => thread.terminate()));
      await this.#link.close();
      this.#reader.close();
    })();
    return this.#closing;
  }

  #list(query: ListQuery): JobRecord[] {
    const where: string[] = [];
    const params: (string | number)[] = [];
    if (query.beforeSeq !== null) {
      where.push('seq < ?');
      params.push(query.beforeSeq);
    }
    if (query.states !== null) {
      where.push(`state IN (${query.states.map(() => '?').join(', ')})`);
      params.push(...query.states);
    }
    if (query.taskType !== null) {
      where.push('task_type = ?');
      params.push(query.taskType);
    }
    if (query.queue !== undefined && query.queue !== null) {
      where.push('queue = ?');
      params.push(query.queue);
    }
    if (query.finishedSinceMs !== undefined && query.finishedSinceMs !== null) {
      where.push('finished_at_ms >= ?');
      params.push(query.finishedSinceMs);
    }
    params.push(query.limit);
    const shape = where.join(' AND ');
    let statement = this.#lists.get(shape);
    if (statement === undefined) {
      statement = this.#reader.prepare(
        `SELECT ${columnList(JOB_COLUMNS)} FROM jobs ${shape === '' ? '' : `WHERE ${shape}`} ORDER BY seq DESC LIMIT ?`,
      );
      this.#lists.set(shape, statement);
    }
    return statement.all(...params).map(jobFromRow);
  }

  #purge(query: PurgeQuery): Promise<number> {
    if (this.#closing !== null) return Promise.reject(new StoreError('store is closed'));
    return this.#link.purge(query);
  }

  #readNow<T>(fn: () => T): Promise<T> {
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(
        new StoreError(`database read failed: ${describeError(err)}`, { cause: err }),
      );
    }
  }
}

/** The first part of a batch that only a shard of a sharded database writes, or null. */
function shardLinksOf(batch: WriteBatch): string | null {
  if ((batch.outbox?.length ?? 0) > 0) return 'outbox messages';
  if ((batch.outboxDone?.length ?? 0) > 0) return 'outbox messages';
  if ((batch.remoteDependents?.length ?? 0) > 0) return 'remote dependents';
  if ((batch.remoteDependentsDone?.length ?? 0) > 0) return 'remote dependents';
  if ((batch.remoteParents?.length ?? 0) > 0) return 'remote parents';
  return null;
}
