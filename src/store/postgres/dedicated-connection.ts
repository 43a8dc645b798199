/**
 * One PostgreSQL connection kept for small, frequent statements (a lease,
 * the membership): opened on first use, every statement under a deadline,
 * and dropped after any failure so that the next statement starts on a
 * fresh connection (a deadline may have passed mid-statement, leaving the
 * old one half-dead). Statements of several users queue on it in order.
 */
import type pg from 'pg';
import { describeError } from '../../protocol/errors.js';
import { StoreError } from '../store.js';
import { connectClient } from './connection.js';

export interface DedicatedConnectionOptions {
  url: string;
  applicationName: string;
  /** Give up on one statement (and on connecting) after this long, in ms. */
  operationTimeoutMs: number;
  /** Runs once on the first connection before any statement (a migration). */
  prepare?: (client: pg.Client) => Promise<void>;
}

export class DedicatedConnection {
  readonly #options: DedicatedConnectionOptions;
  #client: Promise<pg.Client> | null = null;
  #prepared = false;
  #closed = false;
  /** The statement before the next one: statements run one after another, never overlapping. */
  #tail: Promise<unknown> = Promise.resolve();

  constructor(options: DedicatedConnectionOptions) {
    this.#options = options;
  }

  /**
   * The rows of one statement, run after the ones asked before it; a
   * {@link StoreError} naming `what` when it fails or is late (the deadline
   * counts from when its turn comes).
   */
  query<R extends pg.QueryResultRow>(what: string, text: string, values: unknown[]): Promise<R[]> {
    const turn = this.#tail.then(() => this.#run<R>(what, text, values));
    this.#tail = turn.catch(() => undefined);
    return turn;
  }

  async #run<R extends pg.QueryResultRow>(
    what: string,
    text: string,
    values: unknown[],
  ): Promise<R[]> {
    if (this.#closed) throw new StoreError(`${what}: the connection is closed`);
    let client: pg.Client;
    try {
      client = await this.#connection();
    } catch (err) {
      throw new StoreError(`${what} failed: ${describeError(err)}`, { cause: err });
    }
    try {
      const result = await withDeadline(
        client.query<R>(text, values),
        this.#options.operationTimeoutMs,
      );
      return result.rows;
    } catch (err) {
      this.#drop(client);
      throw new StoreError(`${what} failed: ${describeError(err)}`, { cause: err });
    }
  }

  /** Idempotent. */
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

  #connection(): Promise<pg.Client> {
    this.#client ??= (async () => {
      const { url, applicationName, operationTimeoutMs, prepare } = this.#options;
      const client = await connectClient({
        url,
        applicationName,
        connectTimeoutMs: operationTimeoutMs,
      });
      if (!this.#prepared && prepare !== undefined) {
        try {
          await prepare(client);
        } catch (err) {
          await client.end().catch(() => undefined);
          throw err;
        }
      }
      this.#prepared = true;
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
}

/** Settles like `promise`, or rejects once `timeoutMs` passed. */
export function withDeadline<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
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
