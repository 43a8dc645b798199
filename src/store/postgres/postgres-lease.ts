/**
 * The leader lease in PostgreSQL: the single row of `dtp.leader_lease`,
 * read and changed only by single atomic statements on the database's clock
 * (`clock_timestamp()`), so the coordinators' own clocks never have to agree.
 *
 * - acquire: `UPDATE … SET epoch = epoch + 1 … WHERE the lease is free or
 *   expired`. Two standbys racing serialize on the row lock; the second sees
 *   the first one's fresh expiry and takes nothing.
 * - renew: `UPDATE … WHERE epoch = mine AND holder = me`.
 * - A commit of the leader checks its epoch inside its own transaction
 *   (schema.ts, `FOR SHARE` on the row), so it either commits before a
 *   takeover or is refused after it.
 *
 * One dedicated connection, opened lazily and opened again after it broke;
 * every operation has a deadline, so a hung database cannot hang a renewal.
 *
 * Each shard has a lease of its own: the row of `leader_lease` in the
 * shard's schema (`dtp_s<n>`), with the same statements rewritten for that
 * schema, and fencing the commits of that schema only.
 */
import type pg from 'pg';
import type { AcquireResult, LeaseBackend, LeaseHolder, LeaseView } from '../lease.js';
import { StoreError } from '../store.js';
import { redactUrl } from './connection.js';
import { DedicatedConnection } from './dedicated-connection.js';
import { DEFAULT_SCHEMA, SCHEMA_VERSION, inSchema, migrate } from './schema.js';

export interface PostgresLeaseOptions {
  url: string;
  /** Give up on one lease operation after this long, in ms. */
  operationTimeoutMs: number;
  /** The schema of the lease row: `dtp` (the default) or a shard's `dtp_s<n>`. */
  schema?: string;
  /**
   * A connection shared with other leases (the shards of one coordinator),
   * whose schemas are migrated already; closed by its owner. Absent = one
   * of its own, migrating the schema on first use.
   */
  connection?: DedicatedConnection;
}

export interface LeaseRow {
  epoch: number;
  holder: string | null;
  worker_address: string | null;
  client_address: string | null;
  live: boolean;
}

const ACQUIRE = `UPDATE dtp.leader_lease
   SET epoch = epoch + 1, holder = $1, worker_address = $2, client_address = $3,
       expires_at = clock_timestamp() + $4 * interval '1 millisecond',
       acquired_at = clock_timestamp()
 WHERE id = 1 AND (holder IS NULL OR expires_at < clock_timestamp())
 RETURNING epoch`;
/** The lease row as it is now, with whether its holder is live (cluster.ts reads each shard's). */
export const READ_LEASE = `SELECT epoch, holder, worker_address, client_address,
       (holder IS NOT NULL AND expires_at >= clock_timestamp()) AS live
  FROM dtp.leader_lease WHERE id = 1`;
/**
 * READ_LEASE with `left_ms`: how long the lease has left, in ms on the
 * database's clock (0 when it is not live). The sharded coordinator's round
 * reads it, so that its map can say how long each leader was sure to lead.
 */
export const READ_LEASE_LEFT = `SELECT epoch, holder, worker_address, client_address,
       (holder IS NOT NULL AND expires_at >= clock_timestamp()) AS live,
       (CASE WHEN holder IS NOT NULL AND expires_at >= clock_timestamp()
             THEN EXTRACT(EPOCH FROM expires_at - clock_timestamp()) * 1000
             ELSE 0 END)::float8 AS left_ms
  FROM dtp.leader_lease WHERE id = 1`;
const RENEW = `UPDATE dtp.leader_lease
   SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
 WHERE id = 1 AND epoch = $2 AND holder = $1
 RETURNING epoch`;
const RELEASE = `UPDATE dtp.leader_lease SET holder = NULL, expires_at = '-infinity'
 WHERE id = 1 AND epoch = $2 AND holder = $1`;

/** The lease's statements in one schema. */
interface LeaseStatements {
  acquire: string;
  read: string;
  renew: string;
  release: string;
}

function statementsIn(schema: string): LeaseStatements {
  return {
    acquire: inSchema(ACQUIRE, schema),
    read: inSchema(READ_LEASE, schema),
    renew: inSchema(RENEW, schema),
    release: inSchema(RELEASE, schema),
  };
}

export class PostgresLease implements LeaseBackend {
  readonly #options: PostgresLeaseOptions;
  readonly #schema: string;
  readonly #sql: LeaseStatements;
  readonly #conn: DedicatedConnection;
  /** False when the connection is shared: its owner closes it. */
  readonly #ownsConnection: boolean;

  constructor(options: PostgresLeaseOptions) {
    this.#options = options;
    this.#schema = options.schema ?? DEFAULT_SCHEMA;
    this.#sql = statementsIn(this.#schema);
    const schema = this.#schema;
    this.#ownsConnection = options.connection === undefined;
    this.#conn =
      options.connection ??
      new DedicatedConnection({
        url: options.url,
        applicationName: `${schema}-lease`,
        operationTimeoutMs: options.operationTimeoutMs,
        prepare: async (client) => void (await migrate(client, SCHEMA_VERSION, schema)),
      });
  }

  async tryAcquire(me: LeaseHolder, ttlMs: number): Promise<AcquireResult> {
    const taken = await this.#query<{ epoch: number }>(this.#sql.acquire, [
      me.nodeId,
      me.workerAddress,
      me.clientAddress,
      ttlMs,
    ]);
    const row = taken[0];
    if (row !== undefined) return { acquired: true, epoch: row.epoch };
    return { acquired: false, current: await this.read() };
  }

  async renew(nodeId: string, epoch: number, ttlMs: number): Promise<boolean> {
    const rows = await this.#query(this.#sql.renew, [nodeId, epoch, ttlMs]);
    return rows.length === 1;
  }

  async release(nodeId: string, epoch: number): Promise<void> {
    await this.#query(this.#sql.release, [nodeId, epoch]);
  }

  /** The lease row as it is now. */
  async read(): Promise<LeaseView> {
    const rows = await this.#query<LeaseRow>(this.#sql.read, []);
    const row = rows[0];
    if (row === undefined) throw new StoreError(`${this.#schema}.leader_lease has no row`);
    return leaseView(row);
  }

  close(): Promise<void> {
    return this.#ownsConnection ? this.#conn.close() : Promise.resolve();
  }

  #query<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<R[]> {
    return this.#conn.query<R>('lease operation', text, values);
  }

  /** For logs: the database without its password (and the schema, when not `dtp`). */
  get description(): string {
    const url = redactUrl(this.#options.url);
    return this.#schema === DEFAULT_SCHEMA ? url : `${url} (${this.#schema})`;
  }
}

/** A lease row (`leader_lease` with its `live` column, as READ_LEASE gives it) as a {@link LeaseView}. */
export function leaseView(row: LeaseRow): LeaseView {
  const holder =
    row.holder === null
      ? null
      : {
          nodeId: row.holder,
          workerAddress: row.worker_address,
          clientAddress: row.client_address,
        };
  return { epoch: row.epoch, holder, live: row.live };
}
