/**
 * Tells a sharded coordinator when messages to some shards were committed
 * to the cluster's outbox: one connection that LISTENs on
 * {@link OUTBOX_CHANNEL}, which every commit with outbox messages notifies
 * with their target shards (shard-writer.ts, postgres-store.ts).
 *
 * A notification is a hint, never the only way a message is found: shards
 * still read the outbox on a slow poll, and after the connection was lost
 * (notifications sent meanwhile are gone) every shard is told to read once
 * it is back. The connection is opened again after a failure, waiting
 * `retryMs` between tries.
 */
import type pg from 'pg';
import { describeError } from '../../protocol/errors.js';
import type { Logger } from '../../observability/logger.js';
import { connectClient } from './connection.js';
import { OUTBOX_CHANNEL } from './shard-writer.js';

export interface OutboxListenerOptions {
  url: string;
  /** Told the shards a commit sent messages to; `null` = any shard may have some. */
  arrived(shards: readonly number[] | null): void;
  /** Between two tries to open the connection, in ms. */
  retryMs: number;
  logger: Logger;
}

/** The shard numbers of a notification's payload (`"3,7"`); malformed ones are skipped. */
export function shardsOfPayload(payload: string | undefined): number[] {
  if (payload === undefined || payload === '') return [];
  return payload
    .split(',')
    .map((part) => Number(part))
    .filter((shard) => Number.isInteger(shard) && shard >= 0);
}

export class OutboxListener {
  readonly #options: OutboxListenerOptions;
  #client: pg.Client | null = null;
  #retry: NodeJS.Timeout | null = null;
  #closed = false;

  private constructor(options: OutboxListenerOptions) {
    this.#options = options;
  }

  /** Starts listening (connecting in the background; a failure is retried). */
  static start(options: OutboxListenerOptions): OutboxListener {
    const listener = new OutboxListener(options);
    void listener.#connect();
    return listener;
  }

  /** True while the connection listens. */
  get listening(): boolean {
    return this.#client !== null;
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#retry !== null) clearTimeout(this.#retry);
    this.#retry = null;
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => undefined);
  }

  async #connect(): Promise<void> {
    if (this.#closed) return;
    let client: pg.Client;
    try {
      client = await connectClient({ url: this.#options.url, applicationName: 'dtp-outbox' });
      await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
    } catch (err) {
      this.#options.logger.warn(
        { err: describeError(err) },
        'cannot listen for outbox messages; trying again',
      );
      this.#later();
      return;
    }
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.#client = client;
    client.on('notification', (note) => {
      if (note.channel === OUTBOX_CHANNEL) this.#options.arrived(shardsOfPayload(note.payload));
    });
    const lost = (): void => {
      if (this.#client !== client) return;
      this.#client = null;
      void client.end().catch(() => undefined);
      this.#later();
    };
    client.on('error', lost);
    client.on('end', lost);
    // What was notified while nobody listened is read now.
    this.#options.arrived(null);
  }

  #later(): void {
    if (this.#closed || this.#retry !== null) return;
    this.#retry = setTimeout(() => {
      this.#retry = null;
      void this.#connect();
    }, this.#options.retryMs);
  }
}
