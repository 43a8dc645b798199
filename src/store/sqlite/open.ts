/**
 * Opening a SQLite database file the way every dtp connection does: WAL
 * journal, the durability's `synchronous` level, a busy timeout.
 */
import { dirname } from 'node:path';
import BetterSqlite3, { type Database } from 'better-sqlite3';
import { describeError } from '../../protocol/errors.js';
import { StoreError } from '../store.js';
import { ensureDirectory } from './database-file.js';

export function openDatabase(
  path: string,
  durability: 'normal' | 'full',
  options: { readOnly?: boolean } = {},
): Database {
  try {
    ensureDirectory(dirname(path));
    const db = new BetterSqlite3(path);
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${durability === 'full' ? 'FULL' : 'NORMAL'}`);
    db.pragma('busy_timeout = 5000');
    if (options.readOnly === true) db.pragma('query_only = ON');
    return db;
  } catch (err) {
    if (err instanceof StoreError) throw err;
    throw new StoreError(`cannot open database ${path}: ${describeError(err)}`, { cause: err });
  }
}
