/**
 * The client's side of sharding: a request about one shard goes straight
 * to that shard's own client port on the coordinator that leads it
 * (shard-table.ts says which requests), so that the coordinator the client
 * dialled does not forward it over one more connection. Everything else,
 * and everything to a coordinator that is not sharded, goes through the
 * coordinator's own client port (the public port) as without routing.
 *
 * Learning whether the coordinator is sharded costs nothing more against
 * one that is not: `LIST_SHARDS` rides on a probe's connection of its own
 * (negotiation.ts): the `WAIT_JOB` probe's, once the coordinator answered it
 * as one that understands it, else one opened after
 * {@link SHARD_PROBE_AFTER_REQUESTS} requests made without knowing (a
 * one-shot command never pays for it). `DtpClient.shards()` teaches it too.
 * What was learned is remembered per address in the client's FeatureCache,
 * shared by the clients of a process.
 *
 * Fallbacks, each to the public port, which serves every request:
 * - the shard's connection is not open yet, or its address could not be
 *   reached lately (shard-connections.ts);
 * - `NOT_LEADER` from the shard's port (the shard moved): the request was
 *   not processed; it goes through the public port, the map is read again,
 *   and the shard's requests go through the public port until the map
 *   names another address or epoch for it;
 * - the connection broke with the request on it: its outcome is unknown.
 *   A request that is safe to repeat (leader-connection.ts) is sent again
 *   through the public port; any other (a submission without an
 *   idempotency key) fails with `CONNECTION_LOST`. The map is read again.
 *   A refusal at a bound (nothing was processed) goes through the public
 *   port too.
 * Otherwise the map is read again when a request is routed with a map
 * older than SHARD_MAP_REFRESH_MS.
 */
import { isNotUnderstood } from '../protocol/features.js';
import { ErrorCode } from '../protocol/error-codes.js';
import type { ClientReply, ClientRequest, ShardList } from '../protocol/messages.js';
import { isLimitRefusal, type ClientConnection, type ConnectionSecurity } from './connection.js';
import { ClientClosedError, TransportError, WrongPortError } from './errors.js';
import { isSafeToRepeat } from './leader-connection.js';
import { probeShards, type FeatureCache, type ShardKnowledge } from './negotiation.js';
import { ShardConnections } from './shard-connections.js';
import {
  PUBLIC,
  RefusedShards,
  MIN_MAP_READ_GAP_MS,
  isStale,
  routeOf,
  shardTableOf,
  type Route,
} from './shard-table.js';

/** Requests sent without knowing whether the coordinator is sharded before a probe finds out. */
export const SHARD_PROBE_AFTER_REQUESTS = 16;

const NOT_SHARDED: ShardKnowledge = { sharded: false };

/** A reply and the connection that carried it. */
export interface Answer {
  reply: ClientReply;
  conn: ClientConnection;
}

export interface ShardRoutingOptions {
  connectTimeoutMs: number;
  /** TLS and token, the client's own. */
  security: ConnectionSecurity;
  /** Where whether an address is sharded, and its map, are remembered. */
  cache: FeatureCache;
  /** The public port's `host:port` now (the cache's key). */
  address(): string;
  /** Sends through the public port (leader-connection.ts). */
  viaPublic(msg: ClientRequest): Promise<Answer>;
  /** A connection of its own to the public port, for a probe; null when none could be opened. */
  openProbe(): Promise<ClientConnection | null>;
}

type ShardRoute = Extract<Route, { via: 'shard' }>;

export class ShardRouting {
  readonly #options: ShardRoutingOptions;
  readonly #shards: ShardConnections;
  readonly #refused = new RefusedShards();
  /** Probe connections still asking for the shards. */
  readonly #probes = new Set<ClientConnection>();
  #unknownRequests = 0;
  #probing = false;
  #refreshing = false;
  /** When the last read of the map began (performance.now ms). */
  #refreshedAtMs = Number.NEGATIVE_INFINITY;
  #closed = false;

  constructor(options: ShardRoutingOptions) {
    this.#options = options;
    this.#shards = new ShardConnections(options.connectTimeoutMs, options.security);
  }

  /**
   * Sends `msg` where it is served best; resolves with its reply and the
   * connection that carried it. Synchronous up to the send on an open
   * connection, so that requests leave in call order on each.
   */
  request(msg: ClientRequest): Promise<Answer> {
    if (this.#closed) return Promise.reject(new ClientClosedError());
    const route = this.#route(msg);
    if (route.via === 'public') return this.#options.viaPublic(msg);
    const conn = this.#shards.get(route.address, performance.now());
    if (conn === null) return this.#options.viaPublic(msg);
    return this.#onShard(msg, route, conn);
  }

  /**
   * Asks for the shards on a probe's connection to the public port (the
   * coordinator understood the probe) and closes it once answered. False,
   * leaving the connection to the caller, when there is nothing to learn.
   */
  learnOn(conn: ClientConnection): boolean {
    if (!this.#wantsProbe()) return false;
    void this.#askOn(conn);
    return true;
  }

  /** A SHARD_LIST the public port gave (`DtpClient.shards()`) to a request sent at `sentAtMs`. */
  learned(list: ShardList, sentAtMs: number): void {
    if (!this.#closed) this.#learn(list, this.#options.address(), sentAtMs);
  }

  /** Closes the shards' connections and the probes'. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const probes = [...this.#probes];
    this.#probes.clear();
    await Promise.all([this.#shards.close(), ...probes.map((conn) => conn.close())]);
  }

  #route(msg: ClientRequest): Route {
    const { cache } = this.#options;
    const address = this.#options.address();
    const known = cache.shardsOf(address);
    if (known === undefined) {
      // A coordinator known to be v1 has no shards: nothing to find out.
      if (cache.get(address)?.waitJob !== false) this.#unknown();
      return PUBLIC;
    }
    if (!known.sharded) return PUBLIC;
    const nowMs = performance.now();
    // Due: read again, though not back to back (a read may fail).
    if (isStale(known.table, nowMs) && nowMs - this.#refreshedAtMs >= MIN_MAP_READ_GAP_MS) {
      this.#refresh();
    }
    const route = routeOf(msg, known.table, nowMs);
    if (route.via === 'shard' && this.#refused.blocked(route.shard, known.table)) return PUBLIC;
    return route;
  }

  async #onShard(msg: ClientRequest, route: ShardRoute, conn: ClientConnection): Promise<Answer> {
    let reply: ClientReply;
    try {
      reply = await conn.request(msg);
    } catch (err) {
      if (this.#closed) throw err;
      if (err instanceof WrongPortError) this.#shards.failed(route.address, performance.now());
      else if (!(err instanceof TransportError)) throw err;
      // Refused before anything was read, or safe to repeat: the public port serves it.
      const unread = err instanceof WrongPortError || isLimitRefusal(err);
      const resent = unread || isSafeToRepeat(msg) ? this.#options.viaPublic(msg) : null;
      this.#refresh();
      if (resent === null) throw err;
      return resent;
    }
    if (reply.type === 'ERROR' && reply.code === ErrorCode.NotLeader) {
      this.#refused.refused(route.shard, route.address, route.epoch);
      const resent = this.#options.viaPublic(msg);
      this.#refresh();
      return resent;
    }
    return { reply, conn };
  }

  /** One more request made without knowing; enough of them start a probe. */
  #unknown(): void {
    if (++this.#unknownRequests < SHARD_PROBE_AFTER_REQUESTS || this.#probing) return;
    this.#unknownRequests = 0;
    this.#probing = true;
    void this.#probe().finally(() => {
      this.#probing = false;
    });
  }

  async #probe(): Promise<void> {
    const conn = await this.#options.openProbe();
    if (conn === null) return;
    if (this.#wantsProbe()) await this.#askOn(conn);
    else await conn.close();
  }

  #wantsProbe(): boolean {
    return !this.#closed && this.#options.cache.shardsOf(this.#options.address()) === undefined;
  }

  /** LIST_SHARDS on a probe's connection; the answer remembered; the connection closed. */
  async #askOn(conn: ClientConnection): Promise<void> {
    const address = this.#options.address();
    this.#probes.add(conn);
    try {
      const sentAtMs = performance.now();
      const answer = await probeShards(conn, this.#options.connectTimeoutMs);
      if (this.#closed || answer === null) return;
      if (answer === 'unsupported') this.#options.cache.recordShards(address, NOT_SHARDED);
      else this.#learn(answer, address, sentAtMs);
    } finally {
      this.#probes.delete(conn);
      await conn.close();
    }
  }

  /** Reads the map again through the public port (one read at a time). */
  #refresh(): void {
    if (this.#refreshing || this.#closed) return;
    this.#refreshing = true;
    const sentAtMs = performance.now();
    this.#refreshedAtMs = sentAtMs;
    const address = this.#options.address();
    void this.#options
      .viaPublic({ type: 'LIST_SHARDS' })
      .then(
        ({ reply, conn }) => {
          if (this.#closed) return;
          if (reply.type === 'SHARD_LIST') this.#learn(reply, address, sentAtMs);
          else if (reply.type === 'ERROR' && isNotUnderstood(reply)) {
            // Replaced by a coordinator without shards, which closes the connection after this.
            void conn.destroy('the coordinator did not understand LIST_SHARDS');
            this.#options.cache.recordShards(address, NOT_SHARDED);
          }
        },
        () => undefined,
      )
      .finally(() => {
        this.#refreshing = false;
      });
  }

  /** Remembers the map of a LIST_SHARDS sent at `sentAtMs` (its leases counted from then). */
  #learn(list: ShardList, address: string, sentAtMs: number): void {
    const table = shardTableOf(list.shards, sentAtMs);
    this.#options.cache.recordShards(
      address,
      table === null ? NOT_SHARDED : { sharded: true, table },
    );
    const named = (table?.addresses ?? []).filter((a): a is string => a !== null);
    this.#shards.keepOnly(new Set(named));
  }
}
