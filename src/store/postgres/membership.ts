/**
 * Membership in PostgreSQL: one row per coordinator in `dtp.coordinators`
 * (always schema `dtp`, whatever the shards: the cluster has one list),
 * written and read by single statements on the database's clock, as the
 * lease is, so the coordinators' own clocks never have to agree.
 *
 * - heartbeat: one statement upserts the caller's row (alive until now +
 *   ttl), deletes the rows dead for over 10 ttls, and lists the rows alive.
 *   The deletion skips rows another transaction holds (`SKIP LOCKED`): two
 *   coordinators back from a long pause, each finding the other dead, would
 *   otherwise wait for each other's row.
 * - leave: deletes the caller's row.
 * - outboxBacklog: counts the messages waiting in the cluster's outbox, by
 *   target shard (a sharded coordinator's `/metrics`, at each scrape).
 *
 * As postgres-lease.ts: one dedicated connection, opened lazily and opened
 * again after it broke; every operation has a deadline, so a hung database
 * cannot hang a heartbeat.
 */
import type pg from 'pg';
import { FORGET_AFTER_TTLS, byNodeId, type Member, type MembershipBackend } from '../membership.js';
import { READ_LEASE_LEFT, leaseView, type LeaseRow } from './postgres-lease.js';
import { DedicatedConnection } from './dedicated-connection.js';
import { inSchema, migrate } from './schema.js';
import { shardSchema } from '../../protocol/shards.js';
import type { ShardLease } from './cluster.js';

/** A shard's lease as the round reads it: with how long it had left then. */
export interface ShardLeaseRead extends ShardLease {
  /** Ms the lease had left when read (database clock); 0 when not live. */
  leftMs: number;
}

export interface PostgresMembershipOptions {
  url: string;
  /** Give up on one operation after this long, in ms. */
  operationTimeoutMs: number;
}

interface MemberRow {
  node_id: string;
  client_address: string | null;
  worker_address: string | null;
  http_address: string | null;
}

const MEMBER_COLUMNS = 'node_id, client_address, worker_address, http_address';

/** $1–$4: the member; $5: the ttl in ms. Its own row comes from RETURNING (the snapshot predates it). */
const HEARTBEAT = `WITH me AS (
  INSERT INTO dtp.coordinators (${MEMBER_COLUMNS}, last_seen, expires_at, started_at)
    VALUES ($1, $2, $3, $4, clock_timestamp(),
            clock_timestamp() + $5::float8 * interval '1 millisecond', clock_timestamp())
  ON CONFLICT (node_id) DO UPDATE SET client_address = excluded.client_address,
    worker_address = excluded.worker_address, http_address = excluded.http_address,
    last_seen = excluded.last_seen, expires_at = excluded.expires_at
  RETURNING ${MEMBER_COLUMNS}
), forgotten AS (
  DELETE FROM dtp.coordinators WHERE node_id IN (
    SELECT node_id FROM dtp.coordinators
     WHERE node_id <> $1
       AND expires_at < clock_timestamp() - ${FORGET_AFTER_TTLS} * $5::float8 * interval '1 millisecond'
       FOR UPDATE SKIP LOCKED)
)
SELECT ${MEMBER_COLUMNS} FROM me
UNION ALL
SELECT ${MEMBER_COLUMNS} FROM dtp.coordinators
 WHERE node_id <> $1 AND expires_at >= clock_timestamp()`;

const LEAVE = 'DELETE FROM dtp.coordinators WHERE node_id = $1';

/** Messages of the cluster's outbox not yet applied, by target shard (its index covers it). */
const OUTBOX_BACKLOG = `SELECT target_shard AS shard, count(*)::int AS messages
  FROM "dtp".shard_outbox GROUP BY target_shard`;

export class PostgresMembership implements MembershipBackend {
  readonly #conn: DedicatedConnection;
  /** The statement of {@link shardLeases}, by shard count. */
  readonly #leaseReads = new Map<number, string>();

  constructor(options: PostgresMembershipOptions) {
    this.#conn = new DedicatedConnection({
      url: options.url,
      applicationName: 'dtp-membership',
      operationTimeoutMs: options.operationTimeoutMs,
      prepare: async (client) => void (await migrate(client)),
    });
  }

  async heartbeat(me: Member, ttlMs: number): Promise<Member[]> {
    const rows = await this.#query<MemberRow>(HEARTBEAT, [
      me.nodeId,
      me.clientAddress,
      me.workerAddress,
      me.httpAddress ?? null,
      ttlMs,
    ]);
    return byNodeId(rows.map(memberOf));
  }

  /**
   * Every shard's lease as the database sees it now, with how long each has
   * left, in one statement on this connection (the sharded coordinator's round; the shard schemas exist
   * by then: ensureShardSchemas ran at its start).
   */
  async shardLeases(shards: number): Promise<ShardLeaseRead[]> {
    let text = this.#leaseReads.get(shards);
    if (text === undefined) {
      text = Array.from(
        { length: shards },
        (_, shard) =>
          `SELECT ${shard} AS shard, l.* FROM (${inSchema(READ_LEASE_LEFT, shardSchema(shard, shards))}) l`,
      ).join('\nUNION ALL\n');
      this.#leaseReads.set(shards, text);
    }
    const rows = await this.#query<LeaseRow & { shard: number; left_ms: number }>(text, []);
    return rows
      .map((row) => ({ shard: row.shard, ...leaseView(row), leftMs: row.left_ms }))
      .sort((a, b) => a.shard - b.shard);
  }

  /** Messages waiting in `dtp.shard_outbox`, by target shard (0..shards − 1; the sharded metrics). */
  async outboxBacklog(shards: number): Promise<number[]> {
    const rows = await this.#query<{ shard: number; messages: number }>(OUTBOX_BACKLOG, []);
    const backlog = new Array<number>(shards).fill(0);
    for (const { shard, messages } of rows) {
      if (shard >= 0 && shard < shards) backlog[shard] = messages;
    }
    return backlog;
  }

  async leave(nodeId: string): Promise<void> {
    await this.#query(LEAVE, [nodeId]);
  }

  close(): Promise<void> {
    return this.#conn.close();
  }

  #query<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<R[]> {
    return this.#conn.query<R>('membership operation', text, values);
  }
}

function memberOf(row: MemberRow): Member {
  return {
    nodeId: row.node_id,
    clientAddress: row.client_address,
    workerAddress: row.worker_address,
    ...(row.http_address !== null && { httpAddress: row.http_address }),
  };
}
