/**
 * The SQLite schema, created and migrated by the coordinator itself.
 *
 * `PRAGMA user_version` holds the number of migrations applied. Each migration
 * runs in its own transaction; a database from a newer version is refused
 * rather than guessed at.
 */
import type { Database } from 'better-sqlite3';
import { StoreError } from '../store.js';

const MIGRATIONS: readonly string[] = [
  // 1: jobs, in submission order. Terminal rows are history; the partial
  // index makes restart recovery read only the active ones. (Rebuilt by 3.)
  `CREATE TABLE jobs (
     seq             INTEGER PRIMARY KEY,
     job_id          TEXT    NOT NULL UNIQUE,
     task_type       TEXT    NOT NULL,
     payload         TEXT    NOT NULL,
     state           TEXT    NOT NULL,
     priority        TEXT    NOT NULL,
     attempts        INTEGER NOT NULL,
     max_attempts    INTEGER NOT NULL,
     timeout_ms      INTEGER NOT NULL,
     idempotency_key TEXT    UNIQUE,
     worker_id       TEXT,
     attempt_id      TEXT,
     deadline_at_ms  INTEGER,
     retry_at_ms     INTEGER,
     result          TEXT,
     error           TEXT,
     created_at_ms   INTEGER NOT NULL,
     updated_at_ms   INTEGER NOT NULL
   ) STRICT;
   CREATE INDEX jobs_active ON jobs (seq) WHERE state IN ('QUEUED', 'RUNNING', 'RETRY_WAIT');
   CREATE INDEX jobs_state_seq ON jobs (state, seq);`,
  // 2: how to read a result: 'text' or 'json' (a handler's non-string value
  // as JSON text). NULL in rows written before it existed: read as text.
  `ALTER TABLE jobs ADD COLUMN result_format TEXT CHECK (result_format IN ('text', 'json'));`,
  // 3: job history and retention, and fewer indexes to keep up per write.
  // One row per ended attempt; when each job started its latest attempt and
  // when it ended (terminal rows of earlier versions count as finished at
  // their last update). The table is rebuilt so that idempotency keys get a
  // partial unique index (a job without a key costs no index entry); one
  // (state, seq) index serves recovery (the active states), listing by state
  // and retention, so the partial active-jobs index goes.
  `CREATE TABLE jobs_v3 (
     seq             INTEGER PRIMARY KEY,
     job_id          TEXT    NOT NULL UNIQUE,
     task_type       TEXT    NOT NULL,
     payload         TEXT    NOT NULL,
     state           TEXT    NOT NULL,
     priority        TEXT    NOT NULL,
     attempts        INTEGER NOT NULL,
     max_attempts    INTEGER NOT NULL,
     timeout_ms      INTEGER NOT NULL,
     idempotency_key TEXT,
     worker_id       TEXT,
     attempt_id      TEXT,
     deadline_at_ms  INTEGER,
     retry_at_ms     INTEGER,
     result          TEXT,
     result_format   TEXT CHECK (result_format IN ('text', 'json')),
     error           TEXT,
     created_at_ms   INTEGER NOT NULL,
     updated_at_ms   INTEGER NOT NULL,
     started_at_ms   INTEGER,
     finished_at_ms  INTEGER
   ) STRICT;
   INSERT INTO jobs_v3
     SELECT seq, job_id, task_type, payload, state, priority, attempts, max_attempts,
            timeout_ms, idempotency_key, worker_id, attempt_id, deadline_at_ms, retry_at_ms,
            result, result_format, error, created_at_ms, updated_at_ms, NULL,
            CASE WHEN state IN ('COMPLETED', 'FAILED', 'CANCELLED') THEN updated_at_ms END
       FROM jobs;
   DROP TABLE jobs;
   ALTER TABLE jobs_v3 RENAME TO jobs;
   CREATE UNIQUE INDEX jobs_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
   CREATE INDEX jobs_state_seq ON jobs (state, seq);
   CREATE INDEX jobs_type_seq ON jobs (task_type, seq);
   CREATE TABLE attempts (
     job_id          TEXT    NOT NULL,
     attempt_number  INTEGER NOT NULL,
     attempt_id      TEXT    NOT NULL,
     worker_id       TEXT    NOT NULL,
     started_at_ms   INTEGER NOT NULL,
     finished_at_ms  INTEGER,
     outcome         TEXT    NOT NULL,
     error           TEXT,
     PRIMARY KEY (job_id, attempt_number)
   ) STRICT, WITHOUT ROWID;`,
  // 4: time. A delayed job's due time and the schedule that made a job; the
  // SCHEDULED jobs indexed by due time (a partial index: only they pay for
  // it); a schedule's jobs by seq; and the schedules themselves.
  `ALTER TABLE jobs ADD COLUMN run_at_ms INTEGER;
   ALTER TABLE jobs ADD COLUMN schedule_name TEXT;
   CREATE INDEX jobs_scheduled_run_at ON jobs (run_at_ms, seq) WHERE state = 'SCHEDULED';
   CREATE INDEX jobs_schedule_seq ON jobs (schedule_name, seq) WHERE schedule_name IS NOT NULL;
   CREATE TABLE schedules (
     name            TEXT    PRIMARY KEY,
     task_type       TEXT    NOT NULL,
     cron            TEXT,
     every_ms        INTEGER,
     timezone        TEXT,
     payload         TEXT    NOT NULL,
     max_attempts    INTEGER,
     priority        TEXT,
     timeout_ms      INTEGER,
     overlap         TEXT    NOT NULL CHECK (overlap IN ('allow', 'skip')),
     catch_up        TEXT    NOT NULL CHECK (catch_up IN ('latest', 'none')),
     paused          INTEGER NOT NULL,
     next_run_at_ms  INTEGER,
     last_run_at_ms  INTEGER,
     last_job_id     TEXT,
     created_at_ms   INTEGER NOT NULL,
     updated_at_ms   INTEGER NOT NULL
   ) STRICT, WITHOUT ROWID;`,
  // 5: the latest progress a handler reported (JSON), kept with the job.
  `ALTER TABLE jobs ADD COLUMN progress TEXT;`,
  // 6: dependencies between jobs. The job row keeps its parents in the order
  // given (JSON text, for its snapshot) and what a parent's failure does to
  // it; job_dependencies is the reverse index (parent -> dependents) that
  // recovery and purge ask: a parent is not purged while a dependent that
  // still needs its result is not terminal.
  `ALTER TABLE jobs ADD COLUMN depends_on TEXT;
   ALTER TABLE jobs ADD COLUMN on_parent_failure TEXT CHECK (on_parent_failure IN ('cancel', 'run'));
   CREATE TABLE job_dependencies (
     parent_id TEXT NOT NULL,
     job_id    TEXT NOT NULL,
     PRIMARY KEY (parent_id, job_id)
   ) STRICT, WITHOUT ROWID;
   CREATE INDEX job_dependencies_job ON job_dependencies (job_id);`,
  // 7: named queues. Each job's queue and group key (fixed at submission;
  // rows from before are in `default`, without a group), an index to list a
  // queue and count it by state, one row of settings per queue that has any
  // (paused, limits), and the queue a schedule's jobs go to.
  `ALTER TABLE jobs ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
   ALTER TABLE jobs ADD COLUMN group_key TEXT;
   CREATE INDEX jobs_queue_state ON jobs (queue, state, seq);
   CREATE TABLE queue_settings (
     name                   TEXT    PRIMARY KEY,
     paused                 INTEGER NOT NULL,
     concurrency            INTEGER,
     rate_max               INTEGER,
     rate_interval_ms       INTEGER,
     group_concurrency      INTEGER,
     group_rate_max         INTEGER,
     group_rate_interval_ms INTEGER,
     updated_at_ms          INTEGER NOT NULL
   ) STRICT, WITHOUT ROWID;
   ALTER TABLE schedules ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';`,
  // 8: the submitter's W3C trace context (JSON), fixed at submission.
  `ALTER TABLE jobs ADD COLUMN trace_context TEXT;`,
  // 9: child jobs. The job whose handler enqueued a job and the call's key
  // among that parent's children; the partial unique index is the durable
  // dedupe (one child per parent and key) and finds a parent's children.
  `ALTER TABLE jobs ADD COLUMN parent_job_id TEXT;
   ALTER TABLE jobs ADD COLUMN child_key TEXT;
   CREATE UNIQUE INDEX jobs_child_key ON jobs (parent_job_id, child_key)
     WHERE parent_job_id IS NOT NULL;`,
  // 10: durable steps. One row per step a handler recorded (its value as JSON
  // text; NULL for a wait not ended yet), in order per job. A wait for
  // another job is stored in job_dependencies, as a parent would be.
  `CREATE TABLE job_steps (
     job_id TEXT    NOT NULL,
     idx    INTEGER NOT NULL,
     name   TEXT    NOT NULL,
     result TEXT,
     at_ms  INTEGER NOT NULL,
     PRIMARY KEY (job_id, idx)
   ) STRICT, WITHOUT ROWID;`,
  // 11: deduplication, expiry and rate limits. A job's deduplication key and
  // mode within its queue, the end of the throttle window its creation
  // opened, when it expires unless started, and its attempts in a row that
  // ended rate limited (0 in rows from before). Two partial indexes, so
  // that only the jobs using them pay: the throttle windows (recovery reads
  // the ended jobs whose window is still open) and the delayed jobs that are keyed or ran before
  // (recovery loads every one of them, whatever the window). A queue held
  // back by a handler until a time; and the groups held back, one row per
  // (queue, group key): the jobs without a group key are held under the
  // group key '' (a real one is 1 to 128 characters).
  `ALTER TABLE jobs ADD COLUMN dedup_key TEXT;
   ALTER TABLE jobs ADD COLUMN dedup_mode TEXT CHECK (dedup_mode IN ('active', 'throttle', 'debounce'));
   ALTER TABLE jobs ADD COLUMN dedup_until_ms INTEGER;
   ALTER TABLE jobs ADD COLUMN expires_at_ms INTEGER;
   ALTER TABLE jobs ADD COLUMN rate_limited_in_a_row INTEGER NOT NULL DEFAULT 0;
   CREATE INDEX jobs_dedup_until ON jobs (dedup_until_ms) WHERE dedup_until_ms IS NOT NULL;
   CREATE INDEX jobs_scheduled_kept ON jobs (seq)
     WHERE state = 'SCHEDULED' AND (dedup_key IS NOT NULL OR attempts > 0);
   ALTER TABLE queue_settings ADD COLUMN held_until_ms INTEGER;
   CREATE TABLE group_holds (
     queue     TEXT    NOT NULL,
     group_key TEXT    NOT NULL,
     until_ms  INTEGER NOT NULL,
     PRIMARY KEY (queue, group_key)
   ) STRICT, WITHOUT ROWID;`,
  // 12: signals, events and triggers. The signals sent to a job, numbered
  // per job, each kept (consumed = 1) once a wait took it until the job is
  // purged; a partial index of those not taken, which recovery reads. The
  // events published, by id (the jobs their triggers created as a JSON
  // array), indexed by time for retention. Signals and events keep rowids:
  // their payloads may be large, and a table without rowid keeps whole rows
  // in its key's b-tree. The triggers, by name.
  `CREATE TABLE job_signals (
     job_id   TEXT    NOT NULL,
     seq      INTEGER NOT NULL,
     name     TEXT    NOT NULL,
     payload  TEXT    NOT NULL,
     at_ms    INTEGER NOT NULL,
     consumed INTEGER NOT NULL CHECK (consumed IN (0, 1)),
     PRIMARY KEY (job_id, seq)
   ) STRICT;
   CREATE INDEX job_signals_held ON job_signals (job_id, seq) WHERE consumed = 0;
   CREATE TABLE events (
     event_id  TEXT    PRIMARY KEY,
     name      TEXT    NOT NULL,
     event_key TEXT,
     payload   TEXT    NOT NULL,
     at_ms     INTEGER NOT NULL,
     job_ids   TEXT    NOT NULL,
     resumed   INTEGER NOT NULL
   ) STRICT;
   CREATE INDEX events_at ON events (at_ms);
   CREATE TABLE triggers (
     name          TEXT    PRIMARY KEY,
     event         TEXT    NOT NULL,
     task_type     TEXT    NOT NULL,
     queue         TEXT    NOT NULL,
     priority      TEXT,
     max_attempts  INTEGER,
     created_at_ms INTEGER NOT NULL,
     updated_at_ms INTEGER NOT NULL
   ) STRICT, WITHOUT ROWID;`,
];

/** Number of the newest schema this code knows. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** Brings the database to `target` (tests stop short of the newest), by default {@link SCHEMA_VERSION}; returns the version found. */
export function migrate(db: Database, target = SCHEMA_VERSION): number {
  const found = db.pragma('user_version', { simple: true }) as number;
  if (found > SCHEMA_VERSION) {
    throw new StoreError(
      `database schema version ${found} is newer than this coordinator understands (${SCHEMA_VERSION})`,
    );
  }
  for (let version = found; version < target; version++) {
    const sql = MIGRATIONS[version] as string;
    db.transaction(() => {
      db.exec(sql);
      db.pragma(`user_version = ${version + 1}`);
    })();
  }
  return found;
}
