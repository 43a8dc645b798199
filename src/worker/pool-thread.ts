/**
 * One task thread as the pool sees it, and one task as it moves through it.
 *
 * Thread states: `idle` (no task) -> `busy` (one task) -> `idle` ... ; a busy
 * thread whose task is stopped (cancel, deadline) -> `stopping`: its task's
 * signal has fired (through the shared stop flag, which a computing handler
 * sees the next time it looks at its signal, and the ABORT_TASK message, which
 * fires it once the handler yields) and the thread gets `graceMs` to settle the handler; then
 * -> `idle` if it did (the thread is reused), else -> `terminating`. From any
 * state -> `terminating` (crash, pool close) -> `exited`. A stopping or
 * terminating thread never takes another task.
 *
 * A task settles exactly once, with whichever happens first: the thread's
 * answer, a stop (settled as cancelled at once: whatever the handler does
 * afterwards is never reported), or the thread's death.
 *
 * A busy thread may also hold one offered task, its `next` (see
 * thread-messages.ts): the thread starts it the moment its task ends, and
 * it becomes the thread's task when that end is heard here. Until the thread
 * claims it, the pool may withdraw it ({@link PoolThread.withdrawNext}) to
 * run it elsewhere; one that a dying thread never claimed goes back to the
 * pool rather than failing.
 */
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { describeError } from '../protocol/errors.js';
import type { JsonObject, ResultFormat } from '../protocol/messages.js';
import { heapExhausted } from './memory-budget.js';
import {
  SHARED_BYTES,
  SharedWords,
  type ClaimSlot,
  isThreadResponse,
  type AbortReason,
  type CallOutcome,
  type RunTaskInput,
  type TaskLogLevel,
  type TaskThreadData,
  type ThreadOutput,
  type ThreadRequest,
} from './thread-messages.js';
import type { Suspension } from './thread-steps.js';

/** How a task ended. `cancelled` tasks never report their result. */
export type TaskOutcome =
  | { success: true; result: string; resultFormat: ResultFormat }
  | {
      success: false;
      error: string;
      cancelled: boolean;
      retryable: boolean;
      /** The handler slept or waits (durable steps): TASK_SUSPEND, not a failed result. */
      suspend?: Suspension;
    };

/** How a stopped task's thread was freed: the handler settled, or the thread was terminated. */
export type StopOutcome = 'cooperative' | 'terminated';

/** Receives the lines a task's handler logs. */
export type TaskLogSink = (
  level: TaskLogLevel,
  message: string,
  fields: Record<string, unknown>,
) => void;

/** Receives what a task's handler reports with `ctx.progress`. */
export type TaskProgressSink = (fraction: number, message: string | null) => void;

/**
 * Receives a call of a task's handler (the message without its ids); the
 * answer goes back with {@link TaskHandle.answerCall} under the same `callId`.
 */
export type TaskCallSink = (callId: number, call: JsonObject) => void;

export class PoolTask {
  readonly requestId: number;
  readonly input: RunTaskInput;
  readonly onLog: TaskLogSink;
  onProgress: TaskProgressSink = () => undefined;
  onCall: TaskCallSink = () => undefined;
  /** Settles exactly once; never rejects. */
  readonly outcome: Promise<TaskOutcome>;
  /** True once the task code began; false if the task ended before that. */
  readonly started: Promise<boolean>;
  readonly #onSettled: () => void;
  #settled = false;
  #resolveOutcome!: (outcome: TaskOutcome) => void;
  #resolveStarted!: (started: boolean) => void;

  constructor(requestId: number, input: RunTaskInput, onLog: TaskLogSink, onSettled: () => void) {
    this.requestId = requestId;
    this.input = input;
    this.onLog = onLog;
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
  /**
   * The thread answered its task. It can take another, or it holds its next
   * already: the pool then moves that up ({@link PoolThread.promoteNext})
   * or withdraws it.
   */
  onIdle(thread: PoolThread): void;
  /**
   * The thread has exited; it must not be used again. `unclaimed` is its
   * offered next that it never claimed: not started, to run elsewhere.
   */
  onExit(thread: PoolThread, unclaimed: PoolTask | null): void;
}

interface Stopping {
  /** The task whose end frees the thread (its task, or its claimed next). */
  readonly task: PoolTask;
  readonly graceMs: number;
  /** The grace, once the task is the thread's (a claimed next's waits for the answer before it). */
  timer: NodeJS.Timeout | null;
  readonly resolve: (how: StopOutcome) => void;
}

export class PoolThread {
  /** Resolves once the thread has exited, for whatever reason. */
  readonly exited: Promise<void>;
  readonly #worker: Worker;
  readonly #shared: SharedWords;
  /** Memory samples counted at the previous {@link memorySample}, and when that count last changed. */
  #samplesSeen = -1;
  #sampleSeenAtMs = 0;
  readonly #events: PoolThreadEvents;
  #task: PoolTask | null = null;
  /** The offered next task, and the claim slot of its offer. */
  #next: PoolTask | null = null;
  #nextSlot: ClaimSlot = 0;
  /** Offers made so far: they take the two claim slots in turn. */
  #offers = 0;
  /**
   * Stops under way: of the task, or of a claimed next (at most one each;
   * a next's grace starts once it is the task).
   */
  readonly #stops: Stopping[] = [];
  #terminating = false;
  /** Why the thread died, when it was not on purpose. */
  #crash: string | null = null;
  #resolveExited!: () => void;

  /**
   * Starts a thread that imports `modules`, its JavaScript heap limited to
   * `taskMemoryMb` MiB (see memory-budget.ts).
   */
  constructor(
    entry: URL,
    modules: TaskThreadData['modules'],
    taskMemoryMb: number,
    events: PoolThreadEvents,
  ) {
    this.#events = events;
    this.exited = new Promise((resolve) => (this.#resolveExited = resolve));
    const shared = new SharedArrayBuffer(SHARED_BYTES);
    this.#shared = new SharedWords(shared);
    const data: TaskThreadData = { modules, shared };
    this.#worker = new Worker(entry, {
      workerData: data,
      resourceLimits: { maxOldGenerationSizeMb: taskMemoryMb },
    });
    this.#worker.on('message', (value: unknown) => this.#onMessage(value));
    this.#worker.on('messageerror', () => this.#fail('task thread sent an unreadable message'));
    this.#worker.on('error', (err) => {
      // The thread is already dying; 'exit' follows and settles its task.
      this.#terminating = true;
      const outOfMemory = (err as { code?: unknown }).code === 'ERR_WORKER_OUT_OF_MEMORY';
      this.#crash ??= outOfMemory
        ? heapExhausted(taskMemoryMb)
        : `task thread crashed: ${describeError(err)}`;
    });
    this.#worker.on('exit', (code) => this.#onExit(code));
  }

  /** True while a task (running or stopped, in its grace) holds the thread. */
  get busy(): boolean {
    return this.#task !== null && !this.#terminating;
  }

  /**
   * The thread's last memory sample, in MiB, and whether a new one was seen
   * within `staleAfterMs` before `nowMs` (a thread that holds its event loop
   * takes none); `nowMs` is `performance.now()`.
   */
  memorySample(nowMs: number, staleAfterMs: number): { usedMb: number; fresh: boolean } {
    const { usedMb, samples } = this.#shared.memory();
    if (samples !== this.#samplesSeen) {
      this.#samplesSeen = samples;
      this.#sampleSeenAtMs = nowMs;
    }
    return { usedMb, fresh: nowMs - this.#sampleSeenAtMs < staleAfterMs };
  }

  /** The thread's last memory sample (heap + Buffers), in MiB. */
  get memoryMb(): number {
    return this.#shared.memory().usedMb;
  }

  /** Terminates the thread for its memory; its task (if any) fails with `error`. */
  terminateForMemory(error: string): void {
    this.#fail(error);
  }

  /** False while the thread is running or stopping a task, or is going away. */
  get available(): boolean {
    return this.#task === null && !this.#terminating;
  }

  /** The offered next task, if any (see the module comment). */
  get next(): PoolTask | null {
    return this.#next;
  }

  /** True while the thread runs a task and may be offered its next: none held, no stop under way. */
  get offerable(): boolean {
    return (
      this.#task !== null && this.#next === null && this.#stops.length === 0 && !this.#terminating
    );
  }

  /**
   * Hands the thread its next task while it runs one ({@link offerable}).
   * The offer takes the claim slot its offer before last took: that one was
   * claimed (it became the running task, whose answer came) or withdrawn.
   */
  offer(task: PoolTask): void {
    assert(this.offerable, 'a thread is offered one next task, while it runs one');
    const slot: ClaimSlot = (this.#offers++ & 1) === 0 ? 0 : 1;
    this.#next = task;
    this.#nextSlot = slot;
    this.#shared.offer(slot, task.requestId);
    this.#post({ requestId: task.requestId, input: task.input, claimSlot: slot });
  }

  /**
   * Takes the offered next back, if the thread has not claimed it: it never
   * starts here, and the caller runs it elsewhere (or ends it). Null when
   * there is none, or the thread claimed it first (it runs here, as the
   * thread's task once the answer before it is heard).
   */
  withdrawNext(): PoolTask | null {
    const next = this.#next;
    if (next === null || !this.#shared.take(this.#nextSlot, next.requestId)) return null;
    this.#next = null;
    return next;
  }

  /** Once the thread is idle: its next becomes its task (claimed or soon to be). */
  promoteNext(): PoolTask | null {
    const next = this.#next;
    if (next === null || this.#task !== null) return null;
    this.#next = null;
    this.#task = next;
    this.#sampleSeenAtMs = performance.now();
    const stopping = this.#stopOf(next);
    if (stopping !== undefined) this.#startGrace(stopping);
    return next;
  }

  run(task: PoolTask): void {
    assert(this.available, 'a pool thread runs one task at a time');
    this.#task = task;
    // The task's first sample is yet to come: not stale before it could be.
    this.#sampleSeenAtMs = performance.now();
    this.#post({ requestId: task.requestId, input: task.input });
  }

  /**
   * Stops this thread's task (already settled as cancelled by the caller):
   * fires its signal, then terminates the thread unless the handler settles
   * within `graceMs`. Resolves with how the thread was freed.
   */
  stop(task: PoolTask, reason: AbortReason, graceMs: number): Promise<StopOutcome> {
    // A claimed next (its withdrawal failed) runs already: stopped the same way.
    const ours = this.#task === task || this.#next === task;
    if (!ours || this.#terminating) return this.exited.then(() => 'terminated');
    assert(!this.#stops.some((s) => s.task === task), 'a task is stopped once');
    return new Promise((resolve) => {
      const stopping: Stopping = { task, graceMs, timer: null, resolve };
      this.#stops.push(stopping);
      if (this.#task === task) this.#startGrace(stopping);
      // Seen at once by a handler that is computing; the message only once it yields.
      this.#shared.raiseStop(task.requestId, reason);
      this.#post({ requestId: task.requestId, input: { type: 'ABORT_TASK', reason } });
    });
  }

  /** The stopped task's grace: the thread is terminated unless it settles within it. */
  #startGrace(stopping: Stopping): void {
    stopping.timer = setTimeout(() => {
      void this.terminate().then(() => stopping.resolve('terminated'));
    }, stopping.graceMs);
  }

  #stopOf(task: PoolTask): Stopping | undefined {
    return this.#stops.find((s) => s.task === task);
  }

  /** Answers one call of `task`'s handler; nothing if the thread no longer runs that task. */
  answerCall(task: PoolTask, callId: number, outcome: CallOutcome): void {
    if (this.#task !== task || this.#terminating || this.#stopOf(task) !== undefined) return;
    this.#post({ requestId: task.requestId, input: { type: 'CALL_SETTLED', callId, outcome } });
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

  #post(request: ThreadRequest): void {
    this.#worker.postMessage(request);
  }

  #fail(reason: string): void {
    this.#crash ??= reason;
    void this.terminate();
  }

  #onMessage(value: unknown): void {
    if (this.#terminating) return;
    if (!isThreadResponse(value)) return this.#fail('task thread sent an unexpected message');
    const task = this.#task;
    if (task === null || value.requestId !== task.requestId) {
      // A handler stopped earlier may still log from a timer it left behind.
      const late = value.output.type;
      if (late === 'TASK_LOG' || late === 'TASK_PROGRESS' || late === 'TASK_CALL') return;
      return this.#fail('task thread answered a request it was not running');
    }
    this.#onOutput(task, value.output);
  }

  #onOutput(task: PoolTask, output: ThreadOutput): void {
    switch (output.type) {
      case 'TASK_STARTED':
        task.markStarted();
        return;
      case 'TASK_LOG':
        task.onLog(output.level, output.message, output.fields);
        return;
      case 'TASK_PROGRESS':
        task.onProgress(output.fraction, output.message);
        return;
      case 'TASK_CALL':
        // A stopped task's calls are not made: its handler sees them fail.
        if (!task.settled) task.onCall(output.callId, output.call);
        return;
      case 'TASK_SUCCEEDED': {
        const { result, resultFormat } = output;
        return this.#finish(task, { success: true, result, resultFormat });
      }
      case 'TASK_FAILED': {
        const { error, retryable } = output;
        return this.#finish(task, { success: false, error, cancelled: false, retryable });
      }
      case 'TASK_SUSPENDED': {
        const suspend: Suspension =
          output.sleepMillis !== undefined
            ? { sleepMillis: output.sleepMillis }
            : { waitForJobId: output.waitForJobId ?? '' };
        const error = 'the handler suspended the attempt';
        return this.#finish(task, {
          success: false,
          error,
          cancelled: false,
          retryable: true,
          suspend,
        });
      }
    }
  }

  /** The handler settled: report it (unless the task was stopped) and take the next task. */
  #finish(task: PoolTask, outcome: TaskOutcome): void {
    this.#task = null;
    task.settle(outcome); // no effect on a stopped task: its outcome is already cancelled
    const stopping = this.#stopOf(task);
    if (stopping !== undefined) {
      this.#stops.splice(this.#stops.indexOf(stopping), 1);
      if (stopping.timer !== null) clearTimeout(stopping.timer);
      stopping.resolve('cooperative');
    }
    this.#events.onIdle(this);
  }

  #onExit(code: number): void {
    this.#terminating = true;
    const task = this.#task;
    this.#task = null;
    // An offer the thread never claimed did not start: the pool runs it elsewhere.
    const unclaimed = this.withdrawNext();
    const claimed = this.#next;
    this.#next = null;
    for (const stopping of this.#stops.splice(0)) {
      if (stopping.timer !== null) clearTimeout(stopping.timer);
      stopping.resolve('terminated');
    }
    // A stopped task is already settled; this only catches real deaths.
    for (const died of [task, claimed]) {
      died?.settle({
        success: false,
        error: this.#crash ?? `task thread exited unexpectedly with code ${code}`,
        cancelled: false,
        retryable: true,
      });
    }
    this.#resolveExited();
    this.#events.onExit(this, unclaimed);
  }
}
