/**
 * Messages between the SQLite store (main thread) and its writer thread.
 *
 *   main -> writer   COMMIT  one batch (jobs as column arrays, attempts)
 *                    PURGE   delete terminal jobs of one state, finished before a time
 *                    CLOSE   finish what is queued, close the database, exit
 *   writer -> main   READY       the database is open and migrated
 *                    OPEN_FAILED the database could not be opened (then the thread exits)
 *                    COMMITTED   every batch up to `upTo` is durable
 *                    FAILED      a commit failed; nothing from then on will commit
 *                    PURGED      a purge deleted `deleted` jobs
 *                    PURGE_FAILED
 *
 * The writer takes every message already queued before it starts a
 * transaction, so batches that arrive while one commits share the next
 * transaction (group commit) without the main thread waiting.
 */
import type { PurgeQuery } from '../store.js';
import type { EncodedBatch } from './writer.js';

export interface WriterData {
  path: string;
  durability: 'normal' | 'full';
}

export type ToWriter =
  | ({ type: 'COMMIT' } & EncodedBatch)
  | { type: 'PURGE'; requestId: number; query: PurgeQuery }
  | { type: 'CLOSE' };

export type FromWriter =
  | { type: 'READY' }
  | { type: 'OPEN_FAILED'; message: string }
  | { type: 'COMMITTED'; upTo: number; durationMs: number }
  | { type: 'FAILED'; message: string }
  | { type: 'PURGED'; requestId: number; deleted: number }
  | { type: 'PURGE_FAILED'; requestId: number; message: string };

/** What the checkpoint thread of an inline writer (checkpoint-thread.ts) is started with. */
export interface CheckpointThreadData {
  path: string;
  /** How often it checkpoints, in ms. */
  intervalMs: number;
  /** The WAL file size beyond which a RESTART follows the passive checkpoint. */
  restartBytes: number;
}

/** How an inline writer's checkpoints run; each field has its default (writer-links.ts). */
export type CheckpointOptions = Partial<Omit<CheckpointThreadData, 'path'>>;
