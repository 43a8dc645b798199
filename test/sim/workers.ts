/**
 * Simulated worker processes.
 *
 * A worker connects, registers, heartbeats while not hung, runs each assigned
 * task for a random simulated time and reports a TASK_RESULT (mostly success;
 * FAIL tasks follow their payload). Its misbehaviours are the faults the
 * coordinator must survive: crashing (in-flight work lost, some frames lost),
 * hanging (no heartbeats, no reading, socket kept), slow and duplicated and
 * reordered results, ignoring a TASK_CANCEL, results for old leases,
 * re-registering under its id on a new connection while the old one is still
 * open, a stray connection with a bad first frame, garbage on the wire,
 * draining. Handlers now and then enqueue children (ENQUEUE_CHILD, with
 * an explicit key or by ordinal, sometimes sent late or twice); a fresh
 * child acknowledged must already be durable. Some workers keep running their tasks across a lost connection
 * and report them on the next one (late results); of those, some list them
 * when they register again (`heldAttempts`, as the real worker does with a
 * coordinator that offers `reattach`), half of the time in several parts
 * (`moreHeld`, then HELD_ATTEMPTS, now and then never finished); the others
 * drop them.
 *
 * Many attempts per worker: a tenth of the workers have more than 1,024
 * slots (`slots`). Requeues: with a coordinator that offers `requeue`, an
 * attempt is now and then cut off through no fault of its own and reported
 * with `requeue: true`; one job in twenty does that on every attempt (it
 * kills its thread each time), so it runs into the bound of free requeues.
 *
 * Durable steps: about a third of the jobs are "stepped". An attempt of one
 * starts after the steps its assignment carries and records a few more
 * (RECORD_STEP, one at a time, each awaited), may end in a sleep or a wait
 * for another job (TASK_SUSPEND; only for a job with a smaller id, so waits
 * never form a cycle; with shards, half the time a job of another shard),
 * then reports as any task does. Checked on the way:
 * an assignment carries exactly the committed steps while its lease is
 * current (so a recorded step never runs again), and a STEP_RECORDED
 * arrives only once its step is committed.
 *
 * Rate limits: with a coordinator that offers `rateLimits`, a result is now
 * and then `rateLimited` (scope job, group or queue) instead.
 *
 * Worker modes: down (process dead until `restartAtMs`) -> up; while up it is
 * disconnected (`link` null, dialling at `reconnectAtMs`), registering, or
 * registered; independently it may be hung until `hungUntilMs`.
 */
import type {
  CoordinatorToWorker,
  EnqueueChild,
  HeldAttempt,
  JsonObject,
  RecordedStep,
  TaskAssign,
  TaskProgress,
  TaskResult,
  WorkerToCoordinator,
} from '../../src/protocol/messages.js';
import { MAX_CAPACITY, MAX_SLOTS, maxPrefetch } from '../../src/protocol/limits.js';
import { EVENT_WAIT_STEP, SIGNAL_WAIT_STEP } from '../../src/coordinator/core/step-names.js';
import type { SimClock, WorkerLink, WorkerPeer } from './network.js';
import type { Random } from './random.js';
import type { Judge } from './violation.js';
import type { World } from './world.js';
import { EVENT_NAMES, EVENT_KEYS, SIGNAL_NAMES } from './signal-checks.js';

/** A lease some worker received: late results are drawn from these. */
export interface GhostLease {
  jobId: string;
  attemptId: string;
  success: boolean;
}

/** Most old leases kept for late results. */
const MAX_GHOSTS = 200;

export class FaultCounter {
  readonly #counts = new Map<string, number>();

  count(kind: string): void {
    this.#counts.set(kind, (this.#counts.get(kind) ?? 0) + 1);
  }

  get total(): number {
    let total = 0;
    for (const n of this.#counts.values()) total += n;
    return total;
  }

  toJSON(): Record<string, number> {
    return Object.fromEntries([...this.#counts.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
  }
}

export interface WorkerEnv {
  world: World;
  clock: SimClock;
  judge: Judge;
  faults: FaultCounter;
  ghosts: GhostLease[];
  heartbeatIntervalMs: number;
  heartbeatTimeoutMs: number;
  taskTimeoutMs: number;
  /** True during quiescence: no misbehaviour. */
  quiet(): boolean;
  log(line: () => string): void;
  /** Whether this lease is the job's current one, as the model knows it. */
  leaseCurrent(jobId: string, attemptId: string): boolean;
  /** Steps recorded and acknowledged so far (for the report). */
  stepStats: { recorded: number; suspensions: number };
  /** Queues a child may name (most calls name one; a shard's own); absent: no call names one. */
  childQueues?: readonly string[];
  /** The leases of the other shards (half the waits pick one of their jobs); absent: one shard. */
  ghostsElsewhere?: () => readonly GhostLease[];
}

/** Most steps a simulated handler records per job (sleeps and waits included). */
const MAX_SIM_STEPS = 6;

/** A stepped job (about a third of them): decided by its id, the same on every worker. */
function isStepped(jobId: string): boolean {
  let h = 0;
  for (let i = 0; i < jobId.length; i++) h = (h * 31 + jobId.charCodeAt(i)) | 0;
  return Math.abs(h) % 3 === 0;
}

/** A job whose every attempt is cut off (one in twenty): decided by its id, as {@link isStepped}. */
function cutsOffAlways(jobId: string): boolean {
  let h = 7;
  for (let i = 0; i < jobId.length; i++) h = (h * 33 + jobId.charCodeAt(i)) | 0;
  return Math.abs(h) % 20 === 0;
}

/** The step state of an attempt of a stepped job. */
interface StepState {
  /** The index its next step takes. */
  next: number;
  /** Steps (or a final sleep or wait) it still means to record. */
  planLeft: number;
  /** The RECORD_STEP waiting for its answer: its requestId, index and name; null = none. */
  waiting: { requestId: number; index: number; name: string; result: string } | null;
}

interface Task {
  jobId: string;
  attemptId: string;
  attemptNumber: number;
  doneAtMs: number;
  success: boolean;
  /** Only for a stepped job. */
  steps?: StepState;
  /** Children its handler enqueued without a key (the next ordinal). */
  ordinal: number;
  /** Child calls it made (a few at most, so the job tree stays small). */
  childCalls: number;
}

interface Outgoing {
  msg: TaskResult | TaskProgress | EnqueueChild;
  sendAtMs: number;
}

/** Child calls one attempt makes at most. */
const MAX_CHILD_CALLS = 2;

/** Stray connections are read by nobody. */
/**
 * What a worker writes when its coordinator offers `batches`: each run of
 * consecutive results in one TASK_RESULTS (a run of one as it is), the
 * other messages where they were.
 */
function batchResults(workerId: string, due: readonly { msg: WorkerToCoordinator }[]) {
  const out: { msg: WorkerToCoordinator }[] = [];
  let run: TaskResult[] = [];
  const endRun = (): void => {
    if (run.length === 1) out.push({ msg: run[0] as TaskResult });
    else if (run.length > 1) out.push({ msg: { type: 'TASK_RESULTS', workerId, results: run } });
    run = [];
  };
  for (const item of due) {
    if (item.msg.type === 'TASK_RESULT') run.push(item.msg);
    else {
      endRun();
      out.push(item);
    }
  }
  endRun();
  return out;
}

const NOBODY: WorkerPeer = { onFrame: () => undefined, onClosed: () => undefined };

export class SimWorker implements WorkerPeer {
  readonly workerId: string;
  #capacity: number;
  /** Attempts it asks to queue beyond capacity (0: it does not ask). */
  #prefetch: number;
  /** Runs only short tasks (a few ms), so its prefetch window can open. */
  readonly #quick: boolean;
  readonly #env: WorkerEnv;
  readonly #rng: Random;
  readonly #taskTypes: string[] | null;
  readonly #keepsTasks: boolean;
  /** Lists what it still holds when it registers (only a worker that keeps its tasks). */
  readonly #listsHeld: boolean;
  /** The part of its held list still to send after WORKER_REGISTERED (`moreHeld`); null = none. */
  #heldRest: HeldAttempt[] | null = null;
  /** What the coordinator offered on the current connection. */
  #features: ReadonlySet<string> = new Set();
  #link: WorkerLink | null = null;
  #registered = false;
  #up = true;
  #restartAtMs = 0;
  #reconnectAtMs = 0;
  #hungUntilMs = 0;
  #nextHeartbeatAtMs = 0;
  #draining = false;
  readonly #tasks = new Map<string, Task>();
  #outbox: Outgoing[] = [];
  /** The next call requestId (ENQUEUE_CHILD, RECORD_STEP), unique on every connection of this worker. */
  #nextRequestId = 1;

  constructor(workerId: string, env: WorkerEnv, rng: Random, taskTypes: string[] | null) {
    this.workerId = workerId;
    this.#env = env;
    this.#rng = rng;
    this.#capacity = this.#pickCapacity();
    this.#prefetch = this.#pickPrefetch();
    this.#quick = rng.chance(0.3);
    this.#taskTypes = taskTypes;
    this.#keepsTasks = rng.chance(0.4);
    this.#listsHeld = this.#keepsTasks && rng.chance(0.6);
  }

  get #now(): number {
    return this.#env.clock.nowMs;
  }

  get #hung(): boolean {
    return this.#now < this.#hungUntilMs;
  }

  /** Time passes for this worker: dial, heartbeat, finish tasks, send results. */
  act(): void {
    const now = this.#now;
    if (!this.#up) {
      if (now < this.#restartAtMs) return;
      this.#up = true;
      this.#env.log(() => `  ${this.workerId} process starts`);
    }
    if (this.#hung) return;
    if (this.#link === null && now >= this.#reconnectAtMs) this.#connect();
    const link = this.#link;
    if (link !== null && this.#registered && now >= this.#nextHeartbeatAtMs) {
      this.#write({ type: 'HEARTBEAT', workerId: this.workerId });
      this.#nextHeartbeatAtMs = now + this.#env.heartbeatIntervalMs;
    }
    this.#finishTasks();
    this.#flushOutbox();
    if (this.#draining && this.#tasks.size === 0 && this.#outbox.length === 0 && link !== null) {
      this.#env.log(() => `  ${this.workerId} drained; disconnects`);
      this.#env.world.workerHangUp(link, link.toCoordinator.length, 'worker drained');
      this.#dropLink();
    }
  }

  /** Reads up to `max` frames from the coordinator (none while down or hung). */
  read(max: number): void {
    if (!this.#up || this.#hung || this.#link === null) return;
    this.#env.world.deliverToWorker(this.#link, max);
  }

  /** Frames waiting for this worker to read them. */
  get unread(): number {
    return this.#link === null || !this.#up || this.#hung ? 0 : this.#link.toWorker.length;
  }

  /** When this worker next has something to do (for the quiescence clock). */
  nextDueAtMs(): number {
    let at = Number.POSITIVE_INFINITY;
    if (!this.#up) return this.#restartAtMs;
    if (this.#hung) return this.#hungUntilMs;
    if (this.#link === null) return this.#reconnectAtMs;
    if (this.#registered) at = this.#nextHeartbeatAtMs;
    for (const task of this.#tasks.values()) at = Math.min(at, task.doneAtMs);
    for (const out of this.#outbox) at = Math.min(at, out.sendAtMs);
    return at;
  }

  onFrame(link: WorkerLink, msg: CoordinatorToWorker): void {
    if (link !== this.#link) return;
    const judge = this.#env.judge;
    switch (msg.type) {
      case 'WORKER_REGISTERED':
        judge.check(
          msg.workerId === this.workerId,
          () => `${this.workerId} registered as ${msg.workerId}`,
        );
        this.#registered = true;
        this.#features = new Set(msg.features ?? []);
        this.#nextHeartbeatAtMs = this.#now + this.#env.heartbeatIntervalMs;
        this.#sendHeldRest();
        return;
      case 'TASK_ASSIGN':
        judge.check(
          this.#registered,
          () =>
            `TASK_ASSIGN ${msg.jobId} reached ${this.workerId} on connection ${link.connId} before WORKER_REGISTERED`,
        );
        this.#checkCarriedSteps(msg);
        return this.#start(
          msg.jobId,
          msg.attemptId,
          msg.attemptNumber,
          msg.taskType,
          msg.payload,
          msg,
        );
      case 'TASK_ASSIGNS':
        judge.check(
          link.takesBatches && msg.attempts.length > 1,
          () =>
            `TASK_ASSIGNS of ${msg.attempts.length} on connection ${link.connId}, which ${link.takesBatches ? 'takes' : 'did not ask for'} batches`,
        );
        for (const assign of msg.attempts) this.onFrame(link, assign);
        return;
      case 'TASK_CANCEL': {
        judge.check(
          link.leases.has(msg.attemptId),
          () =>
            `TASK_CANCEL ${msg.jobId}/${msg.attemptId} on connection ${link.connId}, which never got that lease`,
        );
        const task = this.#tasks.get(msg.attemptId);
        if (task === undefined || task.jobId !== msg.jobId) return;
        if (!this.#env.quiet() && this.#rng.chance(0.15)) {
          this.#env.faults.count('cancelIgnored');
          return;
        }
        this.#tasks.delete(msg.attemptId);
        return;
      }
      case 'STEP_RECORDED':
        return this.#stepAnswered(msg.requestId, true);
      case 'CHILD_ENQUEUED':
        // A fresh child is durable before the worker hears of it.
        if (msg.created) {
          judge.check(
            this.#env.world.store.committedJob(msg.jobId) !== undefined,
            () => `CHILD_ENQUEUED ${msg.jobId} reached ${this.workerId} before it was committed`,
          );
        }
        return;
      case 'ERROR':
        if (typeof msg.requestId === 'number') this.#stepAnswered(msg.requestId, false);
        return;
      case 'STEPS':
      case 'HEARTBEAT_ACK':
        return;
    }
  }

  /**
   * The steps an assignment carries are the committed ones (a prefix while
   * the lease may already be stale, all of them while it is current): what
   * was recorded is handed back, so it never runs again.
   */
  #checkCarriedSteps(msg: TaskAssign): void {
    const committed = this.#env.world.store.committedSteps(msg.jobId);
    const carried: RecordedStep[] = msg.steps ?? [];
    const judge = this.#env.judge;
    judge.check(
      msg.stepCount === undefined || msg.stepCount === null || msg.stepCount === carried.length,
      () => `TASK_ASSIGN ${msg.jobId} carries ${carried.length} of ${msg.stepCount} small steps`,
    );
    carried.forEach((step, i) => {
      const stored = committed[i];
      judge.check(
        stored !== undefined && stored.name === step.name && stored.result === step.result,
        () =>
          `TASK_ASSIGN ${msg.jobId} carries step ${i} ${step.name}=${step.result}, the store has ${stored?.name}=${stored?.result}`,
      );
    });
    // A replay finds each signal or event wait ended: its value, never what it waits for.
    carried.forEach((step, i) => {
      if (step.name !== SIGNAL_WAIT_STEP && step.name !== EVENT_WAIT_STEP) return;
      const value = JSON.parse(step.result ?? 'null') as Record<string, unknown> | null;
      const member = step.name === SIGNAL_WAIT_STEP ? 'signal' : 'event';
      judge.check(
        value !== null && member in value && !('waitingFor' in value),
        () =>
          `TASK_ASSIGN ${msg.jobId} carries step ${i} ${step.name}=${step.result}, a wait not ended`,
      );
    });
    if (this.#env.leaseCurrent(msg.jobId, msg.attemptId)) {
      judge.check(
        committed.length === carried.length,
        () =>
          `TASK_ASSIGN ${msg.jobId}/${msg.attemptId} (current) carries ${carried.length} steps, ${committed.length} are committed: a recorded step would run again`,
      );
    }
  }

  /** The answer to a RECORD_STEP: the next step, or (refused) the attempt fails. */
  #stepAnswered(requestId: number, recorded: boolean): void {
    for (const task of this.#tasks.values()) {
      const steps = task.steps;
      const waiting = steps?.waiting;
      if (steps === undefined || waiting === null || waiting === undefined) continue;
      if (waiting.requestId !== requestId) continue;
      steps.waiting = null;
      if (recorded) {
        const stored = this.#env.world.store.committedSteps(task.jobId)[waiting.index];
        this.#env.judge.check(
          stored !== undefined && stored.name === waiting.name && stored.result === waiting.result,
          () =>
            `STEP_RECORDED ${task.jobId} step ${waiting.index} before it was committed (store: ${stored?.name})`,
        );
        this.#env.stepStats.recorded++;
        steps.next++;
        steps.planLeft--;
      } else {
        // A refused step (a stale attempt): the handler's call throws, the attempt fails.
        steps.planLeft = 0;
        task.success = false;
      }
      task.doneAtMs = this.#now + this.#rng.int(0, 300);
      return;
    }
  }

  onClosed(link: WorkerLink): void {
    if (link !== this.#link) return;
    this.#env.log(() => `  ${this.workerId} sees connection ${link.connId} closed`);
    this.#dropLink();
  }

  // ---- faults --------------------------------------------------------------

  /** The process dies: tasks and unsent results are lost, some written frames too. */
  crash(): void {
    if (!this.#up) return;
    const link = this.#link;
    if (link !== null) {
      this.#env.world.workerHangUp(
        link,
        this.#rng.int(0, link.toCoordinator.length),
        'worker crashed',
      );
    }
    this.#link = null;
    this.#registered = false;
    this.#draining = false;
    this.#tasks.clear();
    this.#outbox = [];
    this.#up = false;
    this.#hungUntilMs = 0;
    this.#restartAtMs = this.#now + this.#rng.int(0, 2 * this.#env.heartbeatTimeoutMs);
  }

  /**
   * Drops its connection and dials again later, as a worker does that judged
   * its coordinator gone (silent too long): what it wrote still arrives,
   * then the end. Its tasks go on or are dropped as it always does.
   */
  redial(): void {
    const link = this.#link;
    if (!this.#up || this.#hung || link === null) return;
    this.#env.log(() => `  ${this.workerId} drops connection ${link.connId} and will dial again`);
    this.#env.world.workerHangUp(link, link.toCoordinator.length, 'worker dropped the connection');
    this.#dropLink();
  }

  /** Stops heartbeating, reading and reporting for a while; the socket stays open. */
  hang(durationMs: number): void {
    if (this.#up) this.#hungUntilMs = Math.max(this.#hungUntilMs, this.#now + durationMs);
  }

  /**
   * A new process registers under the same id on a new connection. The old
   * connection is left half-open (the coordinator must replace the session)
   * or ends later.
   */
  reregister(): void {
    if (!this.#up || this.#link === null) return;
    const old = this.#link;
    old.owner = null;
    old.toWorker.length = 0;
    if (this.#rng.chance(0.5))
      this.#env.world.workerHangUp(old, old.toCoordinator.length, 'old process gone');
    this.#tasks.clear();
    this.#outbox = [];
    this.#hungUntilMs = 0;
    this.#draining = false;
    if (this.#rng.chance(0.3)) {
      this.#capacity = this.#pickCapacity();
      this.#prefetch = this.#pickPrefetch();
    }
    this.#connect();
  }

  /**
   * Breaks the protocol: an undecodable frame, or a second WORKER_REGISTER on
   * a registered connection. Either way the coordinator must drop this worker.
   */
  garbage(): void {
    if (this.#link === null || !this.#up || this.#hung) return;
    if (this.#registered && this.#rng.chance(0.5)) {
      this.#write({
        type: 'WORKER_REGISTER',
        workerId: this.workerId,
        capacity: Math.min(this.#capacity, MAX_CAPACITY),
        taskTypes: this.#taskTypes,
      });
    } else {
      this.#env.world.workerGarbage(this.#link, 'undecodable frame');
    }
  }

  /** A stray connection from this host whose first frame is wrong. */
  strayConnection(): void {
    const link = this.#env.world.openWorkerLink(NOBODY);
    const bad: WorkerToCoordinator = this.#rng.pick<WorkerToCoordinator>([
      { type: 'HEARTBEAT', workerId: this.workerId },
      { type: 'WORKER_REGISTER', workerId: ' ', capacity: 1, taskTypes: null },
      { type: 'WORKER_REGISTER', workerId: this.workerId, capacity: 0, taskTypes: null },
      { type: 'WORKER_REGISTER', workerId: this.workerId, capacity: 5000, taskTypes: null },
      {
        type: 'WORKER_REGISTER',
        workerId: this.workerId,
        capacity: 512,
        taskTypes: null,
        slots: 5000,
      },
      {
        type: 'WORKER_REGISTER',
        workerId: this.workerId,
        capacity: MAX_CAPACITY,
        taskTypes: null,
        slots: MAX_SLOTS + 1,
      },
      {
        type: 'WORKER_REGISTER',
        workerId: this.workerId,
        capacity: 1,
        taskTypes: null,
        prefetch: 5,
      },
    ]);
    this.#env.world.writeWorker(link, bad);
    if (this.#rng.chance(0.5))
      this.#env.world.writeWorker(link, { type: 'HEARTBEAT', workerId: this.workerId });
  }

  /** Asks for no new work; disconnects once idle. */
  drain(): void {
    if (!this.#registered || this.#draining || this.#hung) return;
    this.#draining = true;
    this.#write({ type: 'WORKER_DRAINING', workerId: this.workerId });
  }

  /** Reports on an old lease (maybe revoked long ago, maybe someone else's). */
  sendLate(ghost: GhostLease): boolean {
    if (!this.#registered || this.#hung) return false;
    this.#write(this.#resultFor(ghost.jobId, ghost.attemptId, ghost.success, 0));
    return true;
  }

  /** Quiescence: the process is healthy from now on. */
  heal(): void {
    this.#hungUntilMs = 0;
    if (!this.#up) this.#restartAtMs = this.#now;
  }

  get registered(): boolean {
    return this.#registered && this.#up;
  }

  // ---- internals -----------------------------------------------------------

  #connect(): void {
    const world = this.#env.world;
    const link = world.openWorkerLink(this);
    this.#link = link;
    this.#registered = false;
    this.#env.log(() => `  ${this.workerId} dials: connection ${link.connId}`);
    this.#features = new Set();
    const held = this.#listsHeld ? this.#held() : null;
    // A listed attempt may be cancelled on this connection.
    for (const h of held ?? []) link.leases.add(h.attemptId);
    // Half of the time the list comes in parts: the first here, the rest after WORKER_REGISTERED.
    const split = held !== null && this.#rng.chance(0.5) ? this.#rng.int(0, held.length) : null;
    this.#heldRest = split === null || held === null ? null : held.slice(split);
    const listed = split === null || held === null ? held : held.slice(0, split);
    const capacity = this.#capacity;
    // Half the connections take a turn's assignments in TASK_ASSIGNS (framing in the shell).
    link.takesBatches = this.#rng.chance(0.5);
    world.writeWorker(link, {
      type: 'WORKER_REGISTER',
      workerId: this.workerId,
      capacity: Math.min(capacity, MAX_CAPACITY),
      ...(capacity > MAX_CAPACITY ? { slots: capacity } : {}),
      taskTypes: this.#taskTypes,
      traceContext: true,
      steps: true,
      children: true,
      ...(this.#prefetch === 0 ? {} : { prefetch: this.#prefetch }),
      ...(listed === null ? {} : { heldAttempts: listed }),
      ...(this.#heldRest === null ? {} : { moreHeld: true }),
      ...(link.takesBatches ? { batches: true } : {}),
    });
  }

  /**
   * The rest of a held list in parts, right after WORKER_REGISTERED (the
   * last with `more: false`); now and then a worker never sends the end.
   */
  #sendHeldRest(): void {
    const rest = this.#heldRest;
    this.#heldRest = null;
    if (rest === null || !this.#features.has('moreHeld')) return;
    let left = rest;
    do {
      const part = left.slice(0, this.#rng.int(1, 3));
      left = left.slice(part.length);
      if (left.length === 0 && !this.#env.quiet() && this.#rng.chance(0.1)) {
        this.#env.faults.count('heldListUnfinished');
        return;
      }
      this.#write({
        type: 'HELD_ATTEMPTS',
        workerId: this.workerId,
        heldAttempts: part,
        more: left.length > 0,
      });
    } while (left.length > 0);
  }

  /** Attempts it still runs or has a result for, once each. */
  #held(): HeldAttempt[] {
    const held = new Map<string, HeldAttempt>();
    for (const task of this.#tasks.values()) held.set(task.attemptId, task);
    for (const { msg } of this.#outbox) held.set(msg.attemptId, msg);
    return [...held.values()].map(({ jobId, attemptId }) => ({ jobId, attemptId }));
  }

  /** A few slots mostly; a tenth of the workers have more than 1,024 (`slots`). */
  #pickCapacity(): number {
    return this.#rng.chance(0.1) ? this.#rng.int(MAX_CAPACITY + 1, MAX_SLOTS) : this.#rng.int(1, 4);
  }

  #pickPrefetch(): number {
    const c = this.#capacity;
    return Math.min(this.#rng.pick([0, 0, 1, c, 2 * c, 4 * c]), maxPrefetch(c));
  }

  #dropLink(): void {
    // A step waiting for its answer never gets it: the handler's call fails.
    for (const task of this.#tasks.values()) {
      if (task.steps?.waiting !== null && task.steps?.waiting !== undefined) {
        task.steps.waiting = null;
        task.steps.planLeft = 0;
        task.success = false;
        task.doneAtMs = this.#now;
      }
    }
    this.#link = null;
    this.#registered = false;
    this.#draining = false;
    this.#reconnectAtMs = this.#now + this.#rng.int(0, this.#env.heartbeatIntervalMs);
    if (!this.#keepsTasks) {
      this.#tasks.clear();
      this.#outbox = [];
    }
  }

  #write(msg: WorkerToCoordinator): void {
    if (this.#link !== null) this.#env.world.writeWorker(this.#link, msg);
  }

  #start(
    jobId: string,
    attemptId: string,
    attemptNumber: number,
    taskType: string,
    payload: JsonObject,
    assign?: TaskAssign,
  ): void {
    const quiet = this.#env.quiet();
    const timeoutMs = this.#env.taskTimeoutMs;
    let durationMs = this.#quick
      ? this.#rng.int(0, 10)
      : this.#rng.int(0, Math.min(Math.floor(timeoutMs / 2), 3_000));
    if (!quiet && this.#rng.chance(0.08)) {
      this.#env.faults.count('slowTask');
      durationMs = this.#rng.int(timeoutMs, 2 * timeoutMs);
    }
    const failUntil = taskType === 'FAIL' ? payload['failUntilAttempt'] : undefined;
    const success =
      typeof failUntil === 'number' ? attemptNumber >= failUntil : this.#rng.chance(0.9);
    const carried = assign?.steps?.length ?? 0;
    const steps: StepState | undefined =
      isStepped(jobId) && carried < MAX_SIM_STEPS
        ? { next: carried, planLeft: this.#rng.int(0, MAX_SIM_STEPS - carried), waiting: null }
        : undefined;
    this.#tasks.set(attemptId, {
      jobId,
      attemptId,
      attemptNumber,
      doneAtMs: this.#now + (steps === undefined ? durationMs : this.#rng.int(0, 300)),
      success,
      ...(steps !== undefined && { steps }),
      ordinal: 0,
      childCalls: 0,
    });
    const ghosts = this.#env.ghosts;
    ghosts.push({ jobId, attemptId, success });
    if (ghosts.length > MAX_GHOSTS) ghosts.splice(0, ghosts.length - MAX_GHOSTS);
  }

  #finishTasks(): void {
    const now = this.#now;
    for (const task of [...this.#tasks.values()]) {
      if (task.doneAtMs > now) {
        // No new children once the run drains: a handler that keeps making
        // work (children of children) would keep the quiet phase busy.
        if (!this.#env.quiet() && task.childCalls < MAX_CHILD_CALLS && this.#rng.chance(0.01)) {
          this.#enqueueChild(task);
        }
        // Progress now and then, sometimes late enough to be stale when it arrives.
        if (this.#rng.chance(0.02)) {
          const late = !this.#env.quiet() && this.#rng.chance(0.2);
          this.#outbox.push({
            msg: {
              type: 'TASK_PROGRESS',
              workerId: this.workerId,
              jobId: task.jobId,
              attemptId: task.attemptId,
              fraction: this.#rng.pick([0, 0.5, 1, 1.5]),
              message: null,
            },
            sendAtMs: late ? now + this.#rng.int(1, 2 * this.#env.taskTimeoutMs) : now,
          });
        }
        continue;
      }
      if (task.steps !== undefined && task.steps.waiting !== null) continue;
      if (task.steps !== undefined && task.steps.planLeft > 0 && this.#registered) {
        this.#nextStep(task, task.steps);
        continue;
      }
      this.#tasks.delete(task.attemptId);
      let sendAtMs = now;
      if (!this.#env.quiet() && this.#rng.chance(0.05)) {
        this.#env.faults.count('slowResult');
        sendAtMs = now + this.#rng.int(1, 2 * this.#env.taskTimeoutMs);
      }
      const msg = this.#cutOff(task)
        ? this.#requeueFor(task)
        : (this.#rateLimitedFor(task) ??
          this.#resultFor(task.jobId, task.attemptId, task.success, task.attemptNumber));
      this.#outbox.push({ msg, sendAtMs });
    }
  }

  /** The next thing a stepped attempt does: record a step, or end in a sleep or a wait. */
  #nextStep(task: Task, steps: StepState): void {
    const roll = this.#rng.int(0, 99);
    const target = this.#waitTarget(task.jobId);
    if (roll >= 30 && roll < 46 && this.#features.has('signals')) {
      // A signal or event wait: the coordinator records it; a replay finds its value.
      this.#tasks.delete(task.attemptId);
      this.#env.stepStats.suspensions++;
      const rng = this.#rng;
      const timeoutMillis = rng.chance(0.5) ? rng.int(0, 3_000) : null;
      const timeout = timeoutMillis === null ? {} : { timeoutMillis };
      this.#write({
        type: 'TASK_SUSPEND',
        workerId: this.workerId,
        jobId: task.jobId,
        attemptId: task.attemptId,
        ...(roll < 38
          ? { waitForSignal: { name: rng.pick(SIGNAL_NAMES), ...timeout } }
          : {
              waitForEvent: {
                name: rng.pick(EVENT_NAMES),
                ...(rng.chance(0.4) && { key: rng.pick(EVENT_KEYS) }),
                ...timeout,
              },
            }),
      });
      return;
    }
    if (roll < 15 || (roll < 30 && target !== null)) {
      // The attempt ends here; the coordinator records the sleep or wait itself.
      this.#tasks.delete(task.attemptId);
      this.#env.stepStats.suspensions++;
      this.#write({
        type: 'TASK_SUSPEND',
        workerId: this.workerId,
        jobId: task.jobId,
        attemptId: task.attemptId,
        ...(roll < 15 || target === null
          ? { sleepMillis: this.#rng.int(0, 2_000) }
          : { waitForJobId: target }),
      });
      return;
    }
    const requestId = this.#nextRequestId++;
    const name = `step-${steps.next}`;
    const result = JSON.stringify({ attempt: task.attemptNumber, at: steps.next });
    steps.waiting = { requestId, index: steps.next, name, result };
    task.doneAtMs = Number.POSITIVE_INFINITY;
    this.#write({
      type: 'RECORD_STEP',
      workerId: this.workerId,
      jobId: task.jobId,
      attemptId: task.attemptId,
      requestId,
      index: steps.next,
      name,
      result,
    });
  }

  /**
   * A job to wait for: one seen before whose id is smaller (waits never form
   * a cycle: the shards take their ids from one counter, so this holds
   * across them), of this shard or, half the time, of another.
   */
  #waitTarget(jobId: string): string | null {
    const elsewhere = this.#env.ghostsElsewhere;
    const pool = elsewhere !== undefined && this.#rng.chance(0.5) ? elsewhere() : this.#env.ghosts;
    const older = pool.filter((g) => g.jobId < jobId);
    return older.length === 0 ? null : this.#rng.pick(older).jobId;
  }

  #flushOutbox(): void {
    if (!this.#registered) return;
    const now = this.#now;
    const due = this.#outbox.filter((o) => o.sendAtMs <= now);
    if (due.length === 0) return;
    this.#outbox = this.#outbox.filter((o) => o.sendAtMs > now);
    const quiet = this.#env.quiet();
    if (due.length > 1 && !quiet && this.#rng.chance(0.5)) {
      this.#env.faults.count('reorderedResults');
      this.#rng.shuffle(due);
    }
    const frames = this.#features.has('batches') ? batchResults(this.workerId, due) : due;
    for (const out of frames) {
      this.#write(out.msg);
      if (!quiet && this.#rng.chance(0.05)) {
        this.#env.faults.count('duplicateResult');
        this.#write(out.msg);
      }
    }
  }

  /** The handler enqueues a child: keyed (a few keys, so attempts repeat them) or by ordinal. */
  #enqueueChild(task: Task): void {
    task.childCalls++;
    const key = this.#rng.chance(0.5)
      ? `k:${this.#rng.pick(['a', 'b', 'c'])}`
      : `o:${task.ordinal++}`;
    const late = !this.#env.quiet() && this.#rng.chance(0.1);
    const queues = this.#env.childQueues;
    const queue = queues !== undefined && this.#rng.chance(0.8) ? this.#rng.pick(queues) : null;
    this.#outbox.push({
      msg: {
        type: 'ENQUEUE_CHILD',
        workerId: this.workerId,
        jobId: task.jobId,
        attemptId: task.attemptId,
        requestId: this.#nextRequestId++,
        key,
        taskType: 'SLEEP',
        payload: { durationMillis: 1 },
        ...(this.#rng.chance(0.3) && { maxAttempts: this.#rng.int(1, 3) }),
        ...(queue !== null && { queue }),
      },
      sendAtMs: late ? this.#now + this.#rng.int(1, 2 * this.#env.taskTimeoutMs) : this.#now,
    });
  }

  /** Whether this attempt was cut off through no fault of its own (only with `requeue` offered). */
  #cutOff(task: Task): boolean {
    if (!this.#features.has('requeue')) return false;
    return cutsOffAlways(task.jobId) || (!this.#env.quiet() && this.#rng.chance(0.03));
  }

  /**
   * Now and then (with a coordinator that offers `rateLimits`, not once the
   * run drains) the handler was rate limited: for the job alone, its group,
   * or its whole queue, for up to 2 s.
   */
  #rateLimitedFor(task: Task): TaskResult | null {
    if (!this.#features.has('rateLimits') || this.#env.quiet() || !this.#rng.chance(0.06)) {
      return null;
    }
    const scope = this.#rng.weighted({ job: 3, group: 2, queue: 1 });
    const retryAfterMillis = this.#rng.int(1, 2_000);
    return {
      type: 'TASK_RESULT',
      workerId: this.workerId,
      jobId: task.jobId,
      attemptId: task.attemptId,
      success: false,
      result: null,
      error: `RATE_LIMITED: simulated 429 on attempt ${task.attemptNumber}`,
      rateLimited: { retryAfterMillis, scope },
    };
  }

  #requeueFor(task: Task): TaskResult {
    return {
      type: 'TASK_RESULT',
      workerId: this.workerId,
      jobId: task.jobId,
      attemptId: task.attemptId,
      success: false,
      result: null,
      error: `simulated: the thread of attempt ${task.attemptNumber} was ended for another attempt`,
      requeue: true,
    };
  }

  #resultFor(
    jobId: string,
    attemptId: string,
    success: boolean,
    attemptNumber: number,
  ): TaskResult {
    return {
      type: 'TASK_RESULT',
      workerId: this.workerId,
      jobId,
      attemptId,
      success,
      result: success ? `ok ${attemptId}` : null,
      error: success ? null : `simulated failure on attempt ${attemptNumber}`,
    };
  }
}
