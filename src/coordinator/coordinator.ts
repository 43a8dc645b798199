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
import type { Admission } from '../net/admission.js';
import { FramedConnection, describeCloseReason } from '../net/framed-connection.js';
import type { NetEvent } from '../net/net-events.js';
import { TcpServer } from '../net/tcp.js';
import { ErrorCode } from '../protocol/error-codes.js';
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
import type { CoreConfig, CoreEvent, CoreInput, Effect, PayloadValidator } from './core/types.js';
import { logEvent } from './event-log.js';
import { Guard } from './guard.js';
import { MetricsServer } from './metrics-server.js';
import type { CoordinatorOptions } from './options.js';

export interface CoordinatorEvents {
  /** Every core event, after its batch was committed. */
  event: [CoreEvent];
  /** Duration of each non-empty commit, in ms. */
  commit: [number];
  /** The coordinator stopped working (store failure or internal error). */
  fatal: [Error];
  /** A refusal, a bound that bit, or a TLS handshake (see net-events.ts). */
  net: [NetEvent];
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
  readonly #guard: Guard;
  readonly #workerConns = new Map<number, FramedConnection>();
  /** Admissions of worker connections not yet registered. */
  readonly #workerAdmissions = new Map<number, Admission>();
  readonly #clients = new Map<number, ClientSession>();
  readonly #waitTimers = new Map<string, NodeJS.Timeout>();
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

  private constructor(
    options: CoordinatorOptions,
    store: Store,
    core: CoordinatorCore,
    guard: Guard,
  ) {
    this.#options = options;
    this.#log = options.logger;
    this.#store = store;
    this.#core = core;
    this.#guard = guard;
    guard.events.on('net', (event) => this.events.emit('net', event));
    this.#workerServer = new TcpServer(
      (socket, admission) => this.#acceptWorker(socket, admission),
      guard.serverOptions('worker'),
    );
    this.#clientServer = new TcpServer(
      (socket, admission) => this.#acceptClient(socket, admission),
      guard.serverOptions('client'),
    );
  }

  /** Opens the store, recovers, listens on both ports and starts the sweep. */
  static async start(
    options: CoordinatorOptions,
    deps: CoordinatorDeps = {},
  ): Promise<Coordinator> {
    // Certificates and token files are read first: a mistake there stops the
    // start before the database is touched.
    const guard = new Guard(
      options.security ?? {},
      options.netLimits ?? {},
      options.heartbeatTimeoutMs,
      options.logger,
    );
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
    const self = new Coordinator(options, store, core, guard);
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
      const guard = this.#guard;
      this.#metricsServer = await MetricsServer.start(this, {
        port,
        host,
        maxActiveJobs,
        tls: guard.tls,
        auth: guard.httpAuth(),
        onEvent: (event) => guard.report(event),
      });
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
        ...this.#guard.describe(),
      },
      'coordinator started',
    );
    this.#guard.warnAtStart(options.bindHost);
  }

  /** Re-reads the TLS certificate and the token files (SIGHUP); failures keep the old ones. */
  reload(): void {
    this.#guard.reload();
  }

  /** The guard's certificates, tokens and bounds (HTTP port, metrics, tests). */
  get guard(): Guard {
    return this.#guard;
  }

  /** Open connections per port right now: all, and those not yet through TLS/AUTH/registration. */
  connectionCounts(): Record<'worker' | 'client', { open: number; pending: number }> {
    return {
      worker: {
        open: this.#workerServer.connectionCount,
        pending: this.#workerServer.pendingCount,
      },
      client: {
        open: this.#clientServer.connectionCount,
        pending: this.#clientServer.pendingCount,
      },
    };
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

  #acceptWorker(socket: Socket, admission: Admission): void {
    const conn: FramedConnection = new FramedConnection(
      socket,
      {
        onMessage: (msg) => this.#onWorkerMessage(conn, msg),
        onProtocolError: (err) =>
          this.#dispatch({ kind: 'workerViolation', connId: conn.id, reason: err.message }),
        onLimit: (breach) => {
          this.#reportLimit(conn, 'worker', breach.limit);
          this.#dispatch({ kind: 'workerViolation', connId: conn.id, reason: breach.message });
        },
        onClose: (reason) => this.#onWorkerClosed(conn, describeCloseReason(reason)),
      },
      this.#guard.connectionOptions(),
    );
    if (this.#failure !== null || this.#stopping) {
      void conn.destroy('coordinator is not accepting workers');
      return;
    }
    this.#workerConns.set(conn.id, conn);
    this.#workerAdmissions.set(conn.id, admission);
    // Absolute: a peer trickling bytes does not extend it.
    const timeoutMs = this.#guard.limits.handshakeTimeoutMs;
    admission.setOnExpired(() => {
      this.#dispatch({
        kind: 'workerViolation',
        connId: conn.id,
        reason: `no WORKER_REGISTER within ${timeoutMs} ms`,
      });
    });
  }

  #reportLimit(
    conn: FramedConnection,
    port: 'worker' | 'client',
    limit: 'frame_timeout' | 'inbound_memory',
  ): void {
    this.#guard.report({ type: 'connection.limited', port, limit, remote: conn.remote });
  }

  #onWorkerClosed(conn: FramedConnection, reason: string): void {
    this.#workerConns.delete(conn.id);
    this.#workerAdmissions.delete(conn.id);
    this.#dispatch({ kind: 'workerClosed', connId: conn.id, reason });
  }

  #onWorkerMessage(conn: FramedConnection, msg: Message): void {
    if (!isWorkerToCoordinator(msg)) {
      this.#dispatch({
        kind: 'workerViolation',
        connId: conn.id,
        reason: `unexpected ${msg.type}`,
      });
      return;
    }
    if (msg.type === 'WORKER_REGISTER' && this.#workerAdmissions.get(conn.id)?.pending === true) {
      // The token is checked here and goes no further: the core never sees it.
      const { authToken, ...register } = msg;
      if (!this.#guard.access.allowsWorker(authToken)) {
        this.#refuseWorker(conn, authToken == null ? 'no authToken' : 'token refused');
        return;
      }
      this.#dispatch({ kind: 'workerMessage', connId: conn.id, msg: register });
      return;
    }
    this.#dispatch({ kind: 'workerMessage', connId: conn.id, msg });
  }

  /** A registration without a valid token: ERROR UNAUTHENTICATED, then close. */
  #refuseWorker(conn: FramedConnection, reason: string): void {
    this.#guard.report({ type: 'auth.refused', port: 'worker', remote: conn.remote, reason });
    conn.pause();
    conn.send({
      type: 'ERROR',
      code: ErrorCode.Unauthenticated,
      message: `Unauthenticated: WORKER_REGISTER needs a valid authToken (${reason})`,
    });
    void conn.close(`unauthenticated worker: ${reason}`);
  }

  #acceptClient(socket: Socket, admission: Admission): void {
    const conn: FramedConnection = new FramedConnection(
      socket,
      {
        onMessage: (msg) => this.#onClientMessage(session, msg),
        onProtocolError: (err) => this.#onClientProtocolError(session, err),
        onLimit: (breach) => {
          this.#reportLimit(conn, 'client', breach.limit);
          this.#onClientLimit(session, breach.message);
        },
        onClose: () => {
          this.#clients.delete(conn.id);
          this.#clearWaitTimers(conn.id);
          this.#dispatch({ kind: 'clientClosed', connId: conn.id });
        },
      },
      this.#guard.connectionOptions(),
    );
    const { access, limits } = this.#guard;
    const session = new ClientSession(conn, {
      checkToken: access.clientTokensRequired ? (token) => access.allowsClient(token) : null,
      admission,
      maxUnsentReplyBytes: limits.maxUnsentReplyBytes,
      idleTimeoutMs: limits.clientIdleTimeoutMs,
      report: (event) => this.#guard.report(event),
    });
    this.#clients.set(conn.id, session);
  }

  #onClientMessage(session: ClientSession, msg: Message): void {
    if (session.gate(msg)) return;
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

  /** A frame took too long or memory ran short: a last ERROR in order, then close. */
  #onClientLimit(session: ClientSession, message: string): void {
    if (session.refuseUnlessOpen()) return;
    const connId = session.conn.id;
    this.#replyLater(connId, session.nextRequest(), {
      type: 'ERROR',
      code: ErrorCode.LimitExceeded,
      message: `Limit exceeded: ${message}`,
    });
    this.#pending.push({ kind: 'close', connId, reason: message });
    this.#scheduleFlush();
  }

  #onClientProtocolError(session: ClientSession, err: ProtocolError): 'continue' | undefined {
    if (session.refuseUnlessOpen()) return undefined;
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
      for (const effect of effects) {
        // Known now, sent after the commit: the session counts what it owes.
        if (effect.kind === 'reply')
          this.#clients.get(effect.connId)?.staged(effect.requestId, effect.msg);
        this.#pending.push(effect);
      }
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
        if (effect.msg.type === 'WORKER_REGISTERED') {
          this.#workerAdmissions.get(effect.connId)?.establish();
          this.#workerAdmissions.delete(effect.connId);
        }
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
