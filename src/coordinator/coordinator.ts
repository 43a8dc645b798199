/**
 * The coordinator shell: one phase, the term it serves, and its ports around
 * the pure core.
 *
 * Phases (one field, changed only through `#setPhase`, which asserts the move):
 *   holding   the ports are bound (or being bound) and nothing serves yet:
 *             before the first serve, and on PostgreSQL while the term of a
 *             new lease starts; new connections wait, paused
 *   standby   PostgreSQL only: another coordinator leads (or none yet);
 *             every request and registration is answered NOT_LEADER
 *   serving   a {@link Term} serves: its store, its core, its commit pipeline
 *   failed    SQLite and memory: a commit failed or the core threw; every
 *             request is answered with that failure until a restart
 *   stopping  close() was called; final
 *
 * Who owns what: the {@link Term} owns every input of the core, the commits
 * and the release of effects, and its timers (term-clock.ts: where a timer
 * for a new kind of input goes); the {@link Ports} own the sockets, the
 * gating of each frame and the in-process client; the {@link TermFactory}
 * owns opening stores, recovery and running for leadership. This class owns
 * the phase and moves it; it never touches a socket or a store itself.
 *
 * Start-up (SQLite, memory): open the store and read what recovery needs,
 * bind both ports (a coordinator that cannot bind never writes), commit the
 * recovery, then serve; connections that arrived in between wait.
 *
 * On PostgreSQL (`--database postgres://…`) several coordinators share one
 * database and one leads at a time (leadership/). Such a coordinator binds
 * its ports and starts as a standby. When it takes the lease it starts a
 * term: opens a store fenced by the lease's epoch, recovers from it with the
 * normal rules, and serves. When the term ends (the lease went stale or was
 * taken over, a write was refused as fenced, or a commit failed) it drops
 * every connection and the store at once, releases nothing of what was not
 * committed, and is a standby again.
 *
 * If a commit fails or the core hits a bug, nothing of the failed batches is
 * released, every open client request gets `ERROR` (STORE_FAILED or
 * INTERNAL_ERROR), so do all later ones, and workers are disconnected; the
 * operator restarts it and recovery starts from the last commit that
 * succeeded. (On PostgreSQL the term ends instead, as above.)
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { NetEvent } from '../net/net-events.js';
import type { Logger } from '../observability/logger.js';
import { ErrorCode, LocalErrorCode } from '../protocol/error-codes.js';
import { DtpError, describeError } from '../protocol/errors.js';
import type { ClientReply, ClientRequest, JobEventKind, ShardList } from '../protocol/messages.js';
import { LeaseLostError } from '../store/lease.js';
import { describeDatabase, isSharedDatabase } from '../store/open-store.js';
import { claimShardCount } from '../store/postgres/cluster.js';
import type { CoreInspection } from './core/core.js';
import { COORDINATOR_FEATURES } from './core/offered-features.js';
import type { CoreEvent } from './core/types.js';
import type { LeaderElection } from './leadership/leader-election.js';
import { notLeaderError, otherShardError } from './leadership/not-leader.js';
import { flowHome, requestShard } from '../protocol/request-shard.js';
import { EMPTY_INSPECTION, type RoleStatus } from './leadership/role.js';
import { logEvent } from './observability/event-log.js';
import { CoordinatorMetrics } from './observability/metrics.js';
import { registerNetMetrics } from './observability/net-metrics.js';
import { CoordinatorSpans } from './observability/spans.js';
import { validateCoordinatorOptions, type CoordinatorOptions } from './options.js';
import type { Guard } from './ports/guard.js';
import { Ports, type Entrance, type PortKind } from './ports/ports.js';
import { TermFactory, type PreparedTerm, type TermDeps } from './term/term-factory.js';
import type { Failure, Term, TermOutlets } from './term/term.js';
import { createCronEvaluator } from './cron.js';
import { advertisedAddress, advertisedHost } from './advertise.js';
import type { CoordinatorView, HttpLimits, HttpPort, HttpPortFactory } from './view.js';

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
export interface CoordinatorDeps extends TermDeps {
  /**
   * Serves the HTTP port when `metricsPort` is set (startCoordinator passes
   * the dashboard's, src/http/); without it such a coordinator does not start.
   */
  httpPort?: HttpPortFactory;
  /** Folder of the built dashboard (default dist/ui). */
  uiDir?: string;
  /** Bounds on the HTTP port's connections (default HTTP_LIMITS in src/http/http-server.ts). */
  httpLimits?: Partial<HttpLimits>;
}

/** In-process requests a shard's coordinator takes at once (its sharded coordinator's clients'). */
const SHARD_LOCAL_IN_FLIGHT = 100_000;

type Phase =
  | { readonly kind: 'holding'; readonly epoch: number | null }
  | { readonly kind: 'standby' }
  | { readonly kind: 'serving'; readonly term: Term }
  | { readonly kind: 'failed'; readonly term: Term }
  | { readonly kind: 'stopping'; readonly term: Term | null };

const PHASE_MOVES: { readonly [K in Phase['kind']]: readonly Phase['kind'][] } = {
  holding: ['holding', 'serving', 'standby', 'stopping'],
  standby: ['holding', 'stopping'],
  serving: ['failed', 'standby', 'stopping'],
  failed: ['standby', 'stopping'],
  stopping: [],
};

export class Coordinator implements CoordinatorView {
  readonly events = new EventEmitter<CoordinatorEvents>();
  readonly #options: CoordinatorOptions;
  readonly #deps: CoordinatorDeps;
  readonly #log: Logger;
  readonly #ports: Ports;
  readonly #terms: TermFactory;
  /** PostgreSQL only: who leads. */
  #election: LeaderElection | null = null;
  #phase: Phase = { kind: 'holding', epoch: null };
  #http: HttpPort | null = null;
  /** Time to open the store and rebuild memory from it, in ms. */
  #recoveryMs = 0;
  #integrityProblems: readonly string[] | null = null;
  /** OpenTelemetry spans (spans.ts); null unless the process set tracing up. */
  #spans: CoordinatorSpans | null = null;
  #closing: Promise<void> | null = null;
  /** Stores of ended or unused terms still closing (see #closeInBackground). */
  readonly #storesClosing = new Set<Promise<void>>();
  /** The term being prepared under a new lease (#startTerm), until it serves or gives up. */
  #starting: Promise<void> | null = null;

  private constructor(options: CoordinatorOptions, deps: CoordinatorDeps) {
    this.#options = options;
    this.#deps = deps;
    this.#log = options.logger;
    this.#ports = new Ports(
      {
        holding: () => this.#phase.kind === 'holding',
        acceptsWorkers: () => this.#phase.kind !== 'failed' && this.#phase.kind !== 'stopping',
        entrance: () => this.#entrance(),
        leaderAddress: (port) => this.#leaderAddress(port),
        clientInput: (input) => this.#termOf()?.clientInput(input),
        workerInput: (input) => this.#termOf()?.workerInput(input),
        clientClosed: (connId) => this.#termOf()?.clientClosed(connId),
        shellAnswer: (msg) => this.#shellAnswer(msg),
      },
      {
        security: options.security ?? {},
        netLimits: options.netLimits ?? {},
        heartbeatTimeoutMs: options.heartbeatTimeoutMs,
        logger: options.logger,
        // A shard's in-process requests are every client's of the sharded
        // coordinator, each bounded by its own connection's limits.
        ...(options.shardRole !== undefined && { maxLocalInFlight: SHARD_LOCAL_IN_FLIGHT }),
      },
    );
    this.#ports.guard.events.on('net', (event) => this.events.emit('net', event));
    this.#terms = new TermFactory(options, deps, this.#outlets());
  }

  /**
   * Opens the store, binds both ports, recovers, and starts serving and
   * sweeping. On PostgreSQL: binds, starts as a standby and leads when it can.
   */
  static async start(
    options: CoordinatorOptions,
    deps: CoordinatorDeps = {},
  ): Promise<Coordinator> {
    validateCoordinatorOptions(options);
    if (options.metricsPort !== null && deps.httpPort === undefined) {
      throw new DtpError(
        LocalErrorCode.InvalidOptions,
        'metricsPort is set but no HTTP port was given (deps.httpPort; startCoordinator gives one)',
      );
    }
    const self = new Coordinator(options, deps);
    // Looked up once, before anything is served (tracing.ts: nothing is loaded without a setup).
    const spans = await CoordinatorSpans.load();
    if (spans !== null) {
      self.#spans = spans;
      self.events.on('event', (event) => spans.event(event));
    }
    const elected = deps.store === undefined && isSharedDatabase(options.databasePath);
    await (elected ? self.#startElected() : self.#startSole());
    return self;
  }

  /** One store for the coordinator's life: read, bind, recover, serve. */
  async #startSole(): Promise<void> {
    const startedMs = performance.now();
    let prepared: PreparedTerm | null = null;
    try {
      prepared = await this.#terms.prepareSole();
      await this.#bind();
      const begun = await this.#begin(prepared, startedMs);
      await this.#serve(begun);
      void begun.term.checkIntegrity()?.then((problems) => {
        this.#integrityProblems = problems;
        this.events.emit('integrity', problems);
      });
    } catch (err) {
      await this.close();
      // Opened but never served: its store was not closed with the rest.
      if (prepared !== null && this.#termOf() === null) await prepared.handle.close();
      throw err;
    }
  }

  /** Several coordinators on one PostgreSQL database: listen as a standby, then lead when elected. */
  async #startElected(): Promise<void> {
    try {
      // A database split into shards is served by sharded coordinators only.
      if (this.#options.shardRole === undefined) {
        const stored = await claimShardCount(this.#options.databasePath, 1);
        if (stored !== 1) {
          throw new DtpError(
            LocalErrorCode.ShardsMismatch,
            `the database ${describeDatabase(this.#options.databasePath)} has ${stored} shards; start this coordinator with --shards ${stored}`,
          );
        }
      }
      await this.#bind();
      const advertised = (port: number): string => this.#advertised(port);
      this.#election = this.#terms.elect(
        {
          workerAddress: advertised(this.#ports.workerPort),
          clientAddress: advertised(this.#ports.clientPort),
        },
        {
          lead: (epoch) => this.#lead(epoch),
          stepDown: (_, reason) => this.#endTerm(reason),
          acquireFailed: (current) => this.#options.shardRole?.acquireFailed?.(current),
        },
      );
      await this.#serve(null);
      this.#election.start();
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  async #bind(): Promise<void> {
    const { workerPort, clientPort, bindHost } = this.#options;
    await this.#ports.bind(workerPort, clientPort, bindHost);
  }

  /** Builds a term from a prepared store (committing its recovery); not serving yet. */
  async #begin(
    prepared: PreparedTerm,
    startedMs: number,
  ): Promise<{ term: Term; recovered: CoreEvent[] }> {
    const begun = await this.#terms.begin(prepared, this.#election);
    this.#recoveryMs = Math.round(performance.now() - startedMs);
    return begun;
  }

  /**
   * Opens the HTTP port (if asked for), then serves `term` (or stands by
   * without one), lets the connections that waited in and says so.
   */
  async #serve(begun: { term: Term; recovered: CoreEvent[] } | null): Promise<void> {
    await this.#openHttpPort();
    if (begun === null) {
      this.#setPhase({ kind: 'standby' });
      this.#ports.admitHeld();
    } else {
      this.#install(begun.term);
    }
    this.#logStart();
    this.#ports.guard.warnAtStart(this.#options.bindHost);
    for (const event of begun?.recovered ?? []) this.#publish(event);
  }

  /** The term serves from now on; the connections that waited come in. */
  #install(term: Term): void {
    this.#spans?.reset();
    this.#setPhase({ kind: 'serving', term });
    term.serve();
    this.#ports.admitHeld();
  }

  // Leadership (PostgreSQL).

  /** Elected for `epoch`: open a store fenced by it, recover, serve. */
  #lead(epoch: number): void {
    if (this.#phase.kind === 'stopping') return;
    this.#setPhase({ kind: 'holding', epoch });
    const starting = this.#startTerm(epoch).finally(() => {
      if (this.#starting === starting) this.#starting = null;
      // Not served (it failed, or leadership ended meanwhile): stand by.
      const phase = this.#phase;
      if (phase.kind !== 'holding' || phase.epoch !== epoch) return;
      this.#setPhase({ kind: 'standby' });
      this.#ports.admitHeld();
    });
    this.#starting = starting;
  }

  async #startTerm(epoch: number): Promise<void> {
    const startedMs = performance.now();
    const election = this.#election as LeaderElection;
    let prepared: PreparedTerm | null = null;
    try {
      prepared = await this.#terms.prepareElected(epoch);
      if (!this.#startsUnder(epoch)) return;
      const { term, recovered } = await this.#begin(prepared, startedMs);
      if (!this.#startsUnder(epoch)) return;
      prepared = null;
      this.#install(term);
      this.#log.info(
        { epoch, activeJobs: term.activeCount, recoveryMs: this.#recoveryMs },
        'leading: recovered and serving',
      );
      for (const event of recovered) this.#publish(event);
    } catch (err) {
      if (!this.#startsUnder(epoch)) return;
      this.#log.error({ epoch, err: describeError(err) }, 'could not start leading');
      election.lost(err instanceof LeaseLostError ? 'fenced' : 'failed');
    } finally {
      // Not installed: this term's store goes (in the background).
      if (prepared !== null) this.#closeInBackground(prepared.handle.close());
    }
  }

  /** True while the term of `epoch` is still the one starting, under a lease still ours. */
  #startsUnder(epoch: number): boolean {
    const phase = this.#phase;
    return (
      phase.kind === 'holding' &&
      phase.epoch === epoch &&
      this.#election?.leadership.epoch === epoch
    );
  }

  /**
   * Leadership ended: stop at once. Nothing more is committed or released
   * under this term; every connection is dropped (a request in flight gets
   * no answer: its outcome is unknown to the client, as after any lost
   * connection); the store closes in the background.
   */
  #endTerm(reason: string): void {
    const phase = this.#phase;
    if (phase.kind === 'stopping') return;
    const term = phase.kind === 'serving' || phase.kind === 'failed' ? phase.term : null;
    if (term !== null) {
      this.#closeInBackground(term.end());
      this.#setPhase({ kind: 'standby' });
    }
    this.#ports.dropAll(`leadership ended: ${reason}`);
    // In-process requests have no connection to drop: they are told instead.
    this.#ports.local.answerAll(notLeaderError('client', this.#leaderAddress('client')));
    if (term !== null) this.#log.warn({ reason }, 'standing by: connections dropped');
  }

  // Failing and stopping.

  /**
   * Stops all work after a failed commit or an internal error. Nothing of the
   * unreleased batches leaves; every open client request gets the error, and
   * so does every later one.
   */
  #fail(code: ErrorCode, what: string, err: unknown): void {
    const phase = this.#phase;
    const term = phase.kind === 'serving' || phase.kind === 'stopping' ? phase.term : null;
    if (term === null || term.failure !== null) return;
    const election = this.#election;
    const message =
      election === null
        ? `Coordinator stopped (${what}): ${describeError(err)}; restart it to recover`
        : `Coordinator gave up leading (${what}): ${describeError(err)}; it recovers from the database before it leads again`;
    this.#log.fatal(
      { code, err: describeError(err) },
      election === null
        ? `${what}: refusing all work until restarted`
        : `${what}: ending this term, standing by`,
    );
    term.fail({ code, message });
    if (phase.kind === 'serving') this.#setPhase({ kind: 'failed', term });
    this.#ports.answerAll({ type: 'ERROR', code, message });
    this.#ports.destroyWorkers(message);
    this.events.emit('fatal', err instanceof Error ? err : new Error(String(err)));
    // Replicated: the term ends and another coordinator (or this one, after
    // recovering) leads; open requests were answered above.
    election?.lost('failed');
  }

  /**
   * Stops accepting, commits what is staged, closes every connection and the
   * store, and waits for the stores of earlier terms still closing: once it
   * resolves, nothing of this coordinator holds a database connection.
   * Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    // From here on inputs are ignored: RUNNING jobs stay RUNNING in the store
    // and are recovered at the next start, exactly as after a crash.
    const term = this.#termOf();
    term?.stop();
    this.#setPhase({ kind: 'stopping', term });
    this.#ports.stopAccepting();
    await term?.settled();
    // After the last commit: a standby may take over at once.
    await this.#election?.stop();
    this.#ports.local.answerAll({
      type: 'ERROR',
      code: ErrorCode.InternalError,
      message: 'Coordinator is shutting down',
    });
    await this.#ports.closeConnections();
    await Promise.all([this.#ports.closeServers(), this.#http?.close()]);
    await term?.close();
    // A term still starting sees the stop and lets its store go; then the
    // stores of terms that ended before, or were never installed.
    await this.#starting;
    await Promise.all(this.#storesClosing);
    this.#log.info('coordinator stopped');
  }

  /**
   * A store of a term that ended, or was prepared and not installed, closes
   * while the coordinator goes on; {@link close} waits for it, so that
   * nothing of this coordinator still holds a database connection once
   * close() has resolved.
   */
  #closeInBackground(closing: Promise<void>): void {
    const tracked: Promise<void> = closing
      .catch((err: unknown) => {
        this.#log.warn({ err: describeError(err) }, 'closing the store of an unused term failed');
      })
      .finally(() => this.#storesClosing.delete(tracked));
    this.#storesClosing.add(tracked);
  }

  // The phase, as the ports and the terms see it.

  #setPhase(next: Phase): void {
    const from = this.#phase.kind;
    assert(PHASE_MOVES[from].includes(next.kind), `coordinator phase ${from} -> ${next.kind}`);
    this.#phase = next;
  }

  /** The term of this phase: serving, failed, or stopping after serving. */
  #termOf(): Term | null {
    const phase = this.#phase;
    switch (phase.kind) {
      case 'serving':
      case 'failed':
      case 'stopping':
        return phase.term;
      case 'holding':
      case 'standby':
        return null;
    }
  }

  #entrance(): Entrance {
    const term = this.#termOf();
    if (term === null) return { kind: this.#election === null ? 'closed' : 'notLeader' };
    const failure = term.failure;
    return failure === null ? { kind: 'term', term } : { kind: 'failed', failure };
  }

  /** Where a term's effects go. */
  #outlets(): TermOutlets {
    const ports = (): Ports => this.#ports;
    return {
      send: (connId, msg) => {
        const spans = this.#spans;
        if (spans === null || msg.type !== 'TASK_ASSIGN') ports().send(connId, msg);
        else ports().send(connId, spans.assigning(connId, msg));
      },
      reply: (connId, requestId, msg) => ports().reply(connId, requestId, msg),
      staged: (connId, requestId, msg) => ports().staged(connId, requestId, msg),
      held: (connId, requestId) => ports().held(connId, requestId),
      push: (connIds, msg) => ports().push(connIds, msg),
      close: (connId, reason, abrupt) => ports().close(connId, reason, abrupt),
      hasClient: (connId) => ports().hasClient(connId),
      publish: (event) => this.#publish(event),
      committed: (durationMs) => this.events.emit('commit', durationMs),
      fail: (code, what, err) => this.#fail(code, what, err),
    };
  }

  #publish(event: CoreEvent): void {
    logEvent(this.#log, event);
    this.events.emit('event', event);
  }

  // The outside view (HTTP port, metrics, tests).

  /** Role, epoch and leader, for /healthz, metrics and WORKER_LIST. */
  status(): RoleStatus {
    const election = this.#election;
    if (election === null) {
      return { role: 'leader', epoch: null, leaderClient: null, leaderWorker: null };
    }
    return {
      role: this.#termOf() !== null ? 'leader' : 'standby',
      epoch: election.leadership.leaderEpoch,
      leaderClient: this.#leaderAddress('client'),
      leaderWorker: this.#leaderAddress('worker'),
    };
  }

  /**
   * Where this coordinator stands in its election (PostgreSQL): holding the
   * lease (`leader`, serving or starting its term), trying to take it
   * (`acquiring`), or neither; null on SQLite and memory.
   */
  electionState(): {
    leader: boolean;
    acquiring: boolean;
    epoch: number | null;
    /** While leading: until when its lease is trusted (`performance.now()` clock); else null. */
    trustedUntilMs: number | null;
  } | null {
    const leadership = this.#election?.leadership;
    if (leadership === undefined) return null;
    return {
      leader: leadership.mode === 'leader',
      acquiring: leadership.acquiring,
      epoch: leadership.epoch,
      trustedUntilMs: leadership.trustedUntilMs,
    };
  }

  /** Hands this coordinator's lease over to whoever takes it next; nothing unless it leads. */
  handOver(): void {
    this.#election?.handOver();
  }

  /** A standby tries to take its lease now rather than at its next turn (its gate permitting). */
  tryNow(): void {
    this.#election?.tryNow();
  }

  /** The core's current state (tests, metrics); empty while standing by. */
  inspect(): CoreInspection {
    const term = this.#termOf();
    if (term !== null) return term.inspect();
    if (this.#election !== null) return EMPTY_INSPECTION;
    throw new Error('coordinator is not started');
  }

  /** Up to `limit` jobs not yet ended that depend on `jobId`; none while standing by. */
  dependentsOf(jobId: string, limit: number): string[] {
    return this.#termOf()?.dependentsOf(jobId, limit) ?? [];
  }

  /** A shard's coordinator: messages to its shard were committed to the outbox; read it now. */
  outboxArrived(): void {
    this.#termOf()?.outboxArrived();
  }

  /**
   * One client request from inside the process, handled by the core like a
   * TCP client's; resolves with its reply once that reply may leave (after
   * its commit). Never rejects: failures are `ERROR` replies.
   */
  request(msg: ClientRequest): Promise<ClientReply> {
    const entrance = this.#entrance();
    if (entrance.kind === 'notLeader') {
      return Promise.resolve(notLeaderError('client', this.#leaderAddress('client')));
    }
    if (entrance.kind === 'failed') return Promise.resolve({ type: 'ERROR', ...entrance.failure });
    if (entrance.kind === 'closed' || this.#phase.kind === 'stopping') {
      return Promise.resolve({
        type: 'ERROR',
        code: ErrorCode.InternalError,
        message: 'Coordinator is not running',
      });
    }
    return this.#ports.local.request(msg);
  }

  /** Non-null once the coordinator has stopped working. */
  get failure(): Failure | null {
    return this.#termOf()?.failure ?? null;
  }

  /** Problems the background integrity check found (null until it has run). */
  get integrityProblems(): readonly string[] | null {
    return this.#integrityProblems;
  }

  /** Re-reads the TLS certificate and the token files (SIGHUP); failures keep the old ones. */
  reload(): void {
    this.#ports.guard.reload();
  }

  /** The guard's certificates, tokens and bounds (HTTP port, metrics, tests). */
  get guard(): Guard {
    return this.#ports.guard;
  }

  /** Open connections per port right now: all, and those not yet through TLS/AUTH/registration. */
  connectionCounts(): Record<PortKind, { open: number; pending: number }> {
    return this.#ports.connectionCounts();
  }

  /** Job events handed to subscriptions since the start, one per subscription, by kind. */
  pushedEvents(): Readonly<Record<JobEventKind, number>> {
    return this.#ports.pushedEvents;
  }

  /** The worker port actually bound. */
  get workerPort(): number {
    return this.#ports.workerPort;
  }

  /** The client port actually bound. */
  get clientPort(): number {
    return this.#ports.clientPort;
  }

  /** The HTTP port actually bound (`/metrics`, `/healthz`, the dashboard); null when off. */
  get metricsPort(): number | null {
    return this.#http?.port ?? null;
  }

  /** Same as {@link metricsPort}: the HTTP port. */
  get httpPort(): number | null {
    return this.metricsPort;
  }

  // Small parts.

  /** Starts the HTTP port with this coordinator's metrics, when asked for. */
  async #openHttpPort(): Promise<void> {
    const { metricsPort: port, bindHost: host, maxActiveJobs } = this.#options;
    const start = this.#deps.httpPort;
    if (port === null || start === undefined) return;
    const metrics = new CoordinatorMetrics(this, { maxActiveJobs });
    registerNetMetrics(metrics.registry, this);
    const guard = this.#ports.guard;
    this.#http = await start(this, {
      port,
      host,
      maxActiveJobs,
      tls: guard.tls,
      tokens: guard.access,
      metrics,
      cron: createCronEvaluator(),
      report: (event) => guard.report(event),
      allowedHosts: this.#options.httpAllowedHosts ?? [],
      ownNames: [host, this.#advertisedHost()],
      ...(this.#deps.uiDir !== undefined && { uiDir: this.#deps.uiDir }),
      limits: {
        maxStreamsPerAddress: this.#options.maxHttpStreamsPerAddress,
        streamStallMs: this.#options.subscriberStallMs,
        ...this.#deps.httpLimits,
      },
    });
  }

  /** The host others should use to reach us. */
  #advertisedHost(): string {
    return advertisedHost(this.#options);
  }

  /** `host:port` others should use for a port of ours. */
  #advertised(port: number): string {
    return advertisedAddress(this.#options, port);
  }

  /**
   * A shard's coordinator refuses requests about another shard's queues and
   * jobs (NOT_LEADER, naming that shard's leader) and a batch that spans
   * shards (the router splits those); a flow that spans shards is taken by
   * the shard of its first job (its core sends the others their jobs:
   * core/cross-shard.ts); a request about every queue gets this shard's part.
   */
  #shellAnswer(msg: ClientRequest): ClientReply | null {
    const role = this.#options.shardRole;
    if (msg.type === 'LIST_SHARDS')
      return role === undefined ? this.#shardList() : role.shardList();
    if (role === undefined) return null;
    const target = requestShard(msg, role.shards);
    if (target.kind === 'one' && target.shard !== role.shard) {
      return otherShardError(target.shard, role.leaderOf(target.shard, 'client'));
    }
    if (target.kind === 'mixed' && msg.type === 'SUBMIT_FLOW') {
      const home = flowHome(msg, role.shards);
      return home === role.shard ? null : otherShardError(home, role.leaderOf(home, 'client'));
    }
    if (target.kind === 'mixed') {
      return {
        type: 'ERROR',
        code: ErrorCode.InvalidRequest,
        message: `Invalid request: its jobs are in the queues of shards ${target.shards.join(', ')}; a shard's coordinator takes only its own`,
      };
    }
    return null;
  }

  /** LIST_SHARDS of an unsharded coordinator that serves: one shard, its own. */
  #shardList(): ShardList {
    const client = this.#advertised(this.clientPort);
    const worker = this.#advertised(this.workerPort);
    const epoch = this.#election?.leadership.epoch ?? 0;
    return {
      type: 'SHARD_LIST',
      shards: [{ shard: 0, leader: client, epoch, clientAddress: client, workerAddress: worker }],
      coordinators: [{ address: client, workerAddress: worker, shards: 1 }],
    };
  }

  /** The leader's address for a port kind, when known. */
  #leaderAddress(port: PortKind): string | null {
    const leader = this.#election?.leadership.leader ?? null;
    if (leader === null) return null;
    return port === 'worker' ? leader.workerAddress : leader.clientAddress;
  }

  /**
   * The start-up line names the ports that scripts read, so it is written at
   * any level but `silent` (a warn-level logger gets an info child for it).
   */
  #logStart(): void {
    const options = this.#options;
    // A shard's own coordinator is internal: the sharded one says where it listens.
    if (options.shardRole !== undefined) {
      this.#log.debug({ workerPort: this.workerPort, clientPort: this.clientPort }, 'shard ports');
      return;
    }
    const log =
      this.#log.isLevelEnabled('info') || this.#log.level === 'silent'
        ? this.#log
        : this.#log.child({}, { level: 'info' });
    const term = this.#termOf();
    const elected = this.#election !== null;
    log.info(
      {
        workerPort: this.workerPort,
        clientPort: this.clientPort,
        httpPort: this.#http?.port,
        // The older name, for scripts that read the port from this line.
        metricsPort: this.#http?.port,
        bindHost: options.bindHost,
        database: term?.description ?? describeDatabase(options.databasePath),
        durability: options.durability,
        activeJobs: term?.activeCount ?? 0,
        recoveryMs: this.#recoveryMs,
        features: COORDINATOR_FEATURES.join(','),
        ...(elected
          ? {
              role: 'standby',
              advertise: this.#advertised(this.clientPort),
              leaseTtlMs: options.leaseTtlMs,
            }
          : {}),
        ...this.#ports.guard.describe(),
      },
      elected ? 'coordinator started (standby until it leads)' : 'coordinator started',
    );
  }
}
