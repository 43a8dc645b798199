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
 * `drain(timeoutMs)` is the graceful way out: it tells the coordinator
 * (WORKER_DRAINING: no new assignments), stops reconnecting, lets running
 * tasks finish for up to `timeoutMs`, then closes; whatever is still running
 * then is abandoned, and the coordinator, seeing a draining worker leave,
 * retries those attempts at once.
 *
 * Messages: sends WORKER_REGISTER, HEARTBEAT, TASK_RESULT; receives
 * WORKER_REGISTERED, TASK_ASSIGN, TASK_CANCEL, ERROR. An ERROR, any other
 * message, or a protocol violation drops the connection, and the worker dials
 * again after `reconnectDelayMs`.
 *
 * Tasks of a lost connection are orphans: the coordinator has revoked (or is
 * about to revoke) their leases, so the work will be redone elsewhere. An
 * orphan that finishes before the worker registers again has its result
 * reported once the new session starts, as a late result the coordinator
 * logs and rejects as stale — so a worker that was frozen (SIGSTOP, a long
 * pause) leaves a trace instead of silently dropping finished work. Orphans
 * still running when the worker registers again are abandoned (their threads
 * terminated), so the new session starts with every slot free.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { FramedConnection, describeCloseReason } from '../net/framed-connection.js';
import { dial } from '../net/tcp.js';
import type { Logger } from '../observability/logger.js';
import { DtpError, describeError } from '../protocol/errors.js';
import {
  isCoordinatorToWorker,
  type ErrorMessage,
  type Message,
  type TaskAssign,
  type TaskCancel,
  type TaskResult,
  type WorkerRegistered,
} from '../protocol/messages.js';
import { Heartbeat } from './heartbeat.js';
import { MAX_CAPACITY } from '../protocol/limits.js';
import { TaskPool, type TaskHandle, type TaskOutcome } from './task-pool.js';

export interface WorkerOptions {
  coordinatorHost: string;
  coordinatorPort: number;
  /** Non-blank; sent in every message. */
  workerId: string;
  /** Tasks run at once, 1..1024. */
  capacity: number;
  /** Time between heartbeats while registered, in ms. */
  heartbeatIntervalMs: number;
  /** Wait between a lost or failed connection and the next dial, in ms (>= 1). */
  reconnectDelayMs: number;
  /** Lines get `workerId=…` added. */
  logger: Logger;
  /** Task module path or URL (see task-module.ts); default: the built-in tasks. */
  taskModule?: string;
  /**
   * Give up a dial, or a registration that gets no reply, after this long, in
   * ms (default 5000).
   */
  connectTimeoutMs?: number;
}

/** What {@link Worker.events} emits; tests wait on these instead of sleeping. */
export interface WorkerEvents {
  connected: [];
  registered: [];
  disconnected: [reason: string];
  assigned: [jobId: string, attemptId: string];
  /** The task's payload was valid and its code began running in a thread. */
  started: [jobId: string, attemptId: string];
  /** A TASK_CANCEL matched a running task and its thread has exited. */
  cancelled: [jobId: string, attemptId: string];
  /** A task was dropped because its connection ended. */
  abandoned: [jobId: string, attemptId: string];
  /** A TASK_RESULT was queued on the connection. */
  result: [message: TaskResult];
}

export type WorkerMode = 'disconnected' | 'connecting' | 'registering' | 'registered' | 'closed';

const TRANSITIONS: { readonly [M in WorkerMode]: readonly WorkerMode[] } = {
  disconnected: ['connecting', 'closed'],
  connecting: ['registering', 'disconnected', 'closed'],
  registering: ['registered', 'disconnected', 'closed'],
  registered: ['disconnected', 'closed'],
  closed: [],
};

const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;

interface RunningTask {
  readonly jobId: string;
  readonly attemptId: string;
  readonly handle: TaskHandle;
  readonly startedAtMs: number;
  /** The connection that assigned it; the result goes back only there. */
  readonly connection: FramedConnection;
}

/** Every message a coordinator may send a worker; the type makes it complete. */

function invalid(message: string): DtpError {
  return new DtpError('INVALID_OPTIONS', message);
}

function isIntegerIn(value: number, min: number, max: number): boolean {
  return Number.isInteger(value) && value >= min && value <= max;
}

/** Throws a DtpError `INVALID_OPTIONS` naming the first bad option. */
export function validateWorkerOptions(options: WorkerOptions): void {
  if (options.workerId.trim() === '') throw invalid('workerId must not be blank');
  if (options.coordinatorHost === '') throw invalid('coordinatorHost must not be empty');
  if (!isIntegerIn(options.coordinatorPort, 1, 65_535))
    throw invalid('coordinatorPort must be an integer in 1..65535');
  if (!isIntegerIn(options.capacity, 1, MAX_CAPACITY))
    throw invalid(`capacity must be an integer in 1..${MAX_CAPACITY}`);
  if (!isIntegerIn(options.heartbeatIntervalMs, 1, 2 ** 31 - 1))
    throw invalid('heartbeatIntervalMs must be a positive integer');
  if (!isIntegerIn(options.reconnectDelayMs, 1, 2 ** 31 - 1))
    throw invalid('reconnectDelayMs must be a positive integer');
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  if (!isIntegerIn(connectTimeoutMs, 1, 2 ** 31 - 1))
    throw invalid('connectTimeoutMs must be a positive integer');
}

export class Worker {
  readonly workerId: string;
  readonly capacity: number;
  readonly events = new EventEmitter<WorkerEvents>();
  readonly #options: WorkerOptions;
  readonly #log: Logger;
  readonly #pool: TaskPool;
  readonly #heartbeat: Heartbeat;
  /** Aborted by close(): cancels a dial or a reconnect wait in progress. */
  readonly #abort = new AbortController();
  /** Running tasks by attemptId (the lease), orphans included. */
  readonly #tasks = new Map<string, RunningTask>();
  /** Results of orphans that finished while no session was registered. */
  #lateResults: TaskResult[] = [];
  #mode: WorkerMode = 'disconnected';
  #connection: FramedConnection | null = null;
  /** The last dial failed; further failures are logged at debug level only. */
  #unreachable = false;
  #loop: Promise<void> = Promise.resolve();
  #closing: Promise<void> | null = null;
  #draining: Promise<void> | null = null;
  /** Told when no task is left (drain waits on this). */
  #idleWaiters: (() => void)[] = [];

  private constructor(options: WorkerOptions) {
    this.workerId = options.workerId;
    this.capacity = options.capacity;
    this.#options = options;
    this.#log = options.logger.child({ workerId: options.workerId });
    this.#pool = new TaskPool(
      options.taskModule === undefined
        ? { capacity: options.capacity }
        : { capacity: options.capacity, taskModule: options.taskModule },
    );
    this.#heartbeat = new Heartbeat(options.heartbeatIntervalMs, () => this.#sendHeartbeat());
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
    if (this.registered)
      this.#connection?.send({ type: 'WORKER_DRAINING', workerId: this.workerId });
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

  async #runLoop(): Promise<void> {
    while (!this.#isClosed() && this.#draining === null) {
      try {
        await this.#connectAndServe();
      } catch (err) {
        // A bug, not a network condition: log it and keep the worker alive.
        this.#log.error({ err: describeError(err) }, 'connection loop failed');
        if (this.#connection !== null) void this.#connection.destroy('connection loop failed');
        if (!this.#isClosed() && this.#mode !== 'disconnected') this.#setMode('disconnected');
      }
      if (this.#isClosed() || this.#draining !== null) return;
      await this.#wait(this.#options.reconnectDelayMs);
    }
  }

  async #wait(ms: number): Promise<void> {
    try {
      await delay(ms, undefined, { signal: this.#abort.signal });
    } catch {
      // Aborted by close(); the loop checks the mode next.
    }
  }

  async #connectAndServe(): Promise<void> {
    this.#setMode('connecting');
    const socket = await this.#dial();
    if (socket === null) return;
    if (this.#isClosed()) {
      socket.destroy();
      return;
    }
    await this.#serve(socket);
  }

  /** One dial; null (mode back to disconnected) when it fails. */
  async #dial(): Promise<Socket | null> {
    const { coordinatorHost: host, coordinatorPort: port } = this.#options;
    const timeoutMs = this.#connectTimeoutMs();
    try {
      return await dial(host, port, timeoutMs, this.#abort.signal);
    } catch (err) {
      if (this.#isClosed()) return null;
      this.#setMode('disconnected');
      this.#onDialFailed(describeError(err));
      return null;
    }
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
    return `${this.#options.coordinatorHost}:${this.#options.coordinatorPort}`;
  }

  /** Registers on a fresh socket; resolves when that connection has ended. */
  #serve(socket: Socket): Promise<void> {
    return new Promise((resolve) => {
      const connection: FramedConnection = new FramedConnection(socket, {
        onMessage: (msg) => this.#onMessage(connection, msg),
        onProtocolError: (err) =>
          this.#drop(connection, `protocol error from coordinator (${err.code}): ${err.message}`),
        onClose: (reason) => {
          this.#onClosed(connection, describeCloseReason(reason));
          resolve();
        },
      });
      this.#connection = connection;
      this.#unreachable = false;
      this.#setMode('registering');
      this.#log.info({ coordinator: this.#coordinator() }, 'connected');
      this.events.emit('connected');
      const { workerId, capacity } = this;
      connection.send({ type: 'WORKER_REGISTER', workerId, capacity, taskTypes: null });
      // A coordinator that accepts but never answers must not hold us forever.
      const timeoutMs = this.#connectTimeoutMs();
      connection.setIdleTimeout(timeoutMs, () =>
        this.#drop(connection, `no reply to WORKER_REGISTER within ${timeoutMs} ms`),
      );
    });
  }

  #drop(connection: FramedConnection, reason: string): void {
    void connection.destroy(reason);
  }

  #onClosed(connection: FramedConnection, reason: string): void {
    if (connection !== this.#connection) return;
    this.#connection = null;
    this.#heartbeat.stop();
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
      this.#tasks.delete(task.attemptId);
      const { jobId, attemptId } = task;
      this.#log.info({ jobId, attemptId }, 'task abandoned');
      void task.handle.cancel();
      this.events.emit('abandoned', jobId, attemptId);
    }
    this.#notifyIfIdle();
  }

  #onMessage(connection: FramedConnection, msg: Message): void {
    if (connection !== this.#connection) return;
    if (!isCoordinatorToWorker(msg)) {
      this.#drop(connection, `unexpected ${msg.type} from coordinator`);
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
        return; // never asked for yet
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
    // The coordinator sends nothing while it has no work: silence is normal now.
    connection.setIdleTimeout(0, () => undefined);
    this.#heartbeat.start();
    this.#log.info({ capacity: this.capacity }, 'registered');
    this.#abandonTasks(true);
    this.#reportLateResults(connection);
    this.events.emit('registered');
  }

  #reportLateResults(connection: FramedConnection): void {
    const late = this.#lateResults;
    this.#lateResults = [];
    for (const message of late) {
      this.#log.info(
        { jobId: message.jobId, attemptId: message.attemptId },
        'late result reported (its lease is probably revoked)',
      );
      const sent = this.#sendOrReport(connection, message);
      if (sent !== null) this.events.emit('result', sent);
    }
  }

  #onError(connection: FramedConnection, msg: ErrorMessage): void {
    const what = this.registered ? 'error from coordinator' : 'registration refused';
    this.#log.error({ message: msg.message, code: msg.code ?? undefined }, what);
    this.#drop(connection, `coordinator replied ERROR: ${msg.message}`);
  }

  #sendHeartbeat(): void {
    if (!this.registered) return;
    this.#connection?.send({ type: 'HEARTBEAT', workerId: this.workerId });
  }

  #onAssign(connection: FramedConnection, msg: TaskAssign): void {
    const { jobId, attemptId, attemptNumber, taskType } = msg;
    this.events.emit('assigned', jobId, attemptId);
    if (this.#tasks.has(attemptId)) {
      this.#log.warn({ jobId, attemptId }, 'duplicate assignment ignored');
      return;
    }
    if (this.#tasks.size >= this.capacity) {
      this.#log.warn({ jobId, attemptId, capacity: this.capacity }, 'task refused: at capacity');
      const outcome = { success: false, error: 'worker at capacity', cancelled: false } as const;
      this.#sendResult(connection, { jobId, attemptId }, outcome);
      return;
    }
    const handle = this.#pool.run(taskType, msg.payload, attemptNumber);
    const startedAtMs = performance.now();
    const task: RunningTask = { jobId, attemptId, handle, startedAtMs, connection };
    this.#tasks.set(attemptId, task);
    void handle.started.then((began) => {
      if (!began || this.#tasks.get(attemptId) !== task) return;
      // Logged once the task's code runs in its thread (not merely queued).
      this.#log.info({ jobId, attemptId, attemptNumber, taskType }, 'task started');
      this.events.emit('started', jobId, attemptId);
    });
    void handle.outcome.then((outcome) => this.#onTaskEnded(task, outcome));
  }

  #onTaskEnded(task: RunningTask, outcome: TaskOutcome): void {
    // Cancelled and abandoned tasks have left the map already: never report them.
    if (this.#tasks.get(task.attemptId) !== task) return;
    this.#tasks.delete(task.attemptId);
    if (!outcome.success && outcome.cancelled) {
      this.#notifyIfIdle();
      return;
    }
    const { jobId, attemptId } = task;
    const durationMs = Math.round(performance.now() - task.startedAtMs);
    const error = outcome.success ? undefined : outcome.error;
    this.#log.info(
      { jobId, attemptId, success: outcome.success, durationMs, error },
      'task finished',
    );
    if (task.connection === this.#connection) {
      this.#sendResult(task.connection, task, outcome);
    } else {
      // An orphan: its connection is gone and no new session exists yet.
      this.#lateResults.push(this.#resultMessage(task, outcome));
    }
    this.#notifyIfIdle();
  }

  #sendResult(
    connection: FramedConnection,
    ids: { jobId: string; attemptId: string },
    outcome: TaskOutcome,
  ): void {
    const sent = this.#sendOrReport(connection, this.#resultMessage(ids, outcome));
    if (sent !== null) this.events.emit('result', sent);
  }

  #resultMessage(ids: { jobId: string; attemptId: string }, outcome: TaskOutcome): TaskResult {
    return {
      type: 'TASK_RESULT',
      workerId: this.workerId,
      jobId: ids.jobId,
      attemptId: ids.attemptId,
      success: outcome.success,
      result: outcome.success ? outcome.result : null,
      error: outcome.success ? null : outcome.error,
    };
  }

  /** Sends a result; one too big for a frame is replaced by a failure saying so. */
  #sendOrReport(connection: FramedConnection, message: TaskResult): TaskResult | null {
    try {
      return connection.send(message) ? message : null;
    } catch (err) {
      const error = `result could not be sent: ${describeError(err)}`;
      const failure: TaskResult = { ...message, success: false, result: null, error };
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
    this.#tasks.delete(attemptId);
    this.#notifyIfIdle();
    const cancelledAtMs = performance.now();
    void task.handle.cancel().then(() => {
      const stopMs = Math.round(performance.now() - cancelledAtMs);
      this.#log.info({ jobId, attemptId, stopMs }, 'cancel applied');
      this.events.emit('cancelled', jobId, attemptId);
    });
  }
}
