/**
 * The worker: keeps one connection to the coordinator (re-established
 * forever), heartbeats on it, and runs the task attempts it is assigned in a
 * {@link TaskPool}, off the main thread.
 *
 * Modes (one field, changed only through `#setMode`, which asserts the move):
 *   disconnected  no connection; waiting to dial (at start, between attempts)
 *   connecting    dialling the coordinator
 *   registering   connected, WORKER_REGISTER sent, WORKER_REGISTERED awaited
 *   registered    heartbeating; TASK_ASSIGN and TASK_CANCEL accepted
 *   closed        close() was called; final
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
 * `retryable`, and deadlines from `TASK_ASSIGN.timeoutMillis` need
 * `assignLimits`. `resultFormat` is an optional field any peer may ignore.
 *
 * Deadlines and cancels preempt (see TaskPool): the handler's signal fires,
 * and a handler that ignores it loses its thread after `cancelGraceMs`. A
 * stopped attempt is never reported: the coordinator has revoked its lease
 * (cancel) or does so at the same deadline, measured from assignment.
 *
 * Messages: sends WORKER_REGISTER, HEARTBEAT, TASK_RESULT, WORKER_DRAINING,
 * TASK_SUSPEND (a handler slept or waits, feature `steps`);
 * receives WORKER_REGISTERED, TASK_ASSIGN, TASK_CANCEL, ERROR, HEARTBEAT_ACK.
 * Calls (worker-calls.ts): a handler's call goes out with a `requestId`
 * (ENQUEUE_CHILD, only to a coordinator that offers its feature); its
 * answer, a reply or an ERROR carrying that `requestId`, settles that call
 * only: such an ERROR does not end the session.
 * An ERROR, any other message, or a protocol violation drops the connection,
 * and the worker dials again after `reconnectDelayMs` — except a refusal:
 * `ERROR` WORKER_REPLACED (another live registration took this id over),
 * UNAUTHENTICATED (token or client certificate refused) or TLS_REQUIRED, and
 * a TLS handshake that failed on a certificate, and a registration answered
 * the way a client port answers it (WRONG_PORT, see port-kind.ts). Those are
 * configuration problems no retry fixes: the worker emits `refused` and
 * closes ("reconnect forever" is for lost connections, not for refusals).
 *
 * Liveness of the coordinator: WORKER_REGISTER asks for `heartbeatAck`; when
 * the coordinator confirms it in `features`, a coordinator silent for
 * `coordinatorTimeoutMs` (frozen, or cut off by a partition) is treated as a
 * lost connection: dropped and redialled, its tasks orphaned.
 *
 * With several coordinators (`coordinatorHost` = `h1[:p1],h2[:p2],…`, one of
 * which leads) the worker walks them with a {@link LeaderFollower}: a standby
 * answers the registration with NOT_LEADER and, when it knows, the leader's
 * address, which is dialled next at once; a failed dial moves on to the next
 * address; it pauses `reconnectDelayMs` only after a whole round failed or a
 * registered session ended. A worker re-registers with whichever leads.
 *
 * Tasks of a lost connection are orphans. They keep running, and the next
 * WORKER_REGISTER lists them (`heldAttempts`, with the ones that finished and
 * were not reported yet). A coordinator that offers `reattach` gives the
 * ones whose lease is still current (the connection died only because the
 * coordinator was frozen, or it had not noticed yet) to the new session and
 * cancels the others with TASK_CANCEL; so they run on. Against any other
 * coordinator the orphans still running when the worker registers again are
 * abandoned (their threads terminated), so the new session starts with every
 * slot free. Either way an orphan that finished before the new session has
 * its result reported once that session starts: counted if its lease is
 * still current, otherwise logged and rejected by the coordinator as stale —
 * so a worker that was frozen (SIGSTOP, a long pause) leaves a trace instead
 * of silently dropping finished work.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { FramedConnection, describeCloseReason } from '../net/framed-connection.js';
import { parseAddressList, type HostPort } from '../net/address.js';
import { LeaderFollower, type TryOutcome } from '../net/leader-follower.js';
import {
  WRONG_PORT_CODE,
  isClientPortAnswer,
  workerOnClientPortMessage,
} from '../net/port-kind.js';
import { DialError, dial } from '../net/tcp.js';
import type { Logger } from '../observability/logger.js';
import { loadOtel, startAttemptSpan, type AttemptSpan } from '../observability/tracing.js';
import { DtpError, describeError } from '../protocol/errors.js';
import { ErrorCode, LocalErrorCode, ProtocolErrorCode } from '../protocol/error-codes.js';
import { decodeValue, messageToJson } from '../protocol/codec.js';
import {
  isCallReply,
  isCoordinatorToWorker,
  isWorkerCall,
  type CallReply,
  type ErrorMessage,
  type JsonObject,
  type HeldAttempt,
  type Message,
  type TaskAssign,
  type TaskCancel,
  type TaskResult,
  type WorkerRegistered,
} from '../protocol/messages.js';
import { ProgressThrottle } from './progress-throttle.js';
import { CALL_FEATURES, parseFeatures, type Feature } from '../protocol/features.js';
import { clipError, MAX_CAPACITY, PROGRESS_MESSAGES_PER_SECOND } from '../protocol/limits.js';
import { DEFAULT_QUEUE } from '../protocol/queue-names.js';
import { traceContextOf } from '../protocol/trace-context.js';
import { BUILTIN_TASK_TYPES } from '../protocol/task-types.js';
import { MAX_TIMER_MS } from '../common/bounds.js';
import { CoordinatorWatchdog } from './coordinator-watchdog.js';
import { Heartbeat } from './heartbeat.js';
import { TASK_MEMORY_MB } from './memory-budget.js';
import {
  DEFAULT_CANCEL_GRACE_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_PREFETCH_PER_SLOT,
  defaultPrefetch,
  MIN_DEFAULT_COORDINATOR_TIMEOUT_MS,
  validateWorkerOptions,
  type WorkerOptions,
} from './options.js';
import { NO_TASK_MODULES, type LoadedTaskModules } from './task-modules.js';
import { TaskPool, type StopOutcome, type TaskHandle, type TaskOutcome } from './task-pool.js';
import type { AbortReason, CallOutcome } from './thread-messages.js';
import { WorkerCalls } from './worker-calls.js';

export type { WorkerOptions } from './options.js';
export { DEFAULT_PREFETCH_PER_SLOT, MIN_DEFAULT_COORDINATOR_TIMEOUT_MS, validateWorkerOptions };

/** ERROR codes that stop the worker instead of a reconnect. */
const REFUSAL_CODES = [
  ErrorCode.WorkerReplaced,
  ErrorCode.Unauthenticated,
  ErrorCode.TlsRequired,
] as const;
type RefusalCode = (typeof REFUSAL_CODES)[number];

function isRefusal(code: string | null | undefined): code is RefusalCode {
  return REFUSAL_CODES.some((refusal) => refusal === code);
}

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

export type WorkerMode = 'disconnected' | 'connecting' | 'registering' | 'registered' | 'closed';

const TRANSITIONS: { readonly [M in WorkerMode]: readonly WorkerMode[] } = {
  disconnected: ['connecting', 'closed'],
  connecting: ['registering', 'disconnected', 'closed'],
  registering: ['registered', 'disconnected', 'closed'],
  registered: ['disconnected', 'closed'],
  closed: [],
};

interface RunningTask {
  readonly jobId: string;
  readonly attemptId: string;
  readonly handle: TaskHandle;
  readonly startedAtMs: number;
  /**
   * The session's connection: the one that assigned it, or the one of a later
   * session that took it back (`reattach`). The result goes back only there.
   */
  connection: FramedConnection;
  /** Fires at the attempt's deadline (when the coordinator told it); cleared when the task leaves. */
  deadlineTimer: NodeJS.Timeout | null;
  /** Its progress on the way out; null when the coordinator did not offer `progress`. */
  readonly progress: ProgressThrottle | null; /** Its `dtp.attempt` span; null without OpenTelemetry. */
  readonly span: AttemptSpan | null;
}

export class Worker {
  readonly workerId: string;
  readonly capacity: number;
  /** Attempts it takes beyond `capacity`, queued until a slot is free. */
  readonly prefetch: number;
  readonly events = new EventEmitter<WorkerEvents>();
  readonly #options: WorkerOptions;
  readonly #log: Logger;
  readonly #tasksLoaded: LoadedTaskModules;
  readonly #pool: TaskPool;
  readonly #heartbeat: Heartbeat;
  readonly #watchdog: CoordinatorWatchdog;
  /** Aborted by close(): cancels a dial or a reconnect wait in progress. */
  readonly #abort = new AbortController();
  /** Running tasks by attemptId (the lease), orphans included. */
  readonly #tasks = new Map<string, RunningTask>();
  /** Calls of running attempts sent to the coordinator and not answered yet. */
  readonly #calls = new WorkerCalls();
  /** Outcomes of orphans that finished while no session was registered. */
  #lateResults: { jobId: string; attemptId: string; outcome: TaskOutcome }[] = [];
  #mode: WorkerMode = 'disconnected';
  #connection: FramedConnection | null = null;
  /** What the coordinator of the current session offers (empty: v1, or none yet). */
  #features: ReadonlySet<Feature> = new Set();
  /** The named queues it takes from; null = every queue. */
  readonly #queues: readonly string[] | null;
  /** The last dial failed; further failures are logged at debug level only. */
  #unreachable = false;
  /** The coordinators to try, and which one leads as far as we know. */
  readonly #follower: LeaderFollower;
  /** The current connection was answered NOT_LEADER, naming this leader (or null). */
  #notLeader: { leader: string | null } | null = null;
  #loop: Promise<void> = Promise.resolve();
  #closing: Promise<void> | null = null;
  #draining: Promise<void> | null = null;
  /** Told when no task is left (drain waits on this). */
  #idleWaiters: (() => void)[] = [];
  /** The OpenTelemetry API when this process registered a tracer provider (or the like); else null. */
  #otel: Awaited<ReturnType<typeof loadOtel>> = null;

  private constructor(options: WorkerOptions) {
    this.workerId = options.workerId;
    this.capacity = options.capacity;
    this.prefetch = options.prefetch ?? defaultPrefetch(options.capacity);
    this.#queues =
      options.queues === undefined || options.queues === null ? null : [...options.queues];
    this.#options = options;
    this.#log = options.logger.child({ workerId: options.workerId });
    this.#tasksLoaded = options.tasks ?? NO_TASK_MODULES;
    this.#pool = new TaskPool({
      capacity: options.capacity,
      modules: this.#tasksLoaded.modules.map(({ specifier, url }) => ({ specifier, url })),
      cancelGraceMs: options.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS,
      queueLimit: this.prefetch,
      taskMemoryMb: options.taskMemoryMb ?? TASK_MEMORY_MB.default,
    });
    this.#heartbeat = new Heartbeat(options.heartbeatIntervalMs, () => this.#sendHeartbeat());
    const silenceMs =
      options.coordinatorTimeoutMs ??
      Math.max(3 * options.heartbeatIntervalMs, MIN_DEFAULT_COORDINATOR_TIMEOUT_MS);
    this.#watchdog = new CoordinatorWatchdog(silenceMs, (silentMs) => {
      const connection = this.#connection;
      if (connection !== null) {
        this.#drop(connection, `coordinator silent for ${silentMs} ms (no heartbeat ack)`);
      }
    });
    this.#follower = new LeaderFollower(
      parseAddressList(options.coordinatorHost, options.coordinatorPort),
      options.coordinatorPort,
    );
  }

  /** Validates the options and starts connecting in the background. */
  static start(options: WorkerOptions): Worker {
    validateWorkerOptions(options);
    const worker = new Worker(options);
    worker.#loop = worker.#runLoop();
    return worker;
  }

  get mode(): WorkerMode {
    return this.#mode;
  }

  /** True while a connection is open (registered or not yet). */
  get connected(): boolean {
    return this.#mode === 'registering' || this.#mode === 'registered';
  }

  get registered(): boolean {
    return this.#mode === 'registered';
  }

  /** The task types this worker declares: the built-ins, then its modules' tasks. */
  get taskTypes(): readonly string[] {
    return this.#tasksLoaded.taskTypes;
  }

  /** The extensions the current coordinator offers (empty when none or not registered). */
  get features(): ReadonlySet<Feature> {
    return this.#features;
  }

  /** Tasks running now, orphans included (cancelled and abandoned ones excluded). */
  get runningCount(): number {
    return this.#tasks.size;
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
    const running = this.#tasks.size;
    if (this.registered && this.#features.has('drain')) {
      this.#connection?.send({ type: 'WORKER_DRAINING', workerId: this.workerId });
    } else if (this.registered) {
      // A v1 coordinator drops a worker that sends WORKER_DRAINING.
      this.#log.info(
        'coordinator does not offer drain: refusing new tasks instead of announcing it',
      );
    }
    this.#log.info({ runningTasks: running, timeoutMs }, 'draining: no new tasks');
    this.#abort.abort(); // no more dials or reconnect waits
    const drained = await this.#whenIdle(timeoutMs);
    if (drained) this.#log.info('drained: every task finished');
    else this.#log.warn({ leftTasks: this.#tasks.size }, 'drain timed out; releasing what is left');
    await this.close();
  }

  /** Resolves true once no task runs (or none could report), false after `timeoutMs`. */
  #whenIdle(timeoutMs: number): Promise<boolean> {
    if (this.#tasks.size === 0 || this.#connection === null) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.#idleWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  #notifyIfIdle(): void {
    if (this.#tasks.size > 0 && this.#connection !== null) return;
    for (const waiter of this.#idleWaiters.splice(0)) waiter();
  }

  /**
   * Stops everything: no more dials, heartbeats or results; running tasks are
   * abandoned and their threads terminated; the connection is closed.
   * Idempotent; always the same promise.
   */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    const connection = this.#connection;
    this.#setMode('closed');
    this.#abort.abort();
    const heartbeatClosed = this.#heartbeat.close();
    this.#watchdog.stop();
    // Ends the session through #onClosed, which abandons its tasks.
    const connectionClosed = connection?.close('worker closing');
    this.#abandonTasks();
    await Promise.all([heartbeatClosed, connectionClosed, this.#loop, this.#pool.close()]);
    this.#log.info('worker closed');
  }

  #isClosed(): boolean {
    return this.#mode === 'closed';
  }

  #setMode(next: WorkerMode): void {
    const current = this.#mode;
    assert(TRANSITIONS[current].includes(next), `worker mode ${current} -> ${next} is not allowed`);
    this.#mode = next;
  }

  /** True once no more dials are made (closed, or draining). */
  #stopsDialling(): boolean {
    return this.#isClosed() || this.#draining !== null;
  }

  /**
   * Dials the coordinators until one registers this worker, serves until
   * that session ends, and starts over: with several coordinators straight
   * on to the next one (or the leader a standby named) until a whole round
   * failed, then after `reconnectDelayMs` (leader-follower.ts).
   */
  async #runLoop(): Promise<void> {
    const delayMs = this.#options.reconnectDelayMs;
    const follow = {
      pause: { firstMs: delayMs, longestMs: delayMs },
      signal: this.#abort.signal,
      retry: () => !this.#stopsDialling(),
    };
    // OpenTelemetry only if this process set it up (tracing.ts); looked up once.
    this.#otel = await loadOtel();
    while (!this.#stopsDialling()) {
      await this.#follower.follow((address) => this.#session(address), follow);
      // A registered session ended: a pause before the next round.
      if (this.#stopsDialling()) return;
      if (this.#follower.shouldPause()) await this.#wait(delayMs);
    }
  }

  async #wait(ms: number): Promise<void> {
    try {
      await delay(ms, undefined, { signal: this.#abort.signal });
    } catch {
      // Aborted by close(); the loop checks the mode next.
    }
  }

  /** One try at `address`: dial, register, serve until the connection ends; what it came to. */
  async #session(address: HostPort): Promise<TryOutcome<void>> {
    try {
      this.#setMode('connecting');
      const socket = await this.#dial(address);
      if (socket === null) return { kind: 'failed', error: null };
      if (this.#isClosed()) {
        socket.destroy();
        return { kind: 'failed', error: null };
      }
      return await this.#serve(socket);
    } catch (err) {
      // A bug, not a network condition: log it and keep the worker alive.
      this.#log.error({ err: describeError(err) }, 'connection loop failed');
      if (this.#connection !== null) void this.#connection.destroy('connection loop failed');
      if (!this.#isClosed() && this.#mode !== 'disconnected') this.#setMode('disconnected');
      return { kind: 'failed', error: err };
    }
  }

  /** One dial; null (mode back to disconnected) when it fails. */
  async #dial({ host, port }: HostPort): Promise<Socket | null> {
    const timeoutMs = this.#connectTimeoutMs();
    try {
      return await dial(host, port, timeoutMs, this.#abort.signal, this.#options.tls ?? null);
    } catch (err) {
      if (this.#isClosed()) return null;
      this.#setMode('disconnected');
      if (err instanceof DialError && err.refused) this.#refuse(err.code, err.message);
      else this.#onDialFailed(describeError(err));
      return null;
    }
  }

  /** The coordinator refused us: a configuration problem, so stop for good. */
  #refuse(
    code:
      | RefusalCode
      | DialError['code']
      | typeof WRONG_PORT_CODE
      | typeof LocalErrorCode.UnsupportedFeature,
    message: string,
  ): void {
    if (this.#isClosed()) return;
    const err = new DtpError(code, message);
    this.#log.error({ code, message }, 'refused by the coordinator: stopping (no reconnect)');
    this.events.emit('refused', err);
    void this.close();
  }

  #onDialFailed(reason: string): void {
    const delayMs = this.#options.reconnectDelayMs;
    if (this.#unreachable) {
      this.#log.debug({ reason, delayMs }, 'connect attempt failed');
      return;
    }
    this.#unreachable = true;
    this.#log.warn(
      { coordinator: this.#coordinator(), reason, delayMs },
      'coordinator unreachable; reconnecting until it is back',
    );
  }

  #connectTimeoutMs(): number {
    return this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  }

  #coordinator(): string {
    return this.#follower.address;
  }

  /**
   * Registers on a fresh socket; resolves when that connection has ended,
   * with what it came to: served (it registered us), a NOT_LEADER, or a
   * failure before registration.
   */
  #serve(socket: Socket): Promise<TryOutcome<void>> {
    return new Promise((resolve) => {
      const connection: FramedConnection = new FramedConnection(
        socket,
        {
          onMessage: (msg) => this.#onMessage(connection, msg),
          onProtocolError: (err) =>
            this.#drop(connection, `protocol error from coordinator (${err.code}): ${err.message}`),
          onClose: (reason) => {
            const registered = this.#mode === 'registered';
            const notLeader = this.#notLeader;
            this.#onClosed(connection, describeCloseReason(reason));
            if (notLeader !== null) {
              resolve({ kind: 'notLeader', leader: notLeader.leader, error: reason });
            } else if (registered) {
              resolve({ kind: 'served', value: undefined });
            } else {
              resolve({ kind: 'failed', error: reason });
            }
          },
        },
        // Results that several task threads hand back in one turn leave together.
        { coalesce: 'turn' },
      );
      this.#connection = connection;
      this.#unreachable = false;
      this.#notLeader = null;
      this.#setMode('registering');
      this.#log.info({ coordinator: this.#coordinator() }, 'connected');
      this.events.emit('connected');
      const { workerId, capacity, prefetch } = this;
      this.#features = new Set();
      const taskTypes = [...this.#tasksLoaded.taskTypes];
      const authToken = this.#options.authToken ?? null;
      connection.send({
        type: 'WORKER_REGISTER',
        workerId,
        // Above 1,024 (feature `slots`): the v1 field at its most, the count in `slots`.
        capacity: Math.min(capacity, MAX_CAPACITY),
        ...(capacity > MAX_CAPACITY ? { slots: capacity } : {}),
        taskTypes,
        heartbeatAck: true,
        parents: true,
        traceContext: true,
        steps: true,
        children: true,
        ...(prefetch === 0 ? {} : { prefetch }),
        ...(authToken === null ? {} : { authToken }),
        heldAttempts: this.#heldAttempts(),
        ...(this.#queues === null ? {} : { queues: [...this.#queues] }),
      });
      // A coordinator that accepts but never answers must not hold us forever.
      const timeoutMs = this.#connectTimeoutMs();
      connection.setIdleTimeout(timeoutMs, () =>
        this.#drop(connection, `no reply to WORKER_REGISTER within ${timeoutMs} ms`),
      );
    });
  }

  /** Orphans still running or queued, and finished ones not reported yet. */
  #heldAttempts(): HeldAttempt[] {
    const held = [...this.#tasks.values(), ...this.#lateResults];
    return held.map(({ jobId, attemptId }) => ({ jobId, attemptId }));
  }

  #drop(connection: FramedConnection, reason: string): void {
    void connection.destroy(reason);
  }

  #onClosed(connection: FramedConnection, reason: string): void {
    if (connection !== this.#connection) return;
    this.#connection = null;
    this.#heartbeat.stop();
    this.#watchdog.stop();
    this.#calls.connectionLost(connection, reason);
    if (this.#isClosed()) {
      this.#abandonTasks();
      return;
    }
    this.#setMode('disconnected');
    this.#log.warn({ reason, orphanedTasks: this.#tasks.size }, 'connection lost');
    if (this.#draining === null) {
      this.#log.info({ delayMs: this.#options.reconnectDelayMs }, 'reconnecting');
    }
    this.events.emit('disconnected', reason);
    this.#notifyIfIdle(); // a draining worker has nobody left to report to
  }

  /** Cancels every running task (or only the orphans) without ever reporting it. */
  #abandonTasks(onlyOrphans = false): void {
    const tasks = [...this.#tasks.values()].filter(
      (task) => !onlyOrphans || task.connection !== this.#connection,
    );
    this.#lateResults = onlyOrphans ? this.#lateResults : [];
    for (const task of tasks) {
      this.#forget(task);
      const { jobId, attemptId } = task;
      this.#log.info({ jobId, attemptId }, 'task abandoned');
      void task.handle.stop('cancel');
      this.events.emit('abandoned', jobId, attemptId);
    }
    this.#notifyIfIdle();
  }

  #onMessage(connection: FramedConnection, msg: Message): void {
    if (connection !== this.#connection) return;
    this.#watchdog.heard();
    if (!isCoordinatorToWorker(msg)) {
      this.#drop(connection, `unexpected ${msg.type} from coordinator`);
      return;
    }
    if (isCallReply(msg)) {
      if (this.registered) this.#onCallReply(connection, msg);
      else this.#drop(connection, `${msg.type} before WORKER_REGISTERED`);
      return;
    }
    switch (msg.type) {
      case 'WORKER_REGISTERED':
        this.#onRegistered(connection, msg);
        return;
      case 'TASK_ASSIGN':
        if (this.registered) this.#onAssign(connection, msg);
        else this.#drop(connection, 'TASK_ASSIGN before WORKER_REGISTERED');
        return;
      case 'TASK_CANCEL':
        if (this.registered) this.#onCancel(msg);
        else this.#drop(connection, 'TASK_CANCEL before WORKER_REGISTERED');
        return;
      case 'ERROR':
        this.#onError(connection, msg);
        return;
      case 'HEARTBEAT_ACK':
        return; // heard: that is all it says
    }
  }

  #onRegistered(connection: FramedConnection, msg: WorkerRegistered): void {
    if (this.#mode !== 'registering') {
      this.#drop(connection, 'unexpected WORKER_REGISTERED from coordinator');
      return;
    }
    if (msg.workerId !== this.workerId) {
      this.#log.warn({ registeredAs: msg.workerId }, 'coordinator echoed another workerId');
    }
    this.#setMode('registered');
    this.#follower.served();
    this.#features = parseFeatures(msg.features);
    if (this.#queues !== null && !this.#features.has('queues')) {
      // It would ignore the list and hand us every queue's attempts.
      this.#refuse(
        LocalErrorCode.UnsupportedFeature,
        `this coordinator does not support queues (--queues ${this.#queues.join(',')} needs one that offers them)`,
      );
      return;
    }
    // The coordinator sends nothing while it has no work: silence is normal now.
    connection.setIdleTimeout(0, () => undefined);
    this.#heartbeat.start();
    if (this.#features.has('heartbeatAck')) this.#watchdog.start();
    const features =
      this.#features.size === 0 ? 'none (v1 coordinator)' : [...this.#features].join(',');
    const customTypes = this.#tasksLoaded.taskTypes.length - BUILTIN_TASK_TYPES.length;
    this.#log.info(
      { capacity: this.capacity, features, customTaskTypes: customTypes },
      'registered',
    );
    if (this.#features.has('reattach')) this.#adoptOrphans(connection);
    else this.#abandonTasks(true);
    this.#reportLateResults(connection);
    this.events.emit('registered');
  }

  /**
   * The coordinator takes back the orphans whose lease is still current and
   * cancels the others: every orphan now belongs to this session.
   */
  #adoptOrphans(connection: FramedConnection): void {
    let adopted = 0;
    for (const task of this.#tasks.values()) {
      if (task.connection === connection) continue;
      task.connection = connection;
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
      const hope = this.#features.has('reattach')
        ? 'counted if its lease is still current'
        : 'its lease is probably revoked';
      this.#log.info({ jobId, attemptId }, `late result reported (${hope})`);
      this.#sendResult(connection, { jobId, attemptId }, outcome);
    }
  }

  /** The answer to a call: back to the handler that made it (an unknown requestId is ignored). */
  #onCallReply(connection: FramedConnection, msg: CallReply): void {
    const reply = JSON.parse(messageToJson(msg)) as JsonObject;
    if (!this.#calls.settle(connection, msg.requestId, { ok: true, reply })) {
      this.#log.debug({ type: msg.type, requestId: msg.requestId }, 'answer to no open call');
    }
  }

  /**
   * A call of a running attempt's handler (the message without its ids): sent
   * with the attempt's ids and a fresh requestId, if the coordinator offers
   * what it needs and the attempt's session is the current one.
   */
  #onTaskCall(task: RunningTask, callId: number, call: JsonObject): void {
    if (this.#tasks.get(task.attemptId) !== task) return; // stopped: its thread failed the call
    const answer = (outcome: CallOutcome): void => task.handle.answerCall(callId, outcome);
    const type = typeof call.type === 'string' ? call.type : JSON.stringify(call.type);
    const feature = Object.prototype.hasOwnProperty.call(CALL_FEATURES, type)
      ? CALL_FEATURES[type as keyof typeof CALL_FEATURES]
      : null;
    if (feature === null) {
      const message = `no such call: ${type}`;
      return answer({ ok: false, code: ErrorCode.InvalidRequest, message });
    }
    if (!this.#features.has(feature)) {
      const message = `the coordinator does not offer ${feature} (${type} needs it)`;
      return answer({ ok: false, code: LocalErrorCode.UnsupportedFeature, message });
    }
    const connection = task.connection;
    if (connection !== this.#connection || !this.registered) {
      const message = 'no connection to the coordinator now';
      return answer({ ok: false, code: LocalErrorCode.ConnectionLost, message });
    }
    const requestId = this.#calls.open(connection, task.attemptId, answer);
    if (requestId === null) return;
    const { workerId } = this;
    const ids = { workerId, jobId: task.jobId, attemptId: task.attemptId, requestId };
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

  #onError(connection: FramedConnection, msg: ErrorMessage): void {
    if (this.registered && msg.requestId !== undefined && msg.requestId !== null) {
      // A refused call: that call fails, the session goes on.
      const outcome = {
        ok: false,
        code: msg.code ?? LocalErrorCode.RemoteError,
        message: msg.message,
      } as const;
      if (!this.#calls.settle(connection, msg.requestId, outcome)) {
        this.#log.debug({ code: msg.code, requestId: msg.requestId }, 'refusal of no open call');
      }
      return;
    }
    if (this.#mode === 'registering' && isClientPortAnswer(msg)) {
      // Registering with a client port is a configuration error, not a lost connection.
      this.#refuse(WRONG_PORT_CODE, workerOnClientPortMessage(this.#follower.current.port));
      return;
    }
    if (isRefusal(msg.code)) {
      this.#refuse(msg.code, clipError(msg.message));
      return;
    }
    if (msg.code === ErrorCode.NotLeader) {
      // A standby (or a leader that just stepped down): on to the leader it names.
      this.#notLeader = { leader: msg.leader ?? null };
      this.#log.info(
        { coordinator: this.#coordinator(), leader: msg.leader ?? 'unknown' },
        'not the leader; trying the next coordinator',
      );
      this.#drop(connection, 'coordinator is not the leader');
      return;
    }
    const what = this.registered ? 'error from coordinator' : 'registration refused';
    // A peer's text goes into the log cut, as a handler's error does.
    const message = clipError(msg.message);
    this.#log.error({ message, code: msg.code ?? undefined }, what);
    this.#drop(connection, `coordinator replied ERROR: ${message}`);
  }

  #sendHeartbeat(): void {
    if (!this.registered) return;
    this.#connection?.send({ type: 'HEARTBEAT', workerId: this.workerId });
  }

  #onAssign(connection: FramedConnection, msg: TaskAssign): void {
    const { jobId, attemptId } = msg;
    this.events.emit('assigned', jobId, attemptId);
    if (this.#tasks.has(attemptId)) {
      this.#log.warn({ jobId, attemptId }, 'duplicate assignment ignored');
      return;
    }
    const refusal =
      this.#draining !== null
        ? 'worker is shutting down'
        : this.#tasks.size >= this.#window()
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
      this.#sendResult(connection, { jobId, attemptId }, outcome);
      return;
    }
    this.#startTask(connection, msg);
  }

  /** Attempts this session may hold: its slots, plus the queue if the coordinator offered it. */
  #window(): number {
    return this.capacity + (this.#features.has('prefetch') ? this.prefetch : 0);
  }

  #startTask(connection: FramedConnection, msg: TaskAssign): void {
    const { jobId, attemptId, attemptNumber, taskType } = msg;
    // Only a coordinator that offers assignLimits means these fields.
    const limits = this.#features.has('assignLimits');
    const timeoutMs = limits ? (msg.timeoutMillis ?? null) : null;
    // Made when the handler first logs (a child logger per attempt is not free).
    let taskLog: Logger | null = null;
    // The job's trace context only from a session that asked for it (the worker always does).
    const jobTrace = traceContextOf(msg);
    const span = startAttemptSpan(this.#otel, jobTrace, {
      jobId,
      taskType,
      attemptNumber,
      // Sent beside the trace context; absent = the default queue.
      queue: msg.queue ?? DEFAULT_QUEUE,
    });
    const handle = this.#pool.run(
      {
        taskType,
        payload: msg.payload,
        jobId,
        attemptId,
        attemptNumber,
        maxAttempts: limits ? (msg.maxAttempts ?? null) : null,
        deadlineAtMs: timeoutMs === null ? null : Date.now() + timeoutMs,
        parents: this.#features.has('parents') ? (msg.parents ?? null) : null,
        traceContext: span?.context ?? jobTrace,
        // Durable steps only with a coordinator that offers them (null: ctx.step refuses).
        steps: this.#features.has('steps') ? (msg.steps ?? []) : null,
        stepCount: this.#features.has('steps') ? (msg.stepCount ?? null) : null,
      },
      (level, message, fields) =>
        (taskLog ??= this.#log.child({ jobId, attemptId, taskType }))[level](fields, message),
      (fraction, message) => task.progress?.report({ fraction, message }),
      (callId, call) => this.#onTaskCall(task, callId, call),
    );
    const startedAtMs = performance.now();
    const task: RunningTask = {
      jobId,
      attemptId,
      handle,
      startedAtMs,
      connection,
      deadlineTimer: null,
      span,
      // Only to a coordinator that offered it; otherwise progress stays here.
      progress: this.#features.has('progress')
        ? new ProgressThrottle(1_000 / PROGRESS_MESSAGES_PER_SECOND, (p) => {
            if (task.connection !== this.#connection || this.#tasks.get(attemptId) !== task) return;
            task.connection.send({
              type: 'TASK_PROGRESS',
              workerId: this.workerId,
              jobId,
              attemptId,
              fraction: p.fraction,
              message: p.message,
            });
          })
        : null,
    };
    if (timeoutMs !== null) {
      // Past the longest timer Node.js keeps, setTimeout would fire at once; a
      // deadline that far off (a coordinator sends at most a day) is as good as none.
      const delayMs = Math.min(timeoutMs, MAX_TIMER_MS);
      task.deadlineTimer = setTimeout(() => this.#onDeadline(task, timeoutMs), delayMs);
    }
    this.#tasks.set(attemptId, task);
    void handle.started.then((began) => {
      if (!began || this.#tasks.get(attemptId) !== task) return;
      // Logged once the task's code runs in its thread (not merely queued).
      this.#log.info({ jobId, attemptId, attemptNumber, taskType, timeoutMs }, 'task started');
      this.events.emit('started', jobId, attemptId);
    });
    void handle.outcome.then((outcome) => this.#onTaskEnded(task, outcome));
  }

  /** Takes a task out of the running set for good (its result will never be sent). */
  #forget(task: RunningTask): void {
    if (this.#tasks.get(task.attemptId) === task) this.#tasks.delete(task.attemptId);
    if (task.deadlineTimer !== null) clearTimeout(task.deadlineTimer);
    task.deadlineTimer = null;
    task.progress?.dispose();
    this.#calls.forgetAttempt(task.attemptId);
    // Ended already with its outcome, unless the worker let it go (closing).
    task.span?.end('CANCELLED', 'the worker let the attempt go');
  }

  #onTaskEnded(task: RunningTask, outcome: TaskOutcome): void {
    // Stopped and abandoned tasks have left the map already: never report them.
    if (this.#tasks.get(task.attemptId) !== task) return;
    // The last progress goes before the result.
    task.progress?.flush();
    task.span?.end(
      outcome.success ? 'SUCCEEDED' : outcome.cancelled ? 'CANCELLED' : 'FAILED',
      outcome.success ? undefined : outcome.error,
    );
    this.#forget(task);
    if (!outcome.success && outcome.cancelled) {
      this.#notifyIfIdle();
      return;
    }
    const { jobId, attemptId } = task;
    const durationMs = Math.round(performance.now() - task.startedAtMs);
    const error = outcome.success ? undefined : outcome.error;
    if (!outcome.success && outcome.suspend !== undefined) {
      this.#log.info({ jobId, attemptId, durationMs, ...outcome.suspend }, 'task suspended');
    } else {
      this.#log.info(
        { jobId, attemptId, success: outcome.success, durationMs, error },
        'task finished',
      );
    }
    if (task.connection === this.#connection) {
      this.#sendResult(task.connection, task, outcome);
    } else {
      // An orphan: its connection is gone and no new session exists yet.
      this.#lateResults.push({ jobId, attemptId, outcome });
    }
    this.#notifyIfIdle();
  }

  #sendResult(
    connection: FramedConnection,
    ids: { jobId: string; attemptId: string },
    outcome: TaskOutcome,
  ): void {
    if (!outcome.success && outcome.suspend !== undefined) {
      if (this.#features.has('steps')) {
        connection.send({
          type: 'TASK_SUSPEND',
          workerId: this.workerId,
          ...ids,
          ...outcome.suspend,
        });
        return;
      }
      // A coordinator without steps (we re-registered elsewhere): the attempt fails, retryable.
      outcome = {
        success: false,
        error: 'the handler slept or waited, and this coordinator does not offer durable steps',
        cancelled: false,
        retryable: true,
      };
    }
    const sent = this.#sendOrReport(connection, this.#resultMessage(ids, outcome));
    if (sent !== null) this.events.emit('result', sent);
  }

  #resultMessage(ids: { jobId: string; attemptId: string }, outcome: TaskOutcome): TaskResult {
    const message: TaskResult = {
      type: 'TASK_RESULT',
      workerId: this.workerId,
      jobId: ids.jobId,
      attemptId: ids.attemptId,
      success: outcome.success,
      result: outcome.success ? outcome.result : null,
      error: outcome.success ? null : clipError(outcome.error),
    };
    // Optional fields: left out unless they say something (and, for
    // `retryable`, unless the coordinator offered to act on it).
    if (outcome.success && outcome.resultFormat === 'json') message.resultFormat = 'json';
    if (!outcome.success && !outcome.retryable && this.#features.has('retryable')) {
      message.retryable = false;
    }
    return message;
  }

  /** Sends a result; one too big for a frame is replaced by a failure saying so. */
  #sendOrReport(connection: FramedConnection, message: TaskResult): TaskResult | null {
    try {
      return connection.send(message) ? message : null;
    } catch (err) {
      const error = `result could not be sent: ${describeError(err)}`;
      const failure: TaskResult = {
        type: 'TASK_RESULT',
        workerId: message.workerId,
        jobId: message.jobId,
        attemptId: message.attemptId,
        success: false,
        result: null,
        error,
      };
      return connection.send(failure) ? failure : null;
    }
  }

  #onCancel(msg: TaskCancel): void {
    const { jobId, attemptId } = msg;
    this.#log.info({ jobId, attemptId }, 'cancel received');
    const task = this.#tasks.get(attemptId);
    if (task === undefined || task.jobId !== jobId) {
      this.#log.info({ jobId, attemptId }, 'cancel ignored: no such running task');
      return;
    }
    this.#stop(task, 'cancel');
  }

  /** The attempt's deadline passed here: stop it; the coordinator revokes it at the same deadline. */
  #onDeadline(task: RunningTask, timeoutMs: number): void {
    task.deadlineTimer = null;
    if (this.#tasks.get(task.attemptId) !== task) return;
    const { jobId, attemptId } = task;
    this.#log.warn({ jobId, attemptId, timeoutMs }, 'deadline passed: stopping the task');
    this.#stop(task, 'deadline');
  }

  /** Preempts a task: its signal fires, its result is never reported, its thread is freed. */
  #stop(task: RunningTask, reason: AbortReason): void {
    task.span?.end(reason === 'deadline' ? 'DEADLINE' : 'CANCELLED');
    this.#forget(task);
    this.#notifyIfIdle();
    const { jobId, attemptId } = task;
    const stoppedAtMs = performance.now();
    void task.handle.stop(reason).then((how) => {
      const stopMs = Math.round(performance.now() - stoppedAtMs);
      const what = how === 'cooperative' ? 'the handler stopped' : 'its thread was terminated';
      this.#log.info({ jobId, attemptId, reason, stopMs }, `task stopped: ${what}`);
      this.events.emit('stopped', jobId, attemptId, reason, how);
      if (reason === 'cancel') this.events.emit('cancelled', jobId, attemptId);
    });
  }
}
