/**
 * The client's view of a sharded coordinator, and where each request goes:
 * through the coordinator's own client port (the "public" port, which routes
 * every request), or straight to the client port of the one shard it is
 * about, on the coordinator that leads that shard.
 *
 * - A request about one shard ({@link requestShard} `one`) goes to that
 *   shard's `clientAddress`, except a flow (the public port sends a flow to
 *   its first job's shard, which hands the other shards their jobs) and a
 *   subscription (the client's subscriptions have connections of their own).
 * - Everything else (lists of every queue, batches across shards, events,
 *   ids that name no shard) goes through the public port.
 * - A shard without a known address, one whose leader's lease may have
 *   ended since the map was read (`leaseLeftMillis`: a leader that froze or
 *   died loses its shards only once its lease ends, and nothing tells the
 *   client), an address that could not be reached lately
 *   ({@link UnreachableAddresses}), and a shard whose port said NOT_LEADER
 *   at the address and epoch the map still names ({@link RefusedShards})
 *   go through the public port too.
 *
 * The map is read again at half the shortest lease it names, and at least
 * every {@link SHARD_MAP_REFRESH_MS}, so that a healthy leader's shard stays
 * routed. Pure: the time is passed in (performance.now milliseconds).
 */
import { requestShard } from '../protocol/request-shard.js';
import type { ClientRequest, ShardInfo } from '../protocol/messages.js';

/** How old the map may get before the next routed request asks for it again, in ms. */
export const SHARD_MAP_REFRESH_MS = 5_000;
/** Least time between two reads of the map that are not forced by a refusal, in ms. */
export const MIN_MAP_READ_GAP_MS = 100;
/** How long an address that could not be reached is left alone, in ms. */
export const UNREACHABLE_PAUSE_MS = 30_000;

/** The shards of a sharded coordinator's database, as read at `readAtMs`. */
export interface ShardTable {
  /** How many shards the database has (at least 2). */
  readonly shards: number;
  /** By shard: its own client port on the coordinator that leads it; null = unknown. */
  readonly addresses: readonly (string | null)[];
  /** By shard: the epoch of its lease when read. */
  readonly epochs: readonly number[];
  /** By shard: until when its address may be used (its leader's lease as the map said). */
  readonly usableUntilMs: readonly number[];
  /** When the map was asked for (its answer is at least this fresh). */
  readonly readAtMs: number;
  /** When to read it again. */
  readonly refreshAtMs: number;
}

/** Where one request goes. */
export type Route =
  | { readonly via: 'public' }
  | {
      readonly via: 'shard';
      readonly shard: number;
      readonly address: string;
      /** The epoch the map names with the address. */
      readonly epoch: number;
    };

/** Through the coordinator's own client port. */
export const PUBLIC: Route = { via: 'public' };

/** Requests about one shard that still go through the public port. */
const ALWAYS_PUBLIC: ReadonlySet<ClientRequest['type']> = new Set([
  'SUBMIT_FLOW',
  'SUBSCRIBE_JOBS',
  'LIST_SHARDS',
  'AUTH',
]);

/**
 * The table of a `SHARD_LIST`'s shards; null when there is nothing to route
 * (one shard: an unsharded coordinator) or the list is not a whole map
 * (shard numbers missing or out of order).
 */
export function shardTableOf(shards: readonly ShardInfo[], readAtMs: number): ShardTable | null {
  if (shards.length < 2 || shards.some((info, index) => info.shard !== index)) return null;
  // Without leaseLeftMillis (not said), an address is used until the next read is due.
  const leftMs = shards.map((info) =>
    info.clientAddress == null ? 0 : (info.leaseLeftMillis ?? SHARD_MAP_REFRESH_MS),
  );
  const shortestMs = Math.min(
    SHARD_MAP_REFRESH_MS,
    ...leftMs.filter((ms) => ms > 0).map((ms) => ms / 2),
  );
  return {
    shards: shards.length,
    addresses: shards.map((info) => info.clientAddress ?? null),
    epochs: shards.map((info) => info.epoch),
    usableUntilMs: leftMs.map((ms) => readAtMs + ms),
    readAtMs,
    refreshAtMs: readAtMs + shortestMs,
  };
}

/** Where `msg` goes at `nowMs` with this table (null: not sharded, or not known to be). */
export function routeOf(msg: ClientRequest, table: ShardTable | null, nowMs: number): Route {
  if (table === null || ALWAYS_PUBLIC.has(msg.type)) return PUBLIC;
  const target = requestShard(msg, table.shards);
  if (target.kind !== 'one') return PUBLIC;
  const { shard } = target;
  const address = table.addresses[shard] ?? null;
  if (address === null || !(nowMs < (table.usableUntilMs[shard] ?? 0))) return PUBLIC;
  return { via: 'shard', shard, address, epoch: table.epochs[shard] ?? 0 };
}

/** True when the table is due to be read again. */
export function isStale(table: ShardTable, nowMs: number): boolean {
  return nowMs >= table.refreshAtMs;
}

/** Addresses that could not be reached, each left alone for {@link UNREACHABLE_PAUSE_MS}. */
export class UnreachableAddresses {
  readonly #untilMs = new Map<string, number>();

  mark(address: string, nowMs: number): void {
    // Only expired entries are dropped here: the map holds at most one per shard address.
    for (const [known, untilMs] of this.#untilMs) {
      if (untilMs <= nowMs) this.#untilMs.delete(known);
    }
    this.#untilMs.set(address, nowMs + UNREACHABLE_PAUSE_MS);
  }

  blocked(address: string, nowMs: number): boolean {
    const untilMs = this.#untilMs.get(address);
    return untilMs !== undefined && nowMs < untilMs;
  }
}

/**
 * Shards whose own port answered NOT_LEADER (the shard moved, or is moving):
 * they go through the public port while the map still names the address and
 * epoch that refused, that is until a map read after the move.
 */
export class RefusedShards {
  readonly #refused = new Map<number, { address: string; epoch: number }>();

  /** The shard's port at `address`, named with `epoch`, answered NOT_LEADER. */
  refused(shard: number, address: string, epoch: number): void {
    this.#refused.set(shard, { address, epoch });
  }

  /** True while the table names for `shard` what refused; a table that names another forgets it. */
  blocked(shard: number, table: ShardTable): boolean {
    const known = this.#refused.get(shard);
    if (known === undefined) return false;
    if (known.address === table.addresses[shard] && known.epoch === table.epochs[shard]) {
      return true;
    }
    this.#refused.delete(shard);
    return false;
  }
}
