/**
 * What a worker makes of a sharded coordinator's shard map: which shards it
 * serves, which worker port leads each, and how its capacity and prefetch
 * are shared among the sessions it opens (one per distinct worker address).
 * Pure functions; the worker (worker.ts) acts on what they say.
 *
 * - Served shards: every shard, or, with `queues`, the shard of each of its
 *   queues (shards.ts: `shardOfQueue`), since a shard hands out only its
 *   own queues' attempts.
 * - A route is one worker address and the served shards it leads. A shard
 *   whose `workerAddress` is null (no coordinator leads it now) or not a
 *   `host:port` is unled: the worker waits for a later map.
 * - Shares: the worker's capacity C is split over its routes in proportion
 *   to the shards each leads (largest remainders, then at least 1 each, the
 *   one taken from the largest share; so the shares add up to C unless C is
 *   below the number of routes, when each gets 1). Prefetch is split the same
 *   way, without the floor, and each share is cut to what its capacity share
 *   may ask for (limits.ts: `maxPrefetch`).
 */
import { formatHostPort, parseHostPort, type HostPort } from '../net/address.js';
import { maxPrefetch } from '../protocol/limits.js';
import type { ShardInfo } from '../protocol/messages.js';
import { MAX_SHARDS, shardOfQueue } from '../protocol/shards.js';

/** One worker address and the shards this worker serves that it leads. */
export interface ShardRoute {
  /** `host:port` as the map gave it, normalised. */
  readonly address: string;
  readonly hostPort: HostPort;
  /** Ascending. */
  readonly shards: readonly number[];
}

/** The shard map as one worker sees it. */
export interface ShardPlan {
  /** Shards of the database. */
  readonly count: number;
  /** The shards this worker takes work from, ascending. */
  readonly served: readonly number[];
  /** Where each served shard that has a leader takes workers, in order of their first shard. */
  readonly routes: readonly ShardRoute[];
  /** Served shards that no coordinator leads now (or whose address is unusable). */
  readonly unled: readonly number[];
}

/** A session's part of the worker's capacity and prefetch. */
export interface Share {
  readonly capacity: number;
  readonly prefetch: number;
}

/**
 * The plan for a map (null when it names no shard in range); `defaultPort`
 * is the port of an address given without one.
 */
export function planShards(
  infos: readonly ShardInfo[],
  queues: readonly string[] | null,
  defaultPort: number,
): ShardPlan | null {
  const known = infos.filter(
    (info) => Number.isInteger(info.shard) && info.shard >= 0 && info.shard < MAX_SHARDS,
  );
  if (known.length === 0) return null;
  // The map lists every shard; its highest number says how many there are.
  const count = Math.max(...known.map((info) => info.shard)) + 1;
  const served =
    queues === null
      ? Array.from({ length: count }, (_, shard) => shard)
      : [...new Set(queues.map((queue) => shardOfQueue(queue, count)))].sort((a, b) => a - b);
  const byShard = new Map(known.map((info) => [info.shard, info.workerAddress]));
  const routes = new Map<string, { hostPort: HostPort; shards: number[] }>();
  const unled: number[] = [];
  for (const shard of served) {
    const hostPort = addressOf(byShard.get(shard) ?? null, defaultPort);
    if (hostPort === null) {
      unled.push(shard);
      continue;
    }
    const address = formatHostPort(hostPort);
    const route = routes.get(address) ?? { hostPort, shards: [] };
    route.shards.push(shard);
    routes.set(address, route);
  }
  return {
    count,
    served,
    routes: [...routes].map(([address, { hostPort, shards }]) => ({ address, hostPort, shards })),
    unled,
  };
}

function addressOf(text: string | null, defaultPort: number): HostPort | null {
  if (text === null || text === '') return null;
  try {
    return parseHostPort(text, defaultPort);
  } catch {
    return null;
  }
}

/**
 * `total` split in proportion to `weights` (largest remainders, earlier
 * first on a tie), then raised to at least `least` each by taking from the
 * largest share; when that cannot be done within `total`, the shares add up
 * to more.
 */
export function splitShare(total: number, weights: readonly number[], least: number): number[] {
  const sum = weights.reduce((a, b) => a + b, 0);
  if (weights.length === 0) return [];
  if (sum <= 0) return weights.map(() => least);
  const exact = weights.map((weight) => (total * weight) / sum);
  const shares = exact.map(Math.floor);
  let left = total - shares.reduce((a, b) => a + b, 0);
  const byRemainder = exact
    .map((value, i) => ({ i, remainder: value - Math.floor(value) }))
    .sort((a, b) => b.remainder - a.remainder || a.i - b.i);
  for (const { i } of byRemainder) {
    if (left <= 0) break;
    shares[i] = (shares[i] as number) + 1;
    left--;
  }
  for (let i = 0; i < shares.length; i++) {
    while ((shares[i] as number) < least) {
      const largest = indexOfLargest(shares);
      if ((shares[largest] as number) <= least) {
        shares[i] = least;
        break;
      }
      shares[largest] = (shares[largest] as number) - 1;
      shares[i] = (shares[i] as number) + 1;
    }
  }
  return shares;
}

function indexOfLargest(values: readonly number[]): number {
  let best = 0;
  values.forEach((value, i) => {
    if (value > (values[best] as number)) best = i;
  });
  return best;
}

/** Each route's share of the worker's `capacity` and `prefetch` (see the module comment). */
export function shareOut(
  capacity: number,
  prefetch: number,
  routes: readonly Pick<ShardRoute, 'shards'>[],
): Share[] {
  const weights = routes.map((route) => route.shards.length);
  const capacities = splitShare(capacity, weights, 1);
  const prefetches = splitShare(prefetch, weights, 0);
  return capacities.map((share, i) => ({
    capacity: share,
    prefetch: Math.min(prefetches[i] as number, maxPrefetch(share)),
  }));
}
