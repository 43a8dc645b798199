/**
 * Coordinator settings, with the documented defaults (docs/OPERATIONS.md)
 * and the one table of their bounds. The CLI maps flags
 * (`--heartbeat-timeout-millis`) onto these fields (`heartbeatTimeoutMs`)
 * and takes each flag's range from {@link COORDINATOR_BOUNDS};
 * `startCoordinator` and `Coordinator.start` check the same table.
 */
import {
  describeValue,
  relationProblem,
  tableProblem,
  type BoundsTable,
  type Relation,
} from '../common/bounds.js';
import { DAY_MS, MAX_DURATION_MS } from '../protocol/duration.js';
import type { Logger } from '../observability/logger.js';
import type { AcquireGate } from './leadership/leadership.js';
import type { ShardList } from '../protocol/messages.js';
import type { DedicatedConnection } from '../store/postgres/dedicated-connection.js';
import type { ShardWriter } from '../store/postgres/shard-writer.js';
import type { LeaseView } from '../store/lease.js';
import { LocalErrorCode } from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';
import {
  DEFAULT_MAX_SCHEDULED_JOBS,
  MAX_ATTEMPTS_LIMIT,
  MAX_HTTP_STREAMS,
  MAX_PORT,
  MAX_SUBSCRIPTIONS,
  MAX_TASK_TIMEOUT_MS,
  MIN_TASK_TIMEOUT_MS,
} from '../protocol/limits.js';
import {
  DEFAULT_NET_LIMITS,
  NET_LIMIT_BOUNDS,
  type NetLimits,
  type SecurityOptions,
} from './ports/guard.js';

/** How hard each commit is pushed to disk. */
export type Durability = 'normal' | 'full';
export const DURABILITIES: readonly Durability[] = ['normal', 'full'];

export interface CoordinatorOptions {
  /** Worker port (default 7070; 0 = any free port). */
  workerPort: number;
  /** Client port (default 7071; 0 = any free port). */
  clientPort: number;
  /** Interface to bind (default 0.0.0.0). */
  bindHost: string;
  /**
   * SQLite file (default data/coordinator.db; parent folders are created; `:memory:` = not
   * durable), or a `postgres://` URL: the PostgreSQL store, shared by any number of
   * coordinators of which one leads at a time.
   */
  databasePath: string;
  /** The host others should use to reach this coordinator; null = `bindHost` unless wildcard, else the host name. */
  advertiseHost: string | null;
  /** PostgreSQL only: how long the leader's lease lasts after each renewal (default 5000 ms). */
  leaseTtlMs: number;
  /** PostgreSQL only: the leader renews, and a standby tries to take over, this often (default 1000 ms). */
  leaseRenewIntervalMs: number;
  /** A worker without a heartbeat for longer than this is lost (default 6000 ms). */
  heartbeatTimeoutMs: number;
  /** Period of the sweep that checks heartbeats, deadlines and retries (default 500 ms). */
  sweepIntervalMs: number;
  /** Execution deadline of one attempt, fixed per job at submission (default 600000 ms; 1..86400000). */
  taskTimeoutMs: number;
  /** Attempts per job unless the submission says otherwise (default 3). */
  maxAttempts: number;
  /** Retry back-off: delay after attempt n = min(max, base * 2^(n-1)) (defaults 1000 / 30000 ms). */
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
  /** Non-terminal jobs allowed at once; more submissions are rejected (default 10000). */
  maxActiveJobs: number;
  /** SCHEDULED (delayed) jobs allowed at once; they count toward maxActiveJobs only once due. */
  maxScheduledJobs: number;
  /** A queued job's priority rises one level per this much age (default 60000 ms). */
  agingStepMs: number;
  /** `normal`: survives a process crash; `full`: fsync per commit, survives power loss (default normal). */
  durability: Durability;
  /**
   * The HTTP port (`--http-port`, alias `--metrics-port`): `/metrics`,
   * `/healthz`, the dashboard and its API; null = off (default off).
   */
  metricsPort: number | null;
  /**
   * Host names the HTTP port answers beside localhost, IP literals, the bind
   * host and the advertised host (`--http-allowed-hosts`): `name`, `.domain`
   * (the domain and its subdomains) or `*` (any). Default none.
   */
  httpAllowedHosts?: readonly string[];
  /** TLS and tokens (default: none; see guard.ts). */
  security?: SecurityOptions;
  /** Bounds on connections and memory (default: DEFAULT_NET_LIMITS in guard.ts). */
  netLimits?: Partial<NetLimits>;
  /** Terminal jobs older than this are deleted in the background, in ms; null = kept (default). */
  retainTerminalMs: number | null;
  /** Pending WAIT_JOBs one client connection may hold (default 10000). */
  maxWaitsPerConnection: number;
  /** Pending WAIT_JOBs all client connections together may hold (default 100000). */
  maxWaits: number;
  /** Pending WAIT_JOBs the client connections from one address may hold together (default 100000). */
  maxWaitsPerAddress: number;
  /** SUBSCRIBE_JOBS subscriptions the client connections from one address may hold together (default 512 of 1024). */
  maxSubscriptionsPerAddress: number;
  /** Live streams of the HTTP port (`/api/events`) one address may hold (default 16 of 32). */
  maxHttpStreamsPerAddress: number;
  /**
   * A job-event subscriber (or live stream) that has left what was sent to it
   * unread this long is dropped when a newcomer would otherwise be refused
   * for a full budget, in ms (default 10000).
   */
  subscriberStallMs: number;
  /**
   * Set by a sharded coordinator (sharding/sharded-coordinator.ts) on each
   * of the coordinators it runs, one per shard; never a command-line option.
   */
  shardRole?: ShardRole;
  logger: Logger;
}

/** One shard's coordinator inside a sharded one: which shard, and what it asks of the host. */
export interface ShardRole {
  readonly shard: number;
  readonly shards: number;
  /** The sharded coordinator's node id: every shard it leads names it in its lease. */
  readonly nodeId: string;
  /** Whether this shard's election may try to take its lease now. */
  readonly gate: AcquireGate;
  /** Where another shard's leader takes this kind of connection, when known (for NOT_LEADER). */
  leaderOf(shard: number, port: 'worker' | 'client'): string | null;
  /** LIST_SHARDS as the sharded coordinator answers it. */
  shardList(): ShardList;
  /** A try to take this shard's lease found it held (`current` says by whom). */
  acquireFailed?(current: LeaseView): void;
  /** The one connection the leases of all the sharded coordinator's shards share. */
  readonly leaseConnection?: DedicatedConnection;
  /** The write connection all the sharded coordinator's shards share (their commits combined). */
  readonly writer?: ShardWriter;
  /**
   * How often this shard's term reads the cluster's outbox for messages of
   * other shards (flows and dependencies across shards), in ms; absent =
   * {@link DEFAULT_OUTBOX_POLL_MS}. A sharded coordinator also reads a
   * shard's outbox at once when told a message came (outbox-listener.ts),
   * so it polls only as a safety net.
   */
  readonly outboxPollMs?: number;
}

/** Reading connections of a shard's store (a coordinator leads many: its share of PostgreSQL's). */
export const SHARD_READ_CONNECTIONS = 1;

/** How often a shard reads the outbox by default: a message waits about half of it. */
export const DEFAULT_OUTBOX_POLL_MS = 50;

export const DEFAULT_COORDINATOR_OPTIONS: Omit<CoordinatorOptions, 'logger'> = {
  workerPort: 7070,
  clientPort: 7071,
  bindHost: '0.0.0.0',
  databasePath: 'data/coordinator.db',
  advertiseHost: null,
  leaseTtlMs: 5_000,
  leaseRenewIntervalMs: 1_000,
  heartbeatTimeoutMs: 6_000,
  sweepIntervalMs: 500,
  taskTimeoutMs: 600_000,
  maxAttempts: 3,
  retryBaseDelayMs: 1_000,
  retryMaxDelayMs: 30_000,
  maxActiveJobs: 10_000,
  maxScheduledJobs: DEFAULT_MAX_SCHEDULED_JOBS,
  agingStepMs: 60_000,
  durability: 'normal',
  metricsPort: null,
  retainTerminalMs: null,
  maxWaitsPerConnection: 10_000,
  maxWaits: 200_000,
  maxWaitsPerAddress: 100_000,
  maxSubscriptionsPerAddress: MAX_SUBSCRIPTIONS / 2,
  maxHttpStreamsPerAddress: MAX_HTTP_STREAMS / 2,
  subscriberStallMs: 10_000,
};

/** Largest `maxActiveJobs`. */
export const MAX_ACTIVE_JOBS_LIMIT = 100_000_000;

/** Inclusive bounds of every numeric option (ports: 0 = any free port). */
export const COORDINATOR_BOUNDS: BoundsTable<CoordinatorOptions> = {
  workerPort: { min: 0, max: MAX_PORT },
  clientPort: { min: 0, max: MAX_PORT },
  heartbeatTimeoutMs: { min: 1, max: DAY_MS },
  sweepIntervalMs: { min: 1, max: DAY_MS },
  taskTimeoutMs: { min: MIN_TASK_TIMEOUT_MS, max: MAX_TASK_TIMEOUT_MS },
  maxAttempts: { min: 1, max: MAX_ATTEMPTS_LIMIT },
  retryBaseDelayMs: { min: 0, max: DAY_MS },
  retryMaxDelayMs: { min: 0, max: DAY_MS },
  maxActiveJobs: { min: 1, max: MAX_ACTIVE_JOBS_LIMIT },
  maxScheduledJobs: { min: 1, max: MAX_ACTIVE_JOBS_LIMIT },
  agingStepMs: { min: 1, max: 365 * DAY_MS },
  leaseTtlMs: { min: 100, max: DAY_MS },
  leaseRenewIntervalMs: { min: 10, max: DAY_MS },
  metricsPort: { min: 0, max: MAX_PORT, nullMeans: 'off' },
  retainTerminalMs: { min: 1, max: MAX_DURATION_MS, nullMeans: 'kept forever' },
  maxWaitsPerConnection: { min: 1, max: 10_000_000 },
  maxWaits: { min: 1, max: 100_000_000 },
  maxWaitsPerAddress: { min: 1, max: 100_000_000 },
  maxSubscriptionsPerAddress: { min: 1, max: MAX_SUBSCRIPTIONS },
  maxHttpStreamsPerAddress: { min: 1, max: MAX_HTTP_STREAMS },
  subscriberStallMs: { min: 1, max: DAY_MS },
};

/** Rules between coordinator options. */
export const COORDINATOR_RELATIONS: readonly Relation<Omit<CoordinatorOptions, 'logger'>>[] = [
  {
    holds: (o) => o.leaseRenewIntervalMs * 2 <= o.leaseTtlMs,
    refusal: (name, o) =>
      `${name('leaseRenewIntervalMs')} (${o.leaseRenewIntervalMs}) must be at most half of ${name('leaseTtlMs')} (${o.leaseTtlMs})`,
  },
  {
    holds: (o) => o.retryMaxDelayMs >= o.retryBaseDelayMs,
    refusal: (name) => `${name('retryMaxDelayMs')} must be at least ${name('retryBaseDelayMs')}`,
  },
];

/**
 * The first problem of a full set of coordinator options (options named as
 * in code), or null. Used by `startCoordinator` and `Coordinator.start`.
 */
export function coordinatorOptionsProblem(options: CoordinatorOptions): string | null {
  const byName = (key: string): string => key;
  const bounds = tableProblem(options, COORDINATOR_BOUNDS, byName);
  if (bounds !== null) return bounds;
  for (const key of ['bindHost', 'databasePath'] as const) {
    const value: unknown = options[key];
    if (typeof value !== 'string' || value === '')
      return `${key} must be a non-empty string, got ${describeValue(value)}`;
  }
  if (!DURABILITIES.includes(options.durability)) {
    return `durability must be one of ${DURABILITIES.join(', ')}, got ${describeValue(options.durability)}`;
  }
  const netLimits: NetLimits = { ...DEFAULT_NET_LIMITS, ...options.netLimits };
  const limits = tableProblem(netLimits, NET_LIMIT_BOUNDS, (key) => `netLimits.${key}`);
  if (limits !== null) return limits;
  return relationProblem(options, COORDINATOR_RELATIONS, byName);
}

/** Throws a DtpError `INVALID_OPTIONS` naming the first bad option. */
export function validateCoordinatorOptions(options: CoordinatorOptions): void {
  const problem = coordinatorOptionsProblem(options);
  if (problem !== null) throw new DtpError(LocalErrorCode.InvalidOptions, problem);
}
