/**
 * One coordinator per SQLite file: an exclusive lock taken before recovery
 * and held for the coordinator's whole life.
 *
 * The lock is SQLite's own file lock (a POSIX `fcntl` lock) on a small file
 * next to the database, `<database>.lock`, held by an open exclusive
 * transaction. The kernel drops it when the holder's process ends, however it
 * ends, so a crashed coordinator never leaves a stale lock behind and there
 * is nothing to clean up. Being a separate file, it does not get in the way
 * of the coordinator's own connections to the database (its writer thread
 * and its readers). Between connections of one process SQLite enforces the
 * same exclusion, so two coordinators in one process exclude each other too.
 *
 * Who holds it is written to `<database>.lock-holder` (pid, host, start
 * time) once the lock is taken, so a coordinator that finds it taken can
 * name the holder. That file is information only; the lock is the fcntl lock.
 *
 * Like SQLite itself, this relies on working file locks: keep the database
 * on a local file system, not a network share.
 */
import { LocalErrorCode } from '../../protocol/error-codes.js';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import BetterSqlite3, { type Database } from 'better-sqlite3';
import { DtpError, describeError } from '../../protocol/errors.js';

/** Another coordinator holds the database (or the lock cannot be taken). */
export class DatabaseLockedError extends DtpError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(LocalErrorCode.DatabaseLocked, message, options);
  }
}

interface Holder {
  pid: number;
  host: string;
  sinceMillis: number;
}

function describeHolder(path: string): string {
  try {
    const holder = JSON.parse(readFileSync(path, 'utf8')) as Partial<Holder>;
    const since =
      typeof holder.sinceMillis === 'number' ? new Date(holder.sinceMillis).toISOString() : '?';
    return `held by pid ${String(holder.pid)} on ${String(holder.host)} since ${since}`;
  } catch {
    return 'holder unknown';
  }
}

/** True for a database path that is a SQLite file (not `:memory:`, not a URL). */
export function isSqliteFile(databasePath: string): boolean {
  return databasePath !== ':memory:' && !/^[a-z][a-z0-9+.-]*:\/\//i.test(databasePath);
}

export class DatabaseLock {
  readonly lockPath: string;
  readonly holderPath: string;
  #db: Database | null;

  private constructor(lockPath: string, holderPath: string, db: Database) {
    this.lockPath = lockPath;
    this.holderPath = holderPath;
    this.#db = db;
  }

  /**
   * Takes the lock of `databasePath` at once, or throws
   * {@link DatabaseLockedError} naming the lock file and its holder.
   */
  static acquire(databasePath: string): DatabaseLock {
    const lockPath = `${databasePath}.lock`;
    const holderPath = `${databasePath}.lock-holder`;
    let db: Database;
    try {
      mkdirSync(dirname(lockPath), { recursive: true });
      db = new BetterSqlite3(lockPath);
    } catch (err) {
      throw new DatabaseLockedError(`cannot open lock file ${lockPath}: ${describeError(err)}`, {
        cause: err,
      });
    }
    try {
      db.pragma('busy_timeout = 0');
      db.pragma('locking_mode = EXCLUSIVE');
      // Held until the connection closes (or the process dies).
      db.exec('BEGIN EXCLUSIVE');
    } catch (err) {
      db.close();
      throw new DatabaseLockedError(
        `database ${databasePath} is in use by another coordinator ` +
          `(lock file ${lockPath}, ${describeHolder(holderPath)})`,
        { cause: err },
      );
    }
    const holder: Holder = { pid: process.pid, host: hostname(), sinceMillis: Date.now() };
    try {
      writeFileSync(holderPath, `${JSON.stringify(holder)}\n`);
    } catch {
      // Information only: the lock itself is held.
    }
    return new DatabaseLock(lockPath, holderPath, db);
  }

  /** True until released. */
  get held(): boolean {
    return this.#db !== null;
  }

  /** Releases the lock. Idempotent. */
  release(): void {
    const db = this.#db;
    if (db === null) return;
    this.#db = null;
    rmSync(this.holderPath, { force: true });
    db.close();
  }
}
