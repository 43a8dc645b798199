/**
 * Shards: which shard a queue and a job belong to, shared by the
 * coordinator, the client library and the worker (one place, so that all of
 * them route the same request to the same shard).
 *
 * - A queue belongs to shard `fnv1a32(utf8(name)) mod shards`; a job
 *   submitted without a queue is in {@link DEFAULT_QUEUE}'s shard. The hash
 *   is fixed: it is part of where data lives, so it never changes.
 * - A job's id names its shard: the coordinator that creates a job on a
 *   sharded database writes the shard number, in hex, into the last three
 *   digits of the id (they are random otherwise, so ids stay unique and
 *   UUID-shaped). With one shard nothing is written and every id is shard 0.
 * - Each shard's tables live in a PostgreSQL schema of their own:
 *   `dtp` with one shard (the schema of an unsharded database), `dtp_s<n>`
 *   with several.
 */
import { DEFAULT_QUEUE } from './queue-names.js';

/** Most shards a database may have. */
export const MAX_SHARDS = 1024;

/** Hex digits at the end of a job id that name its shard. */
const SHARD_DIGITS = 3;

/** Why a shard count is refused, or null. */
export function shardCountProblem(shards: number): string | null {
  if (!Number.isInteger(shards) || shards < 1 || shards > MAX_SHARDS) {
    return `must be an integer in 1..${MAX_SHARDS}, got ${String(shards)}`;
  }
  return null;
}

/** The shard of a queue (null or absent = the default queue). */
export function shardOfQueue(queue: string | null | undefined, shards: number): number {
  if (shards === 1) return 0;
  const name = queue ?? DEFAULT_QUEUE;
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(name, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % shards;
}

/** `id` with its last digits naming `shard` (ids of an unsharded database stay as they are). */
export function stampShard(id: string, shard: number, shards: number): string {
  if (shards === 1) return id;
  return id.slice(0, -SHARD_DIGITS) + shard.toString(16).padStart(SHARD_DIGITS, '0');
}

/**
 * The shard a job id names; null when it names none of `shards` (not an id
 * this database made: no shard has such a job).
 */
export function shardOfJobId(id: string, shards: number): number | null {
  if (shards === 1) return 0;
  const tail = id.slice(-SHARD_DIGITS);
  if (!/^[0-9a-f]{3}$/.test(tail)) return null;
  const shard = Number.parseInt(tail, 16);
  return shard < shards ? shard : null;
}

/** The PostgreSQL schema that holds a shard's tables. */
export function shardSchema(shard: number, shards: number): string {
  return shards === 1 ? 'dtp' : `dtp_s${shard}`;
}
