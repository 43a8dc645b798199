/**
 * Background checkpoints for the SQLite store in durability `normal`, where
 * the main thread commits inline and never checkpoints itself (a checkpoint
 * fsyncs the database file: that wait belongs off the event loop). Every
 * interval it copies what it can from the WAL into the database without
 * blocking the writer (PASSIVE); on CLOSE it does a last one and exits.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openDatabase } from './open.js';

const { path, intervalMs } = workerData as { path: string; intervalMs: number };
const port = parentPort;
if (port === null) throw new Error('checkpoint-thread.js must run inside a worker thread');

const db = openDatabase(path, 'normal');
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
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
