/**
 * The PostgreSQL schema, created and migrated by the coordinator itself, in
 * a schema of its own (`dtp`) so that it can share a database with others.
 *
 * `dtp.schema_version` holds the number of migrations applied. Missing
 * migrations run in one transaction under a transaction-scoped advisory
 * lock, so coordinators starting at the same time migrate once. A database
 * from a newer version is refused rather than guessed at.
 *
 * Tables: `jobs` and `attempts` (the same rows as the SQLite store), and
 * `leader_lease`: one row naming the coordinator that leads, its epoch (the
 * fencing token) and when its lease expires, on the database's clock.
 * Writes go through two functions that check the caller's epoch in the same
 * transaction as the writes: `commit_batch` and `purge`.
 *
 * With shards, each shard's tables are the same tables in a schema of its own
 * (`dtp_s0`, `dtp_s1`, … see protocol/shards.ts): every statement here is
 * written once, for `dtp`, and {@link inSchema} rewrites it for another
 * schema, so each shard has its own lease row and fencing, and the code that
 * fences is the same. Schema `dtp` also holds the cluster's own tables
 * (migrations 13 and 14): how many shards the database has, the
 * coordinators alive, and the outbox of messages between shards.
 */
import type { ClientBase } from 'pg';
import { StoreError } from '../store.js';

/** SQLSTATE raised by the functions when the caller's epoch is not the current one. */
export const FENCED_SQLSTATE = 'DTP01';

/**
 * Key of the advisory lock taken while migrating. One key for every schema:
 * migrations of different shards' schemas wait for one another too. They are
 * short (a schema already up to date costs one transaction of a few reads)
 * and happen at start only, and one key keeps `CREATE SCHEMA` and the
 * version row of each schema under the same simple rule.
 */
const MIGRATION_LOCK_KEY = 7_070_071;

/** The schema of an unsharded database, and of the cluster's own tables. */
export const DEFAULT_SCHEMA = 'dtp';

/** The schemas dtp writes: `dtp`, or a shard's `dtp_s<n>` (protocol/shards.ts). */
const SCHEMA_NAME = /^dtp(_s[0-9]{1,4})?$/;

/**
 * `schema`, when it is one dtp may use. The name is spliced into SQL text
 * (a schema cannot be a bound parameter), so anything else is refused.
 */
export function checkedSchema(schema: string): string {
  if (!SCHEMA_NAME.test(schema)) {
    throw new RangeError(`not a dtp schema name: ${JSON.stringify(schema)}`);
  }
  return schema;
}

/**
 * A statement written for schema `dtp`, for `schema` instead. Every `dtp.`
 * in this folder's SQL names the schema (no literal, column or function
 * there contains it otherwise), so rewriting each one moves the whole
 * statement. Callers rewrite once per schema and keep the result: this is
 * not for the path of every query.
 */
export function inSchema(sql: string, schema: string): string {
  if (checkedSchema(schema) === DEFAULT_SCHEMA) return sql;
  return sql.replace(/\bdtp\./g, `${schema}.`);
}

/** The job columns as JSON keys of a JobRecord, with their SQL types (commit_batch input). */
const JOB_FIELDS = `seq bigint, "jobId" text, "taskType" text, "payloadJson" text, state text,
  priority text, attempts integer, "maxAttempts" integer, "timeoutMs" bigint,
  "idempotencyKey" text, "workerId" text, "attemptId" text, "deadlineAtMs" bigint,
  "retryAtMs" bigint, result text, "resultFormat" text, error text, "createdAtMs" bigint,
  "updatedAtMs" bigint, "startedAtMs" bigint, "finishedAtMs" bigint`;

/** The job fields of schema 3 onwards (the time columns added). */
const JOB_FIELDS_V3 = `${JOB_FIELDS}, "runAtMs" bigint, "scheduleName" text`;

/** The schedule columns as JSON keys of a ScheduleRecord (commit_batch input, schema 3). */
const SCHEDULE_FIELDS = `name text, "taskType" text, cron text, "everyMs" bigint, timezone text,
  "payloadJson" text, "maxAttempts" integer, priority text, "timeoutMs" bigint, overlap text,
  "catchUp" text, paused boolean, "nextRunAtMs" bigint, "lastRunAtMs" bigint, "lastJobId" text,
  "createdAtMs" bigint, "updatedAtMs" bigint`;

const ATTEMPT_FIELDS = `"jobId" text, "attemptNumber" integer, "attemptId" text, "workerId" text,
  "startedAtMs" bigint, "finishedAtMs" bigint, outcome text, error text`;

/** The part of every commit_batch that writes attempts (each migration step's version). */
const ATTEMPTS_UPSERT = `     IF p_attempts IS NOT NULL THEN
       INSERT INTO dtp.attempts (job_id, attempt_number, attempt_id, worker_id, started_at_ms,
           finished_at_ms, outcome, error)
         SELECT "jobId", "attemptNumber", "attemptId", "workerId", "startedAtMs",
           "finishedAtMs", outcome, error
         FROM json_to_recordset(p_attempts) AS r(${ATTEMPT_FIELDS})
       ON CONFLICT (job_id, attempt_number) DO UPDATE SET attempt_id = excluded.attempt_id,
         worker_id = excluded.worker_id, started_at_ms = excluded.started_at_ms,
         finished_at_ms = excluded.finished_at_ms, outcome = excluded.outcome,
         error = excluded.error;
     END IF;
`;

const FENCE = `
  PERFORM 1 FROM dtp.leader_lease WHERE id = 1 AND epoch = p_epoch FOR SHARE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'lease epoch % is no longer current', p_epoch USING ERRCODE = '${FENCED_SQLSTATE}';
  END IF;`;

/** A job column added after the first schema: its name, its JobRecord key, its SQL type. */
interface ExtraColumn {
  column: string;
  key: string;
  type: string;
  /** False for a column fixed at the job's insert (updates leave it alone). */
  updated?: boolean;
  /** The value written when the JSON row leaves it out (a NOT NULL column's default). */
  fallback?: string;
}

/** The SQL value of an extra column from the JSON row `row` (`r.`, or '' in a plain SELECT). */
function columnValue(c: { key: string; fallback?: string }, row: string): string {
  const value = `${row}"${c.key}"`;
  return c.fallback === undefined ? value : `coalesce(${value}, ${c.fallback})`;
}

/** Job columns of migration 4. */
const PROGRESS_COLUMNS: ExtraColumn[] = [{ column: 'progress', key: 'progress', type: 'json' }];

/** Job columns of migration 5 (fixed at submission). */
const DEPENDENCY_COLUMNS: ExtraColumn[] = [
  { column: 'depends_on', key: 'dependsOn', type: 'jsonb', updated: false },
  { column: 'on_parent_failure', key: 'onParentFailure', type: 'text', updated: false },
];

/** Job columns of migration 6 (fixed at submission). */
const QUEUE_COLUMNS: ExtraColumn[] = [
  { column: 'queue', key: 'queue', type: 'text', updated: false },
  { column: 'group_key', key: 'groupKey', type: 'text', updated: false },
];

/** Job columns of migration 8 (fixed at submission). */
const TRACE_COLUMNS: ExtraColumn[] = [
  { column: 'trace_context', key: 'traceContext', type: 'jsonb', updated: false },
];

/** Job columns of migration 9 (fixed at submission). */
const CHILD_COLUMNS: ExtraColumn[] = [
  { column: 'parent_job_id', key: 'parentJobId', type: 'text', updated: false },
  { column: 'child_key', key: 'childKey', type: 'text', updated: false },
];

/**
 * Job columns of migration 11. Written by updates too (a stored row is the
 * whole record the core last gave), the count of rate-limited attempts
 * falling back to 0 for a writer that leaves it out.
 */
const DEDUP_COLUMNS: ExtraColumn[] = [
  { column: 'dedup_key', key: 'dedupKey', type: 'text' },
  { column: 'dedup_mode', key: 'dedupMode', type: 'text' },
  { column: 'dedup_until_ms', key: 'dedupUntilMs', type: 'bigint' },
  { column: 'expires_at_ms', key: 'expiresAtMs', type: 'bigint' },
  { column: 'rate_limited_in_a_row', key: 'rateLimitedInARow', type: 'integer', fallback: '0' },
];

/** The time columns of migration 3; an update sets `run_at_ms`, never `schedule_name`. */
const TIME_COLUMNS: ExtraColumn[] = [
  { column: 'run_at_ms', key: 'runAtMs', type: 'bigint' },
  { column: 'schedule_name', key: 'scheduleName', type: 'text', updated: false },
];

/** The insert of p_inserts' rows: the first schema's job columns, then `extra` in order. */
function jobInserts(
  fields: string,
  extra: readonly { column: string; key: string; fallback?: string }[],
): string {
  return `       INSERT INTO dtp.jobs (seq, job_id, task_type, payload, state, priority, attempts,
           max_attempts, timeout_ms, idempotency_key, worker_id, attempt_id, deadline_at_ms,
           retry_at_ms, result, result_format, error, created_at_ms, updated_at_ms,
           started_at_ms, finished_at_ms${extra.map((c) => `, ${c.column}`).join('')})
         SELECT seq, "jobId", "taskType", "payloadJson", state, priority, attempts,
           "maxAttempts", "timeoutMs", "idempotencyKey", "workerId", "attemptId", "deadlineAtMs",
           "retryAtMs", result, "resultFormat", error, "createdAtMs", "updatedAtMs",
           "startedAtMs", "finishedAtMs"${extra.map((c) => `, ${columnValue(c, '')}`).join('')}
         FROM json_to_recordset(p_inserts) AS r(${fields});`;
}

/** The update of p_updates' rows, one by primary key: the usual columns plus `also`. */
function jobUpdates(
  fields: string,
  also: readonly { column: string; key: string; fallback?: string }[],
): string {
  return `     IF p_updates IS NOT NULL THEN
       FOR r IN SELECT * FROM json_to_recordset(p_updates) AS x(${fields}) LOOP
         UPDATE dtp.jobs SET state = r.state, attempts = r.attempts, worker_id = r."workerId",
             attempt_id = r."attemptId", deadline_at_ms = r."deadlineAtMs",
             retry_at_ms = r."retryAtMs", result = r.result, result_format = r."resultFormat",
             error = r.error, updated_at_ms = r."updatedAtMs", started_at_ms = r."startedAtMs",
             finished_at_ms = r."finishedAtMs"${also.map((c) => `, ${c.column} = ${columnValue(c, 'r.')}`).join('')}
           WHERE seq = r.seq;
         IF NOT FOUND THEN
           RAISE EXCEPTION 'update of job seq % changed no row', r.seq;
         END IF;
       END LOOP;
     END IF;`;
}

/**
 * The fenced write function over the first schema's job columns plus
 * `extra` (a later migration that adds a job column replaces the function
 * with its columns added to the list).
 */
function commitBatchFunction(verb: 'CREATE' | 'CREATE OR REPLACE', extra: ExtraColumn[]): string {
  const fields = JOB_FIELDS + extra.map((c) => `, "${c.key}" ${c.type}`).join('');
  return `${verb} FUNCTION dtp.commit_batch(p_epoch bigint, p_inserts json, p_updates json, p_attempts json)
   RETURNS void LANGUAGE plpgsql AS $fn$
   DECLARE
     r record;
   BEGIN
     ${FENCE}
     IF p_inserts IS NOT NULL THEN
${jobInserts(fields, extra)}
     END IF;
     -- One primary-key update per job: a join of the JSON rows with the table
     -- would be planned once (the plan is cached) and could stay a scan of
     -- the whole table as it grows.
${jobUpdates(fields, extra)}
${ATTEMPTS_UPSERT}   END
   $fn$;`;
}

/**
 * `dtp.purge` once jobs can have dependents (migration 5), steps
 * (migration 10, `withSteps`) and signals (migration 12, `withSignals`): a
 * job a live dependent still needs stays, and a purged job's attempts,
 * links (steps, signals) go with it. With signals it takes a fifth
 * argument: a purge of COMPLETED jobs also deletes the oldest events
 * published before the bound, at most `p_event_limit` of them.
 */
function linkedPurgeFunction(
  withSteps: boolean,
  withSignals = false,
  withRemoteParents = false,
): string {
  const steps = withSteps
    ? `
     ), unstepped AS (
       DELETE FROM dtp.job_steps st USING doomed d WHERE st.job_id = d.job_id`
    : '';
  const signals = withSignals
    ? `
     ), unsignalled AS (
       DELETE FROM dtp.job_signals s USING doomed d WHERE s.job_id = d.job_id`
    : '';
  const events = withSignals
    ? `
     IF p_state = 'COMPLETED' THEN
       DELETE FROM dtp.events WHERE event_id IN (
         SELECT event_id FROM dtp.events WHERE at_ms < p_before_ms
         ORDER BY at_ms LIMIT p_event_limit);
     END IF;`
    : '';
  return `CREATE OR REPLACE FUNCTION dtp.purge(p_epoch bigint, p_state text, p_before_ms bigint, p_limit integer${withSignals ? ', p_event_limit integer' : ''})
   RETURNS integer LANGUAGE plpgsql AS $fn$
   DECLARE
     deleted integer;${withRemoteParents ? '\n     unlinked_parents text[];' : ''}
   BEGIN
     ${FENCE}
     WITH doomed AS (
       DELETE FROM dtp.jobs WHERE seq IN (
         SELECT j.seq FROM dtp.jobs j WHERE j.state = p_state AND j.finished_at_ms < p_before_ms
           AND NOT EXISTS (SELECT 1 FROM dtp.job_dependencies d JOIN dtp.jobs c ON c.job_id = d.job_id
                            WHERE d.parent_id = j.job_id
                              AND c.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED'))
         ORDER BY j.finished_at_ms LIMIT p_limit)
       RETURNING job_id
     ), gone AS (
       DELETE FROM dtp.attempts a USING doomed d WHERE a.job_id = d.job_id${steps}${signals}
     ), unlinked AS (
       DELETE FROM dtp.job_dependencies l USING doomed d
        WHERE l.job_id = d.job_id OR l.parent_id = d.job_id${withRemoteParents ? '\n       RETURNING l.parent_id' : ''}
     )
     ${withRemoteParents ? remoteParentsPurged() : 'SELECT count(*) INTO deleted FROM doomed;'}${events}
     RETURN deleted;
   END
   $fn$;`;
}

/**
 * The end of a purge with remote parents (migration 15): the outcome of a
 * parent of another shard goes once no stored job depends on it any more
 * (a separate statement, so that it sees the links just deleted as gone).
 */
function remoteParentsPurged(): string {
  return `SELECT (SELECT count(*) FROM doomed),
            (SELECT coalesce(array_agg(DISTINCT parent_id), '{}') FROM unlinked)
       INTO deleted, unlinked_parents;
     DELETE FROM dtp.remote_parents r WHERE r.parent_id = ANY(unlinked_parents)
       AND NOT EXISTS (SELECT 1 FROM dtp.job_dependencies d WHERE d.parent_id = r.parent_id);`;
}

/**
 * The fenced write function of schema 3 (jobs, attempts and schedules) over
 * its job columns plus `extra` (a later migration that adds a job column
 * replaces it with its columns in the list); with `dependencies` (schema 5),
 * a new job's `dependsOn` also goes into job_dependencies.
 */
function scheduleCommitBody(
  extra: ExtraColumn[],
  dependencies = false,
  scheduleQueue = false,
  /** Columns of the first schema an update sets too, beyond the usual ones. */
  alsoUpdated: readonly { column: string; key: string }[] = [],
): string {
  const fields = JOB_FIELDS_V3 + extra.map((c) => `, "${c.key}" ${c.type}`).join('');
  const scheduleFields = SCHEDULE_FIELDS + (scheduleQueue ? ', queue text' : '');
  const updated = extra.filter((c) => c.updated !== false);
  const dependencyRows = dependencies
    ? `
       INSERT INTO dtp.job_dependencies (parent_id, job_id)
         SELECT p.parent_id, n."jobId"
         FROM json_to_recordset(p_inserts) AS n(${fields})
         CROSS JOIN LATERAL jsonb_array_elements_text(n."dependsOn") AS p(parent_id)
         WHERE n."dependsOn" IS NOT NULL
       ON CONFLICT DO NOTHING;`
    : '';
  return `     ${FENCE}
     IF p_inserts IS NOT NULL THEN
${jobInserts(fields, [...TIME_COLUMNS, ...extra])}${dependencyRows}
     END IF;
${jobUpdates(fields, [TIME_COLUMNS[0] as ExtraColumn, ...updated, ...alsoUpdated])}
${ATTEMPTS_UPSERT}     IF p_deleted_schedules IS NOT NULL THEN
       DELETE FROM dtp.schedules
         WHERE name IN (SELECT json_array_elements_text(p_deleted_schedules));
     END IF;
     IF p_schedules IS NOT NULL THEN
       INSERT INTO dtp.schedules (name, task_type, cron, every_ms, timezone, payload,
           max_attempts, priority, timeout_ms, overlap, catch_up, paused, next_run_at_ms,
           last_run_at_ms, last_job_id, created_at_ms, updated_at_ms${scheduleQueue ? ', queue' : ''})
         SELECT name, "taskType", cron, "everyMs", timezone, "payloadJson", "maxAttempts",
           priority, "timeoutMs", overlap, "catchUp", paused, "nextRunAtMs", "lastRunAtMs",
           "lastJobId", "createdAtMs", "updatedAtMs"${scheduleQueue ? ', queue' : ''}
         FROM json_to_recordset(p_schedules) AS r(${scheduleFields})
       ON CONFLICT (name) DO UPDATE SET task_type = excluded.task_type, cron = excluded.cron,
         every_ms = excluded.every_ms, timezone = excluded.timezone, payload = excluded.payload,
         max_attempts = excluded.max_attempts, priority = excluded.priority,
         timeout_ms = excluded.timeout_ms, overlap = excluded.overlap,
         catch_up = excluded.catch_up, paused = excluded.paused,
         next_run_at_ms = excluded.next_run_at_ms, last_run_at_ms = excluded.last_run_at_ms,
         last_job_id = excluded.last_job_id, created_at_ms = excluded.created_at_ms,
         updated_at_ms = excluded.updated_at_ms${scheduleQueue ? ', queue = excluded.queue' : ''};
     END IF;
`;
}

/** The six-argument commit_batch over {@link scheduleCommitBody}'s statements. */
function scheduleCommitBatch(
  verb: 'CREATE' | 'CREATE OR REPLACE',
  extra: ExtraColumn[],
  dependencies = false,
  scheduleQueue = false,
  alsoUpdated: readonly { column: string; key: string }[] = [],
): string {
  return `${verb} FUNCTION dtp.commit_batch(p_epoch bigint, p_inserts json, p_updates json,
       p_attempts json, p_schedules json, p_deleted_schedules json)
   RETURNS void LANGUAGE plpgsql AS $fn$
   DECLARE
     r record;
   BEGIN
${scheduleCommitBody(extra, dependencies, scheduleQueue, alsoUpdated)}   END
   $fn$;`;
}

/**
 * The seven-argument commit_batch: the six-argument one, then the queues'
 * settings rows; with `held` (schema 11), also until when a queue is held.
 */
function queueCommitBatch(verb: 'CREATE' | 'CREATE OR REPLACE', held: boolean): string {
  return `${verb} FUNCTION dtp.commit_batch(p_epoch bigint, p_inserts json, p_updates json,
       p_attempts json, p_schedules json, p_deleted_schedules json, p_queues json)
   RETURNS void LANGUAGE plpgsql AS $fn$
   BEGIN
     PERFORM dtp.commit_batch(p_epoch, p_inserts, p_updates, p_attempts, p_schedules,
       p_deleted_schedules);
${queueSettingsSql(held)}   END
   $fn$;`;
}

/** The queues' settings rows of a commit; with `held` (schema 11), until when a queue is held. */
function queueSettingsSql(held: boolean): string {
  return `     IF p_queues IS NOT NULL THEN
       INSERT INTO dtp.queue_settings (name, paused, concurrency, rate_max, rate_interval_ms,
           group_concurrency, group_rate_max, group_rate_interval_ms, updated_at_ms${held ? ', held_until_ms' : ''})
         SELECT name, paused, concurrency, "rateMax", "rateIntervalMs", "groupConcurrency",
           "groupRateMax", "groupRateIntervalMs", "updatedAtMs"${held ? ', "heldUntilMs"' : ''}
         FROM json_to_recordset(p_queues) AS r(name text, paused boolean, concurrency integer,
           "rateMax" integer, "rateIntervalMs" bigint, "groupConcurrency" integer,
           "groupRateMax" integer, "groupRateIntervalMs" bigint, "updatedAtMs" bigint${held ? ', "heldUntilMs" bigint' : ''})
       ON CONFLICT (name) DO UPDATE SET paused = excluded.paused,
         concurrency = excluded.concurrency, rate_max = excluded.rate_max,
         rate_interval_ms = excluded.rate_interval_ms,
         group_concurrency = excluded.group_concurrency,
         group_rate_max = excluded.group_rate_max,
         group_rate_interval_ms = excluded.group_rate_interval_ms,
         updated_at_ms = excluded.updated_at_ms${held ? ',\n         held_until_ms = excluded.held_until_ms' : ''};
     END IF;
`;
}

/**
 * The arguments of {@link scheduleCommitBody} for the newest job columns
 * (schema 11 on): every job column so far, an update writing the payload
 * too (a debounced submission replaces it).
 */
const LATEST_JOB_WRITES: Parameters<typeof scheduleCommitBatch> extends [unknown, ...infer Rest]
  ? Rest
  : never = [
  [
    ...PROGRESS_COLUMNS,
    ...DEPENDENCY_COLUMNS,
    ...QUEUE_COLUMNS,
    ...TRACE_COLUMNS,
    ...CHILD_COLUMNS,
    ...DEDUP_COLUMNS,
  ],
  true,
  true,
  [
    { column: 'max_attempts', key: 'maxAttempts' },
    { column: 'payload', key: 'payloadJson' },
  ],
];

const MIGRATIONS: readonly string[] = [
  // 1: jobs, attempts, the lease, and the fenced write functions.
  `CREATE TABLE dtp.jobs (
     seq             bigint  PRIMARY KEY,
     job_id          text    NOT NULL UNIQUE,
     task_type       text    NOT NULL,
     payload         text    NOT NULL,
     state           text    NOT NULL,
     priority        text    NOT NULL,
     attempts        integer NOT NULL,
     max_attempts    integer NOT NULL,
     timeout_ms      bigint  NOT NULL,
     idempotency_key text    UNIQUE,
     worker_id       text,
     attempt_id      text,
     deadline_at_ms  bigint,
     retry_at_ms     bigint,
     result          text,
     result_format   text    CHECK (result_format IN ('text', 'json')),
     error           text,
     created_at_ms   bigint  NOT NULL,
     updated_at_ms   bigint  NOT NULL,
     started_at_ms   bigint,
     finished_at_ms  bigint
   );
   CREATE INDEX jobs_active ON dtp.jobs (seq) WHERE state IN ('QUEUED', 'RUNNING', 'RETRY_WAIT');
   CREATE INDEX jobs_state_seq ON dtp.jobs (state, seq);
   CREATE INDEX jobs_type_seq ON dtp.jobs (task_type, seq);
   CREATE INDEX jobs_finished ON dtp.jobs (state, finished_at_ms) WHERE finished_at_ms IS NOT NULL;
   CREATE TABLE dtp.attempts (
     job_id          text    NOT NULL,
     attempt_number  integer NOT NULL,
     attempt_id      text    NOT NULL,
     worker_id       text    NOT NULL,
     started_at_ms   bigint  NOT NULL,
     finished_at_ms  bigint,
     outcome         text    NOT NULL,
     error           text,
     PRIMARY KEY (job_id, attempt_number)
   );
   CREATE TABLE dtp.leader_lease (
     id              integer PRIMARY KEY CHECK (id = 1),
     epoch           bigint  NOT NULL,
     holder          text,
     worker_address  text,
     client_address  text,
     expires_at      timestamptz NOT NULL,
     acquired_at     timestamptz
   );
   INSERT INTO dtp.leader_lease (id, epoch, expires_at) VALUES (1, 0, '-infinity');
   ${commitBatchFunction('CREATE', [])}
   CREATE FUNCTION dtp.purge(p_epoch bigint, p_state text, p_before_ms bigint, p_limit integer)
   RETURNS integer LANGUAGE plpgsql AS $fn$
   DECLARE
     deleted integer;
   BEGIN
     ${FENCE}
     WITH doomed AS (
       DELETE FROM dtp.jobs WHERE seq IN (
         SELECT seq FROM dtp.jobs WHERE state = p_state AND finished_at_ms < p_before_ms
         ORDER BY finished_at_ms LIMIT p_limit)
       RETURNING job_id
     ), gone AS (
       DELETE FROM dtp.attempts a USING doomed d WHERE a.job_id = d.job_id
     )
     SELECT count(*) INTO deleted FROM doomed;
     RETURN deleted;
   END
   $fn$;`,
  // 2: fewer index entries per write (as in the SQLite schema): idempotency
  // keys in a partial unique index, so a job without a key costs no entry at
  // its insert and at each update; the (state, seq) index serves recovery,
  // so the partial index of active jobs goes.
  `ALTER TABLE dtp.jobs DROP CONSTRAINT jobs_idempotency_key_key;
   CREATE UNIQUE INDEX jobs_key ON dtp.jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
   DROP INDEX dtp.jobs_active;`,
  // 3: time. A delayed job's due time and the schedule that made a job; the
  // SCHEDULED jobs indexed by due time (partial: only they pay for it); a
  // schedule's jobs by seq; the schedules; and commit_batch with both (the
  // tick's job and its schedule's advance are written in one transaction).
  `ALTER TABLE dtp.jobs ADD COLUMN run_at_ms bigint;
   ALTER TABLE dtp.jobs ADD COLUMN schedule_name text;
   CREATE INDEX jobs_scheduled_run_at ON dtp.jobs (run_at_ms, seq) WHERE state = 'SCHEDULED';
   CREATE INDEX jobs_schedule_seq ON dtp.jobs (schedule_name, seq) WHERE schedule_name IS NOT NULL;
   CREATE TABLE dtp.schedules (
     name            text    PRIMARY KEY,
     task_type       text    NOT NULL,
     cron            text,
     every_ms        bigint,
     timezone        text,
     payload         text    NOT NULL,
     max_attempts    integer,
     priority        text,
     timeout_ms      bigint,
     overlap         text    NOT NULL CHECK (overlap IN ('allow', 'skip')),
     catch_up        text    NOT NULL CHECK (catch_up IN ('latest', 'none')),
     paused          boolean NOT NULL,
     next_run_at_ms  bigint,
     last_run_at_ms  bigint,
     last_job_id     text,
     created_at_ms   bigint  NOT NULL,
     updated_at_ms   bigint  NOT NULL
   );
   ${scheduleCommitBatch('CREATE', [])}`,
  // 4: the latest progress a handler reported, kept with the job.
  `ALTER TABLE dtp.jobs ADD COLUMN progress jsonb;
   ${scheduleCommitBatch('CREATE OR REPLACE', PROGRESS_COLUMNS)}`,
  // 5: dependencies between jobs (as SQLite's migration 6): the job row keeps
  // its parents in order and its parent-failure policy; job_dependencies is
  // the reverse index that recovery and purge ask. commit_batch (with every
  // column of the steps before) writes both; purge keeps a parent while a
  // non-terminal dependent needs its result.
  `ALTER TABLE dtp.jobs ADD COLUMN depends_on jsonb;
   ALTER TABLE dtp.jobs ADD COLUMN on_parent_failure text
     CHECK (on_parent_failure IN ('cancel', 'run'));
   CREATE TABLE dtp.job_dependencies (
     parent_id text NOT NULL,
     job_id    text NOT NULL,
     PRIMARY KEY (parent_id, job_id)
   );
   CREATE INDEX job_dependencies_job ON dtp.job_dependencies (job_id);
   ${scheduleCommitBatch('CREATE OR REPLACE', [...PROGRESS_COLUMNS, ...DEPENDENCY_COLUMNS], true)}
   ${linkedPurgeFunction(false)}`,
  // 6: named queues. Each job's queue and group key (fixed at submission;
  // rows from before are in 'default', without a group), an index to list
  // and count a queue, the queues' settings, and the queue a schedule's
  // jobs go to. The six-argument
  // commit_batch gets the two job columns; a seventh-argument version
  // writes all that one does and then the settings rows, in the same
  // transaction.
  `ALTER TABLE dtp.jobs ADD COLUMN queue text NOT NULL DEFAULT 'default';
   ALTER TABLE dtp.jobs ADD COLUMN group_key text;
   CREATE INDEX jobs_queue_state ON dtp.jobs (queue, state, seq);
   CREATE TABLE dtp.queue_settings (
     name                   text    PRIMARY KEY,
     paused                 boolean NOT NULL,
     concurrency            integer,
     rate_max               integer,
     rate_interval_ms       bigint,
     group_concurrency      integer,
     group_rate_max         integer,
     group_rate_interval_ms bigint,
     updated_at_ms          bigint  NOT NULL
   );
   ALTER TABLE dtp.schedules ADD COLUMN queue text NOT NULL DEFAULT 'default';
   ${scheduleCommitBatch('CREATE OR REPLACE', [...PROGRESS_COLUMNS, ...DEPENDENCY_COLUMNS, ...QUEUE_COLUMNS], true, true)}
   ${queueCommitBatch('CREATE', false)}`,
  // 7: an update writes max_attempts too (a re-run of a FAILED job gives it
  // a fresh attempt budget); the six-argument commit_batch that every write
  // goes through, as step 6 left it plus that column.
  scheduleCommitBatch(
    'CREATE OR REPLACE',
    [...PROGRESS_COLUMNS, ...DEPENDENCY_COLUMNS, ...QUEUE_COLUMNS],
    true,
    true,
    [{ column: 'max_attempts', key: 'maxAttempts' }],
  ),
  // 8: the submitter's W3C trace context, fixed at submission; commit_batch
  // with every job column of the steps before and this one.
  `ALTER TABLE dtp.jobs ADD COLUMN trace_context jsonb;
   ${scheduleCommitBatch(
     'CREATE OR REPLACE',
     [...PROGRESS_COLUMNS, ...DEPENDENCY_COLUMNS, ...QUEUE_COLUMNS, ...TRACE_COLUMNS],
     true,
     true,
     [{ column: 'max_attempts', key: 'maxAttempts' }],
   )}`,
  // 9: child jobs (as SQLite's migration 9): the job whose handler enqueued
  // a job and the call's key among that parent's children, unique per parent
  // (the durable dedupe, and the index that finds a parent's children);
  // commit_batch with every job column so far.
  `ALTER TABLE dtp.jobs ADD COLUMN parent_job_id text;
   ALTER TABLE dtp.jobs ADD COLUMN child_key text;
   CREATE UNIQUE INDEX jobs_child_key ON dtp.jobs (parent_job_id, child_key)
     WHERE parent_job_id IS NOT NULL;
   ${scheduleCommitBatch(
     'CREATE OR REPLACE',
     [
       ...PROGRESS_COLUMNS,
       ...DEPENDENCY_COLUMNS,
       ...QUEUE_COLUMNS,
       ...TRACE_COLUMNS,
       ...CHILD_COLUMNS,
     ],
     true,
     true,
     [{ column: 'max_attempts', key: 'maxAttempts' }],
   )}`,
  // 10: durable steps (as SQLite's migration 10): one row per recorded step; a
  // wait for another job goes into job_dependencies as a parent would. A
  // ten-argument commit_batch writes all the seven-argument one does, then
  // drops the steps of re-run jobs, writes steps and waits, in the same
  // transaction; purge deletes a job's steps with it.
  `CREATE TABLE dtp.job_steps (
     job_id text    NOT NULL,
     idx    integer NOT NULL,
     name   text    NOT NULL,
     result text,
     at_ms  bigint  NOT NULL,
     PRIMARY KEY (job_id, idx)
   );
   CREATE FUNCTION dtp.commit_batch(p_epoch bigint, p_inserts json, p_updates json,
       p_attempts json, p_schedules json, p_deleted_schedules json, p_queues json,
       p_cleared_steps json, p_steps json, p_step_waits json)
   RETURNS void LANGUAGE plpgsql AS $fn$
   BEGIN
     PERFORM dtp.commit_batch(p_epoch, p_inserts, p_updates, p_attempts, p_schedules,
       p_deleted_schedules, p_queues);
${stepsSql()}   END
   $fn$;
   ${linkedPurgeFunction(true)}`,
  // 11: deduplication, expiry and rate limits (as SQLite's migration 11): a
  // job's deduplication key and mode, the end of its throttle window, when
  // it expires unless started, its attempts in a row that ended rate
  // limited; partial indexes of the throttle windows and of the delayed
  // keyed jobs (recovery reads both); until when a queue is held; and the
  // groups held, one row per (queue, group key), the jobs without a group
  // key under '' (a real group key is never empty). commit_batch with every
  // job column so far, an update writing the payload too (a debounced
  // submission replaces it); the seven-argument one with the hold of a
  // queue; a twelve-argument one writes all the ten-argument one does, then
  // the group holds (see holdsSql).
  `ALTER TABLE dtp.jobs ADD COLUMN dedup_key text;
   ALTER TABLE dtp.jobs ADD COLUMN dedup_mode text
     CHECK (dedup_mode IN ('active', 'throttle', 'debounce'));
   ALTER TABLE dtp.jobs ADD COLUMN dedup_until_ms bigint;
   ALTER TABLE dtp.jobs ADD COLUMN expires_at_ms bigint;
   ALTER TABLE dtp.jobs ADD COLUMN rate_limited_in_a_row integer NOT NULL DEFAULT 0;
   CREATE INDEX jobs_dedup_until ON dtp.jobs (dedup_until_ms) WHERE dedup_until_ms IS NOT NULL;
   CREATE INDEX jobs_scheduled_kept ON dtp.jobs (seq)
     WHERE state = 'SCHEDULED' AND (dedup_key IS NOT NULL OR attempts > 0);
   ALTER TABLE dtp.queue_settings ADD COLUMN held_until_ms bigint;
   CREATE TABLE dtp.group_holds (
     queue     text   NOT NULL,
     group_key text   NOT NULL,
     until_ms  bigint NOT NULL,
     PRIMARY KEY (queue, group_key)
   );
   ${scheduleCommitBatch('CREATE OR REPLACE', ...LATEST_JOB_WRITES)}
   ${queueCommitBatch('CREATE OR REPLACE', true)}
   CREATE FUNCTION dtp.commit_batch(p_epoch bigint, p_inserts json, p_updates json,
       p_attempts json, p_schedules json, p_deleted_schedules json, p_queues json,
       p_cleared_steps json, p_steps json, p_step_waits json, p_group_holds json,
       p_holds_ended_before_ms bigint)
   RETURNS void LANGUAGE plpgsql AS $fn$
   BEGIN
     PERFORM dtp.commit_batch(p_epoch, p_inserts, p_updates, p_attempts, p_schedules,
       p_deleted_schedules, p_queues, p_cleared_steps, p_steps, p_step_waits);
${holdsSql()}
   END
   $fn$;`,
  // 12: signals, events and triggers (as SQLite's migration 12): the
  // signals sent to a job, numbered per job, kept (consumed) once a wait
  // took one until the job is purged, with a partial index of those not
  // taken that recovery reads; the events published, by id, with the jobs
  // their triggers created (a JSON array) and an index by time for
  // retention; the triggers, by name. A sixteen-argument commit_batch
  // writes all the twelve-argument one does, then signals, events (an id
  // already stored fails the commit) and triggers (see signalsSql); purge
  // deletes a job's signals with it, and old events: it takes how many of
  // those at most, and the four-argument one goes.
  `CREATE TABLE dtp.job_signals (
     job_id   text    NOT NULL,
     seq      bigint  NOT NULL,
     name     text    NOT NULL,
     payload  text    NOT NULL,
     at_ms    bigint  NOT NULL,
     consumed boolean NOT NULL,
     PRIMARY KEY (job_id, seq)
   );
   CREATE INDEX job_signals_held ON dtp.job_signals (job_id, seq) WHERE NOT consumed;
   CREATE TABLE dtp.events (
     event_id  text    PRIMARY KEY,
     name      text    NOT NULL,
     event_key text,
     payload   text    NOT NULL,
     at_ms     bigint  NOT NULL,
     job_ids   jsonb   NOT NULL,
     resumed   integer NOT NULL
   );
   CREATE INDEX events_at ON dtp.events (at_ms);
   CREATE TABLE dtp.triggers (
     name          text    PRIMARY KEY,
     event         text    NOT NULL,
     task_type     text    NOT NULL,
     queue         text    NOT NULL,
     priority      text,
     max_attempts  integer,
     created_at_ms bigint  NOT NULL,
     updated_at_ms bigint  NOT NULL
   );
   CREATE FUNCTION dtp.commit_batch(p_epoch bigint, p_inserts json, p_updates json,
       p_attempts json, p_schedules json, p_deleted_schedules json, p_queues json,
       p_cleared_steps json, p_steps json, p_step_waits json, p_group_holds json,
       p_holds_ended_before_ms bigint, p_signals json, p_events json, p_triggers json,
       p_deleted_triggers json)
   RETURNS void LANGUAGE plpgsql AS $fn$
   BEGIN
     PERFORM dtp.commit_batch(p_epoch, p_inserts, p_updates, p_attempts, p_schedules,
       p_deleted_schedules, p_queues, p_cleared_steps, p_steps, p_step_waits, p_group_holds,
       p_holds_ended_before_ms);
${signalsSql()}
   END
   $fn$;
   DROP FUNCTION dtp.purge(bigint, text, bigint, integer);
   ${linkedPurgeFunction(true, true)}`,
  // 13: the cluster's own tables, in schema dtp only (CLUSTER_MIGRATIONS):
  // how many shards the database has, stored by the first coordinator that
  // starts (cluster.ts), and the coordinators alive, each with when it was
  // last seen and until when it counts as alive, on the database clock
  // (membership.ts).
  `CREATE TABLE dtp.cluster (
     id         integer     PRIMARY KEY CHECK (id = 1),
     shards     integer     NOT NULL CHECK (shards >= 1),
     created_at timestamptz NOT NULL DEFAULT clock_timestamp()
   );
   CREATE TABLE dtp.coordinators (
     node_id        text        PRIMARY KEY,
     client_address text,
     worker_address text,
     http_address   text,
     last_seen      timestamptz NOT NULL,
     expires_at     timestamptz NOT NULL,
     started_at     timestamptz NOT NULL
   );`,
  // 14: the cluster's outbox, in schema dtp only (CLUSTER_MIGRATIONS): the
  // messages one shard's core sends another's (docs/ARCHITECTURE.md,
  // "Across shards: the outbox"), read by the target shard in id order.
  `CREATE TABLE dtp.shard_outbox (
     id           bigserial   PRIMARY KEY,
     target_shard integer     NOT NULL,
     body         jsonb       NOT NULL,
     created_at   timestamptz NOT NULL DEFAULT clock_timestamp()
   );
   CREATE INDEX shard_outbox_target ON dtp.shard_outbox (target_shard, id);`,
  // 15: a shard's side of dependencies across shards, in every schema: the
  // children in other shards that wait for a job of this one, and the ended
  // parents in other shards that this one's children heard of. A
  // twenty-one-argument commit_batch writes all the sixteen-argument one
  // does, then the outbox messages sent and applied and those two tables
  // (see shardLinksSql), in the same transaction, under the same fence;
  // purge deletes a remote parent's outcome once no job depends on it.
  `CREATE TABLE dtp.remote_dependents (
     parent_id   text    NOT NULL,
     child_id    text    NOT NULL,
     child_shard integer NOT NULL,
     PRIMARY KEY (parent_id, child_id)
   );
   CREATE TABLE dtp.remote_parents (
     parent_id     text PRIMARY KEY,
     task_type     text NOT NULL,
     state         text NOT NULL,
     result        text,
     result_format text
   );
   CREATE FUNCTION dtp.commit_batch(p_epoch bigint, p_inserts json, p_updates json,
       p_attempts json, p_schedules json, p_deleted_schedules json, p_queues json,
       p_cleared_steps json, p_steps json, p_step_waits json, p_group_holds json,
       p_holds_ended_before_ms bigint, p_signals json, p_events json, p_triggers json,
       p_deleted_triggers json, p_outbox json, p_outbox_done json, p_remote_dependents json,
       p_remote_dependents_done json, p_remote_parents json)
   RETURNS void LANGUAGE plpgsql AS $fn$
   BEGIN
     PERFORM dtp.commit_batch(p_epoch, p_inserts, p_updates, p_attempts, p_schedules,
       p_deleted_schedules, p_queues, p_cleared_steps, p_steps, p_step_waits, p_group_holds,
       p_holds_ended_before_ms, p_signals, p_events, p_triggers, p_deleted_triggers);
${shardLinksSql()}
   END
   $fn$;
   ${linkedPurgeFunction(true, true, true)}`,
  // 16: the twenty-one-argument commit_batch in one piece. Until 15 each
  // version called the one before it (21 → 16 → 12 → 10 → 7 → 6), six
  // PL/pgSQL calls per commit; a sharded coordinator makes one call per
  // shard written in a transaction, so those calls were much of its
  // PostgreSQL time. The same statements, in the same order, in one body;
  // the shorter versions stay (nothing calls them). The holds' statements
  // name their JSON rows r, like the loop's record: columns win there.
  `CREATE OR REPLACE FUNCTION dtp.commit_batch(p_epoch bigint, p_inserts json, p_updates json,
       p_attempts json, p_schedules json, p_deleted_schedules json, p_queues json,
       p_cleared_steps json, p_steps json, p_step_waits json, p_group_holds json,
       p_holds_ended_before_ms bigint, p_signals json, p_events json, p_triggers json,
       p_deleted_triggers json, p_outbox json, p_outbox_done json, p_remote_dependents json,
       p_remote_dependents_done json, p_remote_parents json)
   RETURNS void LANGUAGE plpgsql AS $fn$
   -- The job updates loop over a record r; the group holds name their rows r too.
   #variable_conflict use_column
   DECLARE
     r record;
   BEGIN
${scheduleCommitBody(...LATEST_JOB_WRITES)}${queueSettingsSql(true)}${stepsSql()}
${holdsSql()}
${signalsSql()}
${shardLinksSql()}
   END
   $fn$;`,
];

/**
 * The migrations (numbered from 1) that make the cluster's tables rather
 * than a shard's. In a shard's schema they count as applied without
 * running: the cluster has one set of those tables, in `dtp`, and every
 * schema's version still numbers the same list (a shard's schema at version
 * 13 has every shard table of versions 1 to 12).
 */
const CLUSTER_MIGRATIONS: ReadonlySet<number> = new Set([13, 14]);

/**
 * The signals, events and triggers of a group of batches merged
 * (mergeBatches): the latest version of each signal; the events, each
 * inserted once; the triggers deleted (the last word on them was a
 * deletion), then the others written.
 */
function signalsSql(): string {
  return `     IF p_signals IS NOT NULL THEN
       INSERT INTO dtp.job_signals (job_id, seq, name, payload, at_ms, consumed)
         SELECT "jobId", seq, name, "payloadJson", "atMs", consumed
         FROM json_to_recordset(p_signals) AS r("jobId" text, seq bigint, name text,
           "payloadJson" text, "atMs" bigint, consumed boolean)
       ON CONFLICT (job_id, seq) DO UPDATE SET name = excluded.name,
         payload = excluded.payload, at_ms = excluded.at_ms, consumed = excluded.consumed;
     END IF;
     IF p_events IS NOT NULL THEN
       INSERT INTO dtp.events (event_id, name, event_key, payload, at_ms, job_ids, resumed)
         SELECT "eventId", name, "key", "payloadJson", "atMs", "jobIds", resumed
         FROM json_to_recordset(p_events) AS r("eventId" text, name text, "key" text,
           "payloadJson" text, "atMs" bigint, "jobIds" jsonb, resumed integer);
     END IF;
     IF p_deleted_triggers IS NOT NULL THEN
       DELETE FROM dtp.triggers
         WHERE name IN (SELECT json_array_elements_text(p_deleted_triggers));
     END IF;
     IF p_triggers IS NOT NULL THEN
       INSERT INTO dtp.triggers (name, event, task_type, queue, priority, max_attempts,
           created_at_ms, updated_at_ms)
         SELECT name, event, "taskType", queue, priority, "maxAttempts", "createdAtMs",
           "updatedAtMs"
         FROM json_to_recordset(p_triggers) AS r(name text, event text, "taskType" text,
           queue text, priority text, "maxAttempts" integer, "createdAtMs" bigint,
           "updatedAtMs" bigint)
       ON CONFLICT (name) DO UPDATE SET event = excluded.event,
         task_type = excluded.task_type, queue = excluded.queue,
         priority = excluded.priority, max_attempts = excluded.max_attempts,
         created_at_ms = excluded.created_at_ms, updated_at_ms = excluded.updated_at_ms;
     END IF;`;
}

/**
 * The outbox and remote links of a group of batches merged (mergeBatches).
 * The outbox is the cluster's table, in schema dtp whatever the shard: it is
 * named `"dtp".shard_outbox`, quoted, which {@link inSchema} leaves as it is.
 * Messages are inserted in the order given (their ids follow it); those
 * applied are deleted. Remote dependents are inserted before the parents
 * whose dependents were told are deleted: a parent never gets a dependent
 * after its end (a watch of an ended parent is answered at once).
 */
function shardLinksSql(): string {
  return `     IF p_outbox IS NOT NULL THEN
       INSERT INTO "dtp".shard_outbox (target_shard, body)
         SELECT (e.value->>'targetShard')::integer, (e.value->'body')::jsonb
         FROM json_array_elements(p_outbox) WITH ORDINALITY AS e(value, n)
         ORDER BY e.n;
     END IF;
     IF p_outbox_done IS NOT NULL THEN
       DELETE FROM "dtp".shard_outbox
        WHERE id IN (SELECT value::bigint FROM json_array_elements_text(p_outbox_done));
     END IF;
     IF p_remote_dependents IS NOT NULL THEN
       INSERT INTO dtp.remote_dependents (parent_id, child_id, child_shard)
         SELECT "parentId", "childId", "childShard" FROM json_to_recordset(p_remote_dependents)
           AS r("parentId" text, "childId" text, "childShard" integer)
       ON CONFLICT DO NOTHING;
     END IF;
     IF p_remote_dependents_done IS NOT NULL THEN
       DELETE FROM dtp.remote_dependents
        WHERE parent_id IN (SELECT value FROM json_array_elements_text(p_remote_dependents_done));
     END IF;
     IF p_remote_parents IS NOT NULL THEN
       INSERT INTO dtp.remote_parents (parent_id, task_type, state, result, result_format)
         SELECT "parentId", "taskType", state, result, "resultFormat"
         FROM json_to_recordset(p_remote_parents) AS r("parentId" text, "taskType" text,
           state text, result text, "resultFormat" text)
       ON CONFLICT (parent_id) DO UPDATE SET task_type = excluded.task_type,
         state = excluded.state, result = excluded.result,
         result_format = excluded.result_format;
     END IF;`;
}

/** The durable steps of a commit: those of re-run jobs dropped, steps and waits for jobs written. */
function stepsSql(): string {
  return `     IF p_cleared_steps IS NOT NULL THEN
       DELETE FROM dtp.job_steps
        WHERE job_id IN (SELECT value FROM json_array_elements_text(p_cleared_steps));
     END IF;
     IF p_steps IS NOT NULL THEN
       INSERT INTO dtp.job_steps (job_id, idx, name, result, at_ms)
         SELECT "jobId", "index", name, result, "atMs"
         FROM json_to_recordset(p_steps) AS r("jobId" text, "index" integer, name text,
           result text, "atMs" bigint)
       ON CONFLICT (job_id, idx) DO UPDATE SET name = excluded.name,
         result = excluded.result, at_ms = excluded.at_ms;
     END IF;
     IF p_step_waits IS NOT NULL THEN
       INSERT INTO dtp.job_dependencies (parent_id, job_id)
         SELECT "targetId", "jobId" FROM json_to_recordset(p_step_waits)
           AS r("jobId" text, "targetId" text)
       ON CONFLICT DO NOTHING;
     END IF;
`;
}

/**
 * The group holds of a group of batches merged (mergeBatches): first the
 * holds that ended before the latest bound go, then each hold given is
 * written, or deleted when its `untilMs` is null (a later batch of the
 * group ended it). Batch by batch this is the same as upserting and then
 * deleting each batch's ended holds.
 */
function holdsSql(): string {
  const rows = `json_to_recordset(p_group_holds) AS r(queue text, "groupKey" text, "untilMs" bigint)`;
  return `     IF p_holds_ended_before_ms IS NOT NULL THEN
       DELETE FROM dtp.group_holds WHERE until_ms < p_holds_ended_before_ms;
     END IF;
     IF p_group_holds IS NOT NULL THEN
       DELETE FROM dtp.group_holds h USING ${rows}
        WHERE r."untilMs" IS NULL AND h.queue = r.queue
          AND h.group_key = coalesce(r."groupKey", '');
       INSERT INTO dtp.group_holds (queue, group_key, until_ms)
         SELECT queue, coalesce("groupKey", ''), "untilMs" FROM ${rows}
          WHERE "untilMs" IS NOT NULL
       ON CONFLICT (queue, group_key) DO UPDATE SET until_ms = excluded.until_ms;
     END IF;`;
}

/** Number of the newest schema this code knows. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** What {@link migrate} runs in one schema, rewritten for it once. */
interface MigrationStatements {
  createSchema: string;
  createVersionTable: string;
  readVersion: string;
  insertVersion: string;
  setVersion: string;
  /** Migration n at index n − 1; null where it has nothing to do in this schema. */
  migrations: readonly (string | null)[];
}

const migrationStatements = new Map<string, MigrationStatements>();

function migrationStatementsOf(schema: string): MigrationStatements {
  let statements = migrationStatements.get(schema);
  if (statements === undefined) {
    const sql = (text: string): string => inSchema(text, schema);
    statements = {
      createSchema: `CREATE SCHEMA IF NOT EXISTS ${checkedSchema(schema)}`,
      createVersionTable: sql(
        'CREATE TABLE IF NOT EXISTS dtp.schema_version (version integer NOT NULL)',
      ),
      readVersion: sql('SELECT version FROM dtp.schema_version'),
      insertVersion: sql('INSERT INTO dtp.schema_version (version) VALUES (0)'),
      setVersion: sql('UPDATE dtp.schema_version SET version = $1'),
      migrations: MIGRATIONS.map((text, i) =>
        schema !== DEFAULT_SCHEMA && CLUSTER_MIGRATIONS.has(i + 1) ? null : sql(text),
      ),
    };
    migrationStatements.set(schema, statements);
  }
  return statements;
}

/**
 * Brings `schema` (by default `dtp`; a shard's `dtp_s<n>`) to `target`
 * (tests stop short of the newest), by default {@link SCHEMA_VERSION};
 * returns the version found.
 */
export async function migrate(
  client: ClientBase,
  target = SCHEMA_VERSION,
  schema = DEFAULT_SCHEMA,
): Promise<number> {
  const statements = migrationStatementsOf(schema);
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await client.query(statements.createSchema);
    await client.query(statements.createVersionTable);
    const found = await currentVersion(client, statements);
    if (found > SCHEMA_VERSION) {
      throw new StoreError(
        `database schema version ${found} is newer than this coordinator understands (${SCHEMA_VERSION})`,
      );
    }
    for (let version = found; version < target; version++) {
      const migration = statements.migrations[version];
      if (migration !== null && migration !== undefined) await client.query(migration);
      await client.query(statements.setVersion, [version + 1]);
    }
    await client.query('COMMIT');
    return found;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

async function currentVersion(
  client: ClientBase,
  statements: MigrationStatements,
): Promise<number> {
  const rows = await client.query<{ version: number }>(statements.readVersion);
  const first = rows.rows[0];
  if (first !== undefined) return first.version;
  await client.query(statements.insertVersion);
  return 0;
}
