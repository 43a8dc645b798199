/**
 * One task thread as the pool sees it, and one task as it moves through it.
 *
 * Thread states: `idle` (no task) -> `busy` (one task) -> `idle` ... ; from
 * any state -> `terminating` (cancel, crash, pool close) -> `exited`. A
 * terminating thread never takes another task; the pool replaces it lazily.
 *
 * A task settles exactly once, with whichever happens first: the thread's
 * answer, a cancel, or the thread's death.
 */
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { describeError } from '../protocol/errors.js';
import {
  isThreadResponse,
  type RunTaskInput,
  type TaskThreadData,
  type ThreadOutput,
  type ThreadRequest,
} from './thread-messages.js';

/** How a task ended. `cancelled` tasks never report their result. */
export type TaskOutcome =
  { success: true; result: string } | { success: false; error: string; cancelled: boolean };

export class PoolTask {
  readonly requestId: number;
  readonly input: RunTaskInput;
  /** Settles exactly once; never rejects. */
  readonly outcome: Promise<TaskOutcome>;
  /** True once the task code began; false if the task ended before that. */
  readonly started: Promise<boolean>;
  readonly #onSettled: () => void;
  #settled = false;
  #resolveOutcome!: (outcome: TaskOutcome) => void;
  #resolveStarted!: (started: boolean) => void;

  constructor(requestId: number, input: RunTaskInput, onSettled: () => void) {
    this.requestId = requestId;
    this.input = input;
    this.#onSettled = onSettled;
    this.outcome = new Promise((resolve) => (this.#resolveOutcome = resolve));
    this.started = new Promise((resolve) => (this.#resolveStarted = resolve));
  }

  get settled(): boolean {
    return this.#settled;
  }

  markStarted(): void {
    this.#resolveStarted(true);
  }

  /** Ends the task; returns false (and changes nothing) if it had already ended. */
  settle(outcome: TaskOutcome): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    this.#resolveStarted(false);
    this.#resolveOutcome(outcome);
    this.#onSettled();
    return true;
  }
}

export interface PoolThreadEvents {
  /** The thread answered its task and can take another. */
  onIdle(thread: PoolThread): void;
  /** The thread has exited; it must not be used again. */
  onExit(thread: PoolThread): void;
}

export class PoolThread {
  /** Resolves once the thread has exited, for whatever reason. */
  readonly exited: Promise<void>;
  readonly #worker: Worker;
  readonly #events: PoolThreadEvents;
  #task: PoolTask | null = null;
  #terminating = false;
  /** Why the thread died, when it was not on purpose. */
  #crash: string | null = null;
  #resolveExited!: () => void;

  constructor(entry: URL, data: TaskThreadData, events: PoolThreadEvents) {
    this.#events = events;
    this.exited = new Promise((resolve) => (this.#resolveExited = resolve));
    this.#worker = new Worker(entry, { workerData: data });
    this.#worker.on('message', (value: unknown) => this.#onMessage(value));
    this.#worker.on('messageerror', () => this.#fail('task thread sent an unreadable message'));
    this.#worker.on('error', (err) => {
      // The thread is already dying; 'exit' follows and settles its task.
      this.#terminating = true;
      this.#crash ??= `task thread crashed: ${describeError(err)}`;
    });
    this.#worker.on('exit', (code) => this.#onExit(code));
  }

  /** False while the thread is running a task or is going away. */
  get available(): boolean {
    return this.#task === null && !this.#terminating;
  }

  run(task: PoolTask): void {
    assert(this.available, 'a pool thread runs one task at a time');
    this.#task = task;
    const request: ThreadRequest = { requestId: task.requestId, input: task.input };
    this.#worker.postMessage(request);
  }

  /** Stops the thread, whatever it is doing. Resolves once it has exited. Idempotent. */
  terminate(): Promise<void> {
    if (!this.#terminating) {
      this.#terminating = true;
      // The exit event (which resolves `exited`) is the single source of truth.
      void this.#worker.terminate();
    }
    return this.exited;
  }

  #fail(reason: string): void {
    this.#crash ??= reason;
    void this.terminate();
  }

  #onMessage(value: unknown): void {
    if (this.#terminating) return;
    const task = this.#task;
    if (!isThreadResponse(value) || task === null || value.requestId !== task.requestId) {
      this.#fail('task thread sent an unexpected message');
      return;
    }
    this.#onOutput(task, value.output);
  }

  #onOutput(task: PoolTask, output: ThreadOutput): void {
    switch (output.type) {
      case 'TASK_STARTED':
        task.markStarted();
        return;
      case 'TASK_SUCCEEDED':
        this.#task = null;
        task.settle({ success: true, result: output.result });
        this.#events.onIdle(this);
        return;
      case 'TASK_FAILED':
        this.#task = null;
        task.settle({ success: false, error: output.error, cancelled: false });
        this.#events.onIdle(this);
        return;
    }
  }

  #onExit(code: number): void {
    this.#terminating = true;
    const task = this.#task;
    this.#task = null;
    // A cancelled task is already settled; this only catches real deaths.
    task?.settle({
      success: false,
      error: this.#crash ?? `task thread exited unexpectedly with code ${code}`,
      cancelled: false,
    });
    this.#resolveExited();
    this.#events.onExit(this);
  }
}
