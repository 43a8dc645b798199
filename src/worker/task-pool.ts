/**
 * A pool of `worker_threads` that runs task attempts off the main thread.
 *
 * - Up to `capacity` tasks run at once, each on its own thread. Threads are
 *   created lazily and reused after a task ends.
 * - `cancel()` terminates the task's thread: the only way to stop CPU-bound
 *   code that never yields. The task settles as cancelled at once, the thread
 *   is replaced lazily by the next run.
 * - A thread that crashes (uncaught error, `process.exit`) fails its task with
 *   a message saying so; the pool carries on.
 *
 * Between a cancel and the thread's exit, the dying thread still exists next
 * to up to `capacity` live ones; terminating a thread takes milliseconds even
 * when it is busy, so this overlap stays small and bounded by the cancels.
 */
import assert from 'node:assert/strict';
import { DtpError } from '../protocol/errors.js';
import { MAX_CAPACITY } from '../protocol/limits.js';
import type { JsonObject } from '../protocol/messages.js';
import { resolveTaskModuleUrl } from './task-module.js';
import { PoolTask, PoolThread, type TaskOutcome } from './pool-thread.js';
import type { TaskThreadData } from './thread-messages.js';

export type { TaskOutcome } from './pool-thread.js';

export interface TaskPoolOptions {
  /** Most tasks (and live threads) at once, 1..1024. */
  capacity: number;
  /**
   * Task module (file path or URL) whose `createRegistry()` or default export
   * returns the task registry. Default: the built-in tasks.
   */
  taskModule?: string;
}

export interface TaskHandle {
  /** Settles exactly once and never rejects. */
  readonly outcome: Promise<TaskOutcome>;
  /** True once the task code began; false if the task ended before that. */
  readonly started: Promise<boolean>;
  /**
   * Stops the task by terminating its thread; its outcome becomes cancelled
   * and its result is dropped. Resolves once the thread has exited. No effect
   * on a task that already ended.
   */
  cancel(): Promise<void>;
}

const THREAD_ENTRY = new URL('./task-thread.js', import.meta.url);

function endedHandle(error: string): TaskHandle {
  const outcome: TaskOutcome = { success: false, error, cancelled: false };
  return {
    outcome: Promise.resolve(outcome),
    started: Promise.resolve(false),
    cancel: () => Promise.resolve(),
  };
}

export class TaskPool {
  readonly capacity: number;
  readonly #data: TaskThreadData;
  /** Every thread that has not exited yet, terminating ones included. */
  readonly #threads = new Set<PoolThread>();
  readonly #idle: PoolThread[] = [];
  readonly #running = new Map<PoolTask, PoolThread>();
  #nextRequestId = 1;
  #closing: Promise<void> | null = null;

  constructor(options: TaskPoolOptions) {
    const { capacity } = options;
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > MAX_CAPACITY) {
      throw new DtpError('INVALID_OPTIONS', `capacity must be an integer in 1..${MAX_CAPACITY}`);
    }
    this.capacity = capacity;
    const module = options.taskModule;
    this.#data = { taskModuleUrl: module === undefined ? null : resolveTaskModuleUrl(module) };
  }

  /** Threads that have not exited yet (idle, busy or terminating). */
  get threadCount(): number {
    return this.#threads.size;
  }

  /** Tasks that have not ended yet. */
  get runningCount(): number {
    return this.#running.size;
  }

  /**
   * Starts one task attempt on a free thread. Beyond capacity, or after
   * `close()`, the handle's outcome is an immediate failure.
   */
  run(taskType: string, payload: JsonObject, attemptNumber: number): TaskHandle {
    if (this.#closing !== null) return endedHandle('task pool is closed');
    if (this.#running.size >= this.capacity) {
      return endedHandle(`task pool at capacity (${this.capacity} tasks)`);
    }
    const input = { type: 'RUN_TASK', taskType, payload, attemptNumber } as const;
    const task: PoolTask = new PoolTask(this.#nextRequestId++, input, () =>
      this.#running.delete(task),
    );
    const thread = this.#takeIdle() ?? this.#spawn();
    this.#running.set(task, thread);
    thread.run(task);
    return { outcome: task.outcome, started: task.started, cancel: () => this.#cancel(task) };
  }

  /** Cancels every task and terminates every thread. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const task of [...this.#running.keys()]) {
        task.settle({ success: false, error: 'task pool closed', cancelled: true });
      }
      await Promise.all([...this.#threads].map((thread) => thread.terminate()));
    })();
    return this.#closing;
  }

  #cancel(task: PoolTask): Promise<void> {
    const thread = this.#running.get(task);
    if (thread === undefined) return Promise.resolve();
    task.settle({ success: false, error: 'task cancelled', cancelled: true });
    return thread.terminate();
  }

  /** An idle thread that is not on its way out, if any. */
  #takeIdle(): PoolThread | undefined {
    for (let thread = this.#idle.pop(); thread !== undefined; thread = this.#idle.pop()) {
      if (thread.available) return thread;
    }
    return undefined;
  }

  #spawn(): PoolThread {
    const thread = new PoolThread(THREAD_ENTRY, this.#data, {
      onIdle: (t) => this.#onIdle(t),
      onExit: (t) => this.#onExit(t),
    });
    this.#threads.add(thread);
    return thread;
  }

  #onIdle(thread: PoolThread): void {
    if (this.#closing !== null) {
      void thread.terminate();
      return;
    }
    assert(this.#idle.length < this.capacity, 'more idle threads than capacity');
    this.#idle.push(thread);
  }

  #onExit(thread: PoolThread): void {
    this.#threads.delete(thread);
    const index = this.#idle.indexOf(thread);
    if (index >= 0) this.#idle.splice(index, 1);
  }
}
