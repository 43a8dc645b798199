/**
 * The SQLite implementation of {@link Store}, on better-sqlite3 (synchronous,
 * which suits a single-writer core: a commit is one call).
 *
 * Journal mode WAL. `synchronous=NORMAL` (durability `normal`) commits survive
 * a crash of the process but not necessarily of the machine; `FULL` (durability
 * `full`) fsyncs the WAL on every commit and survives power loss. Either way a
 * commit covers a whole batch of staged rows, so fsyncs are per batch, not per
 * job.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3, { type Database, type Statement } from 'better-sqlite3';
import { describeError } from '../protocol/errors.js';
import type { JobState, Priority } from '../protocol/messages.js';
import { migrate } from './schema.js';
import {
  PendingWrites,
  StoreError,
  mergeListed,
  type JobRecord,
  type ListQuery,
  type Store,
} from './store.js';

export interface SqliteStoreOptions {
  /** File path, or `:memory:` (not durable). Parent folders are created. */
  path: string;
  /** `normal` (default) or `full` (fsync per commit). */
  durability?: 'normal' | 'full';
}

interface JobRow {
  seq: number;
  job_id: string;
  task_type: string;
  payload: string;
  state: string;
  priority: string;
  attempts: number;
  max_attempts: number;
  timeout_ms: number;
  idempotency_key: string | null;
  worker_id: string | null;
  attempt_id: string | null;
  deadline_at_ms: number | null;
  retry_at_ms: number | null;
  result: string | null;
  result_format: string | null;
  error: string | null;
  created_at_ms: number;
  updated_at_ms: number;
}

const COLUMNS =
  'seq, job_id, task_type, payload, state, priority, attempts, max_attempts, timeout_ms, ' +
  'idempotency_key, worker_id, attempt_id, deadline_at_ms, retry_at_ms, result, result_format, ' +
  'error, created_at_ms, updated_at_ms';

function fromRow(row: JobRow): JobRecord {
  return {
    seq: row.seq,
    jobId: row.job_id,
    taskType: row.task_type,
    payloadJson: row.payload,
    state: row.state as JobState,
    priority: row.priority as Priority,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    timeoutMs: row.timeout_ms,
    idempotencyKey: row.idempotency_key,
    workerId: row.worker_id,
    attemptId: row.attempt_id,
    deadlineAtMs: row.deadline_at_ms,
    retryAtMs: row.retry_at_ms,
    result: row.result,
    resultFormat:
      row.result_format === 'json' || row.result_format === 'text' ? row.result_format : null,
    error: row.error,
    createdAtMs: row.created_at_ms,
    updatedAtMs: row.updated_at_ms,
  };
}

function toParams(job: Readonly<JobRecord>): Record<string, string | number | null> {
  return {
    seq: job.seq,
    job_id: job.jobId,
    task_type: job.taskType,
    payload: job.payloadJson,
    state: job.state,
    priority: job.priority,
    attempts: job.attempts,
    max_attempts: job.maxAttempts,
    timeout_ms: job.timeoutMs,
    idempotency_key: job.idempotencyKey,
    worker_id: job.workerId,
    attempt_id: job.attemptId,
    deadline_at_ms: job.deadlineAtMs,
    retry_at_ms: job.retryAtMs,
    result: job.result,
    result_format: job.resultFormat,
    error: job.error,
    created_at_ms: job.createdAtMs,
    updated_at_ms: job.updatedAtMs,
  };
}

export class SqliteStore implements Store {
  readonly #db: Database;
  readonly #pending = new PendingWrites();
  readonly #insert: Statement;
  readonly #update: Statement;
  readonly #byId: Statement<[string], JobRow>;
  readonly #byKey: Statement<[string], JobRow>;
  readonly #active: Statement<[], JobRow>;
  readonly #maxSeq: Statement<[], { m: number | null }>;
  readonly #commitBatch: (rows: { job: JobRecord; isNew: boolean }[]) => void;
  #closed = false;

  constructor(options: SqliteStoreOptions) {
    this.#db = SqliteStore.#open(options);
    const db = this.#db;
    this.#insert = db.prepare(
      `INSERT INTO jobs (${COLUMNS}) VALUES (${COLUMNS.split(', ')
        .map((c) => '@' + c)
        .join(', ')})`,
    );
    this.#update = db.prepare(
      `UPDATE jobs SET state = @state, attempts = @attempts, worker_id = @worker_id,
         attempt_id = @attempt_id, deadline_at_ms = @deadline_at_ms, retry_at_ms = @retry_at_ms,
         result = @result, result_format = @result_format, error = @error,
         updated_at_ms = @updated_at_ms
       WHERE seq = @seq`,
    );
    this.#byId = db.prepare(`SELECT ${COLUMNS} FROM jobs WHERE job_id = ?`);
    this.#byKey = db.prepare(`SELECT ${COLUMNS} FROM jobs WHERE idempotency_key = ?`);
    this.#active = db.prepare(
      `SELECT ${COLUMNS} FROM jobs WHERE state IN ('QUEUED', 'RUNNING', 'RETRY_WAIT') ORDER BY seq`,
    );
    this.#maxSeq = db.prepare('SELECT max(seq) AS m FROM jobs');
    this.#commitBatch = db.transaction((rows: { job: JobRecord; isNew: boolean }[]) => {
      for (const { job, isNew } of rows) (isNew ? this.#insert : this.#update).run(toParams(job));
    });
  }

  static #open(options: SqliteStoreOptions): Database {
    try {
      if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true });
      const db = new BetterSqlite3(options.path);
      db.pragma('journal_mode = WAL');
      db.pragma(`synchronous = ${options.durability === 'full' ? 'FULL' : 'NORMAL'}`);
      db.pragma('foreign_keys = ON');
      db.pragma('busy_timeout = 5000');
      migrate(db);
      return db;
    } catch (err) {
      if (err instanceof StoreError) throw err;
      throw new StoreError(`cannot open database ${options.path}: ${describeError(err)}`, {
        cause: err,
      });
    }
  }

  insertJob(job: Readonly<JobRecord>): void {
    this.#pending.insert(job);
  }

  updateJob(job: Readonly<JobRecord>): void {
    this.#pending.update(job);
  }

  get pendingCount(): number {
    return this.#pending.size;
  }

  commit(): void {
    if (this.#pending.size === 0) return;
    const rows = this.#pending.entries();
    try {
      this.#commitBatch(rows);
    } catch (err) {
      throw new StoreError(`commit of ${rows.length} job(s) failed: ${describeError(err)}`, {
        cause: err,
      });
    }
    this.#pending.clear();
  }

  getJob(jobId: string): Readonly<JobRecord> | undefined {
    const staged = this.#pending.get(jobId);
    if (staged !== undefined) return staged;
    const row = this.#read(() => this.#byId.get(jobId));
    return row === undefined ? undefined : fromRow(row);
  }

  getJobByIdempotencyKey(key: string): Readonly<JobRecord> | undefined {
    const staged = this.#pending.getByKey(key);
    if (staged !== undefined) return staged;
    const row = this.#read(() => this.#byKey.get(key));
    if (row === undefined) return undefined;
    return this.#pending.get(row.job_id) ?? fromRow(row);
  }

  loadActiveJobs(): JobRecord[] {
    return this.#read(() => this.#active.all()).map(fromRow);
  }

  maxSeq(): number {
    let max = this.#read(() => this.#maxSeq.get())?.m ?? 0;
    for (const { job } of this.#pending.entries()) max = Math.max(max, job.seq);
    return max;
  }

  listJobs(query: ListQuery): Readonly<JobRecord>[] {
    const where: string[] = [];
    const params: (string | number)[] = [];
    if (query.beforeSeq !== null) {
      where.push('seq < ?');
      params.push(query.beforeSeq);
    }
    if (query.state !== null) {
      where.push('state = ?');
      params.push(query.state);
    }
    params.push(query.limit + this.#pending.size);
    const sql =
      `SELECT ${COLUMNS} FROM jobs ${where.length > 0 ? 'WHERE ' + where.join(' AND ') : ''} ` +
      'ORDER BY seq DESC LIMIT ?';
    const rows = this.#read(() => this.#db.prepare<unknown[], JobRow>(sql).all(...params));
    return mergeListed(rows.map(fromRow), this.#pending, query);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#db.close();
  }

  #read<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      throw new StoreError(`database read failed: ${describeError(err)}`, { cause: err });
    }
  }
}
