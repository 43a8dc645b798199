/**
 * One coordinator per SQLite file: exclusive locks taken before recovery and
 * held for the coordinator's whole life. The kernel drops them when the
 * holder's process ends, however it ends, so a crashed coordinator never
 * leaves a stale lock behind and there is nothing to clean up.
 *
 * Two locks, because a file can be reached by more than one name:
 *
 * - The file itself (Linux): a `flock` on the database file's descriptor
 *   (through the optional `fs-ext` addon). It belongs to the inode, so a
 *   symbolic link, a hard link, a renamed file or another mount of the same
 *   directory all meet it. On Linux `flock` locks and the `fcntl` locks
 *   SQLite takes on the same file never interact; on BSD and macOS they do,
 *   which is why it is not used there.
 * - The real name: SQLite's own lock (a POSIX `fcntl` lock) on
 *   `<real path>.lock`, held by an open exclusive transaction, where the
 *   real path has every symbolic link resolved. It catches what the inode
 *   lock cannot: a new file put in place of a live database under its old
 *   name (which would share the live one's `-wal` file), and every alias on
 *   platforms without the inode lock. Between connections of one process
 *   SQLite enforces it too.
 *
 * A database file with more than one hard link is refused on every platform,
 * live holder or not: SQLite names the write-ahead log after the path, so
 * two names of one file mean two logs, and committed transactions in one
 * are invisible through the other.
 *
 * Within one process a second lock on a held file (any name) is refused
 * before the file is even opened: closing a descriptor of a file drops every
 * `fcntl` lock the process holds on it, so a refused attempt that opened and
 * closed the live database would take the live coordinator's SQLite locks
 * away (another process could then take the database).
 *
 * Who holds the database is written to `<real path>.lock-holder` (pid, host,
 * start time, inode) once both are taken, so a coordinator refused under the
 * same real name can name the holder. That file is information only.
 *
 * Like SQLite itself, this relies on working file locks: keep the database
 * on a local file system, not a network share.
 */
import {
  accessSync,
  closeSync,
  constants,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import BetterSqlite3, { type Database } from 'better-sqlite3';
import { LocalErrorCode } from '../../protocol/error-codes.js';
import { DtpError, describeError } from '../../protocol/errors.js';
import { fsReason, openDatabaseFile, type DatabaseFile } from './database-file.js';

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
  inode: number;
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

/** Takes an exclusive `flock` on `fd`: true if taken, false if another holds it. */
type InodeLocker = (fd: number) => boolean;

function loadInodeLocker(): InodeLocker | null {
  if (process.platform !== 'linux') return null;
  let flockSync: unknown;
  try {
    const addon: unknown = createRequire(import.meta.url)('fs-ext');
    flockSync =
      typeof addon === 'object' && addon !== null ? Reflect.get(addon, 'flockSync') : null;
  } catch {
    return null; // an optional dependency that did not build
  }
  if (typeof flockSync !== 'function') return null;
  const flock = flockSync as (fd: number, flags: 'exnb') => void;
  return (fd) => {
    try {
      flock(fd, 'exnb');
      return true;
    } catch (err) {
      const code = err instanceof Error ? (err as NodeJS.ErrnoException).code : undefined;
      if (code === 'EAGAIN' || code === 'EWOULDBLOCK') return false;
      throw err;
    }
  };
}

const INODE_LOCKER = loadInodeLocker();

/**
 * Database files (`dev:inode`) locked by this process. A second lock in the
 * same process is refused before the file is opened: the descriptor it would
 * open and close would drop the `fcntl` locks the live coordinator's SQLite
 * connections hold on that file.
 */
const HELD_HERE = new Map<string, string>();

function fileKey(dev: number, inode: number): string {
  return `${dev}:${inode}`;
}

/** Options for tests. */
export interface DatabaseLockOptions {
  /** Lock the file's inode where the platform allows it (default true). */
  inodeLock?: boolean;
}

export class DatabaseLock {
  /** The side file of SQLite's lock, `<real path>.lock`. */
  readonly lockPath: string;
  readonly holderPath: string;
  /** True when the database file's inode is locked too (see the module comment). */
  readonly inodeLocked: boolean;
  #file: DatabaseFile | null;
  #db: Database | null;

  private constructor(file: DatabaseFile, inodeLocked: boolean, db: Database) {
    this.lockPath = `${file.realPath}.lock`;
    this.holderPath = `${file.realPath}.lock-holder`;
    this.inodeLocked = inodeLocked;
    this.#file = file;
    this.#db = db;
  }

  /** True where the database file's inode can be locked (Linux with the addon built). */
  static get inodeLockAvailable(): boolean {
    return INODE_LOCKER !== null;
  }

  /**
   * Takes the locks of `databasePath` at once, or throws: a
   * {@link DatabaseLockedError} naming the lock and its holder, or a
   * StoreError when the file cannot be opened or created.
   */
  static acquire(databasePath: string, options: DatabaseLockOptions = {}): DatabaseLock {
    const existing = statOrNull(databasePath);
    const heldAs =
      existing === null ? undefined : HELD_HERE.get(fileKey(existing.dev, existing.ino));
    if (heldAs !== undefined) {
      throw inUse(
        databasePath,
        `lock file ${heldAs}.lock, held by pid ${process.pid} (this process)`,
      );
    }
    const file = openDatabaseFile(databasePath);
    try {
      const locker = options.inodeLock === false ? null : INODE_LOCKER;
      lockInode(databasePath, file, locker);
      const db = lockRealName(databasePath, file.realPath);
      const lock = new DatabaseLock(file, locker !== null, db);
      lock.#writeHolder(file);
      HELD_HERE.set(fileKey(file.dev, file.inode), file.realPath);
      return lock;
    } catch (err) {
      closeSync(file.fd);
      throw err;
    }
  }

  /** True until released. */
  get held(): boolean {
    return this.#db !== null;
  }

  /** Releases both locks. Idempotent. */
  release(): void {
    const db = this.#db;
    const file = this.#file;
    if (db === null || file === null) return;
    this.#db = null;
    this.#file = null;
    HELD_HERE.delete(fileKey(file.dev, file.inode));
    rmSync(this.holderPath, { force: true });
    db.close();
    closeSync(file.fd); // drops the inode lock
  }

  #writeHolder(file: DatabaseFile): void {
    const holder: Holder = {
      pid: process.pid,
      host: hostname(),
      sinceMillis: Date.now(),
      inode: file.inode,
    };
    try {
      writeFileSync(this.holderPath, `${JSON.stringify(holder)}\n`);
    } catch {
      // Information only: the locks themselves are held.
    }
  }
}

function inUse(databasePath: string, detail: string, cause?: unknown): DatabaseLockedError {
  return new DatabaseLockedError(
    `database ${databasePath} is in use by another coordinator (${detail})`,
    { cause },
  );
}

/**
 * The inode lock (where there is one), then the refusal of a file with other
 * names: SQLite names the write-ahead log after the path, so a coordinator on
 * another name of the file would read another log and lose or corrupt what
 * the first wrote, even after the first has gone.
 */
function lockInode(databasePath: string, file: DatabaseFile, locker: InodeLocker | null): void {
  if (locker !== null) {
    let taken: boolean;
    try {
      taken = locker(file.fd);
    } catch (err) {
      throw new DatabaseLockedError(`cannot lock database ${databasePath}: ${describeError(err)}`, {
        cause: err,
      });
    }
    if (!taken) throw lockedInode(databasePath, file);
  }
  if (file.links > 1) {
    throw new DatabaseLockedError(
      `database ${databasePath} has ${file.links} hard links: a coordinator on another name ` +
        'would use another write-ahead log and lose or corrupt data; remove the other names',
    );
  }
}

function lockedInode(databasePath: string, file: DatabaseFile): DatabaseLockedError {
  const holder = describeHolder(`${file.realPath}.lock-holder`);
  // Under the same real name the holder's files are found; under a hard link
  // or after a rename only the inode is shared.
  const alias =
    holder === 'holder unknown'
      ? `; the file is locked under another name (${file.links > 1 ? 'a hard link' : 'renamed'})`
      : '';
  return inUse(databasePath, `lock file ${file.realPath}.lock, ${holder}${alias}`);
}

/** SQLite's exclusive lock on `<real path>.lock`, held by the returned connection. */
function lockRealName(databasePath: string, realPath: string): Database {
  const lockPath = `${realPath}.lock`;
  let db: Database;
  try {
    ensureLockFile(lockPath);
    db = new BetterSqlite3(lockPath);
  } catch (err) {
    throw new DatabaseLockedError(`cannot open lock file ${lockPath}: ${fsReason(err)}`, {
      cause: err,
    });
  }
  try {
    db.pragma('busy_timeout = 0');
    // It never writes: no journal file to create beside it.
    db.pragma('journal_mode = OFF');
    db.pragma('locking_mode = EXCLUSIVE');
    // Held until the connection closes (or the process dies).
    db.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    db.close();
    if (!isBusy(err)) {
      throw new DatabaseLockedError(`cannot lock ${lockPath}: ${describeError(err)}`, {
        cause: err,
      });
    }
    throw inUse(
      databasePath,
      `lock file ${lockPath}, ${describeHolder(`${realPath}.lock-holder`)}`,
      err,
    );
  }
  return db;
}

/**
 * Creates the lock file, or checks the one there, so that a failure has a
 * clear reason (SQLite would only say "unable to open database file"). An
 * existing one is never opened here: closing a descriptor of a file drops
 * every `fcntl` lock this process holds on it, a live coordinator's too.
 */
function ensureLockFile(lockPath: string): void {
  try {
    // A new file: nobody holds a lock on it yet.
    closeSync(openSync(lockPath, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL, 0o644));
    return;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  if (statSync(lockPath).isDirectory()) throw new Error('is a directory');
  accessSync(lockPath, constants.R_OK | constants.W_OK);
}

/** SQLite's "another connection holds the lock" (as opposed to an I/O failure). */
function isBusy(err: unknown): boolean {
  const code = err instanceof Error ? (err as { code?: unknown }).code : undefined;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}

function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch {
    return null; // missing or unreadable: opening it says why
  }
}
