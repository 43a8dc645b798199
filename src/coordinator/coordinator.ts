/**
 * The coordinator shell: sockets, timers and the store around the pure core.
 *
 * Every input (a decoded frame, a closed connection, a sweep tick, an expired
 * wait, a read that came back, a batch that committed) goes through
 * {@link Coordinator.#dispatch} into the core, one at a time, in arrival
 * order. At the end of each event-loop turn the core's writes are handed to
 * the store as one batch and the turn's effects queue behind it in the
 * {@link CommitPipeline}: they leave only once that batch (and every earlier
 * one) is durable, while the next batch is already being built. Reads of
 * history the core asks for run at once; their answers come back as inputs.
 *
 * If a commit fails (disk full, I/O error) or the core hits a bug, the
 * coordinator stops: nothing of the failed batches is released, every open
 * client request gets `ERROR` (code STORE_FAILED or INTERNAL_ERROR), so do
 * all later ones, workers are disconnected, and the operator restarts it;
 * recovery then starts from the last commit that succeeded.
 *
 * Start-up order: open the store and read what recovery needs, bind both
 * ports (a coordinator that cannot bind never writes), then commit the
 * recovery, then serve. Connections that arrive in between wait.
 *
 * On PostgreSQL (`--database postgres://…`) several coordinators share one
 * database and one leads at a time (leader-election.ts). Such a coordinator
 * binds its ports and starts as a standby: it answers every client request
 * and every registration with NOT_LEADER (naming the leader when known).
 * When it takes the lease it starts a term: opens a store fenced by the
 * lease's epoch, recovers from it with the normal rules, and serves. When the
 * term ends (the lease went stale or was taken over, a write was refused as
 * fenced, or a commit failed) it drops every connection and the store at
 * once, releases nothing of what was not committed, and is a standby again.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { formatHostPort, isWildcardHost } from '../net/address.js';
import type { Admission } from '../net/admission.js';
import { FramedConnection, describeCloseReason } from '../net/framed-connection.js';
import type { NetEvent } from '../net/net-events.js';
import { CLIENT_PORT_HINT, WORKER_PORT_HINT } from '../net/port-kind.js';
import { TcpServer } from '../net/tcp.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { ProtocolErrorCode, describeError, type ProtocolError } from '../protocol/errors.js';
import {
  isClientRequest,
  isWorkerToCoordinator,
  type ClientReply,
  type ClientRequest,
  type ErrorMessage,
  type Message,
} from '../protocol/messages.js';
import { LeaseLostError } from '../store/lease.js';
import { MemoryStore } from '../store/memory-store.js';
import { isPostgresUrl } from '../store/postgres/connection.js';
import { PostgresLease } from '../store/postgres/postgres-lease.js';
import { PostgresStore } from '../store/postgres/postgres-store.js';
import { SqliteStore } from '../store/sqlite/sqlite-store.js';
import type { RecoveredState, Store, StoreRead } from '../store/store.js';
import { createBuiltinRegistry } from '../tasks/builtin/index.js';
import type { Logger } from '../observability/logger.js';
import { ClientSession } from './client-session.js';
import { CommitPipeline } from './commit-pipeline.js';
import { CoordinatorCore, type CoreInspection } from './core/core.js';
import { COORDINATOR_FEATURES } from './core/offered-features.js';
import type { CoreConfig, CoreEvent, CoreInput, Effect, PayloadValidator } from './core/types.js';
import { DatabaseLock, isSqliteFile } from './database-lock.js';
import { logEvent } from './event-log.js';
import { Guard } from './guard.js';
import { LeaderElection } from './leader-election.js';
import { LocalClient, LOCAL_CONN_ID } from './local-client.js';
import { MetricsServer, type HttpLimits } from './metrics-server.js';
import { notLeaderError } from './not-leader.js';
import type { CoordinatorOptions } from './options.js';
import { EMPTY_INSPECTION, type RoleStatus } from './role.js';
import { TimeOrderedIds } from './time-ordered-id.js';
import { WaitTimers } from './wait-timers.js';
import { WorkerInbox } from './worker-inbox.js';

export interface CoordinatorEvents {
  /** Every core event, after its batch was committed. */
  event: [CoreEvent];
  /** Time from handing a batch to the store until it was durable, in ms. */
  commit: [number];
  /** The coordinator stopped working (store failure or internal error). */
  fatal: [Error];
  /** The background integrity check finished (problems found; empty = sound). */
  integrity: [readonly string[]];
  /** A refusal, a bound that bit, or a TLS handshake (see net-events.ts). */
  net: [NetEvent];
}

/** Extra wiring for tests and embedding (all optional). */
export interface CoordinatorDeps {
  store?: Store;
  validator?: PayloadValidator;
  now?: () => number;
  /** Folder of the built dashboard (default dist/ui). */
  uiDir?: string;
  /** Bounds on the HTTP port's connections (default HTTP_LIMITS in metrics-server.ts). */
  httpLimits?: Partial<HttpLimits>;
}

/** Opens the store the options name: SQLite, or memory for `:memory:`. */
async function openStore(options: CoordinatorOptions): Promise<Store> {
  if (options.databasePath === ':memory:') return new MemoryStore();
  return SqliteStore.open({ path: options.databasePath, durability: options.durability });
}

export class Coordinator {
  readonly events = new EventEmitter<CoordinatorEvents>();
  readonly #options: CoordinatorOptions;
  readonly #deps: CoordinatorDeps;
  readonly #log: Logger;
  /** The current term's store, pipeline and core: all set while serving, all null otherwise. */
  #store: Store | null = null;
  #core: CoordinatorCore | null = null;
  #pipeline: CommitPipeline | null = null;
  /** PostgreSQL only: who leads. */
  #election: LeaderElection | null = null;
  /** New connections wait (paused) while this is set: before the first start and while a term starts. */
  #holdConnections = true;
  readonly #workerServer: TcpServer;
  readonly #clientServer: TcpServer;
  readonly #guard: Guard;
  /** SQLite only: the file's exclusive lock, held from before recovery until the store is closed. */
  #databaseLock: DatabaseLock | null = null;
  readonly #workerConns = new Map<number, FramedConnection>();
  /** Admissions of worker connections not yet registered. */
  readonly #workerAdmissions = new Map<number, Admission>();
  readonly #clients = new Map<number, ClientSession>();
  /** Requests from inside the process (the HTTP API), through the core like any client's. */
  readonly #local: LocalClient;
  readonly #waitTimers: WaitTimers;
  /** Worker inputs of this turn, handed over after its reads (ends first). */
  readonly #workerInbox: WorkerInbox;
  /** Sockets accepted before recovery finished; served once it has. */
  #early: { socket: Socket; port: 'worker' | 'client'; admission: Admission }[] = [];
  #ports: [number, number] = [0, 0];
  #metricsServer: MetricsServer | null = null;
  /** Time to open the store and rebuild memory from it, in ms. */
  #recoveryMs = 0;
  #pending: Effect[] = [];
  #flushScheduled = false;
  #sweepTimer: NodeJS.Timeout | null = null;
  #failure: { code: ErrorCode; message: string } | null = null;
  #integrityProblems: readonly string[] | null = null;
  /** Set first thing in shutdown: from then on inputs are ignored. */
  #stopping = false;
  #closing: Promise<void> | null = null;

  private constructor(options: CoordinatorOptions, deps: CoordinatorDeps) {
    this.#options = options;
    this.#deps = deps;
    this.#log = options.logger;
    // Certificates and token files are read first: a mistake there stops the
    // start before the database is touched.
    const guard = new Guard(
      options.security ?? {},
      options.netLimits ?? {},
      options.heartbeatTimeoutMs,
      options.logger,
    );
    this.#guard = guard;
    guard.events.on('net', (event) => this.events.emit('net', event));
    this.#workerServer = new TcpServer(
      (socket, admission) => this.#accept(socket, 'worker', admission),
      guard.serverOptions('worker'),
    );
    this.#clientServer = new TcpServer(
      (socket, admission) => this.#accept(socket, 'client', admission),
      guard.serverOptions('client'),
    );
    this.#waitTimers = new WaitTimers((connId, requestId) =>
      this.#dispatch({ kind: 'waitExpired', connId, requestId }),
    );
    this.#workerInbox = new WorkerInbox((input) => this.#dispatch(input));
    this.#local = new LocalClient((requestId, msg) =>
      this.#dispatch({ kind: 'clientRequest', connId: LOCAL_CONN_ID, requestId, msg }),
    );
  }

  /**
   * Opens the store, binds both ports, recovers, and starts serving and
   * sweeping. On PostgreSQL: binds, starts as a standby and leads when it can.
   */
  static async start(
    options: CoordinatorOptions,
    deps: CoordinatorDeps = {},
  ): Promise<Coordinator> {
    if (deps.store === undefined && isPostgresUrl(options.databasePath)) {
      return Coordinator.#startReplicated(options, deps);
    }
    const recoveryStartedMs = performance.now();
    const self = new Coordinator(options, deps);
    // One coordinator per file: the lock comes before anything reads or writes it.
    const lock =
      deps.store === undefined && isSqliteFile(options.databasePath)
        ? DatabaseLock.acquire(options.databasePath)
        : null;
    let store: Store;
    try {
      store = deps.store ?? (await openStore(options));
    } catch (err) {
      lock?.release();
      throw err;
    }
    self.#databaseLock = lock;
    try {
      const stored = await store.recover();
      await self.#bind();
      const { core, recovered } = await self.#recoverCore(store, stored);
      self.#install(store, core);
      self.#recoveryMs = Math.round(performance.now() - recoveryStartedMs);
      await self.#serve();
      for (const effect of recovered) if (effect.kind === 'event') self.#publish(effect.event);
      self.#checkIntegrity();
      return self;
    } catch (err) {
      await self.close();
      await store.close();
      throw err;
    }
  }

  /** Several coordinators on one PostgreSQL database: listen as a standby, then lead when elected. */
  static async #startReplicated(
    options: CoordinatorOptions,
    deps: CoordinatorDeps,
  ): Promise<Coordinator> {
    const self = new Coordinator(options, deps);
    try {
      await self.#bind();
      const me = {
        nodeId: `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`,
        workerAddress: self.#advertised(self.#ports[0]),
        clientAddress: self.#advertised(self.#ports[1]),
      };
      const lease = new PostgresLease({
        url: options.databasePath,
        operationTimeoutMs: Math.max(options.leaseRenewIntervalMs, 1_000),
      });
      self.#election = new LeaderElection(
        { ttlMs: options.leaseTtlMs, renewIntervalMs: options.leaseRenewIntervalMs },
        me,
        lease,
        { lead: (epoch) => self.#lead(epoch), stepDown: (_, reason) => self.#endTerm(reason) },
        options.logger,
      );
      await self.#serve();
      self.#election.start();
      return self;
    } catch (err) {
      await self.close();
      throw err;
    }
  }

  /** Builds the core from what the store recovered and commits the recovery's writes. */
  async #recoverCore(
    store: Store,
    stored: RecoveredState,
  ): Promise<{ core: CoordinatorCore; recovered: Effect[] }> {
    const deps = this.#deps;
    const ids = new TimeOrderedIds(deps.now ?? Date.now);
    const core = new CoordinatorCore(
      coreConfig(this.#options),
      {
        now: deps.now ?? Date.now,
        newId: () => ids.next(),
        validator: deps.validator ?? createBuiltinRegistry(),
      },
      stored,
    );
    const recovered = core.takeRecoveryEffects();
    const batch = core.takeBatch();
    if (batch !== null) {
      await store.commit(batch);
      core.handle({ kind: 'committed', batchId: batch.batchId });
    }
    return { core, recovered };
  }

  /** Starts serving a term: its store, a pipeline of its own, its core. */
  #install(store: Store, core: CoordinatorCore): void {
    const pipeline: CommitPipeline = new CommitPipeline({
      commit: (batch) => store.commit(batch),
      release: (effects) => {
        if (this.#pipeline !== pipeline) return;
        for (const effect of effects) this.#release(effect);
      },
      committed: (batchId, durationMs) => {
        if (this.#pipeline !== pipeline) return;
        this.events.emit('commit', durationMs);
        this.#dispatch({ kind: 'committed', batchId });
      },
      failed: (err) => {
        if (this.#pipeline !== pipeline) return;
        // A refused fenced write is not a storage failure: another coordinator leads.
        if (err instanceof LeaseLostError && this.#election !== null) this.#election.lost('fenced');
        else this.#fail(ErrorCode.StoreFailed, 'storage failure', err);
      },
    });
    this.#store = store;
    this.#pipeline = pipeline;
    this.#core = core;
    this.#failure = null;
  }

  /** Elected for `epoch`: open a store fenced by it, recover, serve. */
  #lead(epoch: number): void {
    if (this.#stopping) return;
    this.#holdConnections = true;
    void this.#startTerm(epoch).finally(() => this.#admitHeld());
  }

  async #startTerm(epoch: number): Promise<void> {
    const startedMs = performance.now();
    let store: PostgresStore | null = null;
    try {
      store = await PostgresStore.open({ url: this.#options.databasePath, epoch });
      const stored = await store.recover();
      if (!this.#leadsUnder(epoch)) return;
      const { core, recovered } = await this.#recoverCore(store, stored);
      if (!this.#leadsUnder(epoch)) return;
      this.#install(store, core);
      store = null;
      this.#recoveryMs = Math.round(performance.now() - startedMs);
      this.#log.info(
        { epoch, activeJobs: core.activeCount, recoveryMs: this.#recoveryMs },
        'leading: recovered and serving',
      );
      for (const effect of recovered) if (effect.kind === 'event') this.#publish(effect.event);
    } catch (err) {
      if (!this.#leadsUnder(epoch)) return;
      this.#log.error({ epoch, err: describeError(err) }, 'could not start leading');
      this.#election?.lost(err instanceof LeaseLostError ? 'fenced' : 'failed');
    } finally {
      // Not installed: this term's store goes (in the background).
      if (store !== null) void store.close();
    }
  }

  #leadsUnder(epoch: number): boolean {
    return !this.#stopping && this.#election?.leadership.epoch === epoch;
  }

  /**
   * Leadership ended: stop at once. Nothing more is committed or released
   * under this term; every connection is dropped (a request in flight gets
   * no answer: its outcome is unknown to the client, as after any lost
   * connection); the store closes in the background.
   */
  #endTerm(reason: string): void {
    if (this.#stopping) return;
    const store = this.#store;
    const hadCore = this.#core !== null;
    this.#core = null;
    this.#store = null;
    this.#pipeline = null;
    this.#pending = [];
    this.#failure = null;
    this.#waitTimers.clearAll();
    this.#workerInbox.clear();
    const why = `leadership ended: ${reason}`;
    for (const conn of this.#workerConns.values()) void conn.destroy(why);
    for (const session of this.#clients.values()) void session.conn.destroy(why);
    // In-process requests have no connection to drop: they are told instead.
    this.#local.answerAll(notLeaderError('client', this.#leaderAddress('client')));
    if (store !== null) {
      store.close().catch((err: unknown) => {
        this.#log.warn({ err: describeError(err) }, 'closing the store of an ended term failed');
      });
    }
    if (hadCore) this.#log.warn({ reason }, 'standing by: connections dropped');
  }

  /** Lets the connections that waited for a term's start in (served, or told NOT_LEADER). */
  #admitHeld(): void {
    this.#holdConnections = false;
    const early = this.#early;
    this.#early = [];
    for (const { socket, port, admission } of early) {
      socket.resume();
      this.#accept(socket, port, admission);
    }
  }

  /** The host others should use to reach us. */
  #advertisedHost(): string {
    const { advertiseHost, bindHost } = this.#options;
    return advertiseHost ?? (isWildcardHost(bindHost) ? hostname() : bindHost);
  }

  /** `host:port` others should use for a port of ours. */
  #advertised(port: number): string {
    return formatHostPort({ host: this.#advertisedHost(), port });
  }

  /** The leader's address for a port kind, when known. */
  #leaderAddress(port: 'worker' | 'client'): string | null {
    const leader = this.#election?.leadership.leader ?? null;
    if (leader === null) return null;
    return port === 'worker' ? leader.workerAddress : leader.clientAddress;
  }

  /** True while this coordinator does not serve (a standby, or a term starting). */
  #standingBy(): boolean {
    return this.#election !== null && this.#core === null;
  }

  /** Role, epoch and leader, for /healthz, metrics and WORKER_LIST. */
  status(): RoleStatus {
    if (this.#election === null) {
      return { role: 'leader', epoch: null, leaderClient: null, leaderWorker: null };
    }
    const leadership = this.#election.leadership;
    return {
      role: this.#core !== null ? 'leader' : 'standby',
      epoch: leadership.leaderEpoch,
      leaderClient: this.#leaderAddress('client'),
      leaderWorker: this.#leaderAddress('worker'),
    };
  }

  async #bind(): Promise<void> {
    const options = this.#options;
    this.#ports = [
      await this.#workerServer.listen(options.workerPort, options.bindHost),
      await this.#clientServer.listen(options.clientPort, options.bindHost),
    ];
  }

  async #serve(): Promise<void> {
    const options = this.#options;
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
        allowedHosts: options.httpAllowedHosts ?? [],
        ownNames: [host, this.#advertisedHost()],
        ...(this.#deps.uiDir !== undefined && { uiDir: this.#deps.uiDir }),
        ...(this.#deps.httpLimits !== undefined && { limits: this.#deps.httpLimits }),
      });
    }
    // The tick goes through the worker inbox, after the frames read in its
    // turn: after a stall of our own, the heartbeats and results that queued
    // up meanwhile are seen before anyone is judged.
    this.#sweepTimer = setInterval(() => this.#workerInbox.tick(), options.sweepIntervalMs);
    this.#admitHeld();
    const replicated = this.#election !== null;
    // The start-up line names the ports that scripts read, so it is written
    // at any level but `silent` (a warn-level logger gets an info child for it).
    const startLog =
      this.#log.isLevelEnabled('info') || this.#log.level === 'silent'
        ? this.#log
        : this.#log.child({}, { level: 'info' });
    startLog.info(
      {
        workerPort: this.#ports[0],
        clientPort: this.#ports[1],
        httpPort: this.#metricsServer?.port,
        // The older name, for scripts that read the port from this line.
        metricsPort: this.#metricsServer?.port,
        bindHost: options.bindHost,
        database: this.#store?.description ?? PostgresStore.describe(options.databasePath),
        durability: options.durability,
        activeJobs: this.#core?.activeCount ?? 0,
        recoveryMs: this.#recoveryMs,
        features: COORDINATOR_FEATURES.join(','),
        ...(replicated
          ? {
              role: 'standby',
              advertise: this.#advertised(this.#ports[1]),
              leaseTtlMs: options.leaseTtlMs,
            }
          : {}),
        ...this.#guard.describe(),
      },
      replicated ? 'coordinator started (standby until it leads)' : 'coordinator started',
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

  /**
   * Looks for damage in the database in the background. A damaged page is
   * not a reason to stop: requests that read it get an error, everything
   * else carries on, and the operator is told (log, metric, health).
   */
  #checkIntegrity(): void {
    const store = this.#store;
    const check = store?.checkIntegrity?.();
    if (store === null || check === undefined) return;
    void check.then((problems) => {
      this.#integrityProblems = problems;
      if (problems.length === 0) {
        this.#log.info({ database: store.description }, 'database integrity check passed');
      } else {
        this.#log.error(
          { database: store.description, problems: problems.slice(0, 3).join('; ') },
          'database is damaged: requests that read damaged pages will fail; restore from a backup',
        );
      }
      this.events.emit('integrity', problems);
    });
  }

  /** Problems the background integrity check found (null until it has run). */
  get integrityProblems(): readonly string[] | null {
    return this.#integrityProblems;
  }

  /** The worker port actually bound. */
  get workerPort(): number {
    return this.#ports[0];
  }

  /** The client port actually bound. */
  get clientPort(): number {
    return this.#ports[1];
  }

  /** The HTTP port actually bound (`/metrics`, `/healthz`, the dashboard); null when off. */
  get metricsPort(): number | null {
    return this.#metricsServer?.port ?? null;
  }

  /** Same as {@link metricsPort}: the HTTP port. */
  get httpPort(): number | null {
    return this.metricsPort;
  }

  /** The core's current state (tests, metrics); empty while standing by. */
  inspect(): CoreInspection {
    if (this.#core === null) {
      if (this.#election !== null) return EMPTY_INSPECTION;
      throw new Error('coordinator is not started');
    }
    return this.#core.inspect();
  }

  /**
   * One client request from inside the process, handled by the core like a
   * TCP client's; resolves with its reply once that reply may leave (after
   * its commit). Never rejects: failures are `ERROR` replies.
   */
  request(msg: ClientRequest): Promise<ClientReply> {
    if (this.#standingBy()) {
      return Promise.resolve(notLeaderError('client', this.#leaderAddress('client')));
    }
    if (this.#failure !== null) return Promise.resolve({ type: 'ERROR', ...this.#failure });
    if (this.#core === null || this.#stopping) {
      return Promise.resolve({
        type: 'ERROR',
        code: ErrorCode.InternalError,
        message: 'Coordinator is not running',
      });
    }
    return this.#local.request(msg);
  }

  /** Non-null once the coordinator has stopped working. */
  get failure(): { code: string; message: string } | null {
    return this.#failure;
  }

  #accept(socket: Socket, port: 'worker' | 'client', admission: Admission): void {
    if (this.#holdConnections && !this.#stopping) {
      socket.pause();
      this.#early.push({ socket, port, admission });
      return;
    }
    if (port === 'worker') this.#acceptWorker(socket, admission);
    else this.#acceptClient(socket, admission);
  }

  #acceptWorker(socket: Socket, admission: Admission): void {
    const conn: FramedConnection = new FramedConnection(
      socket,
      {
        onMessage: (msg) => this.#onWorkerMessage(conn, msg),
        onProtocolError: (err) =>
          this.#workerInbox.push({
            kind: 'workerViolation',
            connId: conn.id,
            reason: err.message,
          }),
        onLimit: (breach) => {
          this.#reportLimit(conn, 'worker', breach.limit);
          this.#workerInbox.push({
            kind: 'workerViolation',
            connId: conn.id,
            reason: breach.message,
          });
        },
        onClose: (reason) => this.#onWorkerClosed(conn, describeCloseReason(reason)),
      },
      this.#guard.connectionOptions('worker'),
    );
    if (this.#failure !== null || this.#stopping) {
      void conn.destroy('coordinator is not accepting workers');
      return;
    }
    this.#workerConns.set(conn.id, conn);
    this.#workerAdmissions.set(conn.id, admission);
    // Absolute: a peer trickling bytes does not extend it.
    const timeoutMs = this.#guard.limits.handshakeTimeoutMs;
    admission.setOnExpired((cause) => {
      this.#workerInbox.push({
        kind: 'workerViolation',
        connId: conn.id,
        reason:
          cause === 'deadline'
            ? `no WORKER_REGISTER within ${timeoutMs} ms`
            : 'dropped before WORKER_REGISTER to make room for a newer connection',
      });
    });
  }

  #reportLimit(conn: FramedConnection, port: 'worker' | 'client', limit: 'frame_timeout'): void {
    this.#guard.report({ type: 'connection.limited', port, limit, remote: conn.remote });
  }

  #onWorkerClosed(conn: FramedConnection, reason: string): void {
    this.#workerConns.delete(conn.id);
    this.#workerAdmissions.delete(conn.id);
    this.#workerInbox.push({ kind: 'workerClosed', connId: conn.id, reason });
  }

  #onWorkerMessage(conn: FramedConnection, msg: Message): void {
    if (this.#standingBy()) {
      conn.pause();
      conn.send(notLeaderError('worker', this.#leaderAddress('worker')));
      void conn.close('not the leader');
      return;
    }
    if (!isWorkerToCoordinator(msg)) {
      const hint = isClientRequest(msg) ? ` (a client request: ${WORKER_PORT_HINT})` : '';
      this.#workerInbox.push({
        kind: 'workerViolation',
        connId: conn.id,
        reason: `unexpected ${msg.type}${hint}`,
      });
      return;
    }
    if (msg.type === 'WORKER_REGISTER' && this.#workerAdmissions.get(conn.id)?.pending === true) {
      // The token is checked here and goes no further: the core never sees it.
      const { authToken, ...register } = msg;
      if (!this.#guard.access.allowsWorker(authToken)) {
        if (authToken == null) {
          this.#refuseWorker(
            conn,
            'no authToken',
            'Unauthenticated: this coordinator needs a worker token (WORKER_REGISTER carried no authToken)',
          );
        } else this.#refuseWorker(conn, 'token refused', 'Unauthenticated: worker token refused');
        return;
      }
      this.#workerInbox.push({ kind: 'workerMessage', connId: conn.id, msg: register });
      return;
    }
    this.#workerInbox.push({ kind: 'workerMessage', connId: conn.id, msg });
  }

  /** A registration without a valid token: ERROR UNAUTHENTICATED, then close. */
  #refuseWorker(conn: FramedConnection, reason: string, message: string): void {
    this.#guard.report({ type: 'auth.refused', port: 'worker', remote: conn.remote, reason });
    conn.pause();
    conn.send({ type: 'ERROR', code: ErrorCode.Unauthenticated, message });
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
          this.#waitTimers.dropConnection(conn.id);
          this.#dispatch({ kind: 'clientClosed', connId: conn.id });
        },
      },
      this.#guard.connectionOptions('client'),
    );
    const { access, limits } = this.#guard;
    const session = new ClientSession(conn, {
      checkToken: access.clientTokensRequired ? (token) => access.allowsClient(token) : null,
      admission,
      maxUnsentReplyBytes: limits.maxUnsentReplyBytes,
      idleTimeoutMs: limits.clientIdleTimeoutMs,
      report: (event) => this.#guard.report(event),
      onBlockedByWait: () => this.#dispatch({ kind: 'releaseWaits', connId: conn.id }),
    });
    this.#clients.set(conn.id, session);
  }

  /** A frame took too long or memory ran short: a last ERROR in order, then close. */
  #onClientLimit(session: ClientSession, message: string): void {
    if (session.refuseUnlessOpen()) return;
    const reply: ErrorMessage = {
      type: 'ERROR',
      code: ErrorCode.LimitExceeded,
      message: `Limit exceeded: ${message}`,
    };
    const requestId = session.nextRequest();
    if (this.#failure !== null || this.#core === null) {
      session.deliver(requestId, reply);
      void session.conn.close(message);
      return;
    }
    this.#replyLater(session.conn.id, requestId, reply);
    this.#pending.push({ kind: 'close', connId: session.conn.id, reason: message });
    this.#scheduleFlush();
  }

  #onClientMessage(session: ClientSession, msg: Message): void {
    // A standby answers NOT_LEADER to everything, AUTH included, before any token check.
    if (this.#standingBy()) {
      session.deliver(
        session.nextRequest(),
        notLeaderError('client', this.#leaderAddress('client')),
      );
      return;
    }
    if (session.gate(msg)) return;
    const requestId = session.nextRequest(msg);
    const connId = session.conn.id;
    if (this.#failure !== null) {
      session.deliver(requestId, { type: 'ERROR', ...this.#failure });
    } else if (!isClientRequest(msg)) {
      this.#replyLater(connId, requestId, {
        type: 'ERROR',
        code: ErrorCode.UnsupportedRequest,
        message: `Unsupported request: ${msg.type} is not a client request${
          isWorkerToCoordinator(msg) ? ` (${CLIENT_PORT_HINT})` : ''
        }`,
      });
    } else {
      this.#dispatch({ kind: 'clientRequest', connId, requestId, msg });
    }
  }

  #onClientProtocolError(session: ClientSession, err: ProtocolError): 'continue' | undefined {
    if (this.#standingBy() && err.code === ProtocolErrorCode.BadValue) {
      session.deliver(
        session.nextRequest(),
        notLeaderError('client', this.#leaderAddress('client')),
      );
      return 'continue';
    }
    if (session.refuseUnlessOpen()) return undefined;
    const requestId = session.nextRequest();
    const connId = session.conn.id;
    if (err.code === ProtocolErrorCode.BadValue && this.#failure === null) {
      // The frame was readable; only a value was wrong. Answer it like any
      // other invalid request and keep the connection.
      this.#replyLater(connId, requestId, {
        type: 'ERROR',
        code: ErrorCode.InvalidRequest,
        message: `Invalid request: ${err.message}`,
      });
      return 'continue';
    }
    const reply: ErrorMessage = {
      type: 'ERROR',
      code: ErrorCode.MalformedRequest,
      message: `Malformed request: ${err.message}`,
    };
    const reason = `malformed request: ${err.message}`;
    // After a framing error the byte stream is lost; after a bad frame the
    // peer is not speaking the protocol. Either way the connection ends here.
    if (this.#failure !== null || this.#core === null) {
      session.deliver(requestId, reply);
      void session.conn.close(reason);
      return undefined;
    }
    this.#replyLater(connId, requestId, reply);
    this.#pending.push({ kind: 'close', connId, reason });
    this.#scheduleFlush();
    return undefined;
  }

  /** Queues a reply the shell produced itself, in order with the core's replies. */
  #replyLater(connId: number, requestId: number, msg: ClientReply): void {
    this.#pending.push({ kind: 'reply', connId, requestId, msg });
    this.#scheduleFlush();
  }

  #dispatch(input: CoreInput): void {
    const core = this.#core;
    if (core === null || this.#failure !== null || this.#stopping) return;
    try {
      for (const effect of core.handle(input)) {
        if (effect.kind === 'read') {
          this.#read(effect.readId, effect.read);
          continue;
        }
        // Known now, sent after the commit: the session counts what it owes.
        if (effect.kind === 'reply') {
          this.#clients.get(effect.connId)?.staged(effect.requestId, effect.msg);
        } else if (effect.kind === 'armWait') {
          this.#clients.get(effect.connId)?.held(effect.requestId);
        }
        this.#pending.push(effect);
      }
    } catch (err) {
      this.#fail(ErrorCode.InternalError, 'internal error', err);
      return;
    }
    this.#scheduleFlush();
  }

  /** Runs a read of history now; its answer is the next input for that read (of the same term). */
  #read(readId: number, read: StoreRead): void {
    const store = this.#store;
    if (store === null) return;
    store.read(read).then(
      (result) => {
        if (this.#store === store) this.#dispatch({ kind: 'readDone', readId, result });
      },
      (err: unknown) => {
        if (this.#store !== store) return;
        if (err instanceof LeaseLostError && this.#election !== null) this.#election.lost('fenced');
        else this.#dispatch({ kind: 'readFailed', readId, message: describeError(err) });
      },
    );
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => this.#flush());
  }

  /** Closes the current batch: its writes go to the store, its effects wait behind it. */
  #flush(): void {
    this.#flushScheduled = false;
    if (this.#failure !== null || this.#core === null || this.#pipeline === null) return;
    if (this.#election !== null && !this.#election.leadsNow()) {
      // The lease went stale (e.g. this process was frozen): nothing of this turn leaves.
      this.#election.check();
      return;
    }
    const effects = this.#pending;
    this.#pending = [];
    const batch = this.#core.takeBatch();
    if (batch === null && effects.length === 0) return;
    this.#pipeline.push(batch, effects);
  }

  #release(effect: Effect): void {
    switch (effect.kind) {
      case 'send': {
        const conn = this.#workerConns.get(effect.connId);
        if (effect.msg.type === 'WORKER_REGISTERED') {
          this.#workerAdmissions.get(effect.connId)?.establish();
          this.#workerAdmissions.delete(effect.connId);
          conn?.setInboundClass('worker');
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
      case 'reply': {
        this.#waitTimers.clear(effect.connId, effect.requestId);
        const msg =
          effect.msg.type === 'WORKER_LIST' && this.#election !== null
            ? { ...effect.msg, ...this.#leaderFields() }
            : effect.msg;
        if (effect.connId === LOCAL_CONN_ID) this.#local.deliver(effect.requestId, msg);
        else this.#clients.get(effect.connId)?.deliver(effect.requestId, msg);
        return;
      }
      case 'armWait':
        if (this.#clients.has(effect.connId) || effect.connId === LOCAL_CONN_ID) {
          this.#waitTimers.arm(effect.connId, effect.requestId, effect.timeoutMs);
        }
        return;
      case 'read':
        this.#read(effect.readId, effect.read);
        return;
      case 'event':
        this.#publish(effect.event);
        return;
    }
  }

  #publish(event: CoreEvent): void {
    logEvent(this.#log, event);
    this.events.emit('event', event);
  }

  /**
   * Stops all work after a failed commit or an internal error. Nothing of the
   * unreleased batches leaves; every open client request gets the error, and
   * so does every later one.
   */
  #fail(code: ErrorCode, what: string, err: unknown): void {
    if (this.#failure !== null) return;
    const election = this.#election;
    const message =
      election === null
        ? `Coordinator stopped (${what}): ${describeError(err)}; restart it to recover`
        : `Coordinator gave up leading (${what}): ${describeError(err)}; it recovers from the database before it leads again`;
    this.#failure = { code, message };
    this.#log.fatal(
      { code, err: describeError(err) },
      election === null
        ? `${what}: refusing all work until restarted`
        : `${what}: ending this term, standing by`,
    );
    if (election === null && this.#sweepTimer !== null) clearInterval(this.#sweepTimer);
    this.#waitTimers.clearAll();
    this.#pending = [];
    const reply: ErrorMessage = { type: 'ERROR', code, message };
    for (const session of this.#clients.values()) session.answerAll(reply);
    this.#local.answerAll(reply);
    for (const conn of this.#workerConns.values()) void conn.destroy(message);
    this.events.emit('fatal', err instanceof Error ? err : new Error(String(err)));
    // Replicated: the term ends and another coordinator (or this one, after
    // recovering) leads; open requests were answered above.
    election?.lost('failed');
  }

  /** `leader` and `epoch` for WORKER_LIST. */
  #leaderFields(): { leader?: string; epoch?: number } {
    const leader = this.#leaderAddress('client');
    const epoch = this.#election?.leadership.leaderEpoch ?? null;
    return { ...(leader === null ? {} : { leader }), ...(epoch === null ? {} : { epoch }) };
  }

  /**
   * Stops accepting, commits what is staged, closes every connection and the
   * store. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    // From here on inputs are ignored: RUNNING jobs stay RUNNING in the store
    // and are recovered at the next start, exactly as after a crash.
    this.#workerInbox.flushAll();
    this.#flush();
    this.#stopping = true;
    if (this.#sweepTimer !== null) clearInterval(this.#sweepTimer);
    this.#workerServer.stopAccepting();
    this.#clientServer.stopAccepting();
    await this.#pipeline?.settled();
    // After the last commit: a standby may take over at once.
    await this.#election?.stop();
    this.#waitTimers.clearAll();
    this.#local.answerAll({
      type: 'ERROR',
      code: ErrorCode.InternalError,
      message: 'Coordinator is shutting down',
    });
    for (const { socket } of this.#early) socket.destroy();
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
    try {
      await this.#store?.close();
    } finally {
      this.#databaseLock?.release();
    }
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
    sweepIntervalMs: options.sweepIntervalMs,
    retainTerminalMs: options.retainTerminalMs,
    maxWaitsPerConnection: options.maxWaitsPerConnection,
    maxWaits: options.maxWaits,
  };
}
