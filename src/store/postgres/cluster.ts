/**
 * The cluster of a sharded PostgreSQL database, as a whole: how many shards
 * it has (`dtp.cluster`, fixed by the first coordinator that starts), the
 * shards' schemas, and every shard's lease at one glance.
 *
 * The shard count is part of where data lives (protocol/shards.ts: a queue's
 * shard is its hash modulo the count), so it is stored once and never
 * changes; a coordinator started with another count must refuse to run
 * rather than look for jobs in the wrong schemas.
 */
import type pg from 'pg';
import { describeError } from '../../protocol/errors.js';
import { shardCountProblem, shardSchema } from '../../protocol/shards.js';
import type { LeaseHolder } from '../lease.js';
import { StoreError } from '../store.js';
import { connectClient } from './connection.js';
import { READ_LEASE, leaseView, type LeaseRow } from './postgres-lease.js';
import { withDeadline } from './dedicated-connection.js';
import { SCHEMA_VERSION, inSchema, migrate } from './schema.js';

/** One shard's lease as the database saw it. */
export interface ShardLease {
  shard: number;
  /** 0 when the shard's lease was never taken (or its schema does not exist yet). */
  epoch: number;
  holder: LeaseHolder | null;
  /** True while the holder's lease has not expired (database clock). */
  live: boolean;
}

/**
 * Stores the shard count when none is stored yet; the first coordinator to
 * ask wins (an insert that conflicts does nothing, and the read after it, a
 * new statement, sees the row that won). A database whose `dtp.jobs` already
 * has rows is an unsharded deployment from before shards: it gets 1 whatever
 * `shards` says, since its jobs are in schema `dtp`. Returns the count stored.
 */
export async function claimShardCount(url: string, shards: number): Promise<number> {
  const problem = shardCountProblem(shards);
  if (problem !== null) throw new RangeError(`shard count ${problem}`);
  return withClient(url, 'dtp-cluster', async (client) => {
    await migrate(client);
    await client.query('BEGIN');
    try {
      await client.query(
        `INSERT INTO dtp.cluster (id, shards)
         SELECT 1, CASE WHEN EXISTS (SELECT 1 FROM dtp.jobs) THEN 1 ELSE $1::integer END
         ON CONFLICT (id) DO NOTHING`,
        [shards],
      );
      const rows = await client.query<{ shards: number }>(
        'SELECT shards FROM dtp.cluster WHERE id = 1',
      );
      await client.query('COMMIT');
      const stored = rows.rows[0];
      if (stored === undefined) throw new StoreError('dtp.cluster has no row');
      return stored.shards;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  });
}

/**
 * Creates or migrates the schema of each of `shards` shards to the newest
 * version (schema `dtp` alone when `shards` is 1). Idempotent; coordinators
 * starting at once serialize on the migration lock (schema.ts), so each
 * schema is migrated once.
 */
export async function ensureShardSchemas(url: string, shards: number): Promise<void> {
  const problem = shardCountProblem(shards);
  if (problem !== null) throw new RangeError(`shard count ${problem}`);
  await withClient(url, 'dtp-cluster', async (client) => {
    for (let shard = 0; shard < shards; shard++) {
      await migrate(client, SCHEMA_VERSION, shardSchema(shard, shards));
    }
  });
}

/**
 * Every shard's lease as the database sees it now, in shard order: one read
 * of the shards' `leader_lease` rows together (one snapshot, in a read-only
 * transaction that first finds which shards' schemas exist yet). A shard
 * whose schema does not exist reads as never taken. Gives up after
 * `timeoutMs`.
 */
export async function readShardLeases(
  url: string,
  shards: number,
  timeoutMs = 10_000,
): Promise<ShardLease[]> {
  const problem = shardCountProblem(shards);
  if (problem !== null) throw new RangeError(`shard count ${problem}`);
  const schemas = Array.from({ length: shards }, (_, shard) => shardSchema(shard, shards));
  return withClient(
    url,
    'dtp-cluster',
    async (client) => {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      try {
        const rows = await readLeaseRows(client, schemas);
        await client.query('COMMIT');
        return schemas.map((_, shard) => {
          const row = rows.get(shard);
          return row === undefined
            ? { shard, epoch: 0, holder: null, live: false }
            : { shard, ...leaseView(row) };
        });
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
    },
    timeoutMs,
  );
}

/** The lease rows of the schemas that have one, by shard (the index in `schemas`). */
async function readLeaseRows(
  client: pg.ClientBase,
  schemas: readonly string[],
): Promise<Map<number, LeaseRow>> {
  const present = await client.query<{ shard: number }>(
    `SELECT (s.ord - 1)::integer AS shard
       FROM unnest($1::text[]) WITH ORDINALITY AS s(name, ord)
      WHERE to_regclass(quote_ident(s.name) || '.leader_lease') IS NOT NULL`,
    [schemas],
  );
  const byShard = new Map<number, LeaseRow>();
  if (present.rows.length === 0) return byShard;
  const union = present.rows
    .map(({ shard }) => `SELECT ${shard} AS shard, l.* FROM (${leaseReadIn(schemas, shard)}) l`)
    .join('\nUNION ALL\n');
  const rows = await client.query<LeaseRow & { shard: number }>(union);
  for (const { shard, ...row } of rows.rows) byShard.set(shard, row);
  return byShard;
}

/** READ_LEASE in the schema of `shard`. */
function leaseReadIn(schemas: readonly string[], shard: number): string {
  return inSchema(READ_LEASE, schemas[shard] as string);
}

/**
 * Runs `fn` on a connection of its own, closed afterwards; with `timeoutMs`,
 * gives up when `fn` has not finished by then (the connection is then
 * dropped without waiting: it may be the part that hangs).
 */
async function withClient<T>(
  url: string,
  applicationName: string,
  fn: (client: pg.Client) => Promise<T>,
  timeoutMs?: number,
): Promise<T> {
  const client = await connectClient({
    url,
    applicationName,
    ...(timeoutMs !== undefined && { connectTimeoutMs: timeoutMs }),
  });
  let result: T;
  try {
    result = await (timeoutMs === undefined ? fn(client) : withDeadline(fn(client), timeoutMs));
  } catch (err) {
    client.end().catch(() => undefined);
    if (err instanceof StoreError || err instanceof RangeError) throw err;
    throw new StoreError(`cluster operation failed: ${describeError(err)}`, { cause: err });
  }
  await client.end().catch(() => undefined);
  return result;
}
