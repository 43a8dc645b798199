/**
 * The PostgreSQL implementation of {@link Store}, on node-postgres (`pg`),
 * fenced by the leader lease.
 *
 * Every store is opened for one leadership term: it carries that term's
 * epoch, and each write checks the epoch inside its own transaction (a call
 * of `dtp.commit_batch`, schema.ts). A write after another coordinator took
 * over is refused with {@link LeaseLostError}, never applied.
 *
 * Writes: one connection of their own. Batches given while a transaction
 * runs queue up and go into the next one together (group commit): they are
 * merged (the latest version of each job and attempt) and sent as JSON in a
 * single statement, so a transaction costs one round trip and one WAL flush
 * whatever its size. After a failed commit every later one fails too
 * (fail-stop: nothing may commit behind a hole). Purges are fenced writes
 * too and run on the same connection, in order with the commits.
 *
 * Reads of history and recovery run on a small pool of other connections
 * and see committed rows only.
 *
 * A store works in one PostgreSQL schema: `dtp`, or a shard's `dtp_s<n>`.
 * Its statements are written for `dtp` and rewritten for the store's schema
 * once per schema (schema.ts, `inSchema`). Prepared statements keep their
 * names in every schema: a name is per connection, and a store's
 * connections are its own.
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { describeError } from '../../protocol/errors.js';
import type { JobState } from '../../protocol/messages.js';
import { LeaseLostError } from '../lease.js';
import {
  PURGE_EVENTS_PER_ROW,
  StoreError,
  type AttemptRecord,
  type ChildLink,
  type EventRecord,
  type GroupHoldRecord,
  type JobRecord,
  type ListQuery,
  type OutboxBody,
  type OutboxMessage,
  type PurgeQuery,
  type QueueSettingsRecord,
  type RecoveredState,
  type RemoteDependentRecord,
  type RemoteParentRecord,
  type ScheduledWindowQuery,
  type ScheduleRecord,
  type SignalRecord,
  type StepRecord,
  type Store,
  type StoreRead,
  type StoreReadResult,
  type TriggerRecord,
  type WriteBatch,
} from '../store.js';
import { clientConfig, connectClient, redactUrl, sqlState } from './connection.js';
import { mergeBatches } from './merge-batches.js';
import { OUTBOX_CHANNEL, type ShardWriter } from './shard-writer.js';
import { DEFAULT_SCHEMA, FENCED_SQLSTATE, SCHEMA_VERSION, inSchema, migrate } from './schema.js';

export { mergeBatches, type MergedGroupHold } from './merge-batches.js';

export interface PostgresStoreOptions {
  /** `postgres://user[:password]@host:port/db`. */
  url: string;
  /** The epoch of the lease this store writes under. */
  epoch: number;
  /** Connections for reads (default 4). */
  readConnections?: number;
  /** Told the duration of every transaction committed, in ms. */
  onCommit?: (durationMs: number) => void;
  /** The schema of the tables: `dtp` (the default) or a shard's `dtp_s<n>`. */
  schema?: string;
  /**
   * The write connection of every shard one sharded coordinator leads
   * (shard-writer.ts): commits go through it, combined with other shards'.
   * Without it the store opens a write connection of its own.
   */
  shardWriter?: ShardWriter;
}

/** Job columns aliased to the JobRecord's keys: a row is a JobRecord as it comes. */
const JOB_SELECT = `SELECT seq, job_id AS "jobId", task_type AS "taskType",
  payload AS "payloadJson", state, priority, attempts, max_attempts AS "maxAttempts",
  timeout_ms AS "timeoutMs", idempotency_key AS "idempotencyKey", worker_id AS "workerId",
  attempt_id AS "attemptId", deadline_at_ms AS "deadlineAtMs", retry_at_ms AS "retryAtMs",
  result, result_format AS "resultFormat", error, created_at_ms AS "createdAtMs",
  updated_at_ms AS "updatedAtMs", started_at_ms AS "startedAtMs",
  finished_at_ms AS "finishedAtMs", run_at_ms AS "runAtMs",
  schedule_name AS "scheduleName", progress, depends_on AS "dependsOn",
  on_parent_failure AS "onParentFailure", queue, group_key AS "groupKey",
  trace_context AS "traceContext", parent_job_id AS "parentJobId", child_key AS "childKey",
  dedup_key AS "dedupKey", dedup_mode AS "dedupMode", dedup_until_ms AS "dedupUntilMs",
  expires_at_ms AS "expiresAtMs", rate_limited_in_a_row AS "rateLimitedInARow"
  FROM dtp.jobs`;

/** The child links of the parents in $1 (a text array), oldest child first. */
const CHILD_LINKS = `SELECT parent_job_id AS "parentJobId", child_key AS "childKey", job_id AS "jobId"
  FROM dtp.jobs WHERE parent_job_id = ANY($1::text[]) ORDER BY seq`;
const SCHEDULE_SELECT = `SELECT name, task_type AS "taskType", cron, every_ms AS "everyMs",
  timezone, payload AS "payloadJson", max_attempts AS "maxAttempts", priority,
  timeout_ms AS "timeoutMs", overlap, catch_up AS "catchUp", paused,
  next_run_at_ms AS "nextRunAtMs", last_run_at_ms AS "lastRunAtMs", last_job_id AS "lastJobId",
  created_at_ms AS "createdAtMs", updated_at_ms AS "updatedAtMs", queue FROM dtp.schedules`;
const QUEUE_SELECT = `SELECT name, paused, concurrency, rate_max AS "rateMax",
  rate_interval_ms AS "rateIntervalMs", group_concurrency AS "groupConcurrency",
  group_rate_max AS "groupRateMax", group_rate_interval_ms AS "groupRateIntervalMs",
  updated_at_ms AS "updatedAtMs", held_until_ms AS "heldUntilMs" FROM dtp.queue_settings`;
/** The jobs without a group key are held under '' (schema.ts, migration 11). */
const GROUP_HOLD_SELECT = `SELECT queue, nullif(group_key, '') AS "groupKey", until_ms AS "untilMs"
  FROM dtp.group_holds`;
const SIGNAL_SELECT = `SELECT job_id AS "jobId", seq, name, payload AS "payloadJson",
  at_ms AS "atMs", consumed FROM dtp.job_signals`;
const EVENT_SELECT = `SELECT event_id AS "eventId", name, event_key AS "key",
  payload AS "payloadJson", at_ms AS "atMs", job_ids AS "jobIds", resumed FROM dtp.events`;
const TRIGGER_SELECT = `SELECT name, event, task_type AS "taskType", queue, priority,
  max_attempts AS "maxAttempts", created_at_ms AS "createdAtMs", updated_at_ms AS "updatedAtMs"
  FROM dtp.triggers`;
const ATTEMPT_SELECT = `SELECT a.job_id AS "jobId", a.attempt_number AS "attemptNumber",
  a.attempt_id AS "attemptId", a.worker_id AS "workerId", a.started_at_ms AS "startedAtMs",
  a.finished_at_ms AS "finishedAtMs", a.outcome, a.error FROM dtp.attempts a`;
const ACTIVE = "state IN ('QUEUED', 'RUNNING', 'RETRY_WAIT', 'SCHEDULED', 'WAITING')";
/** Delayed jobs without parents due by $1 (the partial index by due time serves it). */
const SCHEDULED_WINDOW = "state = 'SCHEDULED' AND depends_on IS NULL AND run_at_ms <= $1";
const TERMINAL = "state IN ('COMPLETED', 'FAILED', 'CANCELLED')";

/** Every statement of the store, as written for schema `dtp`. */
const DTP_STATEMENTS = {
  jobSelect: JOB_SELECT,
  childLinks: CHILD_LINKS,
  recoverJobs: `${JOB_SELECT} WHERE ${ACTIVE} ORDER BY seq`,
  // With a window: every active job but the delayed ones without parents,
  // steps, deduplication key or signals held, and of those only the earliest
  // in the window (through the partial index by due time); the rest are
  // counted.
  recoverJobsInWindow: `(${JOB_SELECT} WHERE state IN ('QUEUED', 'RUNNING', 'RETRY_WAIT', 'WAITING'))
               UNION (${JOB_SELECT} WHERE state = 'SCHEDULED' AND job_id IN
                        (SELECT d.job_id FROM dtp.job_dependencies d
                          UNION SELECT d.parent_id FROM dtp.job_dependencies d
                          UNION SELECT st.job_id FROM dtp.job_steps st
                          UNION SELECT sg.job_id FROM dtp.job_signals sg WHERE NOT sg.consumed))
               UNION (${JOB_SELECT} WHERE state = 'SCHEDULED'
                        AND (dedup_key IS NOT NULL OR attempts > 0))
               UNION (${JOB_SELECT} WHERE ${SCHEDULED_WINDOW} AND run_at_ms > $2
                      ORDER BY run_at_ms, seq LIMIT $3)
               ORDER BY seq`,
  recoverAttempts: `${ATTEMPT_SELECT} JOIN dtp.jobs j ON j.job_id = a.job_id WHERE j.${ACTIVE}`,
  recoverSteps: `SELECT s.job_id AS "jobId", s.idx AS "index", s.name, s.result, s.at_ms AS "atMs"
             FROM dtp.job_steps s JOIN dtp.jobs j ON j.job_id = s.job_id WHERE j.${ACTIVE}`,
  maxSeq: 'SELECT max(seq) AS m FROM dtp.jobs',
  recoverParents: `${JOB_SELECT} WHERE ${TERMINAL} AND job_id IN
             (SELECT d.parent_id FROM dtp.job_dependencies d JOIN dtp.jobs c ON c.job_id = d.job_id
               WHERE c.${ACTIVE})`,
  scheduledCount: "SELECT count(*) AS n FROM dtp.jobs WHERE state = 'SCHEDULED'",
  // Through the partial index of throttle windows: the open ones are few.
  throttled: `${JOB_SELECT} WHERE dedup_until_ms > $1 AND ${TERMINAL} ORDER BY seq`,
  groupHolds: `${GROUP_HOLD_SELECT} ORDER BY queue, group_key`,
  schedules: `${SCHEDULE_SELECT} ORDER BY name`,
  queues: `${QUEUE_SELECT} ORDER BY name`,
  // Through the partial index of the signals no wait took: they are few.
  heldSignals: `${SIGNAL_SELECT} s WHERE NOT s.consumed AND EXISTS
             (SELECT 1 FROM dtp.jobs j WHERE j.job_id = s.job_id AND j.${ACTIVE})
           ORDER BY s.job_id, s.seq`,
  triggers: `${TRIGGER_SELECT} ORDER BY name`,
  eventById: `${EVENT_SELECT} WHERE event_id = $1`,
  jobById: `${JOB_SELECT} WHERE job_id = $1`,
  jobByKey: `${JOB_SELECT} WHERE idempotency_key = $1`,
  queueCounts: `SELECT queue, state, count(*) AS count FROM dtp.jobs GROUP BY queue, state`,
  queueCountsOf: `SELECT queue, state, count(*) AS count FROM dtp.jobs WHERE queue = $1 GROUP BY queue, state`,
  jobsById: `${JOB_SELECT} WHERE job_id = ANY($1::text[])`,
  scheduledWindow: `${JOB_SELECT} WHERE ${SCHEDULED_WINDOW}
                     AND (run_at_ms, seq) > ($2, $3)
                   ORDER BY run_at_ms, seq LIMIT $4`,
  scheduleJobs: `${JOB_SELECT} WHERE schedule_name = $1 ORDER BY seq DESC LIMIT $2`,
  commitBatch: `SELECT dtp.commit_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,
                 $13, $14, $15, $16, $17, $18, $19, $20, $21)`,
  // The cluster's table, quoted: inSchema leaves it in schema dtp (schema.ts).
  readOutbox: `SELECT id, target_shard AS "targetShard", body FROM "dtp".shard_outbox
                WHERE target_shard = $1 AND id > $2 ORDER BY id LIMIT $3`,
  remoteDependents: `SELECT parent_id AS "parentId", child_id AS "childId",
                      child_shard AS "childShard" FROM dtp.remote_dependents`,
  // Only those an active job depends on (its dependsOn is in job_dependencies).
  remoteParents: `SELECT r.parent_id AS "parentId", r.task_type AS "taskType", r.state,
                   r.result, r.result_format AS "resultFormat" FROM dtp.remote_parents r
                 WHERE EXISTS (SELECT 1 FROM dtp.job_dependencies d
                                JOIN dtp.jobs c ON c.job_id = d.job_id
                               WHERE d.parent_id = r.parent_id AND c.${ACTIVE})`,
  purge: 'SELECT dtp.purge($1, $2, $3, $4, $5) AS deleted',
  stepsOf:
    'SELECT name, at_ms AS "atMs", coalesce(octet_length(result), 0)::int AS "resultBytes" FROM dtp.job_steps WHERE job_id = $1 ORDER BY idx',
  uncountedOf: `SELECT count(*) FILTER (WHERE outcome = 'REQUEUED')::int AS requeues,
      count(*) FILTER (WHERE outcome = 'RATE_LIMITED')::int AS "rateLimited"
    FROM dtp.attempts WHERE job_id = $1 AND outcome IN ('REQUEUED', 'RATE_LIMITED')`,
  attemptsOf: `${ATTEMPT_SELECT} WHERE a.job_id = $1 ORDER BY a.attempt_number`,
} as const;

type Statements = { readonly [K in keyof typeof DTP_STATEMENTS]: string };

const statementsBySchema = new Map<string, Statements>([[DEFAULT_SCHEMA, DTP_STATEMENTS]]);

/** The store's statements in `schema`, rewritten the first time a store uses that schema. */
function statementsIn(schema: string): Statements {
  let statements = statementsBySchema.get(schema);
  if (statements === undefined) {
    const entries = Object.entries(DTP_STATEMENTS).map(([key, sql]) => [
      key,
      inSchema(sql, schema),
    ]);
    statements = Object.fromEntries(entries) as Statements;
    statementsBySchema.set(schema, statements);
  }
  return statements;
}

interface Pending<T> {
  resolve(value: T): void;
  reject(err: Error): void;
}

type WriteOp =
  | { kind: 'commit'; batch: WriteBatch; pending: Pending<void> }
  | { kind: 'purge'; query: PurgeQuery; pending: Pending<number> };

export class PostgresStore implements Store {
  readonly description: string;
  readonly #epoch: number;
  readonly #sql: Statements;
  /** The store's own write connection, or the one its coordinator's shards share. */
  readonly #writer: { own: pg.Client } | { shared: ShardWriter };
  readonly #schema: string;
  readonly #pool: pg.Pool;
  readonly #onCommit: ((durationMs: number) => void) | undefined;
  readonly #queue: WriteOp[] = [];
  #writing: Promise<void> | null = null;
  #failure: Error | null = null;
  #closing: Promise<void> | null = null;

  private constructor(
    options: PostgresStoreOptions,
    sql: Statements,
    writer: { own: pg.Client } | { shared: ShardWriter },
    pool: pg.Pool,
  ) {
    const schema = options.schema ?? DEFAULT_SCHEMA;
    this.#schema = schema;
    this.description =
      PostgresStore.describe(options.url) + (schema === DEFAULT_SCHEMA ? '' : ` (${schema})`);
    this.#epoch = options.epoch;
    this.#sql = sql;
    this.#writer = writer;
    this.#pool = pool;
    this.#onCommit = options.onCommit;
    if ('own' in writer) {
      writer.own.on('error', (err) => this.#fail(storeError('database connection failed', err)));
    }
  }

  /** Connects, migrates the schema as needed; rejects with {@link StoreError}. */
  static async open(options: PostgresStoreOptions): Promise<PostgresStore> {
    // The connections are named after the schema: `dtp-writer-e7`, `dtp_s1-reader`.
    const schema = options.schema ?? DEFAULT_SCHEMA;
    const sql = statementsIn(schema);
    const shared = options.shardWriter;
    const writer =
      shared === undefined
        ? await connectClient({
            url: options.url,
            applicationName: `${schema}-writer-e${options.epoch}`,
          })
        : null;
    const pool = new pg.Pool({
      ...clientConfig({ url: options.url, applicationName: `${schema}-reader` }),
      max: options.readConnections ?? 4,
    });
    // A pooled connection that breaks while idle is dropped by the pool itself.
    pool.on('error', () => undefined);
    try {
      if (writer !== null) {
        await migrate(writer, SCHEMA_VERSION, schema);
      } else {
        // Without a write connection of its own, a reading one migrates.
        const client = await pool.connect();
        try {
          await migrate(client, SCHEMA_VERSION, schema);
        } finally {
          client.release();
        }
      }
    } catch (err) {
      await Promise.all([writer?.end().catch(() => undefined), pool.end()]);
      if (err instanceof StoreError) throw err;
      throw storeError(`cannot prepare ${redactUrl(options.url)}`, err);
    }
    const chosen = writer !== null ? { own: writer } : { shared: shared as ShardWriter };
    return new PostgresStore(options, sql, chosen, pool);
  }

  /** How a store on `url` is named in logs (without the password). */
  static describe(url: string): string {
    return `postgres ${redactUrl(url)}`;
  }

  /** The epoch this store writes under. */
  get epoch(): number {
    return this.#epoch;
  }

  recover(window?: ScheduledWindowQuery, nowMs?: number): Promise<RecoveredState> {
    return this.#withReader(async (client) => {
      // One snapshot for the three reads.
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      try {
        const sql = this.#sql;
        const jobs = await client.query<JobRecord>(
          window === undefined ? sql.recoverJobs : sql.recoverJobsInWindow,
          window === undefined ? [] : [window.untilMs, -1, window.limit],
        );
        const attempts = await client.query<AttemptRecord>(sql.recoverAttempts);
        const steps = await client.query<StepRecord>(sql.recoverSteps);
        const max = await client.query<{ m: number | null }>(sql.maxSeq);
        const parents = await client.query<JobRecord>(sql.recoverParents);
        let scheduledWindow: RecoveredState['scheduledWindow'];
        if (window !== undefined) {
          const total = await client.query<{ n: string }>(sql.scheduledCount);
          const loaded = jobs.rows.filter((job) => job.state === 'SCHEDULED').length;
          scheduledWindow = { ...window, farCount: Number(total.rows[0]?.n ?? 0) - loaded };
        }
        const throttled = await client.query<JobRecord>(sql.throttled, [
          nowMs ?? Number.MIN_SAFE_INTEGER,
        ]);
        const holds = await client.query<GroupHoldRecord>(sql.groupHolds);
        const schedules = await client.query<ScheduleRecord>(sql.schedules);
        const queues = await client.query<QueueSettingsRecord>(sql.queues);
        const links = await client.query<ChildLink>(sql.childLinks, [
          jobs.rows.map((job) => job.jobId),
        ]);
        const loaded = new Set(jobs.rows.map((job) => job.jobId));
        const signals = await client.query<SignalRecord>(sql.heldSignals);
        const triggers = await client.query<TriggerRecord>(sql.triggers);
        const dependents = await client.query<RemoteDependentRecord>(sql.remoteDependents);
        const remoteParents = await client.query<RemoteParentRecord>(sql.remoteParents);
        return {
          activeJobs: jobs.rows,
          activeAttempts: attempts.rows,
          ...(steps.rows.length > 0 && { activeSteps: steps.rows }),
          maxSeq: max.rows[0]?.m ?? 0,
          parentJobs: parents.rows,
          childLinks: links.rows,
          schedules: schedules.rows,
          queueSettings: queues.rows,
          throttledJobs: throttled.rows,
          groupHolds: holds.rows,
          activeSignals: signals.rows.filter((signal) => loaded.has(signal.jobId)),
          triggers: triggers.rows,
          ...(dependents.rows.length > 0 && { remoteDependents: dependents.rows }),
          ...(remoteParents.rows.length > 0 && { remoteParents: remoteParents.rows }),
          epoch: this.#epoch,
          ...(scheduledWindow !== undefined && { scheduledWindow }),
        };
      } finally {
        await client.query('COMMIT');
      }
    });
  }

  commit(batch: WriteBatch): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#enqueue({ kind: 'commit', batch, pending: { resolve, reject } });
    });
  }

  read(read: StoreRead): Promise<StoreReadResult> {
    switch (read.op) {
      case 'event':
        return this.#withReader(async (client) => {
          const rows = await client.query<EventRecord>({
            name: 'dtp_event_by_id',
            text: this.#sql.eventById,
            values: [read.eventId],
          });
          return { op: 'event', event: rows.rows[0] ?? null };
        });
      case 'job':
        return this.#withReader(async (client) => {
          const rows = await client.query<JobRecord>({
            name: 'dtp_job_by_id',
            text: this.#sql.jobById,
            values: [read.jobId],
          });
          const job = rows.rows[0] ?? null;
          const attempts =
            read.withAttempts && job !== null
              ? await attemptsOf(client, this.#sql, read.jobId)
              : null;
          if (job !== null) await addSnapshotDetails(client, this.#sql, job);
          const children =
            job === null
              ? []
              : (await client.query<ChildLink>(this.#sql.childLinks, [[read.jobId]])).rows.map(
                  (link) => link.jobId,
                );
          return { op: 'job', job, attempts, ...(children.length > 0 && { children }) };
        });
      case 'children':
        return this.#withReader(async (client) => {
          const rows = await client.query<ChildLink>(this.#sql.childLinks, [read.parentJobIds]);
          return { op: 'children', links: rows.rows };
        });
      case 'jobByKey':
        return this.#withReader(async (client) => {
          const rows = await client.query<JobRecord>({
            name: 'dtp_job_by_key',
            text: this.#sql.jobByKey,
            values: [read.key],
          });
          return { op: 'jobByKey', job: rows.rows[0] ?? null };
        });
      case 'list':
        return this.#withReader(async (client) => {
          const jobs = await listJobs(client, this.#sql, read.query);
          if (read.withAttempts !== true) return { op: 'list', jobs };
          const attempts: AttemptRecord[] = [];
          for (const job of jobs) {
            attempts.push(...(await attemptsOf(client, this.#sql, job.jobId)));
          }
          return { op: 'list', jobs, attempts };
        });
      case 'purge':
        return new Promise<number>((resolve, reject) => {
          this.#enqueue({ kind: 'purge', query: read.query, pending: { resolve, reject } });
        }).then((deleted) => ({ op: 'purge', deleted }));
      case 'queueCounts':
        return this.#withReader(async (client) => {
          const rows = await client.query<{ queue: string; state: JobState; count: string }>(
            read.queue === null ? this.#sql.queueCounts : this.#sql.queueCountsOf,
            read.queue === null ? [] : [read.queue],
          );
          const counts = rows.rows.map((r) => ({ ...r, count: Number(r.count) }));
          return { op: 'queueCounts', counts };
        });
      case 'jobs':
        return this.#withReader(async (client) => {
          const rows = await client.query<JobRecord>({
            name: 'dtp_jobs_by_id',
            text: this.#sql.jobsById,
            values: [read.jobIds],
          });
          return { op: 'jobs', jobs: rows.rows };
        });
      case 'scheduledWindow':
        return this.#withReader(async (client) => {
          const rows = await client.query<JobRecord>({
            name: 'dtp_scheduled_window',
            text: this.#sql.scheduledWindow,
            values: [read.untilMs, read.after.atMs, read.after.seq, read.limit],
          });
          return { op: 'scheduledWindow', jobs: rows.rows };
        });
      case 'scheduleJobs':
        return this.#withReader(async (client) => {
          const rows = await client.query<JobRecord>({
            name: 'dtp_schedule_jobs',
            text: this.#sql.scheduleJobs,
            values: [read.scheduleName, read.limit],
          });
          return { op: 'scheduleJobs', jobs: rows.rows };
        });
    }
  }

  readOutbox(shard: number, afterId: number, limit: number): Promise<OutboxMessage[]> {
    return this.#withReader(async (client) => {
      const rows = await client.query<{ id: string; targetShard: number; body: OutboxBody }>({
        name: 'dtp_read_outbox',
        text: this.#sql.readOutbox,
        values: [shard, afterId, limit],
      });
      // bigserial comes back as text; ids stay far below 2^53.
      return rows.rows.map((row) => ({ ...row, id: Number(row.id) }));
    });
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#writing;
      const closed = new StoreError('store is closed');
      for (const op of this.#queue.splice(0)) op.pending.reject(closed);
      await Promise.all([
        'own' in this.#writer ? this.#writer.own.end().catch(() => undefined) : undefined,
        this.#pool.end().catch(() => undefined),
      ]);
    })();
    return this.#closing;
  }

  #enqueue(op: WriteOp): void {
    if (this.#failure !== null) {
      op.pending.reject(this.#failure);
      return;
    }
    if (this.#closing !== null) {
      op.pending.reject(new StoreError('store is closed'));
      return;
    }
    this.#queue.push(op);
    this.#writing ??= this.#writeAll();
  }

  /**
   * Empties the queue, one transaction at a time, until it is empty or a
   * write failed. `#writing` is cleared in the same step as the last check of
   * the queue, so an operation queued at any moment either is seen by this
   * loop or starts the next one.
   */
  async #writeAll(): Promise<void> {
    try {
      // Let the batches of this event-loop turn join the first transaction.
      await Promise.resolve();
      while (this.#queue.length > 0 && this.#failure === null) {
        const head = this.#queue[0] as WriteOp;
        if (head.kind === 'purge') {
          this.#queue.shift();
          await this.#purge(head);
        } else {
          const group: Extract<WriteOp, { kind: 'commit' }>[] = [];
          while (this.#queue[0]?.kind === 'commit') {
            group.push(this.#queue.shift() as Extract<WriteOp, { kind: 'commit' }>);
          }
          await this.#commitGroup(group);
        }
      }
    } finally {
      this.#writing = null;
    }
  }

  async #commitGroup(group: Extract<WriteOp, { kind: 'commit' }>[]): Promise<void> {
    const started = performance.now();
    try {
      const merged = mergeBatches(group.map((op) => op.batch));
      const { inserts, updates, attempts, schedules, deletedSchedules, queues } = merged;
      const { clearedSteps, steps, stepWaits, groupHolds, groupHoldsEndedBeforeMs } = merged;
      const { signals, events, triggers, deletedTriggers } = merged;
      const { outbox, outboxDone, remoteDependents, remoteDependentsDone, remoteParents } = merged;
      const json = (rows: readonly unknown[]): string | null =>
        rows.length === 0 ? null : JSON.stringify(rows);
      const notifies = [...new Set(outbox.map((row) => row.targetShard))];
      const values = [
        this.#epoch,
        json(inserts),
        json(updates),
        json(attempts),
        json(schedules),
        json(deletedSchedules),
        json(queues),
        json(clearedSteps),
        json(steps),
        json(stepWaits),
        json(groupHolds),
        groupHoldsEndedBeforeMs,
        json(signals),
        json(events),
        json(triggers),
        json(deletedTriggers),
        json(outbox),
        json(outboxDone),
        json(remoteDependents),
        json(remoteDependentsDone),
        json(remoteParents),
      ];
      if ('shared' in this.#writer) {
        await this.#writer.shared.commit({ schema: this.#schema, values, notifies });
      } else if (notifies.length === 0) {
        await this.#writer.own.query({
          name: 'dtp_commit_batch_shards',
          text: this.#sql.commitBatch,
          values,
        });
      } else {
        // Told at commit to the shards' coordinators (shard-writer.ts, OUTBOX_CHANNEL).
        await this.#writer.own.query({
          name: 'dtp_commit_batch_notify',
          text: `${this.#sql.commitBatch}, pg_notify('${OUTBOX_CHANNEL}', $22)`,
          values: [...values, notifies.sort((a, b) => a - b).join(',')],
        });
      }
    } catch (err) {
      const first = group[0]?.batch.batchId;
      const last = group.at(-1)?.batch.batchId;
      this.#fail(writeError(`commit of batches ${first}..${last}`, this.#epoch, err));
      for (const op of group) op.pending.reject(this.#failure as Error);
      return;
    }
    this.#onCommit?.(performance.now() - started);
    for (const op of group) op.pending.resolve();
  }

  async #purge(op: Extract<WriteOp, { kind: 'purge' }>): Promise<void> {
    try {
      const { query } = op;
      const statement = {
        name: `dtp_purge_${this.#schema}`,
        text: this.#sql.purge,
        values: [
          this.#epoch,
          query.state,
          query.finishedBeforeMs,
          query.limit,
          query.limit * PURGE_EVENTS_PER_ROW,
        ],
      };
      const result =
        'own' in this.#writer
          ? await this.#writer.own.query<{ deleted: number }>(statement)
          : await this.#writer.shared.query<{ deleted: number }>(statement);
      op.pending.resolve(result.rows[0]?.deleted ?? 0);
    } catch (err) {
      const failure = writeError('purge', this.#epoch, err);
      // A fenced purge means the term is over; any other failed purge costs only itself.
      if (failure instanceof LeaseLostError) this.#fail(failure);
      op.pending.reject(failure);
    }
  }

  /** Sticky: every queued and later write is refused with `err`. */
  #fail(err: Error): void {
    this.#failure ??= err;
    for (const op of this.#queue.splice(0)) op.pending.reject(this.#failure);
  }

  async #withReader<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    if (this.#closing !== null) throw new StoreError('store is closed');
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (err) {
      throw storeError('database read failed', err);
    }
    let broken: Error | undefined;
    try {
      return await fn(client);
    } catch (err) {
      broken = err instanceof Error ? err : new Error(String(err));
      throw storeError('database read failed', err);
    } finally {
      // A connection whose query failed is discarded, not reused mid-transaction.
      client.release(broken);
    }
  }
}

/**
 * What a single job's snapshot shows beyond its row: its steps, and its
 * requeued and rate-limited attempts.
 */
async function addSnapshotDetails(
  client: pg.ClientBase,
  sql: Statements,
  job: JobRecord,
): Promise<void> {
  const steps = await client.query<{ name: string; atMs: number; resultBytes: number }>({
    name: 'dtp_steps_of',
    text: sql.stepsOf,
    values: [job.jobId],
  });
  if (steps.rows.length > 0) job.steps = steps.rows;
  const uncounted = await client.query<{ requeues: number; rateLimited: number }>({
    name: 'dtp_uncounted_of',
    text: sql.uncountedOf,
    values: [job.jobId],
  });
  const row = uncounted.rows[0];
  if (row !== undefined && row.requeues > 0) job.requeues = row.requeues;
  if (row !== undefined && row.rateLimited > 0) job.rateLimited = row.rateLimited;
}

async function attemptsOf(
  client: pg.ClientBase,
  sql: Statements,
  jobId: string,
): Promise<AttemptRecord[]> {
  const rows = await client.query<AttemptRecord>({
    name: 'dtp_attempts_of',
    text: sql.attemptsOf,
    values: [jobId],
  });
  return rows.rows;
}

async function listJobs(
  client: pg.ClientBase,
  sql: Statements,
  query: ListQuery,
): Promise<JobRecord[]> {
  const where: string[] = [];
  const values: (string | number)[] = [];
  if (query.beforeSeq !== null) {
    values.push(query.beforeSeq);
    where.push(`seq < $${values.length}`);
  }
  if (query.states !== null) {
    values.push(...query.states);
    const first = values.length - query.states.length + 1;
    where.push(`state IN (${query.states.map((_, i) => `$${first + i}`).join(', ')})`);
  }
  if (query.taskType !== null) {
    values.push(query.taskType);
    where.push(`task_type = $${values.length}`);
  }
  if (query.queue !== undefined && query.queue !== null) {
    values.push(query.queue);
    where.push(`queue = $${values.length}`);
  }
  if (query.finishedSinceMs !== undefined && query.finishedSinceMs !== null) {
    values.push(query.finishedSinceMs);
    where.push(`finished_at_ms >= $${values.length}`);
  }
  values.push(query.limit);
  const filter = where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`;
  const rows = await client.query<JobRecord>(
    `${sql.jobSelect} ${filter} ORDER BY seq DESC LIMIT $${values.length}`,
    values,
  );
  return rows.rows;
}

function storeError(what: string, err: unknown): StoreError {
  return new StoreError(`${what}: ${describeError(err)}`, { cause: err });
}

/** A fenced refusal becomes {@link LeaseLostError}; anything else a {@link StoreError}. */
function writeError(what: string, epoch: number, err: unknown): Error {
  if (err instanceof StoreError) return err;
  if (sqlState(err) === FENCED_SQLSTATE) {
    return new LeaseLostError(`${what} refused: epoch ${epoch} lost the lease`, { cause: err });
  }
  return storeError(`${what} failed`, err);
}
