/**
 * Runs SQLite's `PRAGMA quick_check` on its own connection and thread, so a
 * coordinator can look for a corrupt page after it has started, without
 * making restart slower (it reads the whole file). Posts the problems found:
 * an empty list when the database is sound.
 */
import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { describeError } from '../../protocol/errors.js';

const { path, maxProblems } = workerData as { path: string; maxProblems: number };
if (parentPort === null) throw new Error('integrity-thread.js must run inside a worker thread');

let problems: string[];
try {
  const db = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
  try {
    const rows = db.pragma(`quick_check(${maxProblems})`) as { quick_check: string }[];
    problems = rows.map((row) => row.quick_check).filter((text) => text !== 'ok');
  } finally {
    db.close();
  }
} catch (err) {
  problems = [describeError(err)];
}
parentPort.postMessage(problems);
