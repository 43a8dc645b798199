/**
 * The SQLite implementation of {@link Store}, on better-sqlite3.
 *
 * Writes go to a writer thread (writer-thread.ts) that owns the only writing
 * connection: the coordinator's event loop never waits for a commit or an
 * fsync, and batches queued while one commits share the next transaction.
 * Reads of history run on the main thread, on a connection of their own,
 * which in WAL mode sees the last committed state without blocking the
 * writer (point lookups by key take microseconds).
 *
 * Journal mode WAL. `synchronous=NORMAL` (durability `normal`) commits survive
 * a crash of the process but not necessarily of the machine; `FULL` (durability
 * `full`) fsyncs the WAL on every commit and survives power loss.
 */
import { once } from 'node:events';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import type { Database, Statement } from 'better-sqlite3';
import { describeError } from '../../protocol/errors.js';
import {
  StoreError,
  type JobRecord,
  type ListQuery,
  type PurgeQuery,
  type RecoveredState,
  type Store,
  type StoreRead,
  type StoreReadResult,
  type WriteBatch,
} from '../store.js';
import { openDatabase } from './open.js';
import {
  ATTEMPT_COLUMNS,
  JOB_COLUMNS,
  attemptFromRow,
  attemptValues,
  columnList,
  jobFromRow,
  jobInsertValues,
  jobUpdateValues,
  type AttemptRow,
  type JobRow,
  type SqlValue,
} from './rows.js';
import type { FromWriter, ToWriter } from './writer-protocol.js';

export interface SqliteStoreOptions {
  /** File path (parent folders are created). */
  path: string;
  /** `normal` (default) or `full` (fsync per commit). */
  durability?: 'normal' | 'full';
  /** Told the duration of every transaction the writer commits, in ms. */
  onCommit?: (durationMs: number) => void;
}

const WRITER_ENTRY = new URL('./writer-thread.js', import.meta.url);
const ACTIVE = "state IN ('QUEUED', 'RUNNING', 'RETRY_WAIT')";

interface Pending<T> {
  resolve(value: T): void;
  reject(err: Error): void;
}

export class SqliteStore implements Store {
  readonly description: string;
  readonly #writer: Worker;
  readonly #port: MessagePort;
  readonly #reader: Database;
  readonly #onCommit: ((durationMs: number) => void) | undefined;
  readonly #commits = new Map<number, Pending<void>>();
  readonly #purges = new Map<number, Pending<number>>();
  readonly #byId: Statement<[string], JobRow>;
  readonly #byKey: Statement<[string], JobRow>;
  readonly #attemptsOf: Statement<[string], AttemptRow>;
  readonly #lists = new Map<string, Statement<(string | number)[], JobRow>>();
  #nextPurgeId = 1;
  #failure: StoreError | null = null;
  #closing: Promise<void> | null = null;

  private constructor(options: SqliteStoreOptions, writer: Worker, port: MessagePort) {
    this.description = `sqlite ${options.path}`;
    this.#writer = writer;
    this.#port = port;
    this.#onCommit = options.onCommit;
    this.#reader = openDatabase(options.path, options.durability ?? 'normal', { readOnly: true });
    this.#byId = this.#reader.prepare(
      `SELECT ${columnList(JOB_COLUMNS)} FROM jobs WHERE job_id = ?`,
    );
    this.#byKey = this.#reader.prepare(
      `SELECT ${columnList(JOB_COLUMNS)} FROM jobs WHERE idempotency_key = ?`,
    );
    this.#attemptsOf = this.#reader.prepare(
      `SELECT ${columnList(ATTEMPT_COLUMNS)} FROM attempts WHERE job_id = ? ORDER BY attempt_number`,
    );
    port.on('message', (msg: FromWriter) => this.#onWriter(msg));
    writer.on('error', (err) => this.#fail(`writer thread failed: ${describeError(err)}`));
    writer.on('exit', () => {
      if (this.#closing === null) this.#fail('writer thread exited');
    });
  }

  /** Opens (creating and migrating as needed) the database; rejects with {@link StoreError}. */
  static async open(options: SqliteStoreOptions): Promise<SqliteStore> {
    if (options.path === ':memory:' || options.path === '') {
      throw new StoreError('SqliteStore needs a file; use MemoryStore for :memory:');
    }
    const { port1, port2 } = new MessageChannel();
    const writer = new Worker(WRITER_ENTRY, {
      workerData: {
        data: { path: options.path, durability: options.durability ?? 'normal' },
        port: port2,
      },
      transferList: [port2],
    });
    const first = await new Promise<FromWriter>((resolve) => {
      port1.once('message', resolve);
      writer.once('error', (err) => resolve({ type: 'OPEN_FAILED', message: describeError(err) }));
      writer.once('exit', (code) =>
        resolve({ type: 'OPEN_FAILED', message: `writer thread exited with code ${code}` }),
      );
    });
    if (first.type !== 'READY') {
      port1.close();
      await writer.terminate();
      const message = first.type === 'OPEN_FAILED' ? first.message : `unexpected ${first.type}`;
      throw new StoreError(message);
    }
    try {
      return new SqliteStore(options, writer, port1);
    } catch (err) {
      port1.close();
      await writer.terminate();
      throw err;
    }
  }

  recover(): Promise<RecoveredState> {
    return this.#readNow(() => {
      const activeJobs = this.#reader
        .prepare<[], JobRow>(
          `SELECT ${columnList(JOB_COLUMNS)} FROM jobs WHERE ${ACTIVE} ORDER BY seq`,
        )
        .all()
        .map(jobFromRow);
      const activeAttempts = this.#reader
        .prepare<[], AttemptRow>(
          `SELECT ${columnList(ATTEMPT_COLUMNS, 'a.')} FROM attempts a
             JOIN jobs j ON j.job_id = a.job_id WHERE j.${ACTIVE}`,
        )
        .all()
        .map(attemptFromRow);
      const max = this.#reader
        .prepare<[], { m: number | null }>('SELECT max(seq) AS m FROM jobs')
        .get();
      return { activeJobs, activeAttempts, maxSeq: max?.m ?? 0 };
    });
  }

  commit(batch: WriteBatch): Promise<void> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    if (this.#closing !== null) return Promise.reject(new StoreError('store is closed'));
    const inserts: SqlValue[][] = [];
    const updates: SqlValue[][] = [];
    for (const { job, isNew } of batch.jobs) {
      if (isNew) inserts.push(jobInsertValues(job));
      else updates.push(jobUpdateValues(job));
    }
    const attempts = batch.attempts.map(attemptValues);
    return new Promise((resolve, reject) => {
      this.#commits.set(batch.batchId, { resolve, reject });
      this.#post({ type: 'COMMIT', batchId: batch.batchId, inserts, updates, attempts });
    });
  }

  read(read: StoreRead): Promise<StoreReadResult> {
    switch (read.op) {
      case 'job':
        return this.#readNow(() => {
          const row = this.#byId.get(read.jobId);
          const attempts =
            read.withAttempts && row !== undefined
              ? this.#attemptsOf.all(read.jobId).map(attemptFromRow)
              : null;
          return { op: 'job', job: row === undefined ? null : jobFromRow(row), attempts };
        });
      case 'jobByKey':
        return this.#readNow(() => {
          const row = this.#byKey.get(read.key);
          return { op: 'jobByKey', job: row === undefined ? null : jobFromRow(row) };
        });
      case 'list':
        return this.#readNow(() => ({ op: 'list', jobs: this.#list(read.query) }));
      case 'purge':
        return this.#purge(read.query).then((deleted) => ({ op: 'purge', deleted }));
    }
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      const exited = once(this.#writer, 'exit');
      this.#post({ type: 'CLOSE' });
      await exited;
      this.#port.close();
      this.#reader.close();
      const closed = new StoreError('store is closed');
      for (const pending of [...this.#commits.values(), ...this.#purges.values()])
        pending.reject(closed);
      this.#commits.clear();
      this.#purges.clear();
    })();
    return this.#closing;
  }

  #post(msg: ToWriter): void {
    this.#port.postMessage(msg);
  }

  #list(query: ListQuery): JobRecord[] {
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
    if (query.taskType !== null) {
      where.push('task_type = ?');
      params.push(query.taskType);
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
    if (this.#failure !== null) return Promise.reject(this.#failure);
    const requestId = this.#nextPurgeId++;
    return new Promise((resolve, reject) => {
      this.#purges.set(requestId, { resolve, reject });
      this.#post({ type: 'PURGE', requestId, query });
    });
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

  #onWriter(msg: FromWriter): void {
    switch (msg.type) {
      case 'COMMITTED':
        for (const [batchId, pending] of this.#commits) {
          if (batchId > msg.upTo) break;
          this.#commits.delete(batchId);
          pending.resolve();
        }
        this.#onCommit?.(msg.durationMs);
        return;
      case 'FAILED':
        this.#fail(msg.message);
        return;
      case 'PURGED':
      case 'PURGE_FAILED': {
        const pending = this.#purges.get(msg.requestId);
        this.#purges.delete(msg.requestId);
        if (msg.type === 'PURGED') pending?.resolve(msg.deleted);
        else pending?.reject(new StoreError(`purge failed: ${msg.message}`));
        return;
      }
      case 'READY':
      case 'OPEN_FAILED':
        return;
    }
  }

  #fail(message: string): void {
    this.#failure ??= new StoreError(message);
    for (const pending of this.#commits.values()) pending.reject(this.#failure);
    this.#commits.clear();
  }
}
