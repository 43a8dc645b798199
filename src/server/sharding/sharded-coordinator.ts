/**
 * A coordinator of a sharded PostgreSQL database (`--shards S`, S > 1): one
 * process that leads its share of the shards and serves every request.
 *
 * Inside, one {@link Coordinator} per shard, each exactly the coordinator of
 * an unsharded database pointed at its shard's schema (`dtp_s<n>`, with its
 * own lease, epoch and fencing), on ports of its own. It stands by until its
 * election takes the shard's lease, then recovers the shard and serves it
 * with its own single-writer core; nothing in memory is shared between
 * shards. Whether a shard's election may try to take its lease is this
 * class's decision (the {@link ShardShare} policy): every round (one lease
 * renewal interval) it says it is alive in the database's membership table,
 * reads every shard's lease, and hands a shard over while it leads more than
 * its share.
 *
 * Outside, the two ports users know. The client port routes each request to
 * its shard, here or on the coordinator that leads it (shard-router.ts). The
 * worker port tells a worker where the shards take workers (a LIST_SHARDS,
 * or the refusal of its WORKER_REGISTER), and the worker registers with each.
 * With `metricsPort` (`--http-port`), the HTTP port one coordinator has, over
 * the whole process (sharded-http.ts).
 */
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../../observability/logger.js';
import { ErrorCode, LocalErrorCode } from '../../protocol/error-codes.js';
import { DtpError, describeError } from '../../protocol/errors.js';
import type {
  ClientReply,
  ClientRequest,
  ErrorMessage,
  ShardInfo,
  ShardList,
} from '../../protocol/messages.js';
import { shardCountProblem } from '../../protocol/shards.js';
import type { LeaseHolder, LeaseView } from '../../store/lease.js';
import type { Member } from '../../store/membership.js';
import { describeDatabase, isSharedDatabase } from '../../store/open-store.js';
import { claimShardCount, ensureShardSchemas } from '../../store/postgres/cluster.js';
import { PostgresMembership, type ShardLeaseRead } from '../../store/postgres/membership.js';
import { DedicatedConnection } from '../../store/postgres/dedicated-connection.js';
import { OutboxListener } from '../../store/postgres/outbox-listener.js';
import { ShardWriter } from '../../store/postgres/shard-writer.js';
import { advertisedAddress } from '../../coordinator/advertise.js';
import { Coordinator, type CoordinatorDeps } from '../../coordinator/coordinator.js';
import { ShardShare } from '../../coordinator/leadership/shard-share.js';
import type { AcquireGate } from '../../coordinator/leadership/leadership.js';
import { OwnershipRound, type ShardElection } from '../../coordinator/sharding/ownership-round.js';
import { validateCoordinatorOptions, type CoordinatorOptions } from '../../coordinator/options.js';
import { parseTokens } from '../../coordinator/ports/access.js';
import { readClientTls, type ClientTls } from '../../net/tls.js';
import { Ports, type PortsHost } from '../../coordinator/ports/ports.js';
import { ShardRouter, type ShardDirectory, type ShardRouterOptions } from './shard-router.js';
import { ShardedHttp } from './sharded-http.js';

/**
 * How often a shard led here reads the outbox without being told of a
 * message (the listener tells it at once): a safety net for a notification
 * lost with its connection, not the way messages usually arrive.
 */
const OUTBOX_SAFETY_POLL_MS = 1_000;

export interface ShardedEvents {
  /** A round read the leases: the map as it is now. */
  shards: [ShardList];
}

/** One shard's lease as the last round read it, and when that read began (performance.now, ms). */
interface ShardView {
  lease: ShardLeaseRead | null;
  readAtMs: number;
}

export class ShardedCoordinator {
  readonly events = new EventEmitter<ShardedEvents>();
  readonly shards: number;
  readonly nodeId: string;
  readonly #options: CoordinatorOptions;
  readonly #log: Logger;
  readonly #share: ShardShare;
  readonly #ownership: OwnershipRound;
  readonly #membership: PostgresMembership;
  /** The shards' leases share it (schemas migrated at start). */
  readonly #leaseConnection: DedicatedConnection;
  /** The shards' commits, combined (shard-writer.ts). */
  readonly #writer: ShardWriter;
  /** Tells the shards led here when outbox messages to them were committed. */
  #outboxListener: OutboxListener | null = null;
  readonly #ports: Ports;
  readonly #router: ShardRouter;
  readonly #routerOptions: ShardRouterOptions;
  readonly #inner: Coordinator[] = [];
  readonly #views: ShardView[];
  #members: Member[] = [];
  #http: ShardedHttp | null = null;
  /** When the last round that reached the database began (performance.now, ms); null = none yet. */
  #memberSinceMs: number | null = null;
  #round: NodeJS.Timeout | null = null;
  #roundRunning = false;
  #changed: { promise: Promise<void>; resolve: () => void };
  #closing: Promise<void> | null = null;

  private constructor(options: CoordinatorOptions, shards: number) {
    this.#options = options;
    this.#log = options.logger;
    this.shards = shards;
    this.nodeId = `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
    this.#share = new ShardShare(shards, this.nodeId, 2 * options.leaseTtlMs);
    this.#ownership = new OwnershipRound(this.#share);
    this.#membership = new PostgresMembership({
      url: options.databasePath,
      operationTimeoutMs: Math.max(options.leaseRenewIntervalMs, 1_000),
    });
    this.#leaseConnection = new DedicatedConnection({
      url: options.databasePath,
      applicationName: 'dtp-shard-leases',
      operationTimeoutMs: Math.max(options.leaseRenewIntervalMs, 1_000),
    });
    this.#writer = new ShardWriter(options.databasePath, 'dtp-shard-writer');
    this.#views = Array.from({ length: shards }, () => ({ lease: null, readAtMs: 0 }));
    this.#changed = deferred();
    const host: PortsHost = {
      holding: () => false,
      acceptsWorkers: () => this.#closing === null,
      entrance: () =>
        this.#closing === null ? { kind: 'router', router: routerPort } : { kind: 'closed' },
      leaderAddress: () => null,
      clientInput: () => undefined,
      workerInput: () => undefined,
      clientClosed: (connId) => this.#router.closed(connId),
      shellAnswer: () => null,
    };
    this.#ports = new Ports(host, {
      security: options.security ?? {},
      netLimits: options.netLimits ?? {},
      heartbeatTimeoutMs: options.heartbeatTimeoutMs,
      logger: options.logger,
    });
    this.#routerOptions = {
      security: { token: peerToken(options), tls: peerTls(options) },
      connectTimeoutMs: Math.max(options.leaseRenewIntervalMs, 1_000),
      leaderWaitMs: 2 * options.leaseTtlMs,
      logger: options.logger,
    };
    this.#router = new ShardRouter(
      this.#directory(),
      {
        reply: (connId, requestId, msg) => this.#ports.reply(connId, requestId, msg),
        push: (connId, msg) => this.#ports.push([connId], msg),
        drop: (connId, reason) => this.#ports.close(connId, reason, true),
      },
      this.#routerOptions,
    );
    const routerPort = {
      request: (connId: number, requestId: number, msg: ClientRequest) =>
        this.#router.request(connId, requestId, msg),
      closed: (connId: number) => this.#router.closed(connId),
      shardList: (): ClientReply => this.shardList(),
      workerRefusal: (): ErrorMessage => this.#workerRefusal(),
    };
  }

  /**
   * Checks the database's shard count (the first coordinator stores it; a
   * different `shards` is refused with SHARDS_MISMATCH), prepares every
   * shard's schema, binds the two ports, starts one standby coordinator per
   * shard, the HTTP port when `metricsPort` is set (through `deps.httpPort`,
   * which must then be given) and the rounds that share the shards out.
   */
  static async start(
    options: CoordinatorOptions,
    shards: number,
    deps: CoordinatorDeps = {},
  ): Promise<ShardedCoordinator> {
    validateCoordinatorOptions(options);
    if (options.metricsPort !== null && deps.httpPort === undefined) {
      throw new DtpError(
        LocalErrorCode.InvalidOptions,
        'metricsPort is set but no HTTP port was given (deps.httpPort)',
      );
    }
    const problem = shardCountProblem(shards);
    if (problem !== null) throw new DtpError(LocalErrorCode.InvalidOptions, `shards ${problem}`);
    if (!isSharedDatabase(options.databasePath)) {
      throw new DtpError(
        LocalErrorCode.InvalidOptions,
        'shards need a PostgreSQL database (--database postgres://…)',
      );
    }
    const stored = await claimShardCount(options.databasePath, shards);
    if (stored !== shards) {
      throw new DtpError(
        LocalErrorCode.ShardsMismatch,
        `the database ${describeDatabase(options.databasePath)} has ${stored} shard${stored === 1 ? '' : 's'}; this coordinator was started with --shards ${shards}`,
      );
    }
    await ensureShardSchemas(options.databasePath, shards);
    const self = new ShardedCoordinator(options, shards);
    try {
      await self.#ports.bind(options.workerPort, options.clientPort, options.bindHost);
      await self.#startShards(deps);
      self.#outboxListener = OutboxListener.start({
        url: options.databasePath,
        arrived: (shards) => self.#outboxArrived(shards),
        retryMs: Math.max(options.leaseRenewIntervalMs, 1_000),
        logger: options.logger,
      });
      await self.#openHttp(deps);
      await self.#runRound();
      self.#scheduleRound();
      self.#logStart();
    } catch (err) {
      await self.close();
      throw err;
    }
    return self;
  }

  get workerPort(): number {
    return this.#ports.workerPort;
  }

  get clientPort(): number {
    return this.#ports.clientPort;
  }

  /** The HTTP port actually bound; null when off. */
  get httpPort(): number | null {
    return this.#http?.port ?? null;
  }

  /**
   * Alive in the membership: its last round that reached the database began
   * less than a lease ttl ago (the others count it alive that long), and it
   * is not stopping.
   */
  memberAlive(): boolean {
    const since = this.#memberSinceMs;
    if (this.#closing !== null || since === null) return false;
    return performance.now() - since < this.#options.leaseTtlMs;
  }

  /** The coordinator of one shard in this process (tests, inspection). */
  shard(shard: number): Coordinator {
    const inner = this.#inner[shard];
    if (inner === undefined) throw new RangeError(`no shard ${shard}`);
    return inner;
  }

  /** Requests its client port sent to a shard: into a shard led here, or forwarded (tests, inspection). */
  routed(): { local: number; forwarded: number } {
    return this.#router.sent;
  }

  /** The shards this process leads now. */
  ledShards(): number[] {
    return this.#inner.flatMap((c, shard) => (c.electionState()?.leader === true ? [shard] : []));
  }

  /**
   * LIST_SHARDS: each shard's leader (its coordinator's client port) and
   * epoch, how long its lease has left, and the coordinators. A shard this
   * process leads is told as it knows it (its epoch, and how long it trusts
   * its lease); another as the last round read it (its lease counted down
   * since), so the shards it took since that round show at once, and one it
   * no longer leads is not shown as its own.
   */
  shardList(): ShardList {
    const byNode = new Map(this.#members.map((m) => [m.nodeId, m]));
    const nowMs = performance.now();
    const led = new Map<string, number>();
    const shards: ShardInfo[] = this.#views.map((view, shard) => {
      const lead = this.#leadOf(shard);
      if (lead.kind === 'here') {
        led.set(this.nodeId, (led.get(this.nodeId) ?? 0) + 1);
        return {
          shard,
          leader: advertisedAddress(this.#options, this.clientPort),
          epoch: lead.epoch,
          clientAddress: advertisedAddress(this.#options, lead.inner.clientPort),
          workerAddress: advertisedAddress(this.#options, lead.inner.workerPort),
          leaseLeftMillis: Math.max(0, Math.floor((lead.trustedUntilMs ?? nowMs) - nowMs)),
        };
      }
      const { holder, epoch } = lead;
      if (holder !== null) led.set(holder.nodeId, (led.get(holder.nodeId) ?? 0) + 1);
      const member = holder === null ? undefined : byNode.get(holder.nodeId);
      const leftMs = holder === null ? 0 : (view.lease?.leftMs ?? 0) - (nowMs - view.readAtMs);
      return {
        shard,
        leader: member?.clientAddress ?? null,
        epoch,
        clientAddress: holder?.clientAddress ?? null,
        workerAddress: holder?.workerAddress ?? null,
        ...(holder !== null && { leaseLeftMillis: Math.max(0, Math.floor(leftMs)) }),
      };
    });
    const coordinators = this.#members.map((m) => ({
      address: m.clientAddress ?? m.nodeId,
      workerAddress: m.workerAddress,
      shards: led.get(m.nodeId) ?? 0,
    }));
    return { type: 'SHARD_LIST', shards, coordinators };
  }

  /** Re-reads the TLS certificate and the token files (SIGHUP), here and in every shard. */
  reload(): void {
    this.#ports.guard.reload();
    for (const inner of this.#inner) inner.reload();
    // What the routers present to the other coordinators' shard ports from
    // now on (connections already open stay as they are).
    try {
      const security = this.#routerOptions.security;
      security.token = peerToken(this.#options);
      security.tls = peerTls(this.#options);
    } catch (err) {
      this.#log.warn({ err: describeError(err) }, 'kept the previous token and TLS for the shards');
    }
  }

  /** Stops: every shard's lease released, this coordinator out of the membership. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    if (this.#round !== null) clearTimeout(this.#round);
    this.#round = null;
    this.#ports.stopAccepting();
    await this.#ports.closeConnections();
    await this.#router.close();
    await this.#http?.close();
    await Promise.all(this.#inner.map((c) => c.close()));
    await this.#outboxListener?.close();
    await this.#writer.close();
    await this.#membership.leave(this.nodeId).catch((err: unknown) => {
      this.#log.warn({ err: describeError(err) }, 'could not leave the membership');
    });
    await this.#membership.close();
    await this.#leaseConnection.close();
    await this.#ports.closeServers();
    this.#changed.resolve();
  }

  async #startShards(deps: CoordinatorDeps): Promise<void> {
    const { httpPort: _httpPort, ...innerDeps } = deps;
    for (let shard = 0; shard < this.shards; shard++) {
      const inner = await Coordinator.start(
        {
          ...this.#options,
          workerPort: 0,
          clientPort: 0,
          metricsPort: null,
          logger: this.#log.child({ shard }),
          shardRole: {
            shard,
            shards: this.shards,
            nodeId: this.nodeId,
            gate: this.#gate(shard),
            acquireFailed: (current) => this.#acquireFailed(shard, current),
            leaderOf: (other, port) => this.#leaderOf(other, port),
            shardList: () => this.shardList(),
            leaseConnection: this.#leaseConnection,
            writer: this.#writer,
            outboxPollMs: OUTBOX_SAFETY_POLL_MS,
          },
        },
        innerDeps,
      );
      this.#inner.push(inner);
    }
  }

  /** Outbox messages to `shards` (null: maybe to any) were committed: those led here read them now. */
  #outboxArrived(shards: readonly number[] | null): void {
    for (const shard of shards ?? this.#inner.keys()) this.#inner[shard]?.outboxArrived();
  }

  async #openHttp(deps: CoordinatorDeps): Promise<void> {
    const start = deps.httpPort;
    if (this.#options.metricsPort === null || start === undefined) return;
    this.#http = await ShardedHttp.open(
      {
        shards: this.shards,
        inner: this.#inner,
        ports: this.#ports,
        directory: this.#directory(),
        routerOptions: this.#routerOptions,
        memberAlive: () => this.memberAlive(),
        epochOf: (shard) => this.#epochOf(shard),
        outboxBacklog: () => this.#membership.outboxBacklog(this.shards),
        writerStats: () => this.#writer.stats,
      },
      this.#options,
      start,
      deps,
    );
  }

  /**
   * Who leads `shard` as this process knows it: its own coordinator of the
   * shard while that leads (its epoch, and until when it trusts its lease),
   * else the holder the last round read, with the lease's epoch. A lease
   * read as this process's that it no longer leads (handed over or lost
   * since) names no holder.
   */
  #leadOf(
    shard: number,
  ):
    | { kind: 'here'; inner: Coordinator; epoch: number; trustedUntilMs: number | null }
    | { kind: 'read'; holder: LeaseHolder | null; epoch: number } {
    const inner = this.#inner[shard];
    const here = inner?.electionState();
    if (inner !== undefined && here?.leader === true && here.epoch !== null) {
      return { kind: 'here', inner, epoch: here.epoch, trustedUntilMs: here.trustedUntilMs };
    }
    const lease = this.#views[shard]?.lease ?? null;
    const read = lease?.live === true ? lease.holder : null;
    const holder = read?.nodeId === this.nodeId ? null : read;
    return { kind: 'read', holder, epoch: lease?.epoch ?? 0 };
  }

  /** A shard's epoch: its coordinator's here while it leads, else the last round's read. */
  #epochOf(shard: number): number {
    return this.#leadOf(shard).epoch;
  }

  /** The ownership round decides whether a standby tries; nothing is taken once stopping. */
  #gate(shard: number): AcquireGate {
    const round = this.#ownership.gate(
      shard,
      () => this.#elections(),
      performance.now.bind(performance),
    );
    return { mayAcquire: () => this.#closing === null && round.mayAcquire() };
  }

  /** Each shard's election as the ownership round sees it. */
  #elections(): ShardElection[] {
    return this.#inner.map((inner) => {
      const state = inner.electionState();
      return {
        mode: state?.leader === true ? 'leader' : 'standby',
        acquiring: state?.acquiring ?? false,
      };
    });
  }

  /** A try found a shard held: the round learns who holds it, and the freed try goes elsewhere. */
  #acquireFailed(shard: number, current: LeaseView): void {
    if (this.#closing !== null || this.#inner.length < this.shards) return;
    const now = performance.now();
    this.#ownership.leaseSeen(shard, current, now);
    for (const next of this.#ownership.admitted(this.#elections(), now))
      this.#inner[next]?.tryNow();
  }

  /** Where a shard's leader takes connections of a kind (this process's own port when it leads it). */
  #leaderOf(shard: number, port: 'worker' | 'client'): string | null {
    const lead = this.#leadOf(shard);
    if (lead.kind === 'here') {
      const { inner } = lead;
      return advertisedAddress(
        this.#options,
        port === 'worker' ? inner.workerPort : inner.clientPort,
      );
    }
    const { holder } = lead;
    if (holder === null) return null;
    return port === 'worker' ? holder.workerAddress : holder.clientAddress;
  }

  #directory(): ShardDirectory {
    return {
      shards: this.shards,
      local: (shard) => {
        const inner = this.#inner[shard];
        if (inner === undefined || inner.status().role !== 'leader') return null;
        return (msg) => inner.request(msg);
      },
      clientAddress: (shard) => this.#leaderOf(shard, 'client'),
      changed: () => this.#changed.promise,
      shardList: () => this.shardList(),
    };
  }

  #workerRefusal(): ErrorMessage {
    return {
      type: 'ERROR',
      code: ErrorCode.NotLeader,
      message:
        'NOT_LEADER: SHARDED: this coordinator leads shards of a sharded database; register with each shard (shards)',
      shards: this.shardList().shards,
    };
  }

  // Rounds.

  #scheduleRound(): void {
    if (this.#closing !== null) return;
    this.#round = setTimeout(() => {
      this.#round = null;
      void this.#runRound().finally(() => this.#scheduleRound());
    }, this.#options.leaseRenewIntervalMs);
  }

  /**
   * Alive in the membership; every shard's lease read; a shard handed over
   * while this coordinator leads more than its share. A failed round (the
   * database out of reach) changes nothing: the leases decide on their own.
   */
  async #runRound(): Promise<void> {
    if (this.#roundRunning || this.#closing !== null) return;
    this.#roundRunning = true;
    try {
      const http = this.httpPort;
      const me: Member = {
        nodeId: this.nodeId,
        clientAddress: advertisedAddress(this.#options, this.clientPort),
        workerAddress: advertisedAddress(this.#options, this.workerPort),
        httpAddress: http === null ? null : advertisedAddress(this.#options, http),
      };
      const startedMs = performance.now();
      this.#members = await this.#membership.heartbeat(me, this.#options.leaseTtlMs);
      this.#memberSinceMs = startedMs;
      const readAtMs = performance.now();
      const leases = await this.#membership.shardLeases(this.shards);
      const now = performance.now();
      for (const lease of leases) {
        const view = this.#views[lease.shard];
        if (view === undefined) continue;
        view.lease = lease;
        view.readAtMs = readAtMs;
      }
      this.#ownership.observe(
        this.#members.map((m) => m.nodeId),
        this.#views.map((v) => v.lease),
        now,
      );
      const decision = this.#ownership.decide(this.#elections(), now);
      for (const shard of decision.handOver) {
        this.#log.info(
          { shard, led: decision.led, share: this.#share.shareOf() },
          'handing a shard over: this coordinator leads more than its share',
        );
        this.#inner[shard]?.handOver();
      }
      for (const shard of decision.tryNow) this.#inner[shard]?.tryNow();
      this.events.emit('shards', this.shardList());
    } catch (err) {
      this.#log.warn({ err: describeError(err) }, 'shard round failed; retrying next round');
    } finally {
      this.#roundRunning = false;
      const changed = this.#changed;
      this.#changed = deferred();
      changed.resolve();
    }
  }

  #logStart(): void {
    this.#log.info(
      {
        workerPort: this.workerPort,
        clientPort: this.clientPort,
        // metricsPort: the older name, as one coordinator's start line has it.
        ...(this.#http !== null && { httpPort: this.#http.port, metricsPort: this.#http.port }),
        shards: this.shards,
        nodeId: this.nodeId,
        database: describeDatabase(this.#options.databasePath),
        advertise: advertisedAddress(this.#options, this.clientPort),
      },
      'sharded coordinator started (leads its share of the shards)',
    );
  }
}

/**
 * The token the client port uses with the shards' own client ports: the
 * first of the client token file (every coordinator of one database takes
 * the same tokens); none without one.
 */
function peerToken(options: CoordinatorOptions): string | null {
  const file = options.security?.clientTokenFile;
  if (file == null) return null;
  return parseTokens(readFileSync(file, 'utf8'))[0] ?? null;
}

/**
 * With TLS, how the client port dials the shards: trusting the peers' CA
 * (`--peer-tls-ca`, else this coordinator's own certificate, which works
 * when all share one), and presenting its own certificate in case the
 * shards ask for client certificates.
 */
function peerTls(options: CoordinatorOptions): ClientTls | null {
  const tls = options.security?.tls;
  if (tls == null) return null;
  return readClientTls({
    caFile: options.security?.peerCaFile ?? tls.certFile,
    certFile: tls.certFile,
    keyFile: tls.keyFile,
  });
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
