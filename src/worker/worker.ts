/**
 * The worker: a session with the coordinator (worker-session.ts: dial,
 * register, heartbeat, reconnect forever) and the attempts it assigns, one
 * {@link Attempt} each, run in a {@link TaskPool} off the main thread — the
 * attempts of shared tasks many to a thread, those of isolated tasks one to
 * a thread.
 *
 * `drain(timeoutMs)` is the graceful way out: it takes no new task (a
 * TASK_ASSIGN that still arrives is answered with a failed TASK_RESULT
 * "worker is shutting down"), stops reconnecting, lets running tasks finish
 * for up to `timeoutMs`, reports them, then closes; whatever is still running
 * then is abandoned. A coordinator that offers `drain` is told first
 * (WORKER_DRAINING), so it assigns nothing more and retries abandoned
 * attempts at once; a v1 coordinator is not sent the extension.
 *
 * Negotiation: the worker uses an extension only when the coordinator listed
 * it in `WORKER_REGISTERED.features` (absent = a v1 coordinator):
 * WORKER_DRAINING needs `drain`, `TASK_RESULT.retryable: false` needs
 * `retryable`, `TASK_RESULT.requeue` needs `requeue`, `TASK_RESULT.rateLimited`
 * needs `rateLimits`, a capacity above 1,024
 * needs `slots` (without it the worker uses 1,024 slots), and deadlines from
 * `TASK_ASSIGN.timeoutMillis` need `assignLimits`. `resultFormat` is an
 * optional field any peer may ignore.
 *
 * Deadlines and cancels preempt (see TaskPool): the handler's signal fires,
 * and a handler that ignores it loses its thread after `cancelGraceMs`. A
 * stopped attempt is never reported: the coordinator has revoked its lease
 * (cancel) or does so at the same deadline, measured from assignment.
 *
 * Calls (worker-calls.ts): a handler's call goes out with a `requestId`
 * (ENQUEUE_CHILD, the steps' calls, only to a coordinator that offers their
 * feature); its answer, a reply or an ERROR carrying that `requestId`,
 * settles that call only.
 *
 * Tasks of a lost connection are orphans. They keep running, and the next
 * WORKER_REGISTER lists them (`heldAttempts`, with the ones that finished and
 * were not reported yet). A coordinator that offers `reattach` gives the
 * ones whose lease is still current (the connection died only because the
 * coordinator was frozen or restarted, or it had not noticed yet) to the
 * new session and cancels the others with TASK_CANCEL; so they run on.
 * Against any other coordinator the orphans still running when the worker
 * registers again are abandoned, so the new session starts with every slot
 * free. Either way an orphan that finished before the new session has its
 * result reported once that session starts: counted if its lease is still
 * current, otherwise logged and rejected by the coordinator as stale — so a
 * worker that was frozen (SIGSTOP, a long pause) leaves a trace instead of
 * silently dropping finished work.
 */
import { EventEmitter } from 'node:events';
import type { FramedConnection } from '../net/framed-connection.js';
import type { Logger } from '../observability/logger.js';
import { loadOtel } from '../observability/tracing.js';
import { DtpError, describeError } from '../protocol/errors.js';
import { ErrorCode, LocalErrorCode, ProtocolErrorCode } from '../protocol/error-codes.js';
import { decodeValue } from '../protocol/codec.js';
import { CALL_FEATURES, type Feature } from '../protocol/features.js';
import { MAX_CAPACITY } from '../protocol/limits.js';
import {
  isWorkerCall,
  type HeldAttempt,
  type JsonObject,
  type TaskAssign,
  type TaskCancel,
  type TaskResult,
  type WorkerRegister,
} from '../protocol/messages.js';
import { BUILTIN_TASK_TYPES } from '../protocol/task-types.js';
import { Attempt, type AttemptHost } from './attempt.js';
import { TASK_MEMORY_MB } from './memory-budget.js';
import {
  DEFAULT_CANCEL_GRACE_MS,
  DEFAULT_PREFETCH_PER_SLOT,
  MIN_DEFAULT_COORDINATOR_TIMEOUT_MS,
  defaultPrefetch,
  validateWorkerOptions,
  type WorkerOptions,
} from './options.js';
import { heldParts, splitHeld } from './held-list.js';
import { sendOutcome, type ResultIds } from './results.js';
import { NO_TASK_MODULES, type LoadedTaskModules } from './task-modules.js';
import { TaskPool, defaultThreads, type StopOutcome, type TaskOutcome } from './task-pool.js';
import type { AbortReason, CallOutcome } from './thread-messages.js';
import { WorkerCalls } from './worker-calls.js';
import { WorkerSession, type WorkerMode } from './worker-session.js';

export type { WorkerOptions } from './options.js';
export type { WorkerMode } from './worker-session.js';
export { DEFAULT_PREFETCH_PER_SLOT, MIN_DEFAULT_COORDINATOR_TIMEOUT_MS, validateWorkerOptions };

/** What {@link Worker.events} emits; tests wait on these instead of sleeping. */
export interface WorkerEvents {
  connected: [];
  registered: [];
  disconnected: [reason: string];
  assigned: [jobId: string, attemptId: string];
  /** The task's payload was valid and its code began running in a thread. */
  started: [jobId: string, attemptId: string];
  /** A TASK_CANCEL matched a running task, which has now stopped (its slot is free). */
  cancelled: [jobId: string, attemptId: string];
  /** A task was preempted (cancel or deadline) and its thread is free or gone. */
  stopped: [jobId: string, attemptId: string, reason: AbortReason, how: StopOutcome];
  /** A task was dropped because its connection ended. */
  abandoned: [jobId: string, attemptId: string];
  /** A TASK_RESULT was queued on the connection. */
  result: [message: TaskResult];
  /**
   * The coordinator refused this worker (id taken over, token or certificate
   * refused, TLS required): the worker closes and does not reconnect.
   */
  refused: [error: DtpError];
}

/** An orphan's outcome that no session could take when it ended. */
interface LateResult extends ResultIds {
  readonly outcome: TaskOutcome;
}

export class Worker {
  readonly workerId: string;
  /** Attempts it runs at once (with a coordinator that offers `slots` above 1,024). */
  readonly capacity: number;
  /** Attempts it takes beyond `capacity`, queued until a slot is free. */
  readonly prefetch: number;
  /** Shared task threads. */
  readonly threads: number;
  readonly events = new EventEmitter<WorkerEvents>();
  readonly #options: WorkerOptions;
  readonly #log: Logger;
  readonly #tasksLoaded: LoadedTaskModules;
  readonly #pool: TaskPool;
  readonly #session: WorkerSession;
  /** Running attempts by attemptId (the lease), orphans included. */
  readonly #attempts = new Map<string, Attempt>();
  /** Calls of running attempts sent to the coordinator and not answered yet. */
  readonly #calls = new WorkerCalls();
  /** Outcomes of orphans that finished while no session was registered. */
  #lateResults: LateResult[] = [];
  /** Held attempts the registration had no room for: sent in HELD_ATTEMPTS once registered. */
  #heldToSend: HeldAttempt[] | null = null;
  /** The named queues it takes from; null = every queue. */
  readonly #queues: readonly string[] | null;
  #closing: Promise<void> | null = null;
  #draining: Promise<void> | null = null;
  /** Told when no task is left (drain waits on this). */
  #idleWaiters: (() => void)[] = [];
  /** The OpenTelemetry API when this process registered a tracer provider (or the like); else null. */
  #otel: Awaited<ReturnType<typeof loadOtel>> = null;
  readonly #attemptHost: AttemptHost;

  private constructor(options: WorkerOptions) {
    this.workerId = options.workerId;
    this.capacity = options.capacity;
    this.prefetch = options.prefetch ?? defaultPrefetch(options.capacity);
    this.threads = options.threads ?? defaultThreads();
    this.#queues =
      options.queues === undefined || options.queues === null ? null : [...options.queues];
    this.#options = options;
    this.#log = options.logger.child({ workerId: options.workerId });
    this.#tasksLoaded = options.tasks ?? NO_TASK_MODULES;
    this.#pool = new TaskPool({
      capacity: options.capacity,
      threads: this.threads,
      modules: this.#tasksLoaded.modules.map(({ specifier, url }) => ({ specifier, url })),
      cancelGraceMs: options.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS,
      queueLimit: this.prefetch,
      taskMemoryMb: options.taskMemoryMb ?? TASK_MEMORY_MB.default,
      ...(this.#tasksLoaded.local === undefined ? {} : { local: this.#tasksLoaded.local }),
      onBlocked: ({ thread, blockedMs, jobIds }) => {
        const fields = { thread, blockedMs, jobIds: jobIds.slice(0, 20), attempts: jobIds.length };
        this.#log.warn(
          fields,
          thread === 'main'
            ? "this process's event loop was held (heartbeats were late): a handler given in code computes without yielding; move it to a task module"
            : 'a task thread is blocked: a handler holds its event loop (no new attempt goes there)',
        );
      },
    });
    this.#session = new WorkerSession(options, this.#log, {
      registration: () => this.#registration(),
      onConnected: () => this.events.emit('connected'),
      onRegistered: (connection, features) => this.#onRegistered(connection, features),
      onAssign: (connection, msg) => this.#onAssign(connection, msg),
      onCancel: (msg) => this.#onCancel(msg),
      onCallAnswer: (connection, requestId, outcome) =>
        this.#calls.settle(connection, requestId, outcome),
      onDisconnected: (connection, reason) => this.#onDisconnected(connection, reason),
      onRefused: (err) => {
        this.events.emit('refused', err);
        void this.close();
      },
    });
    this.#attemptHost = this.#makeAttemptHost();
  }

  /** Validates the options and starts connecting in the background. */
  static start(options: WorkerOptions): Worker {
    validateWorkerOptions(options);
    const worker = new Worker(options);
    // OpenTelemetry only if this process set it up (tracing.ts); looked up once.
    worker.#session.start(async () => {
      worker.#otel = await loadOtel();
    });
    return worker;
  }

  get mode(): WorkerMode {
    return this.#session.mode;
  }

  /** True while a connection is open (registered or not yet). */
  get connected(): boolean {
    return this.mode === 'registering' || this.mode === 'registered';
  }

  get registered(): boolean {
    return this.#session.registered;
  }

  /** The task types this worker declares: the built-ins, then its modules' tasks. */
  get taskTypes(): readonly string[] {
    return this.#tasksLoaded.taskTypes;
  }

  /** The extensions the current coordinator offers (empty when none or not registered). */
  get features(): ReadonlySet<Feature> {
    return this.#session.features;
  }

  /** Tasks running now, orphans included (cancelled and abandoned ones excluded). */
  get runningCount(): number {
    return this.#attempts.size;
  }

  /** Task threads that exist now (shared and isolated, ending ones included). */
  get threadCount(): number {
    return this.#pool.threadCount;
  }

  /**
   * Graceful shutdown: announces WORKER_DRAINING, takes no new connection,
   * waits up to `timeoutMs` for running tasks to finish and report, then
   * closes (abandoning what is left). Idempotent; always the same promise.
   */
  drain(timeoutMs: number): Promise<void> {
    this.#draining ??= this.#drainThenClose(timeoutMs);
    return this.#draining;
  }

  async #drainThenClose(timeoutMs: number): Promise<void> {
    const running = this.#attempts.size;
    const connection = this.#session.connection;
    if (this.registered && this.features.has('drain')) {
      connection?.send({ type: 'WORKER_DRAINING', workerId: this.workerId });
    } else if (this.registered) {
      // A v1 coordinator drops a worker that sends WORKER_DRAINING.
      this.#log.info(
        'coordinator does not offer drain: refusing new tasks instead of announcing it',
      );
    }
    this.#log.info({ runningTasks: running, timeoutMs }, 'draining: no new tasks');
    this.#session.stopDialling();
    const drained = await this.#whenIdle(timeoutMs);
    if (drained) this.#log.info('drained: every task finished');
    else {
      this.#log.warn({ leftTasks: this.#attempts.size }, 'drain timed out; releasing what is left');
    }
    await this.close();
  }

  /** Resolves true once no task runs (or none could report), false after `timeoutMs`. */
  #whenIdle(timeoutMs: number): Promise<boolean> {
    if (this.#attempts.size === 0 || this.#session.connection === null) {
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.#idleWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  #notifyIfIdle(): void {
    if (this.#attempts.size > 0 && this.#session.connection !== null) return;
    for (const waiter of this.#idleWaiters.splice(0)) waiter();
  }

  /**
   * Stops everything: no more dials, heartbeats or results; running tasks are
   * abandoned and their threads terminated; the connection is closed.
   * Idempotent; always the same promise.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const session = this.#session.close();
      this.#abandonAttempts();
      await Promise.all([session, this.#pool.close()]);
      this.#log.info('worker closed');
    })();
    return this.#closing;
  }

  /** What WORKER_REGISTER says of this worker (held attempts change from one to the next). */
  #registration(): Omit<WorkerRegister, 'type' | 'workerId'> {
    const fields = this.#registrationFields();
    const { listed, rest } = splitHeld(
      { type: 'WORKER_REGISTER', workerId: this.workerId, ...fields },
      this.#heldAttempts(),
    );
    this.#heldToSend = rest.length > 0 ? rest : null;
    return { ...fields, heldAttempts: listed, ...(rest.length > 0 ? { moreHeld: true } : {}) };
  }

  #registrationFields(): Omit<WorkerRegister, 'type' | 'workerId' | 'heldAttempts'> {
    const authToken = this.#options.authToken ?? null;
    const { capacity, prefetch } = this;
    return {
      // Above 1,024 only through `slots` (a v1 coordinator refuses more).
      capacity: Math.min(capacity, MAX_CAPACITY),
      ...(capacity > MAX_CAPACITY ? { slots: capacity } : {}),
      taskTypes: [...this.#tasksLoaded.taskTypes],
      heartbeatAck: true,
      parents: true,
      traceContext: true,
      steps: true,
      children: true,
      batches: true,
      ...(prefetch === 0 ? {} : { prefetch }),
      ...(authToken === null ? {} : { authToken }),
      ...(this.#queues === null ? {} : { queues: [...this.#queues] }),
    };
  }

  /** Orphans still running or queued, and finished ones not reported yet. */
  #heldAttempts(): HeldAttempt[] {
    const held = [...this.#attempts.values(), ...this.#lateResults];
    return held.map(({ jobId, attemptId }) => ({ jobId, attemptId }));
  }

  #onRegistered(connection: FramedConnection, features: ReadonlySet<Feature>): void {
    const shown = features.size === 0 ? 'none (v1 coordinator)' : [...features].join(',');
    const customTypes = this.#tasksLoaded.taskTypes.length - BUILTIN_TASK_TYPES.length;
    this.#log.info(
      {
        capacity: this.capacity,
        threads: this.threads,
        features: shown,
        customTaskTypes: customTypes,
      },
      'registered',
    );
    if (this.capacity > MAX_CAPACITY && !features.has('slots')) {
      this.#log.warn(
        { capacity: this.capacity, slots: MAX_CAPACITY },
        `this coordinator does not offer slots: it hands this worker at most ${MAX_CAPACITY} attempts`,
      );
    }
    this.#sendRestOfHeld(connection, features);
    if (features.has('reattach')) this.#adoptOrphans(connection);
    else this.#abandonAttempts(true);
    this.#reportLateResults(connection);
    this.events.emit('registered');
  }

  /**
   * The held attempts the registration had no room for: in HELD_ATTEMPTS
   * parts to a coordinator that offers `moreHeld`; to any other, revoked at
   * the registration (it saw them not listed), so they are let go unreported.
   */
  #sendRestOfHeld(connection: FramedConnection, features: ReadonlySet<Feature>): void {
    const rest = this.#heldToSend;
    this.#heldToSend = null;
    if (rest === null) return;
    if (features.has('moreHeld')) {
      const parts = heldParts(rest);
      parts.forEach((heldAttempts, i) =>
        connection.send({
          type: 'HELD_ATTEMPTS',
          workerId: this.workerId,
          heldAttempts,
          more: i < parts.length - 1,
        }),
      );
      this.#log.info({ held: rest.length, parts: parts.length }, 'held attempts listed in parts');
      return;
    }
    const unlisted = new Set(rest.map((held) => held.attemptId));
    this.#lateResults = this.#lateResults.filter((late) => !unlisted.has(late.attemptId));
    for (const attempt of [...this.#attempts.values()]) {
      if (!unlisted.has(attempt.attemptId)) continue;
      this.#forget(attempt);
      attempt.abandon();
      this.events.emit('abandoned', attempt.jobId, attempt.attemptId);
    }
    this.#log.warn(
      { unlisted: rest.length },
      'this coordinator takes no held attempts beyond the registration: the unlisted ones are let go',
    );
  }

  /**
   * The coordinator takes back the orphans whose lease is still current and
   * cancels the others: every orphan now belongs to this session.
   */
  #adoptOrphans(connection: FramedConnection): void {
    let adopted = 0;
    for (const attempt of this.#attempts.values()) {
      if (attempt.connection === connection) continue;
      attempt.connection = connection;
      adopted++;
    }
    if (adopted > 0) {
      this.#log.info({ tasks: adopted }, 'running tasks carried over to the new session');
    }
  }

  #reportLateResults(connection: FramedConnection): void {
    const late = this.#lateResults;
    this.#lateResults = [];
    for (const { jobId, attemptId, outcome } of late) {
      const hope = this.features.has('reattach')
        ? 'counted if its lease is still current'
        : 'its lease is probably revoked';
      this.#log.info({ jobId, attemptId }, `late result reported (${hope})`);
      this.#report(connection, { jobId, attemptId }, outcome);
    }
  }

  #onDisconnected(connection: FramedConnection, reason: string): void {
    this.#calls.connectionLost(connection, reason);
    if (this.#session.closed) {
      this.#abandonAttempts();
      return;
    }
    this.#log.warn({ reason, orphanedTasks: this.#attempts.size }, 'connection lost');
    if (this.#draining === null) {
      this.#log.info({ delayMs: this.#options.reconnectDelayMs }, 'reconnecting');
    }
    this.events.emit('disconnected', reason);
    this.#notifyIfIdle(); // a draining worker has nobody left to report to
  }

  /** Lets every running attempt (or only the orphans) go without ever reporting it. */
  #abandonAttempts(onlyOrphans = false): void {
    const current = this.#session.connection;
    const attempts = [...this.#attempts.values()].filter(
      (attempt) => !onlyOrphans || attempt.connection !== current,
    );
    this.#lateResults = onlyOrphans ? this.#lateResults : [];
    for (const attempt of attempts) {
      this.#forget(attempt);
      attempt.abandon();
      const { jobId, attemptId } = attempt;
      this.#log.info({ jobId, attemptId }, 'task abandoned');
      this.events.emit('abandoned', jobId, attemptId);
    }
    this.#notifyIfIdle();
  }

  #onAssign(connection: FramedConnection, msg: TaskAssign): void {
    const { jobId, attemptId } = msg;
    this.events.emit('assigned', jobId, attemptId);
    if (this.#attempts.has(attemptId)) {
      this.#log.warn({ jobId, attemptId }, 'duplicate assignment ignored');
      return;
    }
    const refusal =
      this.#draining !== null
        ? 'worker is shutting down'
        : this.#attempts.size >= this.#window()
          ? 'worker at capacity'
          : null;
    if (refusal !== null) {
      this.#log.warn({ jobId, attemptId, capacity: this.capacity }, `task refused: ${refusal}`);
      const outcome = {
        success: false,
        error: refusal,
        cancelled: false,
        retryable: true,
      } as const;
      this.#report(connection, { jobId, attemptId }, outcome);
      return;
    }
    const attempt = new Attempt(this.#attemptHost, this.#pool, connection, msg, {
      otel: this.#otel,
      isolated: this.#tasksLoaded.isolated.has(msg.taskType),
      local: this.#tasksLoaded.local?.has(msg.taskType) === true,
    });
    this.#attempts.set(attemptId, attempt);
  }

  /** Attempts this session may hold: its slots, plus the queue if the coordinator offered it. */
  #window(): number {
    const slots =
      this.capacity > MAX_CAPACITY && !this.features.has('slots') ? MAX_CAPACITY : this.capacity;
    return slots + (this.features.has('prefetch') ? this.prefetch : 0);
  }

  /** Takes an attempt out of the running set for good. */
  #forget(attempt: Attempt): void {
    if (this.#attempts.get(attempt.attemptId) === attempt) this.#attempts.delete(attempt.attemptId);
    this.#calls.forgetAttempt(attempt.attemptId);
  }

  #makeAttemptHost(): AttemptHost {
    return {
      workerId: this.workerId,
      log: this.#log,
      features: () => this.features,
      connection: () => this.#session.connection,
      onCall: (attempt, callId, call) => this.#onCall(attempt, callId, call),
      onStarted: (attempt) => {
        const { jobId, attemptId, attemptNumber, taskType, timeoutMs } = attempt;
        // Logged once the task's code runs in its thread (not merely queued).
        this.#log.info({ jobId, attemptId, attemptNumber, taskType, timeoutMs }, 'task started');
        this.events.emit('started', jobId, attemptId);
      },
      onEnded: (attempt, outcome) => this.#onEnded(attempt, outcome),
      onDeadline: (attempt) => this.#stop(attempt, 'deadline'),
      onStopped: (attempt, reason, how) => {
        const { jobId, attemptId } = attempt;
        const stopMs = Math.round(performance.now() - attempt.stoppedAtMs);
        const what =
          how === 'cooperative'
            ? 'the handler stopped'
            : how === 'terminated'
              ? 'its thread was terminated'
              : 'its handler ignored the stop and runs on, unreported (a handler given in code cannot be ended)';
        this.#log.info({ jobId, attemptId, reason, stopMs }, `task stopped: ${what}`);
        this.events.emit('stopped', jobId, attemptId, reason, how);
        if (reason === 'cancel') this.events.emit('cancelled', jobId, attemptId);
      },
    };
  }

  #onEnded(attempt: Attempt, outcome: TaskOutcome): void {
    this.#forget(attempt);
    if (!outcome.success && outcome.cancelled) {
      this.#notifyIfIdle();
      return;
    }
    const { jobId, attemptId } = attempt;
    const durationMs = Math.round(performance.now() - attempt.startedAtMs);
    if (!outcome.success && outcome.suspend !== undefined) {
      this.#log.info({ jobId, attemptId, durationMs, ...outcome.suspend }, 'task suspended');
    } else {
      const error = outcome.success ? undefined : outcome.error;
      const requeue = !outcome.success && outcome.requeue === true ? true : undefined;
      this.#log.info(
        { jobId, attemptId, success: outcome.success, durationMs, error, requeue },
        'task finished',
      );
    }
    if (attempt.connection === this.#session.connection) {
      this.#report(attempt.connection, attempt, outcome);
    } else {
      // An orphan: its connection is gone and no new session exists yet.
      this.#lateResults.push({ jobId, attemptId, outcome });
    }
    this.#notifyIfIdle();
  }

  #report(connection: FramedConnection, ids: ResultIds, outcome: TaskOutcome): void {
    const sent = sendOutcome(connection, this.workerId, ids, outcome, this.features);
    if (sent !== null) this.events.emit('result', sent);
  }

  #onCancel(msg: TaskCancel): void {
    const { jobId, attemptId } = msg;
    this.#log.info({ jobId, attemptId }, 'cancel received');
    const attempt = this.#attempts.get(attemptId);
    if (attempt === undefined || attempt.jobId !== jobId) {
      this.#log.info({ jobId, attemptId }, 'cancel ignored: no such running task');
      return;
    }
    this.#stop(attempt, 'cancel');
  }

  #stop(attempt: Attempt, reason: AbortReason): void {
    this.#forget(attempt);
    attempt.stop(reason);
    this.#notifyIfIdle();
  }

  /**
   * A call of a running attempt's handler (the message without its ids): sent
   * with the attempt's ids and a fresh requestId, if the coordinator offers
   * what it needs and the attempt's session is the current one.
   */
  #onCall(attempt: Attempt, callId: number, call: JsonObject): void {
    if (this.#attempts.get(attempt.attemptId) !== attempt) return; // stopped: its thread failed the call
    const answer = (outcome: CallOutcome): void => attempt.answerCall(callId, outcome);
    const type = typeof call.type === 'string' ? call.type : JSON.stringify(call.type);
    const feature = Object.prototype.hasOwnProperty.call(CALL_FEATURES, type)
      ? CALL_FEATURES[type as keyof typeof CALL_FEATURES]
      : null;
    if (feature === null) {
      return answer({
        ok: false,
        code: ErrorCode.InvalidRequest,
        message: `no such call: ${type}`,
      });
    }
    if (!this.features.has(feature)) {
      const message = `the coordinator does not offer ${feature} (${type} needs it)`;
      return answer({ ok: false, code: LocalErrorCode.UnsupportedFeature, message });
    }
    const connection = attempt.connection;
    if (connection !== this.#session.connection || !this.registered) {
      const message = 'no connection to the coordinator now';
      return answer({ ok: false, code: LocalErrorCode.ConnectionLost, message });
    }
    const requestId = this.#calls.open(connection, attempt.attemptId, answer);
    if (requestId === null) return;
    const { workerId } = this;
    const ids = { workerId, jobId: attempt.jobId, attemptId: attempt.attemptId, requestId };
    try {
      const msg = decodeValue({ ...call, ...ids });
      if (!isWorkerCall(msg)) throw new Error(`${msg.type} is not a call`);
      if (!connection.send(msg)) {
        const message = 'the connection to the coordinator is closing';
        this.#calls.fail(requestId, { ok: false, code: LocalErrorCode.ConnectionLost, message });
      }
    } catch (err) {
      // Too large for a frame, or a field the message does not allow.
      const code = err instanceof DtpError && err.code === ProtocolErrorCode.FrameEncode;
      this.#calls.fail(requestId, {
        ok: false,
        code: code ? LocalErrorCode.PayloadTooLarge : ErrorCode.InvalidRequest,
        message: `${type} could not be sent: ${describeError(err)}`,
      });
    }
  }
}
