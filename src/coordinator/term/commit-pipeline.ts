/**
 * Pipelined group commit: effects leave only after the batch they were
 * produced with is durable, batches commit in order, and a new batch is
 * built while earlier ones are still committing.
 *
 * Each flush closes the current batch: the core's writes (if any) go to the
 * store at once, and the effects wait in a queue behind every earlier batch.
 * The queue releases from its head as commits complete, so replies and
 * assignments leave in the order they were produced, each after its own
 * commit. A flush without writes still waits behind earlier batches, because
 * its replies may report state those batches carry.
 */
import { performance } from 'node:perf_hooks';
import type { WriteBatch } from '../../store/store.js';

interface Entry<E> {
  readonly effects: E[];
  done: boolean;
}

/** What a pipeline of effects of type `E` is wired to. */
export interface CommitPipelineHooks<E> {
  /** Hands a batch to the store. */
  commit(batch: WriteBatch): Promise<void>;
  /** Effects whose batch is durable, in production order. */
  release(effects: E[]): void;
  /** A batch is durable (after its effects were released); `durationMs` from hand-off. */
  committed(batchId: number, durationMs: number): void;
  /** A commit failed: the effects of that batch and every later one are dropped, unreleased. */
  failed(err: unknown): void;
}

export class CommitPipeline<E> {
  readonly #hooks: CommitPipelineHooks<E>;
  readonly #queue: Entry<E>[] = [];
  #idleWaiters: (() => void)[] = [];
  #failed = false;

  constructor(hooks: CommitPipelineHooks<E>) {
    this.#hooks = hooks;
  }

  /** Batches handed to the store and not yet durable, plus flushes queued behind them. */
  get depth(): number {
    return this.#queue.length;
  }

  /** Queues `effects` behind `batch` (null: no writes) and hands the batch to the store. */
  push(batch: WriteBatch | null, effects: E[]): void {
    if (this.#failed) return;
    const entry: Entry<E> = { effects, done: batch === null };
    this.#queue.push(entry);
    if (batch !== null) {
      const started = performance.now();
      this.#hooks.commit(batch).then(
        () => {
          entry.done = true;
          this.#drain();
          this.#hooks.committed(batch.batchId, performance.now() - started);
        },
        (err: unknown) => this.#fail(err),
      );
    }
    this.#drain();
  }

  /** Resolves once every queued batch is durable (or the pipeline failed). */
  settled(): Promise<void> {
    if (this.#queue.length === 0 || this.#failed) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #drain(): void {
    while (this.#queue[0]?.done === true) {
      const entry = this.#queue.shift() as Entry<E>;
      this.#hooks.release(entry.effects);
    }
    if (this.#queue.length === 0) this.#wakeIdle();
  }

  #wakeIdle(): void {
    for (const wake of this.#idleWaiters.splice(0)) wake();
  }

  #fail(err: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    this.#queue.splice(0);
    this.#hooks.failed(err);
    this.#wakeIdle();
  }
}
