/**
 * The task threads that run attempts off the main thread.
 *
 * - Up to `capacity` attempts run at once, shared and isolated together.
 *   Attempts beyond wait (up to `queueLimit`) and start in arrival order as
 *   slots free up.
 * - An attempt of a shared task runs as an async call on one of at most
 *   `threads` shared threads, many attempts per thread. It goes to the least
 *   loaded thread whose event loop has turned within
 *   {@link BLOCKED_AFTER_MS}. A new thread is started (up to `threads`) only
 *   when every existing one is saturated: its event loop busy for at least
 *   {@link SATURATED_SHARE} of each of the last two windows of
 *   {@link SATURATION_WINDOW_MS} (one alone may be its start-up or a burst),
 *   held, or stopping an attempt. Attempts that
 *   mostly wait (I/O) therefore share one thread however many they are, and
 *   attempts that compute spread over up to `threads`. A thread whose loop is held by a handler
 *   (synchronous code) gets no new attempt while another is free, and once
 *   held for {@link BLOCKED_REPORT_MS} it is reported (`onBlocked`) with the
 *   jobs on it.
 * - An attempt of an isolated task (`isolate: true`) gets a thread to
 *   itself while it runs. A thread whose isolated attempt ended is kept for
 *   the next one (starting a thread costs milliseconds of CPU, an attempt
 *   microseconds): at most `capacity` idle ones, each for at most
 *   {@link ISOLATED_IDLE_MS} unused, so a burst's threads go away after it.
 * - `stop(reason)` preempts an attempt: it settles as cancelled at once (its
 *   slot is free and nothing it produces is ever reported), its handler's
 *   `ctx.signal` fires, and the handler gets `cancelGraceMs` to settle. One
 *   that does not (or computes and never yields) has its thread terminated;
 *   the other attempts of a shared thread are then requeued (pool-thread.ts).
 * - Each thread has a memory budget, `taskMemoryMb` (memory-budget.ts): its
 *   JavaScript heap is capped by V8, its heap plus Buffers are sampled, and
 *   the worker's resident memory is watched for threads that cannot sample.
 *   A thread over budget is terminated: an isolated thread's attempt fails
 *   saying so; a shared thread's attempts are requeued (nothing tells which
 *   of them used the memory; the coordinator counts a job's requeues, so
 *   none can go round for ever). A thread that keeps much memory once idle
 *   is replaced instead of reused.
 * - A thread that crashes ends its attempts the same way; the pool carries on.
 */
import { availableParallelism } from 'node:os';
import { LocalErrorCode } from '../protocol/error-codes.js';
import { MAX_TIMER_MS, tableProblem, type BoundsTable } from '../common/bounds.js';
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
import { LoopWatch } from './local-thread.js';
import type { Handler } from './task-modules.js';
import {
  PoolTask,
  PoolThread,
  type StopOutcome,
  type ThreadKind,
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

/** A shared thread whose event loop has not turned for this long gets no new attempt, in ms. */
export const BLOCKED_AFTER_MS = 100;
/** A shared thread held this long is reported with the jobs on it, in ms. */
export const BLOCKED_REPORT_MS = 1_000;
/** A shared thread whose event loop was busy this share of a window is saturated: another may start. */
export const SATURATED_SHARE = 0.8;
/** The window over which a shared thread's event loop is judged saturated, in ms. */
export const SATURATION_WINDOW_MS = 200;

/** What `onBlocked` is told of a thread whose event loop is held. */
export interface BlockedThread {
  readonly thread: string;
  readonly blockedMs: number;
  readonly jobIds: readonly string[];
}

export interface TaskPoolOptions {
  /** Most attempts running at once (shared and isolated), 1..10,000. */
  capacity: number;
  /** Shared task threads, 1..256 (default: the machine's available parallelism). */
  threads?: number;
  /** Users' task modules that every thread imports (main thread checked them). */
  modules?: TaskThreadData['modules'];
  /** Time a stopped handler gets before its thread is terminated, in ms (default 1000). */
  cancelGraceMs?: number;
  /** Memory budget of each task thread, in MiB, 32..1048576 (default 512; see memory-budget.ts). */
  taskMemoryMb?: number;
  /**
   * Attempts that may wait for a slot beyond `capacity` (the worker's
   * `prefetch` bound; default 0: none).
   */
  queueLimit?: number;
  /** How long an idle isolated thread is kept for the next isolated attempt, in ms (default {@link ISOLATED_IDLE_MS}). */
  isolatedIdleMs?: number;
  /** Told of a shared thread whose event loop has been held for {@link BLOCKED_REPORT_MS}. */
  onBlocked?: (blocked: BlockedThread) => void;
  /**
   * Handlers that run on this thread (the program's own event loop), by task
   * type: see local-thread.ts.
   */
  local?: ReadonlyMap<string, Handler>;
}

/**
 * The pool's bounds are the worker's: its queue holds the worker's prefetch,
 * so the queue limit has the very bound of `prefetch`.
 */
export const TASK_POOL_BOUNDS: BoundsTable<TaskPoolOptions> = {
  capacity: WORKER_BOUNDS.capacity,
  threads: WORKER_BOUNDS.threads,
  cancelGraceMs: WORKER_BOUNDS.cancelGraceMs,
  taskMemoryMb: WORKER_BOUNDS.taskMemoryMb,
  queueLimit: WORKER_BOUNDS.prefetch,
  isolatedIdleMs: { min: 1, max: MAX_TIMER_MS, optional: true },
};

/** How long an idle isolated thread waits for the next isolated attempt before it ends, in ms. */
export const ISOLATED_IDLE_MS = 10_000;

/** The default number of shared task threads: the machine's available parallelism, within bounds. */
export function defaultThreads(): number {
  return Math.min(WORKER_BOUNDS.threads.max, Math.max(1, availableParallelism()));
}

/** One attempt to run (see {@link RunTaskInput}). */
export type TaskRun = Omit<RunTaskInput, 'type'>;

export interface TaskHandle {
  /** Settles exactly once and never rejects. */
  readonly outcome: Promise<TaskOutcome>;
  /** True once the task code began; false if the task ended before that. */
  readonly started: Promise<boolean>;
  /**
   * Preempts the task (see the module comment). Its outcome becomes
   * cancelled at once. Resolves once its thread is free of it, with how; no
   * effect (resolves `cooperative`) on a task that already ended.
   */
  stop(reason: AbortReason): Promise<StopOutcome>;
  /** Answers one call its handler made (see {@link TaskCallSink}); nothing once it ended. */
  answerCall(callId: number, outcome: CallOutcome): void;
}

/** The sinks of one attempt's outputs, and whether it runs isolated. */
export interface TaskRunSinks {
  onLog?: TaskLogSink;
  onProgress?: TaskProgressSink;
  onCall?: TaskCallSink;
  /** A thread of its own (a task declared `isolate`). */
  isolated?: boolean;
  /** On this thread (a handler given in code). */
  local?: boolean;
}

const THREAD_ENTRY = new URL('./task-thread.js', import.meta.url);

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
  readonly threads: number;
  readonly cancelGraceMs: number;
  readonly taskMemoryMb: number;
  readonly #baselineMb = process.memoryUsage.rss() / 2 ** 20;
  readonly #modules: TaskThreadData['modules'];
  readonly #onBlocked: (blocked: BlockedThread) => void;
  readonly #localHandlers: ReadonlyMap<string, Handler>;
  /** Where handlers given in code run; made with the first of their attempts. */
  #local: PoolThread | null = null;
  readonly #loopWatch: LoopWatch;
  /** Shared threads in service (not terminating), in the order they started. */
  readonly #shared: PoolThread[] = [];
  /** Isolated threads with no attempt, kept for the next. */
  readonly #idleIsolated: PoolThread[] = [];
  /** Every thread that has not exited yet, terminating ones included. */
  readonly #threads = new Set<PoolThread>();
  /** Attempts placed on a thread and not settled yet. */
  readonly #running = new Map<PoolTask, PoolThread>();
  /** Attempts waiting for a slot, oldest first. */
  readonly #queued: PoolTask[] = [];
  #queueLimit: number;
  #checkTimer: NodeJS.Timeout | null = null;
  #threadsMade = 0;
  readonly #isolatedIdleMs: number;
  /** When each idle isolated thread went idle (performance.now()), as #idleIsolated. */
  #idleSinceMs: number[] = [];
  #idleTimer: NodeJS.Timeout | null = null;
  #nextRequestId = 1;
  #closing: Promise<void> | null = null;

  constructor(options: TaskPoolOptions) {
    const problem = tableProblem(options, TASK_POOL_BOUNDS, (key) => key);
    if (problem !== null) throw new DtpError(LocalErrorCode.InvalidOptions, problem);
    this.capacity = options.capacity;
    this.threads = options.threads ?? defaultThreads();
    this.cancelGraceMs = options.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS;
    this.taskMemoryMb = options.taskMemoryMb ?? TASK_MEMORY_MB.default;
    this.#queueLimit = options.queueLimit ?? 0;
    this.#isolatedIdleMs = options.isolatedIdleMs ?? ISOLATED_IDLE_MS;
    this.#modules = [...(options.modules ?? [])];
    this.#onBlocked = options.onBlocked ?? (() => undefined);
    this.#localHandlers = options.local ?? new Map();
    this.#loopWatch = new LoopWatch(BLOCKED_REPORT_MS, ({ heldMs }) =>
      this.#onBlocked({
        thread: 'main',
        blockedMs: heldMs,
        jobIds: this.#local?.jobIds() ?? [],
      }),
    );
  }

  /** Threads that have not exited yet (shared, isolated, terminating ones too). */
  get threadCount(): number {
    return this.#threads.size;
  }

  /** Threads started since the pool was made (each costs an isolate's start). */
  get threadsStarted(): number {
    return this.#threadsMade;
  }

  /** Attempts on a thread that have not ended yet (stopped ones have). */
  get runningCount(): number {
    return this.#running.size;
  }

  /** Attempts waiting for a slot. */
  get queuedCount(): number {
    return this.#queued.length;
  }

  /** Most attempts that may wait for a slot. */
  get queueLimit(): number {
    return this.#queueLimit;
  }

  /**
   * A new bound on the attempts that may wait (a worker with several
   * sessions holds what each may be sent; shard-map.ts). Attempts already
   * waiting keep their place.
   */
  set queueLimit(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 0) {
      throw new DtpError(LocalErrorCode.InvalidOptions, `queueLimit must be >= 0, got ${limit}`);
    }
    this.#queueLimit = limit;
  }

  /**
   * Starts one attempt, or queues it (up to `queueLimit`) until a slot is
   * free. Beyond that, or after `close()`, the handle's outcome is an
   * immediate failure.
   */
  run(run: TaskRun, sinks: TaskRunSinks = {}): TaskHandle {
    if (this.#closing !== null) return endedHandle('task pool is closed');
    const full = this.#running.size >= this.capacity;
    if (full && this.#queued.length >= this.#queueLimit) {
      return endedHandle(`task pool at capacity (${this.capacity} tasks)`);
    }
    const input: RunTaskInput = { type: 'RUN_TASK', ...run };
    const onLog = sinks.onLog ?? (() => undefined);
    const task: PoolTask = new PoolTask(
      this.#nextRequestId++,
      input,
      sinks.local === true ? 'local' : sinks.isolated === true ? 'isolated' : 'shared',
      onLog,
      () => this.#onSettled(task),
    );
    if (sinks.onProgress !== undefined) task.onProgress = sinks.onProgress;
    if (sinks.onCall !== undefined) task.onCall = sinks.onCall;
    if (full) this.#queued.push(task);
    else this.#place(task);
    return {
      outcome: task.outcome,
      started: task.started,
      stop: (reason) => this.#stop(task, reason),
      answerCall: (callId, outcome) => this.#running.get(task)?.answerCall(task, callId, outcome),
    };
  }

  /** Cancels every attempt and terminates every thread. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#checkTimer !== null) clearInterval(this.#checkTimer);
      this.#checkTimer = null;
      if (this.#idleTimer !== null) clearInterval(this.#idleTimer);
      this.#idleTimer = null;
      this.#loopWatch.stop();
      for (const task of [...this.#queued.splice(0), ...this.#running.keys()]) {
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

  #onSettled(task: PoolTask): void {
    if (!this.#running.delete(task)) return;
    this.#startQueued();
  }

  #stop(task: PoolTask, reason: AbortReason): Promise<StopOutcome> {
    const thread = this.#running.get(task);
    const index = thread === undefined ? this.#queued.indexOf(task) : -1;
    if (thread === undefined && index < 0) return Promise.resolve('cooperative'); // ended already
    if (index >= 0) this.#queued.splice(index, 1); // still waiting: it never starts
    // The thread learns of the stop first: the slot this frees goes elsewhere.
    const stopped =
      thread === undefined
        ? Promise.resolve<StopOutcome>('cooperative')
        : thread.stop(task, reason, this.cancelGraceMs);
    task.settle({
      success: false,
      error: `task stopped (${reason})`,
      cancelled: true,
      retryable: true,
    });
    return stopped;
  }

  #place(task: PoolTask): void {
    const thread =
      task.kind === 'local'
        ? this.#localThread()
        : task.kind === 'isolated'
          ? this.#isolatedThread()
          : this.#sharedThread();
    this.#running.set(task, thread);
    thread.run(task);
    this.#checkTimer ??= setInterval(() => this.#check(), CHECK_INTERVAL_MS).unref();
  }

  /**
   * The shared thread for a new attempt: an idle one, else a new one (up to
   * `threads`) when every one is saturated, held or stopping an attempt,
   * else the least loaded one whose loop turned lately and that stops
   * nothing, else the least loaded one at all.
   */
  #sharedThread(): PoolThread {
    const nowMs = Date.now();
    let lively: PoolThread | undefined;
    let any: PoolThread | undefined;
    let live = 0;
    let unsaturated = false;
    for (const thread of this.#shared) {
      if (!thread.terminating) live++;
      if (!thread.hasRoom) continue;
      if (any === undefined || thread.load < any.load) any = thread;
      // One with a stopped attempt still in its handler may be ended for it.
      if (thread.stopping || thread.blockedMs(nowMs) > BLOCKED_AFTER_MS) continue;
      if (!thread.saturated) unsaturated = true;
      if (lively === undefined || thread.load < lively.load) lively = thread;
    }
    if (lively !== undefined && lively.load === 0) return lively;
    if (live < this.threads && !unsaturated) return this.#spawn('shared');
    return lively ?? any ?? this.#spawn('shared');
  }

  #localThread(): PoolThread {
    this.#loopWatch.start();
    this.#local ??= this.#spawn('local');
    return this.#local;
  }

  /** The most recently idle isolated thread (the older ones age out), else a new one. */
  #isolatedThread(): PoolThread {
    for (let thread = this.#idleIsolated.pop(); thread !== undefined;) {
      this.#idleSinceMs.pop();
      if (thread.hasRoom) return thread;
      thread = this.#idleIsolated.pop();
    }
    return this.#spawn('isolated');
  }

  /** Ends the idle isolated threads unused for {@link ISOLATED_IDLE_MS}; the timer runs while any is idle. */
  #retireIdleIsolated(): void {
    const oldest = performance.now() - this.#isolatedIdleMs;
    while (this.#idleIsolated.length > 0 && (this.#idleSinceMs[0] as number) <= oldest) {
      this.#retire(this.#idleIsolated[0] as PoolThread);
    }
    if (this.#idleIsolated.length === 0 && this.#idleTimer !== null) {
      clearInterval(this.#idleTimer);
      this.#idleTimer = null;
    }
  }

  #spawn(kind: ThreadKind): PoolThread {
    const thread = new PoolThread(
      THREAD_ENTRY,
      {
        kind,
        name: `${kind}-${++this.#threadsMade}`,
        modules: this.#modules,
        taskMemoryMb: this.taskMemoryMb,
        // A shared thread may hold every attempt, and stopped ones still in their grace.
        slots: kind === 'isolated' ? 2 : this.capacity + 64,
        local: this.#localHandlers,
      },
      {
        onTaskEnded: (t) => this.#onTaskEnded(t),
        onExit: (t) => this.#onExit(t),
      },
    );
    this.#threads.add(thread);
    if (kind === 'shared') this.#shared.push(thread);
    return thread;
  }

  #onTaskEnded(thread: PoolThread): void {
    if (thread.load > 0 || thread.terminating) return;
    if (thread.kind === 'local') return this.#loopWatch.stop();
    // An idle thread never collects what its attempts left: let it go.
    const retained = thread.memoryMb > RETAINED_LIMIT_MB;
    if (this.#closing !== null || retained) return this.#retire(thread);
    if (thread.kind === 'isolated') {
      if (this.#idleIsolated.length >= this.capacity) return this.#retire(thread);
      this.#idleIsolated.push(thread);
      this.#idleSinceMs.push(performance.now());
      const everyMs = Math.max(1, Math.ceil(this.#isolatedIdleMs / 4));
      this.#idleTimer ??= setInterval(() => this.#retireIdleIsolated(), everyMs).unref();
    }
  }

  /** Terminates a thread on purpose; a shared one leaves the placement list at once. */
  #retire(thread: PoolThread): void {
    this.#forget(thread);
    void thread.terminate();
  }

  #forget(thread: PoolThread): void {
    const shared = this.#shared.indexOf(thread);
    if (shared >= 0) this.#shared.splice(shared, 1);
    const idle = this.#idleIsolated.indexOf(thread);
    if (idle >= 0) {
      this.#idleIsolated.splice(idle, 1);
      this.#idleSinceMs.splice(idle, 1);
    }
  }

  #onExit(thread: PoolThread): void {
    this.#threads.delete(thread);
    this.#forget(thread);
    this.#startQueued(); // its attempts are settled: their slots are free
  }

  /** Starts waiting attempts while slots are free. */
  #startQueued(): void {
    while (this.#closing === null && this.#running.size < this.capacity) {
      const next = this.#queued.shift();
      if (next === undefined) return;
      this.#place(next);
    }
  }

  /** The periodic look at the threads: memory budgets, and loops held too long. */
  #check(): void {
    const busy = [...this.#threads].filter(
      (thread) => thread.load > 0 && !thread.terminating && thread.kind !== 'local',
    );
    if (busy.length === 0) {
      if (this.#checkTimer !== null) clearInterval(this.#checkTimer);
      this.#checkTimer = null;
      return;
    }
    this.#checkMemory(busy);
    this.#checkBlocked();
    const nowMs = performance.now();
    for (const thread of this.#shared) {
      thread.lookAtLoad(nowMs, SATURATION_WINDOW_MS, SATURATED_SHARE);
    }
  }

  /** Terminates the threads over their memory budget (see memory-budget.ts). */
  #checkMemory(busy: readonly PoolThread[]): void {
    const nowMs = performance.now();
    const samples = busy.map((thread) => ({
      thread,
      ...thread.memorySample(nowMs, STALE_AFTER_MS),
    }));
    const verdicts = overBudget(samples, {
      taskMemoryMb: this.taskMemoryMb,
      rssMb: process.memoryUsage.rss() / 2 ** 20,
      rssBudgetMb: rssBudgetMb(this.#baselineMb, this.#threads.size, this.taskMemoryMb),
    });
    for (const { thread, error } of verdicts) {
      this.#forget(thread);
      thread.fail(error);
    }
  }

  /** Reports each shared thread once per spell in which its loop is held too long. */
  #checkBlocked(): void {
    const nowMs = Date.now();
    for (const thread of this.#shared) {
      const blockedMs = thread.blockedMs(nowMs);
      if (blockedMs < BLOCKED_REPORT_MS) {
        thread.blockedLogged = false;
        continue;
      }
      if (thread.blockedLogged) continue;
      thread.blockedLogged = true;
      this.#onBlocked({ thread: thread.name, blockedMs, jobIds: thread.jobIds() });
    }
  }
}
