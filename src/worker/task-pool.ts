/**
 * A pool of `worker_threads` that runs task attempts off the main thread.
 *
 * - Up to `capacity` tasks run at once, each on its own thread. Threads are
 *   created lazily and reused after a task ends.
 * - `stop(reason)` preempts a task: it settles as cancelled at once (its
 *   slot is free and nothing it produces is ever reported), its handler's
 *   `ctx.signal` fires, and the handler gets `cancelGraceMs` to settle. A
 *   handler that does keeps its thread for the next task; one that ignores
 *   the signal (or is CPU-bound and never yields) has its thread terminated.
 * - A thread that crashes (uncaught error, `process.exit`) fails its task with
 *   a message saying so; the pool carries on.
 *
 * - Each thread has a memory budget, `taskMemoryMb` (memory-budget.ts): its
 *   JavaScript heap is capped by V8, its heap plus Buffers are sampled, and
 *   the worker's resident memory is watched for threads that cannot sample.
 *   A thread over budget is terminated and its task fails saying so; a thread
 *   that keeps much memory after its task is replaced instead of reused.
 *
 * - Tasks beyond `capacity` wait (up to `queueLimit`). A busy thread is
 *   offered the oldest waiting task as its next (pool-thread.ts): it starts
 *   it the moment its own task ends, without a round trip through this
 *   thread, and a run of short tasks keeps each thread awake between them.
 *   An offer still unclaimed after {@link OFFER_WAIT_MS} is taken over by
 *   an idle thread (at once if one is idle then, or when one goes idle), so a
 *   long task does not hold up the task offered behind it. Sooner would
 *   cost more than it saves: a thread with short tasks claims its offer
 *   within microseconds, and taking it over costs two more messages.
 *
 * Between a stop and the end of its grace, the stopping thread still exists
 * next to up to `capacity` live ones; so at most `capacity` + (tasks stopped
 * within the last grace period) threads exist, and idle threads beyond
 * `capacity` are terminated as soon as they are free.
 */
import { LocalErrorCode } from '../protocol/error-codes.js';
import { tableProblem, type BoundsTable } from '../common/bounds.js';
import { DtpError } from '../protocol/errors.js';
import { DEFAULT_CANCEL_GRACE_MS, WORKER_BOUNDS } from './options.js';
import {
  CHECK_INTERVAL_MS,
  RETAINED_LIMIT_MB,
  STALE_AFTER_MS,
  TASK_MEMORY_MB,
  overBudget,
  rssBudgetMb,
} from './memory-budget.js';
import {
  PoolTask,
  PoolThread,
  type StopOutcome,
  type TaskCallSink,
  type TaskLogSink,
  type TaskProgressSink,
  type TaskOutcome,
} from './pool-thread.js';
import type { AbortReason, CallOutcome, RunTaskInput, TaskThreadData } from './thread-messages.js';

export type {
  StopOutcome,
  TaskCallSink,
  TaskLogSink,
  TaskOutcome,
  TaskProgressSink,
} from './pool-thread.js';

export { DEFAULT_CANCEL_GRACE_MS };

export interface TaskPoolOptions {
  /** Most tasks (and live threads) at once, 1..1024. */
  capacity: number;
  /** Users' task modules that every thread imports (main thread checked them). */
  modules?: TaskThreadData['modules'];
  /** Time a stopped handler gets before its thread is terminated, in ms (default 1000). */
  cancelGraceMs?: number;
  /** Memory budget of each task thread, in MiB, 32..1048576 (default 512; see memory-budget.ts). */
  taskMemoryMb?: number;
  /**
   * Tasks that may wait for a thread beyond `capacity`, 0..4 x capacity (the
   * worker's `prefetch` bound; default 0: none).
   */
  queueLimit?: number;
}

/**
 * The pool's bounds are the worker's: its queue holds the worker's prefetch,
 * so the queue limit has the very bound of `prefetch`.
 */
export const TASK_POOL_BOUNDS: BoundsTable<TaskPoolOptions> = {
  capacity: WORKER_BOUNDS.capacity,
  cancelGraceMs: WORKER_BOUNDS.cancelGraceMs,
  taskMemoryMb: WORKER_BOUNDS.taskMemoryMb,
  queueLimit: WORKER_BOUNDS.prefetch,
};

/** One attempt to run (see {@link RunTaskInput}). */
export type TaskRun = Omit<RunTaskInput, 'type'>;

export interface TaskHandle {
  /** Settles exactly once and never rejects. */
  readonly outcome: Promise<TaskOutcome>;
  /** True once the task code began; false if the task ended before that. */
  readonly started: Promise<boolean>;
  /**
   * Preempts the task (see the module comment). Its outcome becomes
   * cancelled at once. Resolves once its thread is free again, with how; no
   * effect (resolves `cooperative`) on a task that already ended.
   */
  stop(reason: AbortReason): Promise<StopOutcome>;
  /** Answers one call its handler made (see {@link TaskCallSink}); nothing once it ended. */
  answerCall(callId: number, outcome: CallOutcome): void;
}

const THREAD_ENTRY = new URL('./task-thread.js', import.meta.url);

/**
 * How long an offered task waits behind its thread's task before an idle
 * thread may take it over (ahead of any task queued after it).
 */
export const OFFER_WAIT_MS = 10;

/** A task offered to a busy thread, and when (performance.now()). */
interface Offer {
  readonly thread: PoolThread;
  readonly atMs: number;
}

function endedHandle(error: string): TaskHandle {
  const outcome: TaskOutcome = { success: false, error, cancelled: false, retryable: true };
  return {
    outcome: Promise.resolve(outcome),
    started: Promise.resolve(false),
    stop: () => Promise.resolve('cooperative'),
    answerCall: () => undefined,
  };
}

export class TaskPool {
  readonly capacity: number;
  readonly cancelGraceMs: number;
  readonly taskMemoryMb: number;
  /** The worker process's resident-memory budget, in MiB. */
  readonly rssBudgetMb: number;
  #memoryTimer: NodeJS.Timeout | null = null;
  readonly #modules: TaskThreadData['modules'];
  /** Every thread that has not exited yet, stopping and terminating ones included. */
  readonly #threads = new Set<PoolThread>();
  readonly #idle: PoolThread[] = [];
  readonly #running = new Map<PoolTask, PoolThread>();
  /** Tasks waiting for a thread, oldest first. */
  readonly #queued: PoolTask[] = [];
  /** Tasks offered to busy threads, oldest first (Map keeps the order they were offered). */
  readonly #offered = new Map<PoolTask, Offer>();
  /** Threads that may be offered a next task (checked again when used). */
  readonly #offerable = new Set<PoolThread>();
  /** Set while an idle thread waits for an offer to be old enough to take over. */
  #takeOverTimer: NodeJS.Timeout | null = null;
  readonly #queueLimit: number;
  #nextRequestId = 1;
  #closing: Promise<void> | null = null;

  constructor(options: TaskPoolOptions) {
    const problem = tableProblem(options, TASK_POOL_BOUNDS, (key) => key);
    if (problem !== null) throw new DtpError(LocalErrorCode.InvalidOptions, problem);
    const { capacity } = options;
    const cancelGraceMs = options.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS;
    const queueLimit = options.queueLimit ?? 0;
    const taskMemoryMb = options.taskMemoryMb ?? TASK_MEMORY_MB.default;
    this.capacity = capacity;
    this.cancelGraceMs = cancelGraceMs;
    this.taskMemoryMb = taskMemoryMb;
    this.rssBudgetMb = rssBudgetMb(process.memoryUsage.rss() / 2 ** 20, capacity, taskMemoryMb);
    this.#queueLimit = queueLimit;
    this.#modules = [...(options.modules ?? [])];
  }

  /** Threads that have not exited yet (idle, busy, stopping or terminating). */
  get threadCount(): number {
    return this.#threads.size;
  }

  /** Tasks on a thread that have not ended yet (stopped ones have). */
  get runningCount(): number {
    return this.#running.size;
  }

  /** Tasks waiting for a free thread, offered ones included. */
  get queuedCount(): number {
    return this.#queued.length + this.#offered.size;
  }

  /**
   * Starts one task attempt on a free thread, or queues it (up to
   * `queueLimit`) until one is free. Beyond that, or after `close()`, the
   * handle's outcome is an immediate failure.
   */
  run(
    run: TaskRun,
    onLog: TaskLogSink = () => undefined,
    onProgress: TaskProgressSink = () => undefined,
    onCall: TaskCallSink = () => undefined,
  ): TaskHandle {
    if (this.#closing !== null) return endedHandle('task pool is closed');
    const full = this.#running.size >= this.capacity;
    if (full && this.queuedCount >= this.#queueLimit) {
      return endedHandle(`task pool at capacity (${this.capacity} tasks)`);
    }
    const input: RunTaskInput = { type: 'RUN_TASK', ...run };
    const task: PoolTask = new PoolTask(this.#nextRequestId++, input, onLog, () =>
      this.#running.delete(task),
    );
    task.onProgress = onProgress;
    task.onCall = onCall;
    if (full) {
      this.#queued.push(task);
      this.#offerQueued();
    } else this.#start(task, this.#takeIdle() ?? this.#spawn());
    return {
      outcome: task.outcome,
      started: task.started,
      stop: (reason) => this.#stop(task, reason),
      answerCall: (callId, outcome) => this.#running.get(task)?.answerCall(task, callId, outcome),
    };
  }

  /** Cancels every task and terminates every thread. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#memoryTimer !== null) clearInterval(this.#memoryTimer);
      this.#memoryTimer = null;
      if (this.#takeOverTimer !== null) clearTimeout(this.#takeOverTimer);
      this.#takeOverTimer = null;
      const offered = [...this.#offered.keys()];
      this.#offered.clear();
      for (const task of [...this.#queued.splice(0), ...offered, ...this.#running.keys()]) {
        task.settle({
          success: false,
          error: 'task pool closed',
          cancelled: true,
          retryable: true,
        });
      }
      await Promise.all([...this.#threads].map((thread) => thread.terminate()));
    })();
    return this.#closing;
  }

  #stop(task: PoolTask, reason: AbortReason): Promise<StopOutcome> {
    const offer = this.#offered.get(task);
    const thread = this.#running.get(task) ?? offer?.thread;
    const index = thread === undefined ? this.#queued.indexOf(task) : -1;
    if (thread === undefined && index < 0) return Promise.resolve('cooperative'); // ended already
    if (index >= 0) this.#queued.splice(index, 1); // still waiting: it never starts
    task.settle({
      success: false,
      error: `task stopped (${reason})`,
      cancelled: true,
      retryable: true,
    });
    if (thread === undefined) return Promise.resolve('cooperative');
    if (offer !== undefined) {
      this.#offered.delete(task);
      // Withdrawn before the thread claimed it: it never starts.
      if (thread.withdrawNext() === task) {
        this.#offerable.add(thread);
        this.#offerQueued();
        return Promise.resolve('cooperative');
      }
      // Claimed: the task before it has ended there; stop it as a running one.
      return thread.stop(task, reason, this.cancelGraceMs);
    }
    // What waits behind the stopped task runs elsewhere (unless claimed already).
    this.#takeBack(thread);
    const stopped = thread.stop(task, reason, this.cancelGraceMs);
    this.#startQueued(); // its slot is free at once; the stopping thread is not
    return stopped;
  }

  /** Withdraws a thread's unclaimed next to the head of the queue. */
  #takeBack(thread: PoolThread): void {
    const back = thread.withdrawNext();
    if (back === null) return;
    this.#offered.delete(back);
    this.#queued.unshift(back);
  }

  /** Offers waiting tasks, oldest first, to the busy threads that hold none. */
  #offerQueued(): void {
    if (this.#closing !== null) return;
    for (const thread of this.#offerable) {
      if (this.#queued.length === 0) return;
      this.#offerable.delete(thread);
      if (!thread.offerable) continue;
      const task = this.#queued.shift();
      if (task === undefined) return;
      thread.offer(task);
      this.#offered.set(task, { thread, atMs: performance.now() });
    }
  }

  /**
   * The oldest offer, withdrawn from its thread for an idle one, once it
   * has waited {@link OFFER_WAIT_MS}. Null when there is none that old, or
   * its thread claimed it first.
   */
  #takeOverOffer(): PoolTask | null {
    for (const [task, offer] of this.#offered) {
      if (performance.now() - offer.atMs < OFFER_WAIT_MS) return null;
      if (offer.thread.withdrawNext() !== task) return null; // claimed: it runs there
      this.#offered.delete(task);
      this.#offerable.add(offer.thread);
      return task;
    }
    return null;
  }

  /** An idle thread waits: look again when the oldest offer may be taken over. */
  #armTakeOver(): void {
    if (this.#takeOverTimer !== null || this.#closing !== null) return;
    const oldest = this.#offered.values().next();
    if (oldest.done === true) return;
    const waitMs = Math.max(0, oldest.value.atMs + OFFER_WAIT_MS - performance.now());
    this.#takeOverTimer = setTimeout(() => this.#takeOverLate(), Math.ceil(waitMs)).unref();
  }

  /** Idle threads take over the offers that are old enough now. */
  #takeOverLate(): void {
    this.#takeOverTimer = null;
    while (this.#closing === null && this.#running.size < this.capacity) {
      const thread = this.#takeIdle();
      if (thread === undefined) return;
      const task = this.#takeOverOffer();
      if (task === null) {
        this.#idle.push(thread);
        this.#armTakeOver();
        return;
      }
      this.#start(task, thread);
    }
  }

  /** An idle thread that is not on its way out, if any. */
  #takeIdle(): PoolThread | undefined {
    for (let thread = this.#idle.pop(); thread !== undefined; thread = this.#idle.pop()) {
      if (thread.available) return thread;
    }
    return undefined;
  }

  #spawn(): PoolThread {
    const thread = new PoolThread(THREAD_ENTRY, this.#modules, this.taskMemoryMb, {
      onIdle: (t) => this.#onIdle(t),
      onExit: (t, unclaimed) => this.#onExit(t, unclaimed),
    });
    this.#threads.add(thread);
    return thread;
  }

  #start(task: PoolTask, thread: PoolThread): void {
    this.#running.set(task, thread);
    thread.run(task);
    this.#offerable.add(thread);
    this.#memoryTimer ??= setInterval(() => this.#checkMemory(), CHECK_INTERVAL_MS).unref();
  }

  /** Terminates the threads over their memory budget (see memory-budget.ts). */
  #checkMemory(): void {
    const busy = [...this.#threads].filter((thread) => thread.busy);
    if (busy.length === 0) {
      if (this.#memoryTimer !== null) clearInterval(this.#memoryTimer);
      this.#memoryTimer = null;
      return;
    }
    const nowMs = performance.now();
    const samples = busy.map((thread) => ({
      thread,
      ...thread.memorySample(nowMs, STALE_AFTER_MS),
    }));
    const verdicts = overBudget(samples, {
      taskMemoryMb: this.taskMemoryMb,
      rssMb: process.memoryUsage.rss() / 2 ** 20,
      rssBudgetMb: this.rssBudgetMb,
    });
    for (const { thread, error } of verdicts) thread.terminateForMemory(error);
  }

  #onIdle(thread: PoolThread): void {
    // A thread freed by a stop can make more threads than slots, and an idle
    // thread never collects what its task left: let either go.
    const retained = thread.memoryMb > RETAINED_LIMIT_MB;
    if (this.#closing !== null || this.#threads.size > this.capacity || retained) {
      this.#takeBack(thread);
      if (thread.next === null) {
        this.#offerable.delete(thread);
        void thread.terminate();
        this.#startQueued();
        return;
      }
      // It claimed its next already: that one runs here first.
    }
    const promoted = thread.promoteNext();
    if (promoted !== null) {
      this.#offered.delete(promoted);
      // A next stopped after its claim is settled: its slot is free already.
      if (!promoted.settled) this.#running.set(promoted, thread);
      this.#offerable.add(thread);
      this.#offerQueued();
      return;
    }
    const free = this.#running.size < this.capacity;
    const next = free ? (this.#takeOverOffer() ?? this.#queued.shift()) : undefined;
    if (next !== undefined) {
      this.#start(next, thread);
      this.#offerQueued();
    } else {
      this.#offerable.delete(thread);
      this.#idle.push(thread);
      this.#armTakeOver();
    }
  }

  /** Starts waiting tasks while slots are free (a new thread where no idle one is left). */
  #startQueued(): void {
    while (this.#closing === null && this.#running.size < this.capacity) {
      const next = this.#queued.shift();
      if (next === undefined) return;
      this.#start(next, this.#takeIdle() ?? this.#spawn());
    }
    this.#offerQueued();
  }

  #onExit(thread: PoolThread, unclaimed: PoolTask | null): void {
    this.#threads.delete(thread);
    this.#offerable.delete(thread);
    for (const [task, offer] of this.#offered) {
      if (offer.thread === thread) this.#offered.delete(task); // claimed: settled as it died
    }
    // Never started there: it waits for a thread again, first in line.
    if (unclaimed !== null && !unclaimed.settled) this.#queued.unshift(unclaimed);
    const index = this.#idle.indexOf(thread);
    if (index >= 0) this.#idle.splice(index, 1);
    this.#startQueued(); // a crashed thread's slot is free again
  }
}
