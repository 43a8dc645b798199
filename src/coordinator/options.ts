/**
 * Coordinator settings, with the documented defaults (docs/OPERATIONS.md). The CLI maps flags
 * (`--heartbeat-timeout-millis`) onto these fields (`heartbeatTimeoutMs`).
 */
import type { Logger } from '../observability/logger.js';
import type { NetLimits, SecurityOptions } from './guard.js';

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
  logger: Logger;
}

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
  agingStepMs: 60_000,
  durability: 'normal',
  metricsPort: null,
  retainTerminalMs: null,
  maxWaitsPerConnection: 10_000,
  maxWaits: 100_000,
};

/**
 * Inclusive bounds of the caps on pending WAIT_JOBs, for the flags and for
 * {@link DEFAULT_COORDINATOR_OPTIONS}'s checks alike.
 */
export const WAIT_CAP_RANGES = {
  maxWaitsPerConnection: [1, 10_000_000],
  maxWaits: [1, 100_000_000],
} as const satisfies Partial<Record<keyof CoordinatorOptions, readonly [number, number]>>;
