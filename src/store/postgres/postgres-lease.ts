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
 */
import type pg from 'pg';
import { describeError } from '../../protocol/errors.js';
import type { AcquireResult, LeaseBackend, LeaseHolder, LeaseView } from '../lease.js';
import { StoreError } from '../store.js';
import { connectClient, redactUrl } from './connection.js';
import { migrate } from './schema.js';

export interface PostgresLeaseOptions {
  url: string;
  /** Give up on one lease operation after this long, in ms. */
  operationTimeoutMs: number;
}

interface LeaseRow {
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
const READ = `SELECT epoch, holder, worker_address, client_address,
       (holder IS NOT NULL AND expires_at >= clock_timestamp()) AS live
  FROM dtp.leader_lease WHERE id = 1`;
const RENEW = `UPDATE dtp.leader_lease
   SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
 WHERE id = 1 AND epoch = $2 AND holder = $1
 RETURNING epoch`;
const RELEASE = `UPDATE dtp.leader_lease SET holder = NULL, expires_at = '-infinity'
 WHERE id = 1 AND epoch = $2 AND holder = $1`;

export class PostgresLease implements LeaseBackend {
  readonly #options: PostgresLeaseOptions;
  #client: Promise<pg.Client> | null = null;
  #migrated = false;
  #closed = false;

  constructor(options: PostgresLeaseOptions) {
    this.#options = options;
  }

  async tryAcquire(me: LeaseHolder, ttlMs: number): Promise<AcquireResult> {
    const taken = await this.#query<{ epoch: number }>(ACQUIRE, [
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
    const rows = await this.#query(RENEW, [nodeId, epoch, ttlMs]);
    return rows.length === 1;
  }

  async release(nodeId: string, epoch: number): Promise<void> {
    await this.#query(RELEASE, [nodeId, epoch]);
  }

  /** The lease row as it is now. */
  async read(): Promise<LeaseView> {
    const rows = await this.#query<LeaseRow>(READ, []);
    const row = rows[0];
    if (row === undefined) throw new StoreError('dtp.leader_lease has no row');
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

  close(): Promise<void> {
    this.#closed = true;
    const client = this.#client;
    this.#client = null;
    return client === null
      ? Promise.resolve()
      : client.then(
          (c) => c.end().catch(() => undefined),
          () => undefined,
        );
  }

  async #query<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<R[]> {
    if (this.#closed) throw new StoreError('lease is closed');
    const client = await this.#connection();
    try {
      const result = await withDeadline(
        client.query<R>(text, values),
        this.#options.operationTimeoutMs,
      );
      return result.rows;
    } catch (err) {
      // The connection may be half-dead (a deadline passed mid-query): start afresh next time.
      this.#drop(client);
      throw new StoreError(`lease operation failed: ${describeError(err)}`, { cause: err });
    }
  }

  #connection(): Promise<pg.Client> {
    this.#client ??= (async () => {
      const client = await connectClient({
        url: this.#options.url,
        applicationName: 'dtp-lease',
        connectTimeoutMs: this.#options.operationTimeoutMs,
      });
      if (!this.#migrated) {
        await migrate(client);
        this.#migrated = true;
      }
      return client;
    })();
    const pending = this.#client;
    pending.catch(() => {
      if (this.#client === pending) this.#client = null;
    });
    return pending;
  }

  #drop(client: pg.Client): void {
    this.#client = null;
    client.end().catch(() => undefined);
  }

  /** For logs: the database without its password. */
  get description(): string {
    return redactUrl(this.#options.url);
  }
}

function withDeadline<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
