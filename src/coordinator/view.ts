/**
 * What the outside of a coordinator — anything beyond its own two ports —
 * sees of it and may do with it. The HTTP side (src/http/) depends on these
 * interfaces only; the coordinator implements {@link CoordinatorView} and is
 * handed an {@link HttpPortFactory} when it should serve HTTP, so it never
 * imports the HTTP code.
 */
import type { NetEvent } from '../net/net-events.js';
import type { ServerTls } from '../net/tls.js';
import type { ClientReply, ClientRequest } from '../protocol/messages.js';
import type { CoreInspection } from './core/core.js';
import type { CoreEvent, CronEvaluator } from './core/types.js';
import type { RoleStatus } from './leadership/role.js';
import type { Failure } from './term/term.js';

export type { CoreEvent, CoreInspection, CronEvaluator, Failure, RoleStatus };

/** A coordinator as an observer sees it. */
export interface CoordinatorView {
  readonly events: {
    on(name: 'event', listener: (event: CoreEvent) => void): unknown;
    off(name: 'event', listener: (event: CoreEvent) => void): unknown;
  };
  /** The core's state right now (read-only); empty while standing by. */
  inspect(): CoreInspection;
  /**
   * Up to `limit` jobs that depend on `jobId` and have not ended (the core
   * indexes those only; read-only, for the dashboard's flow view).
   */
  dependentsOf(jobId: string, limit: number): string[];
  /**
   * One client request through the core, like a TCP client's; resolves with
   * its reply once that reply may leave (after its commit). Never rejects.
   */
  request(msg: ClientRequest): Promise<ClientReply>;
  /** Role, epoch and leader. */
  status(): RoleStatus;
  /** Non-null once the coordinator has stopped working. */
  readonly failure: Failure | null;
  /** Problems the background integrity check found (null until it has run). */
  readonly integrityProblems: readonly string[] | null;
  /**
   * The process of a sharded coordinator only (absent on one coordinator):
   * its shards and its place among the coordinators, for `/healthz`.
   */
  sharding?(): ShardingStatus;
}

/** Where a sharded coordinator's process stands (see {@link CoordinatorView.sharding}). */
export interface ShardingStatus {
  /** The database's shard count. */
  shards: number;
  /** The shards this process leads and serves now, in shard order. */
  led: readonly number[];
  /**
   * True while it counts as alive in the database's membership (its last
   * round reached the database less than a lease ttl ago) and is not stopping.
   */
  member: boolean;
}

/** The client tokens, as far as the HTTP port checks them. */
export interface ClientTokens {
  /** True when protected paths need a token. */
  readonly clientTokensRequired: boolean;
  /** True when `token` is listed (always, without client tokens). */
  allowsClient(token: unknown): boolean;
  /** The listed tokens, by SHA-256 digest; null without client tokens. */
  readonly client: { matchesDigest(digest: Buffer): boolean } | null;
}

/** The coordinator's metrics in Prometheus text format. */
export interface MetricsText {
  readonly contentType: string;
  text(): Promise<string>;
}

/** Bounds on the HTTP port's connections (defaults: HTTP_LIMITS in src/http/http-server.ts). */
export interface HttpLimits {
  /** Open connections: scrapers, probes, dashboards (each page holds a live stream and a few more). */
  maxConnections: number;
  /** Open connections from one address (a reverse proxy in front counts as one). */
  maxConnectionsPerAddress: number;
  /** Time from connecting (or from the start of a request) to its whole header, in ms. */
  headersTimeoutMs: number;
  /** Time from the start of a request to its whole body, in ms. */
  requestTimeoutMs: number;
  /** Time a keep-alive connection waits for its next request, in ms. */
  keepAliveTimeoutMs: number;
  /** Live streams one address may hold (of MAX_HTTP_STREAMS in protocol/limits.ts). */
  maxStreamsPerAddress: number;
  /**
   * A live stream that has had what was sent to it waiting unread this long
   * (ms) is closed when a newcomer would otherwise be refused for a full budget.
   */
  streamStallMs: number;
}

/** How the coordinator wants its HTTP port. */
export interface HttpPortSettings {
  /** 0 = any free port. */
  port: number;
  host: string;
  maxActiveJobs: number;
  /** Cron evaluation, the same the core uses (a schedule's next runs on the dashboard). */
  cron: CronEvaluator;
  /** HTTPS with this certificate (reloaded with it); null = plain HTTP. */
  tls: ServerTls | null;
  tokens: ClientTokens;
  metrics: MetricsText;
  /** TLS handshakes and refused tokens are reported here. */
  report(event: NetEvent): void;
  /** Host names answered beside the built-in ones (src/http/host-check.ts). */
  allowedHosts: readonly string[];
  /** Names this coordinator goes by: bind host and advertised host. */
  ownNames: readonly string[];
  /** Bounds on connections (default: HTTP_LIMITS). */
  limits?: Partial<HttpLimits>;
  /** Folder of the built dashboard (default dist/ui). */
  uiDir?: string;
}

/** A running HTTP port. */
export interface HttpPort {
  /** The port actually bound. */
  readonly port: number;
  /** Stops listening and ends open connections. Idempotent. */
  close(): Promise<void>;
}

/** Starts an HTTP port for a coordinator; rejects if the port cannot be bound. */
export type HttpPortFactory = (
  view: CoordinatorView,
  settings: HttpPortSettings,
) => Promise<HttpPort>;
