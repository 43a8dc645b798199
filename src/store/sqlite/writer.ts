/**
 * The writing side of the SQLite store: one connection, the statements that
 * apply a group of batches in one transaction, and purge steps. Used on the
 * writer thread (durability `full`) and inline on the main thread
 * (durability `normal`, where a commit never waits for the disk).
 */
import type { Database, Statement } from 'better-sqlite3';
import { PURGE_EVENTS_PER_ROW, type PurgeQuery } from '../store.js';
import {
  ATTEMPT_COLUMNS,
  JOB_COLUMNS,
  JOB_MUTABLE_COLUMNS,
  SCHEDULE_COLUMNS,
  QUEUE_COLUMNS,
  columnList,
  type SqlValue,
} from './rows.js';
import { EVENT_COLUMNS, SIGNAL_COLUMNS, TRIGGER_COLUMNS, type SignalParts } from './signal-rows.js';

/** One batch as the writer applies it: jobs as column arrays. */
export interface EncodedBatch extends SignalParts {
  batchId: number;
  inserts: SqlValue[][];
  updates: SqlValue[][];
  attempts: SqlValue[][];
  /** Rows of the dependency table: `[parentId, jobId]`. */
  dependencies: SqlValue[][];
  /** Schedules to write (insert or replace), as column arrays. */
  schedules: SqlValue[][];
  /** Names of schedules to delete. */
  deletedSchedules: string[];
  /** Queue settings rows (absent = none). */
  queues?: SqlValue[][];
  /** Jobs whose steps are all deleted first (absent = none). */
  clearedSteps?: string[];
  /** Step rows `[jobId, idx, name, result, atMs]` to insert or replace (absent = none). */
  steps?: SqlValue[][];
  /** Group hold rows `[queue, group_key, until_ms]` to insert or replace (absent = none). */
  groupHolds?: SqlValue[][];
  /** Then delete the group holds that ended before this time (absent = none). */
  groupHoldsEndedBeforeMs?: number;
}

export class SqliteWriter {
  readonly #insert: Statement<SqlValue[]>;
  readonly #update: Statement<SqlValue[]>;
  readonly #attempt: Statement<SqlValue[]>;
  readonly #schedule: Statement<SqlValue[]>;
  readonly #deleteSchedule: Statement<[string]>;
  readonly #queue: Statement<SqlValue[]>;
  readonly #purgeSelect: Statement<[string, number, number], { seq: number; job_id: string }>;
  readonly #purgeAttempts: Statement<[string]>;
  readonly #purgeJob: Statement<[number]>;
  readonly #dependency: Statement<SqlValue[]>;
  readonly #purgeDependencies: Statement<[string, string]>;
  readonly #step: Statement<SqlValue[]>;
  readonly #purgeSteps: Statement<[string]>;
  readonly #groupHold: Statement<SqlValue[]>;
  readonly #endGroupHolds: Statement<[number]>;
  readonly #signal: Statement<SqlValue[]>;
  readonly #purgeSignals: Statement<[string]>;
  readonly #event: Statement<SqlValue[]>;
  readonly #purgeEvents: Statement<[number, number]>;
  readonly #trigger: Statement<SqlValue[]>;
  readonly #deleteTrigger: Statement<[string]>;
  readonly #writeAll: (batches: readonly EncodedBatch[]) => void;
  readonly #purgeSome: (query: PurgeQuery) => number;

  constructor(db: Database) {
    const placeholders = (n: number): string => Array.from({ length: n }, () => '?').join(', ');
    this.#insert = db.prepare(
      `INSERT INTO jobs (${columnList(JOB_COLUMNS)}) VALUES (${placeholders(JOB_COLUMNS.length)})`,
    );
    this.#update = db.prepare(
      `UPDATE jobs SET ${JOB_MUTABLE_COLUMNS.map((c) => `${c} = ?`).join(', ')} WHERE seq = ?`,
    );
    this.#attempt = db.prepare(
      `INSERT OR REPLACE INTO attempts (${columnList(ATTEMPT_COLUMNS)}) VALUES (${placeholders(ATTEMPT_COLUMNS.length)})`,
    );
    this.#dependency = db.prepare(
      'INSERT OR IGNORE INTO job_dependencies (parent_id, job_id) VALUES (?, ?)',
    );
    this.#schedule = db.prepare(
      `INSERT OR REPLACE INTO schedules (${columnList(SCHEDULE_COLUMNS)}) VALUES (${placeholders(SCHEDULE_COLUMNS.length)})`,
    );
    this.#deleteSchedule = db.prepare('DELETE FROM schedules WHERE name = ?');
    this.#queue = db.prepare(
      `INSERT OR REPLACE INTO queue_settings (${columnList(QUEUE_COLUMNS)}) VALUES (${placeholders(QUEUE_COLUMNS.length)})`,
    );
    // A parent that a non-terminal job depends on is kept: that job still
    // needs its result (see PurgeQuery).
    this.#purgeSelect = db.prepare(
      `SELECT seq, job_id FROM jobs WHERE state = ? AND finished_at_ms < ?
         AND NOT EXISTS (SELECT 1 FROM job_dependencies d JOIN jobs c ON c.job_id = d.job_id
                          WHERE d.parent_id = jobs.job_id
                            AND c.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED'))
       ORDER BY seq LIMIT ?`,
    );
    this.#purgeDependencies = db.prepare(
      'DELETE FROM job_dependencies WHERE job_id = ? OR parent_id = ?',
    );
    this.#purgeAttempts = db.prepare('DELETE FROM attempts WHERE job_id = ?');
    this.#step = db.prepare(
      'INSERT OR REPLACE INTO job_steps (job_id, idx, name, result, at_ms) VALUES (?, ?, ?, ?, ?)',
    );
    this.#purgeSteps = db.prepare('DELETE FROM job_steps WHERE job_id = ?');
    this.#groupHold = db.prepare(
      'INSERT OR REPLACE INTO group_holds (queue, group_key, until_ms) VALUES (?, ?, ?)',
    );
    this.#endGroupHolds = db.prepare('DELETE FROM group_holds WHERE until_ms < ?');
    this.#signal = db.prepare(
      `INSERT OR REPLACE INTO job_signals (${columnList(SIGNAL_COLUMNS)}) VALUES (${placeholders(SIGNAL_COLUMNS.length)})`,
    );
    this.#purgeSignals = db.prepare('DELETE FROM job_signals WHERE job_id = ?');
    this.#event = db.prepare(
      `INSERT INTO events (${columnList(EVENT_COLUMNS)}) VALUES (${placeholders(EVENT_COLUMNS.length)})`,
    );
    // The oldest first, through the index by time, a step's worth at most.
    this.#purgeEvents = db.prepare(
      `DELETE FROM events WHERE rowid IN
         (SELECT rowid FROM events WHERE at_ms < ? ORDER BY at_ms LIMIT ?)`,
    );
    this.#trigger = db.prepare(
      `INSERT OR REPLACE INTO triggers (${columnList(TRIGGER_COLUMNS)}) VALUES (${placeholders(TRIGGER_COLUMNS.length)})`,
    );
    this.#deleteTrigger = db.prepare('DELETE FROM triggers WHERE name = ?');
    this.#purgeJob = db.prepare('DELETE FROM jobs WHERE seq = ?');
    this.#writeAll = db.transaction((batches: readonly EncodedBatch[]) => {
      for (const batch of batches) this.#apply(batch);
    });
    this.#purgeSome = db.transaction((query: PurgeQuery) => {
      const rows = this.#purgeSelect.all(query.state, query.finishedBeforeMs, query.limit);
      for (const row of rows) {
        this.#purgeAttempts.run(row.job_id);
        this.#purgeSteps.run(row.job_id);
        this.#purgeSignals.run(row.job_id);
        this.#purgeDependencies.run(row.job_id, row.job_id);
        this.#purgeJob.run(row.seq);
      }
      if (query.state === 'COMPLETED') {
        this.#purgeEvents.run(query.finishedBeforeMs, query.limit * PURGE_EVENTS_PER_ROW);
      }
      return rows.length;
    });
  }

  /** Applies the batches in one transaction (all or nothing); throws on failure. */
  write(batches: readonly EncodedBatch[]): void {
    this.#writeAll(batches);
  }

  /** Deletes one step of terminal jobs; returns how many. */
  purge(query: PurgeQuery): number {
    return this.#purgeSome(query);
  }

  #apply(batch: EncodedBatch): void {
    for (const values of batch.inserts) this.#insert.run(...values);
    for (const values of batch.dependencies) this.#dependency.run(...values);
    for (const values of batch.updates) {
      const info = this.#update.run(...values);
      if (info.changes !== 1) {
        throw new Error(`update of job seq ${String(values.at(-1))} changed ${info.changes} rows`);
      }
    }
    for (const values of batch.attempts) this.#attempt.run(...values);
    for (const values of batch.schedules) this.#schedule.run(...values);
    for (const name of batch.deletedSchedules) this.#deleteSchedule.run(name);
    for (const values of batch.queues ?? []) this.#queue.run(...values);
    for (const jobId of batch.clearedSteps ?? []) this.#purgeSteps.run(jobId);
    for (const values of batch.steps ?? []) this.#step.run(...values);
    for (const values of batch.groupHolds ?? []) this.#groupHold.run(...values);
    if (batch.groupHoldsEndedBeforeMs !== undefined) {
      this.#endGroupHolds.run(batch.groupHoldsEndedBeforeMs);
    }
    for (const values of batch.signals ?? []) this.#signal.run(...values);
    for (const values of batch.events ?? []) this.#event.run(...values);
    for (const values of batch.triggers ?? []) this.#trigger.run(...values);
    for (const name of batch.deletedTriggers ?? []) this.#deleteTrigger.run(name);
  }
}
