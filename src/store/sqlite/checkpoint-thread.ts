/**
 * Background checkpoints for the SQLite store in durability `normal`, where
 * the main thread commits inline and never checkpoints itself (a checkpoint
 * fsyncs the database file: that wait belongs off the event loop).
 *
 * Every interval it copies what it can from the WAL into the database without
 * blocking the writer (PASSIVE). That alone never lets the WAL start over
 * under a steady load: SQLite rewinds the WAL only at a commit that finds
 * every frame copied, and a passive checkpoint copies only the frames that
 * were there when it began, while commits keep appending. So once the WAL
 * file is larger than `restartBytes`, a RESTART follows the passive pass: if
 * no commit is under way, it holds commits off while it copies the few frames
 * appended since (milliseconds: commits that come meanwhile wait in their
 * busy handler) and syncs, and the next commit writes the WAL from its start
 * again. The file then stays near its size at that moment instead of
 * growing by every page every commit writes (and a restart after a crash has
 * that much less to read). On CLOSE it does a last passive pass and exits.
 */
import { statSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { openDatabase } from './open.js';
import type { CheckpointThreadData } from './writer-protocol.js';

const { path, intervalMs, restartBytes } = workerData as CheckpointThreadData;
const port = parentPort;
if (port === null) throw new Error('checkpoint-thread.js must run inside a worker thread');

const db = openDatabase(path, 'normal');
// No waiting in a busy handler here: a RESTART that waited for a reader (a
// backup, the integrity check) would hold every commit off meanwhile. It
// takes the writer lock only if it is free at once and gives up on readers
// at once, behaving as a passive checkpoint from there; the next interval
// tries again.
db.pragma('busy_timeout = 0');
const walPath = `${path}-wal`;

function walBytes(): number {
  try {
    return statSync(walPath).size;
  } catch {
    return 0; // no WAL file (yet): nothing to rewind
  }
}

const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
    if (walBytes() > restartBytes) db.pragma('wal_checkpoint(RESTART)');
  } catch {
    // Busy or failing: the next interval tries again; commits are unaffected.
  }
}, intervalMs);

port.on('message', () => {
  clearInterval(timer);
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } finally {
    db.close();
    port.close();
  }
});
