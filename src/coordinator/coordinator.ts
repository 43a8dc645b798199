/**
 * The coordinator shell: sockets, timers and the store around the pure core.
 *
 * Every input (a decoded frame, a closed connection, a sweep tick, an expired
 * wait) goes through {@link Coordinator.#dispatch} into the core, one at a
 * time, in arrival order. The effects pile up until the end of the current
 * event-loop turn; then one store commit makes the whole batch durable and
 * only after that are the effects released (group commit). So a JOB_SUBMITTED
 * or a TASK_ASSIGN is never sent before the state it depends on is on disk.
 *
 * If a commit fails (disk full, I/O error) or the core hits a bug, the
 * coordinator stops: nothing of the failed batch is released, every client
 * request gets `ERROR` (code STORE_FAILED or INTERNAL_ERROR) from then on,
 * workers are disconnected, and the operator restarts it; recovery then
 * starts from the last commit that succeeded.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { FramedConnection, describeCloseReason } from '../net/framed-connection.js';
import { TcpServer } from '../net/tcp.js';
import { ProtocolErrorCode, describeError, type ProtocolError } from '../protocol/errors.js';
import {
  isClientRequest,
  isWorkerToCoordinator,
  type ClientReply,
  type Message,
} from '../protocol/messages.js';
import { SqliteStore } from '../store/sqlite-store.js';
import type { Store } from '../store/store.js';
import { createBuiltinRegistry } from '../tasks/builtin/index.js';
import type { Logger } from '../observability/logger.js';
import { ClientSession } from './client-session.js';
import { CoordinatorCore, type CoreInspection } from './core/core.js';
import { COORDINATOR_FEATURES } from './core/offered-features.js';
import type { CoreConfig, CoreEvent, CoreInput, Effect, PayloadValidator } from './core/types.js';
import { logEvent } from './event-log.js';
import { MetricsServer } from './metrics-server.js';
import type { CoordinatorOptions } from './options.js';

export interface CoordinatorEvents {
  /** Every core event, after its batch was committed. */
  event: [CoreEvent];
  /** Duration of each non-empty commit, in ms. */
  commit: [number];
  /** The coordinator stopped working (store failure or internal error). */
  fatal: [Error];
}

/** Extra wiring for tests and embedding (all optional). */
export interface CoordinatorDeps {
  store?: Store;
  validator?: PayloadValidator;
  now?: () => number;
}

export class Coordinator {
  readonly events = new EventEmitter<CoordinatorEvents>();
  readonly #options: CoordinatorOptions;
  readonly #log: Logger;
  readonly #store: Store;
  readonly #core: CoordinatorCore;
  readonly #workerServer: TcpServer;
  readonly #clientServer: TcpServer;
  readonly #workerConns = new Map<number, FramedConnection>();
  readonly #clients = new Map<number, ClientSession>();
  readonly #waitTimers = new Map<string, NodeJS.Timeout>();
  readonly #registrationTimeoutMs: number;
  #ports: [number, number] = [0, 0];
  #metricsServer: MetricsServer | null = null;
  /** Time to open the store and rebuild memory from it, in ms. */
  #recoveryMs = 0;
  #pending: Effect[] = [];
  #flushScheduled = false;
  #sweepTimer: NodeJS.Timeout | null = null;
  #failure: { code: string; message: string } | null = null;
  /** Set first thing in shutdown: from then on inputs are ignored. */
  #stopping = false;
  #closing: Promise<void> | null = null;

  private constructor(options: CoordinatorOptions, store: Store, core: CoordinatorCore) {
    this.#options = options;
    this.#log = options.logger;
    this.#store = store;
    this.#core = core;
    this.#workerServer = new TcpServer((socket) => this.#acceptWorker(socket));
    this.#clientServer = new TcpServer((socket) => this.#acceptClient(socket));
    this.#registrationTimeoutMs = Math.max(options.heartbeatTimeoutMs, 1_000);
  }

  /** Opens the store, recovers, listens on both ports and starts the sweep. */
  static async start(
    options: CoordinatorOptions,
    deps: CoordinatorDeps = {},
  ): Promise<Coordinator> {
    const store =
      deps.store ?? new SqliteStore({ path: options.databasePath, durability: options.durability });
    let core: CoordinatorCore;
    let recovered: Effect[];
    const recoveryStartedMs = performance.now();
    try {
      core = new CoordinatorCore(coreConfig(options), {
        now: deps.now ?? Date.now,
        newId: randomUUID,
        store,
        validator: deps.validator ?? createBuiltinRegistry(),
      });
      recovered = core.takeRecoveryEffects();
      store.commit();
    } catch (err) {
      store.close();
      throw err;
    }
    const self = new Coordinator(options, store, core);
    self.#recoveryMs = Math.round(performance.now() - recoveryStartedMs);
    try {
      await self.#listen();
    } catch (err) {
      await self.close();
      throw err;
    }
    for (const effect of recovered) if (effect.kind === 'event') self.#publish(effect.event);
    return self;
  }

  async #listen(): Promise<void> {
    const options = this.#options;
    this.#ports = [
      await this.#workerServer.listen(options.workerPort, options.bindHost),
      await this.#clientServer.listen(options.clientPort, options.bindHost),
    ];
    if (options.metricsPort !== null) {
      const { metricsPort: port, bindHost: host, maxActiveJobs } = options;
      this.#metricsServer = await MetricsServer.start(this, { port, host, maxActiveJobs });
    }
    this.#sweepTimer = setInterval(() => this.#dispatch({ kind: 'tick' }), options.sweepIntervalMs);
    this.#log.info(
      {
        workerPort: this.#ports[0],
        clientPort: this.#ports[1],
        metricsPort: this.#metricsServer?.port,
        bindHost: options.bindHost,
        database: options.databasePath,
        durability: options.durability,
        activeJobs: this.#core.activeCount,
        recoveryMs: this.#recoveryMs,
        features: COORDINATOR_FEATURES.join(','),
      },
      'coordinator started',
    );
  }

  /** The worker port actually bound. */
  get workerPort(): number {
    return this.#ports[0];
  }

  /** The client port actually bound. */
  get clientPort(): number {
    return this.#ports[1];
  }

  /** The `/metrics` port actually bound; null when metrics are off. */
  get metricsPort(): number | null {
    return this.#metricsServer?.port ?? null;
  }

  /** The core's current state (tests, metrics). */
  inspect(): CoreInspection {
    return this.#core.inspect();
  }

  /** Non-null once the coordinator has stopped working. */
  get failure(): { code: string; message: string } | null {
    return this.#failure;
  }

  #acceptWorker(socket: Socket): void {
    const conn: FramedConnection = new FramedConnection(socket, {
      onMessage: (msg) => this.#onWorkerMessage(conn, msg),
      onProtocolError: (err) =>
        this.#dispatch({ kind: 'workerViolation', connId: conn.id, reason: err.message }),
      onClose: (reason) => {
        this.#workerConns.delete(conn.id);
        this.#dispatch({
          kind: 'workerClosed',
          connId: conn.id,
          reason: describeCloseReason(reason),
        });
      },
    });
    if (this.#failure !== null || this.#stopping) {
      void conn.destroy('coordinator is not accepting workers');
      return;
    }
    this.#workerConns.set(conn.id, conn);
    conn.setIdleTimeout(this.#registrationTimeoutMs, () => {
      this.#dispatch({
        kind: 'workerViolation',
        connId: conn.id,
        reason: 'no WORKER_REGISTER in time',
      });
    });
  }

  #onWorkerMessage(conn: FramedConnection, msg: Message): void {
    if (isWorkerToCoordinator(msg)) this.#dispatch({ kind: 'workerMessage', connId: conn.id, msg });
    else
      this.#dispatch({
        kind: 'workerViolation',
        connId: conn.id,
        reason: `unexpected ${msg.type}`,
      });
  }

  #acceptClient(socket: Socket): void {
    const conn: FramedConnection = new FramedConnection(socket, {
      onMessage: (msg) => this.#onClientMessage(session, msg),
      onProtocolError: (err) => this.#onClientProtocolError(session, err),
      onClose: () => {
        this.#clients.delete(conn.id);
        this.#clearWaitTimers(conn.id);
        this.#dispatch({ kind: 'clientClosed', connId: conn.id });
      },
    });
    const session = new ClientSession(conn);
    this.#clients.set(conn.id, session);
  }

  #onClientMessage(session: ClientSession, msg: Message): void {
    const requestId = session.nextRequest();
    const connId = session.conn.id;
    if (this.#failure !== null) {
      session.deliver(requestId, { type: 'ERROR', ...this.#failure });
    } else if (!isClientRequest(msg)) {
      this.#replyLater(connId, requestId, {
        type: 'ERROR',
        code: 'UNSUPPORTED_REQUEST',
        message: `Unsupported request: ${msg.type} is not a client request`,
      });
    } else {
      this.#dispatch({ kind: 'clientRequest', connId, requestId, msg });
    }
  }

  #onClientProtocolError(session: ClientSession, err: ProtocolError): 'continue' | undefined {
    const requestId = session.nextRequest();
    const connId = session.conn.id;
    if (err.code === ProtocolErrorCode.BadValue) {
      // The frame was readable; only a value was wrong. Answer it like any
      // other invalid request and keep the connection.
      this.#replyLater(connId, requestId, {
        type: 'ERROR',
        code: 'INVALID_REQUEST',
        message: `Invalid request: ${err.message}`,
      });
      return 'continue';
    }
    this.#replyLater(connId, requestId, {
      type: 'ERROR',
      code: 'MALFORMED_REQUEST',
      message: `Malformed request: ${err.message}`,
    });
    // After a framing error the byte stream is lost; after a bad frame the
    // peer is not speaking the protocol. Either way the connection ends here.
    this.#pending.push({ kind: 'close', connId, reason: `malformed request: ${err.message}` });
    this.#scheduleFlush();
    return undefined;
  }

  /** Queues a reply the shell produced itself, in order with the core's replies. */
  #replyLater(connId: number, requestId: number, msg: ClientReply): void {
    this.#pending.push({ kind: 'reply', connId, requestId, msg });
    this.#scheduleFlush();
  }

  #dispatch(input: CoreInput): void {
    if (this.#failure !== null || this.#stopping) return;
    try {
      const effects = this.#core.handle(input);
      for (const effect of effects) this.#pending.push(effect);
    } catch (err) {
      this.#fail('INTERNAL_ERROR', 'internal error', err);
      return;
    }
    this.#scheduleFlush();
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => this.#flush());
  }

  /** Commits the batch, then releases its effects (never the other way round). */
  #flush(): void {
    this.#flushScheduled = false;
    if (this.#failure !== null) return;
    const effects = this.#pending;
    this.#pending = [];
    if (this.#store.pendingCount > 0) {
      const started = performance.now();
      try {
        this.#store.commit();
      } catch (err) {
        this.#fail('STORE_FAILED', 'storage failure', err, effects);
        return;
      }
      this.events.emit('commit', performance.now() - started);
    }
    for (const effect of effects) this.#release(effect);
  }

  #release(effect: Effect): void {
    switch (effect.kind) {
      case 'send': {
        const conn = this.#workerConns.get(effect.connId);
        if (effect.msg.type === 'WORKER_REGISTERED') conn?.setIdleTimeout(0, () => undefined);
        conn?.send(effect.msg);
        return;
      }
      case 'close': {
        // A worker connection keeps delivering until the worker closes too,
        // so a late result on its way is still judged (and rejected as stale).
        const worker = this.#workerConns.get(effect.connId);
        if (worker !== undefined) void worker.close(effect.reason, { drainInbound: true });
        else void this.#clients.get(effect.connId)?.conn.close(effect.reason);
        return;
      }
      case 'reply':
        this.#deliver(effect.connId, effect.requestId, effect.msg);
        return;
      case 'armWait':
        this.#armWait(effect.connId, effect.requestId, effect.timeoutMs);
        return;
      case 'event':
        this.#publish(effect.event);
        return;
    }
  }

  #deliver(connId: number, requestId: number, msg: ClientReply): void {
    const key = `${connId}/${requestId}`;
    const timer = this.#waitTimers.get(key);
    if (timer !== undefined) {
      clearTimeout(timer);
      this.#waitTimers.delete(key);
    }
    this.#clients.get(connId)?.deliver(requestId, msg);
  }

  #armWait(connId: number, requestId: number, timeoutMs: number): void {
    const key = `${connId}/${requestId}`;
    const timer = setTimeout(() => {
      this.#waitTimers.delete(key);
      this.#dispatch({ kind: 'waitExpired', connId, requestId });
    }, timeoutMs);
    this.#waitTimers.set(key, timer);
  }

  #clearWaitTimers(connId: number): void {
    const prefix = `${connId}/`;
    for (const [key, timer] of this.#waitTimers) {
      if (!key.startsWith(prefix)) continue;
      clearTimeout(timer);
      this.#waitTimers.delete(key);
    }
  }

  #publish(event: CoreEvent): void {
    logEvent(this.#log, event);
    this.events.emit('event', event);
  }

  /**
   * Stops all work after a failed commit or an internal error. Nothing of the
   * failed batch leaves; its client requests get the error instead.
   */
  #fail(code: string, what: string, err: unknown, batch: Effect[] = []): void {
    const message = `Coordinator stopped after a ${what}: ${describeError(err)}; restart it to recover`;
    this.#failure = { code, message };
    this.#log.fatal(
      { code, err: describeError(err) },
      `${what}: refusing all work until restarted`,
    );
    if (this.#sweepTimer !== null) clearInterval(this.#sweepTimer);
    for (const effect of [...batch, ...this.#pending]) {
      if (effect.kind === 'reply')
        this.#deliver(effect.connId, effect.requestId, { type: 'ERROR', code, message });
    }
    this.#pending = [];
    for (const conn of this.#workerConns.values()) void conn.destroy(message);
    this.events.emit('fatal', err instanceof Error ? err : new Error(String(err)));
  }

  /**
   * Stops accepting, commits what is staged, closes every connection and the
   * database. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    this.#stopping = true;
    // From here on inputs are ignored: RUNNING jobs stay RUNNING in the store
    // and are recovered at the next start, exactly as after a crash.
    if (this.#sweepTimer !== null) clearInterval(this.#sweepTimer);
    this.#workerServer.stopAccepting();
    this.#clientServer.stopAccepting();
    if (this.#failure === null) this.#flush();
    for (const timer of this.#waitTimers.values()) clearTimeout(timer);
    this.#waitTimers.clear();
    const conns = [
      ...this.#workerConns.values(),
      ...[...this.#clients.values()].map((c) => c.conn),
    ];
    await Promise.race([
      Promise.all(conns.map((conn) => conn.close('coordinator shutting down'))),
      new Promise((resolve) => setTimeout(resolve, 2_000).unref()),
    ]);
    await Promise.all([
      this.#workerServer.close(),
      this.#clientServer.close(),
      this.#metricsServer?.close(),
    ]);
    this.#store.close();
    this.#log.info('coordinator stopped');
  }
}

function coreConfig(options: CoordinatorOptions): CoreConfig {
  return {
    heartbeatTimeoutMs: options.heartbeatTimeoutMs,
    taskTimeoutMs: options.taskTimeoutMs,
    defaultMaxAttempts: options.maxAttempts,
    retryBaseDelayMs: options.retryBaseDelayMs,
    retryMaxDelayMs: options.retryMaxDelayMs,
    maxActiveJobs: options.maxActiveJobs,
    agingStepMs: options.agingStepMs,
  };
}
