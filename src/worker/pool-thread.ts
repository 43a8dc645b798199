/**
 * One task thread as the pool sees it, and one task as it moves through it.
 *
 * A thread is *shared* (many attempts at once, as async calls on its event
 * loop) or *isolated* (one attempt at a time). It lives until it is
 * terminated: on purpose (the pool closes, or lets an idle thread go), for
 * its memory, after a stopped attempt did not settle within its grace, or
 * when it crashes (an uncaught error, `process.exit` in a handler).
 *
 * A task on a thread is *running* until the thread answers it for the last
 * time. A stopped task (cancel, deadline) is settled as cancelled at once by
 * the pool (its slot is free, nothing it produces is reported), but stays on
 * the thread until its handler ends: its signal has fired (through its stop
 * slot in shared memory, which a computing handler sees the next time it
 * looks at its signal, and the ABORT_TASK message, which fires it once the
 * handler yields) and it has the cancel grace to settle. If it does not, the
 * thread is terminated. Whatever else was on the thread then did nothing
 * wrong: on a shared thread those attempts end with a `requeue` outcome (the
 * worker sends them back without using an attempt), and the same holds when
 * a shared thread goes over its memory budget or crashes, since nothing
 * tells which of its attempts did it. An attempt alone on its thread (an
 * isolated thread's, or the only one a shared thread held, with no stopped
 * one beside it) did it: its thread's death is its own failure.
 */
import assert from 'node:assert/strict';
import type { EventLoopUtilization } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { describeError } from '../protocol/errors.js';
import type { JsonObject, RateLimitedResult, ResultFormat } from '../protocol/messages.js';
import { LocalEndpoint } from './local-thread.js';
import { heapExhausted } from './memory-budget.js';
import type { Handler } from './task-modules.js';
import {
  Outbox,
  SharedWords,
  isFinalOutput,
  decodeResponse,
  encodeRequest,
  sharedBytes,
  type AbortReason,
  type CallOutcome,
  type FinalOutput,
  type RunTaskInput,
  type TaskLogLevel,
  type TaskThreadData,
  type ThreadOutput,
  type WireRequest,
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
      /**
       * Cut off through no doing of its own (its shared thread was ended for
       * another attempt, went over its memory budget, or crashed): sent back
       * without using an attempt where the coordinator offers it.
       */
      requeue?: boolean;
      /** The handler threw a RateLimitedError: how long, and what, to hold back. */
      rateLimited?: RateLimitedResult;
    };

/**
 * How a stopped task's thread was freed: the handler settled, the thread was
 * terminated, or (a handler on the program's own loop, which cannot be
 * terminated) it was let go and runs on, unreported.
 */
export type StopOutcome = 'cooperative' | 'terminated' | 'left';

/** Where a thread's attempts run: many on a task thread, one on a task thread, or on this thread. */
export type ThreadKind = 'shared' | 'isolated' | 'local';

/** What the pool talks to: a task thread, or the channel to handlers on this thread. */
interface ThreadEndpoint {
  postMessage(value: unknown): void;
  on(event: 'message', listener: (value: unknown) => void): unknown;
  on(event: 'messageerror', listener: () => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'exit', listener: (code: number) => void): unknown;
  terminate(): Promise<number>;
}

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
 * answer goes back with the task handle's `answerCall` under the same `callId`.
 */
export type TaskCallSink = (callId: number, call: JsonObject) => void;

export class PoolTask {
  readonly requestId: number;
  readonly input: RunTaskInput;
  /** Where it runs: a shared thread, a thread of its own (`isolate`), or this thread. */
  readonly kind: ThreadKind;
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

  constructor(
    requestId: number,
    input: RunTaskInput,
    kind: ThreadKind,
    onLog: TaskLogSink,
    onSettled: () => void,
  ) {
    this.requestId = requestId;
    this.input = input;
    this.kind = kind;
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
  /** A task left the thread: its last answer came (settled now, unless a stop settled it before). */
  onTaskEnded(thread: PoolThread, task: PoolTask): void;
  /** The thread has exited; every task that was on it is settled. It must not be used again. */
  onExit(thread: PoolThread): void;
}

interface Stopping {
  readonly graceMs: number;
  readonly timer: NodeJS.Timeout;
  readonly resolve: (how: StopOutcome) => void;
}

/** A task on the thread, and its stop slot. */
interface Placed {
  readonly task: PoolTask;
  readonly slot: number;
}

export class PoolThread {
  readonly kind: ThreadKind;
  /** For logs: `shared-2`, `isolated-17`. */
  readonly name: string;
  /** Resolves once the thread has exited, for whatever reason. */
  readonly exited: Promise<void>;
  readonly #worker: ThreadEndpoint;
  readonly #shared: SharedWords;
  readonly #outbox: Outbox<WireRequest>;
  readonly #events: PoolThreadEvents;
  /** Tasks on the thread by request id: running, or stopped and not yet ended. */
  readonly #placed = new Map<number, Placed>();
  readonly #freeSlots: number[] = [];
  #usedSlots = 0;
  readonly #stops = new Map<PoolTask, Stopping>();
  /** Attempts let go on a `local` thread, still in their handlers: their slots, freed when they end. */
  readonly #letGone = new Map<number, number>();
  /** Memory samples counted at the previous {@link memorySample}, and when that count last changed. */
  #samplesSeen = -1;
  #sampleSeenAtMs = 0;
  /** When it was last handed work while it held none (Date.now()): blocked counts from there at most. */
  #busySinceMs = 0;
  #terminating = false;
  /** Why the thread died, when it was not on purpose. */
  #crash: string | null = null;
  /** Set while a blocked spell of the thread is logged, so it is logged once. */
  blockedLogged = false;
  /** Its event loop's counters at the start of the current window of {@link lookAtLoad}. */
  #elu: EventLoopUtilization | undefined;
  /** When that window began (performance.now()). */
  #eluAtMs = 0;
  /** Whole windows in a row in which its event loop was busy most of the time. */
  #busyWindows = 0;
  #resolveExited!: () => void;

  /**
   * Starts a thread that imports `modules`, its JavaScript heap limited to
   * `taskMemoryMb` MiB (see memory-budget.ts), with room for `slots`
   * attempts at once.
   */
  constructor(
    entry: URL,
    spec: {
      kind: ThreadKind;
      name: string;
      modules: TaskThreadData['modules'];
      taskMemoryMb: number;
      slots: number;
      /** The handlers of a `local` thread. */
      local?: ReadonlyMap<string, Handler>;
    },
    events: PoolThreadEvents,
  ) {
    this.kind = spec.kind;
    this.name = spec.name;
    this.#events = events;
    this.exited = new Promise((resolve) => (this.#resolveExited = resolve));
    const shared = new SharedArrayBuffer(sharedBytes(spec.slots));
    this.#shared = new SharedWords(shared);
    if (spec.kind === 'local') {
      this.#worker = new LocalEndpoint(spec.local ?? new Map(), shared);
    } else {
      const data: TaskThreadData = {
        modules: spec.modules,
        shared,
        isolated: spec.kind === 'isolated',
      };
      this.#worker = new Worker(entry, {
        workerData: data,
        resourceLimits: { maxOldGenerationSizeMb: spec.taskMemoryMb },
      });
    }
    this.#outbox = new Outbox(
      (batch) => this.#worker.postMessage(batch),
      (flush) => queueMicrotask(flush),
    );
    this.#worker.on('message', (value: unknown) => this.#onBatch(value));
    this.#worker.on('messageerror', () => this.fail('task thread sent an unreadable message'));
    this.#worker.on('error', (err: Error) => {
      // The thread is already dying; 'exit' follows and settles its tasks.
      this.#terminating = true;
      const outOfMemory = (err as { code?: unknown }).code === 'ERR_WORKER_OUT_OF_MEMORY';
      this.#crash ??= outOfMemory
        ? heapExhausted(spec.taskMemoryMb)
        : `task thread crashed: ${describeError(err)}`;
    });
    this.#worker.on('exit', (code: number) => this.#onExit(code));
  }

  /** Tasks on the thread, stopped ones still in their handler included. */
  get load(): number {
    return this.#placed.size;
  }

  /** True while it may be handed another task: not on its way out, a stop slot free. */
  get hasRoom(): boolean {
    return (
      !this.#terminating &&
      (this.#freeSlots.length > 0 || this.#usedSlots < this.#shared.slots) &&
      (this.kind !== 'isolated' || this.#placed.size === 0)
    );
  }

  get terminating(): boolean {
    return this.#terminating;
  }

  /** True while a stopped attempt is still in its handler here (the thread may be ended for it). */
  get stopping(): boolean {
    return this.#stops.size > 0;
  }

  /** The jobs of the tasks on it (for a log line). */
  jobIds(): string[] {
    return [...this.#placed.values()].map(({ task }) => task.input.jobId);
  }

  /**
   * Whether the thread's event loop spent at least the pool's share of each
   * of the last two windows running code rather than waiting (one window
   * alone can be a start-up, or a burst of attempts arriving at once). The
   * program's own loop is never saturated.
   */
  get saturated(): boolean {
    return this.#busyWindows >= 2;
  }

  /**
   * Judges the window of `windowMs` that has passed since the previous one
   * (the first starts at the first look): busy when the event loop ran code
   * `share` of it or more.
   */
  lookAtLoad(nowMs: number, windowMs: number, share: number): void {
    if (!(this.#worker instanceof Worker)) return;
    if (this.#elu !== undefined && nowMs - this.#eluAtMs < windowMs) return;
    const counters = this.#worker.performance.eventLoopUtilization();
    if (this.#elu !== undefined) {
      const since = this.#worker.performance.eventLoopUtilization(counters, this.#elu);
      this.#busyWindows = since.utilization >= share ? this.#busyWindows + 1 : 0;
    }
    this.#elu = counters;
    this.#eluAtMs = nowMs;
  }

  /**
   * How long the thread's event loop has not turned while it held tasks, in
   * ms at `nowMs` (Date.now()); 0 while it holds none.
   */
  blockedMs(nowMs: number): number {
    if (this.#placed.size === 0) return 0;
    return Math.min(this.#shared.sinceTurnMs(nowMs), nowMs - this.#busySinceMs);
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

  run(task: PoolTask): void {
    assert(this.hasRoom, 'a task thread is handed a task only while it has room');
    if (this.#placed.size === 0) {
      this.#busySinceMs = Date.now();
      // Its first sample is yet to come: not stale before it could be.
      this.#sampleSeenAtMs = performance.now();
    }
    const slot = this.#freeSlots.pop() ?? this.#usedSlots++;
    this.#shared.clearStop(slot);
    this.#placed.set(task.requestId, { task, slot });
    this.#outbox.push(encodeRequest({ requestId: task.requestId, input: task.input, slot }));
  }

  /**
   * Stops one task of this thread (already settled as cancelled by the
   * caller): fires its signal, then terminates the thread unless the handler
   * settles within `graceMs`. Resolves with how it was freed.
   */
  stop(task: PoolTask, reason: AbortReason, graceMs: number): Promise<StopOutcome> {
    const placed = this.#placed.get(task.requestId);
    if (placed === undefined || this.#terminating) return this.exited.then(() => 'terminated');
    assert(!this.#stops.has(task), 'a task is stopped once');
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#stubborn(task, graceMs), graceMs);
      this.#stops.set(task, { graceMs, timer, resolve });
      // Seen at once by a handler that is computing; the message only once it yields.
      this.#shared.raiseStop(placed.slot, task.requestId, reason);
      this.#outbox.push(
        encodeRequest({ requestId: task.requestId, input: { type: 'ABORT_TASK', reason } }),
      );
    });
  }

  /** A stopped task did not settle within its grace: the thread goes, and what was on it. */
  #stubborn(task: PoolTask, graceMs: number): void {
    if (!this.#placed.has(task.requestId)) return;
    if (this.kind === 'local') return this.#letGo(task);
    const { jobId, attemptId } = task.input;
    this.fail(
      `its task thread was ended because attempt ${attemptId} of job ${jobId} did not stop ` +
        `within the cancel grace (${graceMs} ms)`,
    );
  }

  /**
   * A handler on this thread that ignored its stop cannot be ended: it is let
   * go (whatever it does is not heard of), and its slot with it.
   */
  #letGo(task: PoolTask): void {
    const placed = this.#placed.get(task.requestId);
    if (placed === undefined) return;
    this.#placed.delete(task.requestId);
    this.#letGone.set(task.requestId, placed.slot);
    const stopping = this.#stops.get(task);
    this.#stops.delete(task);
    stopping?.resolve('left');
    this.#events.onTaskEnded(this, task);
  }

  /** Answers one call of `task`'s handler; nothing if the task is stopped or gone. */
  answerCall(task: PoolTask, callId: number, outcome: CallOutcome): void {
    if (this.#terminating || this.#stops.has(task) || !this.#placed.has(task.requestId)) return;
    this.#outbox.push(
      encodeRequest({
        requestId: task.requestId,
        input: { type: 'CALL_SETTLED', callId, outcome },
      }),
    );
  }

  /** Terminates the thread for `reason`: its tasks end saying so (see the module comment). */
  fail(reason: string): void {
    this.#crash ??= reason;
    void this.terminate();
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

  #onBatch(value: unknown): void {
    if (this.#terminating) return;
    if (!Array.isArray(value)) return this.fail('task thread sent an unexpected message');
    for (const wire of value) {
      if (this.#terminating) return;
      const response = decodeResponse(wire);
      if (response === null) return this.fail('task thread sent an unexpected message');
      this.#onResponse(response.requestId, response.output);
    }
  }

  #onResponse(requestId: number, output: ThreadOutput): void {
    const placed = this.#placed.get(requestId);
    const gone = this.#letGone.get(requestId);
    if (placed === undefined && gone !== undefined) {
      // A handler let go has ended after all: its slot is free, its outcome unheard.
      if (isFinalOutput(output)) {
        this.#letGone.delete(requestId);
        this.#freeSlots.push(gone);
      }
      return;
    }
    if (placed === undefined) {
      // A handler that ended may still log from a timer it left behind.
      if (!isFinalOutput(output)) return;
      return this.fail('task thread answered a request it was not running');
    }
    const { task } = placed;
    if (isFinalOutput(output)) return this.#finish(placed, outcomeOf(output));
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
    }
  }

  /** The handler settled: report it (unless the task was stopped) and free its slot. */
  #finish({ task, slot }: Placed, outcome: TaskOutcome): void {
    this.#placed.delete(task.requestId);
    this.#freeSlots.push(slot);
    task.settle(outcome); // no effect on a stopped task: its outcome is already cancelled
    const stopping = this.#stops.get(task);
    if (stopping !== undefined) {
      this.#stops.delete(task);
      clearTimeout(stopping.timer);
      stopping.resolve('cooperative');
    }
    this.#events.onTaskEnded(this, task);
  }

  #onExit(code: number): void {
    this.#terminating = true;
    for (const [task, stopping] of this.#stops) {
      clearTimeout(stopping.timer);
      stopping.resolve('terminated');
      this.#stops.delete(task);
    }
    const why = this.#crash ?? `task thread exited unexpectedly with code ${code}`;
    // A stopped task is already settled; these are the others that were on it.
    const onThread = [...this.#placed.values()].map(({ task }) => task);
    const live = onThread.filter((task) => !task.settled);
    // One attempt alone on the thread (no stopped one beside it) did it.
    const culprit = live.length === 1 && onThread.length === 1;
    for (const task of live) task.settle(this.#deathOutcome(why, culprit));
    this.#placed.clear();
    this.#resolveExited();
    this.#events.onExit(this);
  }

  /**
   * What a task that was on the thread when it died ends with: a failure of
   * its own when it was alone there (an isolated thread's attempt, or the
   * only attempt a shared thread held), else a requeue.
   */
  #deathOutcome(why: string, alone: boolean): TaskOutcome {
    if (this.kind === 'isolated' || alone) {
      return { success: false, error: why, cancelled: false, retryable: true };
    }
    return {
      success: false,
      error: `${why}; this attempt shared the thread and is requeued`,
      cancelled: false,
      retryable: true,
      requeue: true,
    };
  }
}

/** The outcome a final output stands for. */
function outcomeOf(output: FinalOutput): TaskOutcome {
  switch (output.type) {
    case 'TASK_SUCCEEDED':
      return { success: true, result: output.result, resultFormat: output.resultFormat };
    case 'TASK_FAILED': {
      const outcome: TaskOutcome = {
        success: false,
        error: output.error,
        cancelled: false,
        retryable: output.retryable,
      };
      if (output.rateLimited !== undefined) outcome.rateLimited = output.rateLimited;
      return outcome;
    }
    case 'TASK_SUSPENDED': {
      const suspend = suspensionOf(output);
      const error = 'the handler suspended the attempt';
      return { success: false, error, cancelled: false, retryable: true, suspend };
    }
  }
}

/** The one wait a TASK_SUSPENDED names. */
function suspensionOf(output: Extract<FinalOutput, { type: 'TASK_SUSPENDED' }>): Suspension {
  if (output.sleepMillis !== undefined) return { sleepMillis: output.sleepMillis };
  if (output.waitForSignal !== undefined) return { waitForSignal: output.waitForSignal };
  if (output.waitForEvent !== undefined) return { waitForEvent: output.waitForEvent };
  return { waitForJobId: output.waitForJobId ?? '' };
}
