/**
 * Which store a coordinator's `--database` names, and opening it:
 *
 * - `:memory:`: a {@link MemoryStore} (nothing survives the process);
 * - a file path: a {@link SqliteStore}, after taking the file's exclusive
 *   lock ({@link DatabaseLock}), so that one coordinator at a time uses it;
 * - a `postgres://` URL: a database shared by several coordinators of which
 *   one leads; each term opens a {@link PostgresStore} fenced by the epoch of
 *   its lease, and the lease itself is a {@link PostgresLease}. With shards,
 *   each shard has its store and lease in a schema of its own (`schema`,
 *   protocol/shards.ts `shardSchema`), and the coordinators alive are listed
 *   by a {@link PostgresMembership}.
 *
 * An opened store comes as a {@link StoreHandle} whose `close()` closes the
 * store and then gives up what was taken for it (the lock).
 */
import type { LeaseBackend } from './lease.js';
import type { MembershipBackend } from './membership.js';
import { MemoryStore } from './memory-store.js';
import { isPostgresUrl } from './postgres/connection.js';
import { PostgresMembership } from './postgres/membership.js';
import { PostgresLease } from './postgres/postgres-lease.js';
import type { DedicatedConnection } from './postgres/dedicated-connection.js';
import { PostgresStore } from './postgres/postgres-store.js';
import type { ShardWriter } from './postgres/shard-writer.js';
import { DatabaseLock, isSqliteFile } from './sqlite/database-lock.js';
import { SqliteStore, type SqliteStoreOptions } from './sqlite/sqlite-store.js';
import type { Store } from './store.js';

/** An open store and how to give it back. */
export interface StoreHandle {
  readonly store: Store;
  /** Closes the store, then releases what was held for it. Call once. */
  close(): Promise<void>;
}

/** True when the database is shared by several coordinators (PostgreSQL). */
export function isSharedDatabase(databasePath: string): boolean {
  return isPostgresUrl(databasePath);
}

/** How the database is named in logs before a store is open (no password). */
export function describeDatabase(databasePath: string): string {
  return isPostgresUrl(databasePath) ? PostgresStore.describe(databasePath) : databasePath;
}

/** A handle for a store someone else opened (tests, embedding): closing it closes the store. */
export function handleOf(store: Store): StoreHandle {
  return { store, close: () => store.close() };
}

/**
 * Opens the store of a coordinator that leads alone: memory for `:memory:`,
 * else the SQLite file, locked first (the lock comes before anything reads
 * or writes the file). Throws `DATABASE_LOCKED` when another coordinator has it.
 */
export async function openSoleStore(
  databasePath: string,
  durability: SqliteStoreOptions['durability'],
): Promise<StoreHandle> {
  if (databasePath === ':memory:') return handleOf(new MemoryStore());
  const lock = isSqliteFile(databasePath) ? DatabaseLock.acquire(databasePath) : null;
  let store: Store;
  try {
    store = await SqliteStore.open({ path: databasePath, durability });
  } catch (err) {
    lock?.release();
    throw err;
  }
  return {
    store,
    close: async () => {
      try {
        await store.close();
      } finally {
        lock?.release();
      }
    },
  };
}

/**
 * Opens the shared PostgreSQL store for one term: every write is fenced by
 * `epoch`, the epoch of the lease in the same `schema` (default `dtp`).
 */
export async function openFencedStore(
  url: string,
  epoch: number,
  schema?: string,
  readConnections?: number,
  shardWriter?: ShardWriter,
): Promise<StoreHandle> {
  return handleOf(
    await PostgresStore.open({
      url,
      epoch,
      ...(schema !== undefined && { schema }),
      ...(readConnections !== undefined && { readConnections }),
      ...(shardWriter !== undefined && { shardWriter }),
    }),
  );
}

/**
 * The leader lease of a shared database (of one shard's `schema`, default
 * `dtp`); each operation gives up after `operationTimeoutMs`.
 */
export function openLease(
  url: string,
  operationTimeoutMs: number,
  schema?: string,
  connection?: DedicatedConnection,
): LeaseBackend {
  return new PostgresLease({
    url,
    operationTimeoutMs,
    ...(schema !== undefined && { schema }),
    ...(connection !== undefined && { connection }),
  });
}

/** The coordinators alive on a shared database; each operation gives up after `operationTimeoutMs`. */
export function openMembership(url: string, operationTimeoutMs: number): MembershipBackend {
  return new PostgresMembership({ url, operationTimeoutMs });
}
