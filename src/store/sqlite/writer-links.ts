/**
 * How the SQLite store reaches its writer: through a thread (durability
 * `full`) or inline on the calling thread (durability `normal`). Both keep
 * the order of commits, report every failure as a {@link StoreError}, and
 * refuse every commit after a failed one (nothing may commit behind a hole).
 */
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { Database } from 'better-sqlite3';
import { describeError } from '../../protocol/errors.js';
import { StoreError, type PurgeQuery } from '../store.js';
import { SqliteWriter, type EncodedBatch } from './writer.js';
import type {
  CheckpointOptions,
  CheckpointThreadData,
  FromWriter,
  ToWriter,
} from './writer-protocol.js';

export interface WriterLink {
  commit(batch: EncodedBatch): Promise<void>;
  purge(query: PurgeQuery): Promise<number>;
  /** Finishes what was given, then stops. Idempotent. */
  close(): Promise<void>;
}

interface Pending<T> {
  resolve(value: T): void;
  reject(err: Error): void;
}

/** Told the duration of each transaction, in ms. */
export type CommitObserver = ((durationMs: number) => void) | undefined;

/**
 * The WAL file size beyond which the background checkpoint rewinds the WAL
 * (checkpoint-thread.ts): 1,000 pages of 4 KiB, the size at which SQLite's
 * own automatic checkpoint runs.
 */
export const WAL_RESTART_BYTES = 4 * 2 ** 20;

/** Commits on the calling thread, at once; a background thread checkpoints. */
export class InlineWriterLink implements WriterLink {
  readonly #writer: SqliteWriter;
  readonly #checkpointer: Worker;
  readonly #onCommit: CommitObserver;
  #failure: StoreError | null = null;
  #closing: Promise<void> | null = null;

  constructor(
    db: Database,
    path: string,
    onCommit: CommitObserver,
    checkpoints: CheckpointOptions = {},
  ) {
    this.#writer = new SqliteWriter(db);
    this.#onCommit = onCommit;
    // Checkpoints (which fsync the database file) happen off this thread.
    db.pragma('wal_autocheckpoint = 0');
    const workerData: CheckpointThreadData = {
      path,
      intervalMs: checkpoints.intervalMs ?? 1_000,
      restartBytes: checkpoints.restartBytes ?? WAL_RESTART_BYTES,
    };
    this.#checkpointer = new Worker(new URL('./checkpoint-thread.js', import.meta.url), {
      workerData,
    });
    this.#checkpointer.unref();
  }

  commit(batch: EncodedBatch): Promise<void> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    if (this.#closing !== null) return Promise.reject(new StoreError('store is closed'));
    const started = performance.now();
    try {
      this.#writer.write([batch]);
    } catch (err) {
      this.#failure = new StoreError(
        `commit of batch ${batch.batchId} failed: ${describeError(err)}`,
        { cause: err },
      );
      return Promise.reject(this.#failure);
    }
    this.#onCommit?.(performance.now() - started);
    return Promise.resolve();
  }

  purge(query: PurgeQuery): Promise<number> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    try {
      return Promise.resolve(this.#writer.purge(query));
    } catch (err) {
      return Promise.reject(new StoreError(`purge failed: ${describeError(err)}`, { cause: err }));
    }
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      const exited = once(this.#checkpointer, 'exit');
      this.#checkpointer.ref(); // keep the process alive until it has finished
      this.#checkpointer.postMessage('close');
      await exited;
    })();
    return this.#closing;
  }
}

/** Commits on the writer thread (writer-thread.ts). */
export class ThreadWriterLink implements WriterLink {
  readonly #thread: Worker;
  readonly #port: MessagePort;
  readonly #onCommit: CommitObserver;
  readonly #commits = new Map<number, Pending<void>>();
  readonly #purges = new Map<number, Pending<number>>();
  #nextPurgeId = 1;
  #failure: StoreError | null = null;
  #closing: Promise<void> | null = null;

  private constructor(thread: Worker, port: MessagePort, onCommit: CommitObserver) {
    this.#thread = thread;
    this.#port = port;
    this.#onCommit = onCommit;
    port.on('message', (msg: FromWriter) => this.#onMessage(msg));
    thread.on('error', (err) => this.#fail(`writer thread failed: ${describeError(err)}`));
    thread.on('exit', () => {
      if (this.#closing === null) this.#fail('writer thread exited');
    });
  }

  /** Starts the thread; it opens and migrates the database. Rejects with {@link StoreError}. */
  static async start(
    path: string,
    durability: 'normal' | 'full',
    onCommit: CommitObserver,
  ): Promise<ThreadWriterLink> {
    const { port1, port2 } = new MessageChannel();
    const thread = new Worker(new URL('./writer-thread.js', import.meta.url), {
      workerData: { data: { path, durability }, port: port2 },
      transferList: [port2],
    });
    const first = await new Promise<FromWriter>((resolve) => {
      port1.once('message', resolve);
      thread.once('error', (err) => resolve({ type: 'OPEN_FAILED', message: describeError(err) }));
      thread.once('exit', (code) =>
        resolve({ type: 'OPEN_FAILED', message: `writer thread exited with code ${code}` }),
      );
    });
    if (first.type !== 'READY') {
      port1.close();
      await thread.terminate();
      throw new StoreError(
        first.type === 'OPEN_FAILED' ? first.message : `unexpected ${first.type}`,
      );
    }
    return new ThreadWriterLink(thread, port1, onCommit);
  }

  commit(batch: EncodedBatch): Promise<void> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    if (this.#closing !== null) return Promise.reject(new StoreError('store is closed'));
    return new Promise((resolve, reject) => {
      this.#commits.set(batch.batchId, { resolve, reject });
      this.#post({ type: 'COMMIT', ...batch });
    });
  }

  purge(query: PurgeQuery): Promise<number> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    const requestId = this.#nextPurgeId++;
    return new Promise((resolve, reject) => {
      this.#purges.set(requestId, { resolve, reject });
      this.#post({ type: 'PURGE', requestId, query });
    });
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      const exited = once(this.#thread, 'exit');
      this.#post({ type: 'CLOSE' });
      await exited;
      this.#port.close();
      const closed = new StoreError('store is closed');
      for (const pending of [...this.#commits.values(), ...this.#purges.values()]) {
        pending.reject(closed);
      }
      this.#commits.clear();
      this.#purges.clear();
    })();
    return this.#closing;
  }

  #post(msg: ToWriter): void {
    this.#port.postMessage(msg);
  }

  #onMessage(msg: FromWriter): void {
    switch (msg.type) {
      case 'COMMITTED':
        // Ids were inserted in increasing order, so iteration order is theirs.
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
