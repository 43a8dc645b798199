/**
 * The write connection the shards led by one sharded coordinator share.
 *
 * Each shard's store groups the batches of its own term into one
 * transaction (postgres-store.ts); with sixteen shards that is sixteen small
 * transactions where one coordinator of the whole database makes one, each
 * with its own round trip and its own WAL flush. Here the groups of every
 * shard that are waiting at the same moment go into one statement,
 * `SELECT dtp_s1.commit_batch(…), dtp_s5.commit_batch(…)`: one transaction,
 * each shard's part still fenced by its own epoch in its own schema (the
 * function raises when the shard's lease moved on, and the whole
 * transaction is rolled back).
 *
 * What can go wrong with a combined transaction, and what each part gets:
 * - The server refused it (an error with an SQLSTATE: one part fenced, a
 *   constraint): nothing of it was written, so each part is tried again
 *   alone, in the same order, and gets its own outcome (a fenced shard
 *   fails alone; the others commit).
 * - The connection broke: whether it committed is unknown, so every part
 *   fails as a lone commit would; each of those shards' stores stops (its
 *   term ends and the next one recovers from what is stored). The next
 *   statement opens a new connection.
 *
 * One part per shard at a time: a store sends its next group only once the
 * last one is answered, so a shard's commits stay in order. Other
 * statements of a shard (a purge) run alone, in turn with the commits.
 *
 * A commit that wrote messages to other shards' outbox also notifies the
 * channel {@link OUTBOX_CHANNEL} with their shard numbers, in the same
 * transaction (delivered at commit, never for a rolled-back one).
 */
import type pg from 'pg';
import { describeError } from '../../protocol/errors.js';
import { StoreError } from '../store.js';
import { connectClient, redactUrl, sqlState } from './connection.js';

/** The channel a commit with outbox messages notifies; the payload lists the target shards. */
export const OUTBOX_CHANNEL = 'dtp_outbox';

/** The arguments of one shard's `commit_batch` (schema.ts, migration 15). */
export const COMMIT_ARGUMENTS = 21;

/** One shard's group of batches, ready for its `commit_batch`. */
export interface CommitPart {
  /** The shard's schema (`dtp_s<n>`). */
  readonly schema: string;
  /** The {@link COMMIT_ARGUMENTS} arguments, the epoch first. */
  readonly values: readonly unknown[];
  /** The shards the part sends outbox messages to (none: empty). */
  readonly notifies: readonly number[];
}

interface Waiting {
  readonly part: CommitPart;
  resolve(): void;
  reject(err: unknown): void;
}

interface Alone {
  readonly query: pg.QueryConfig;
  resolve(result: pg.QueryResult): void;
  reject(err: unknown): void;
}

/** The statement of one part's call, its arguments numbered from `first`. */
function callOf(schema: string, first: number): string {
  const args = Array.from({ length: COMMIT_ARGUMENTS }, (_, i) => `$${first + i}`);
  return `${schema}.commit_batch(${args.join(', ')})`;
}

export class ShardWriter {
  readonly #url: string;
  readonly #applicationName: string;
  #client: Promise<pg.Client> | null = null;
  readonly #commits: Waiting[] = [];
  readonly #alone: Alone[] = [];
  #running = false;
  #closed = false;
  /** Transactions sent and the parts they carried (for tests and measurements). */
  readonly stats = { transactions: 0, parts: 0 };

  constructor(url: string, applicationName: string) {
    this.#url = url;
    this.#applicationName = applicationName;
  }

  /** Commits one shard's part, with the parts of other shards waiting now. */
  commit(part: CommitPart): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.#closed) {
        reject(new StoreError('the shards’ write connection is closed'));
        return;
      }
      this.#commits.push({ part, resolve, reject });
      this.#kick();
    });
  }

  /** Runs one statement alone, in turn with the commits. */
  query<R extends pg.QueryResultRow>(query: pg.QueryConfig): Promise<pg.QueryResult<R>> {
    return new Promise<pg.QueryResult<R>>((resolve, reject) => {
      if (this.#closed) {
        reject(new StoreError('the shards’ write connection is closed'));
        return;
      }
      this.#alone.push({
        query,
        resolve: resolve as (result: pg.QueryResult) => void,
        reject,
      });
      this.#kick();
    });
  }

  /** Idempotent; what is waiting is refused. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const closed = new StoreError('the shards’ write connection is closed');
    for (const waiting of [...this.#commits.splice(0), ...this.#alone.splice(0)]) {
      waiting.reject(closed);
    }
    const client = this.#client;
    this.#client = null;
    if (client !== null) await client.then((c) => c.end()).catch(() => undefined);
  }

  #kick(): void {
    if (this.#running) return;
    this.#running = true;
    // The commits of this event-loop turn's other shards (what every socket
    // read in this turn brought) join the first transaction.
    setImmediate(() => void this.#drain());
  }

  async #drain(): Promise<void> {
    try {
      while (!this.#closed && (this.#commits.length > 0 || this.#alone.length > 0)) {
        const alone = this.#alone.shift();
        if (alone !== undefined) {
          await this.#runAlone(alone);
          continue;
        }
        await this.#runCommits(this.#takeCommits());
      }
    } finally {
      this.#running = false;
    }
  }

  /** The waiting commits, at most one per schema (a later one of a schema waits its turn). */
  #takeCommits(): Waiting[] {
    const taken: Waiting[] = [];
    const schemas = new Set<string>();
    const left: Waiting[] = [];
    for (const waiting of this.#commits.splice(0)) {
      if (schemas.has(waiting.part.schema)) {
        left.push(waiting);
      } else {
        schemas.add(waiting.part.schema);
        taken.push(waiting);
      }
    }
    this.#commits.push(...left);
    return taken;
  }

  async #runAlone(alone: Alone): Promise<void> {
    try {
      const client = await this.#connection();
      alone.resolve(await client.query(alone.query));
    } catch (err) {
      this.#dropUnlessRefused(err);
      alone.reject(err);
    }
  }

  async #runCommits(parts: Waiting[]): Promise<void> {
    try {
      await this.#send(parts.map((w) => w.part));
      for (const waiting of parts) waiting.resolve();
      return;
    } catch (err) {
      // The server refused the transaction: nothing of it was written.
      if (parts.length > 1 && sqlState(err) !== null) {
        for (const waiting of parts) {
          try {
            await this.#send([waiting.part]);
            waiting.resolve();
          } catch (alone) {
            this.#dropUnlessRefused(alone);
            waiting.reject(alone);
          }
        }
        return;
      }
      this.#dropUnlessRefused(err);
      for (const waiting of parts) waiting.reject(err);
    }
  }

  async #send(parts: readonly CommitPart[]): Promise<void> {
    const calls: string[] = [];
    const values: unknown[] = [];
    const notifies = new Set<number>();
    for (const part of parts) {
      calls.push(callOf(part.schema, values.length + 1));
      values.push(...part.values);
      for (const shard of part.notifies) notifies.add(shard);
    }
    if (notifies.size > 0) {
      values.push([...notifies].sort((a, b) => a - b).join(','));
      calls.push(`pg_notify('${OUTBOX_CHANNEL}', $${values.length})`);
    }
    const text = `SELECT ${calls.join(', ')}`;
    const client = await this.#connection();
    // A lone part's statement is prepared once per connection; combinations vary too much.
    const name =
      parts.length === 1 && notifies.size === 0
        ? `dtp_commit_${(parts[0] as CommitPart).schema}`
        : undefined;
    await client.query(name === undefined ? { text, values } : { name, text, values });
    this.stats.transactions += 1;
    this.stats.parts += parts.length;
  }

  /** A connection whose statement failed without the server's word on it is not used again. */
  #dropUnlessRefused(err: unknown): void {
    if (sqlState(err) !== null) return;
    const client = this.#client;
    this.#client = null;
    void client?.then((c) => c.end()).catch(() => undefined);
  }

  #connection(): Promise<pg.Client> {
    if (this.#client === null) {
      const opening = connectClient({ url: this.#url, applicationName: this.#applicationName });
      opening.catch(() => {
        if (this.#client === opening) this.#client = null;
      });
      this.#client = opening;
    }
    return this.#client.catch((err: unknown) => {
      throw new StoreError(
        `cannot open the shards’ write connection to ${redactUrl(this.#url)}: ${describeError(err)}`,
        { cause: err },
      );
    });
  }
}
