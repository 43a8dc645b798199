/**
 * Getting at a SQLite database's file before anything waits on it: its
 * directory, created one level at a time, and the file itself, opened for
 * reading and writing (created when missing). Every failure is a
 * {@link StoreError} naming the path and the reason, at once.
 *
 * Why not `mkdirSync(dir, { recursive: true })`: under a directory that
 * refuses new entries with ENOENT although it exists (`/proc`), Node's
 * recursive mkdir retries the parent forever, and a coordinator started on
 * `/proc/nope/x.db` hung without a word.
 */
import {
  closeSync,
  constants,
  fstatSync,
  mkdirSync,
  openSync,
  realpathSync,
  statSync,
  type Stats,
} from 'node:fs';
import { dirname, resolve } from 'node:path';
import { StoreError } from '../store.js';

/** The reason an fs call failed, in words ("permission denied"), with its code. */
export function fsReason(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as NodeJS.ErrnoException).code;
  // Node's messages read "EACCES: permission denied, open '/x'".
  const words = /^[A-Z0-9]+: ([^,]+)/.exec(err.message)?.[1];
  return words !== undefined && code !== undefined ? `${words} (${code})` : err.message;
}

function errorCode(err: unknown): string | undefined {
  return err instanceof Error ? (err as NodeJS.ErrnoException).code : undefined;
}

/** The entry at `path`, or null when there is none (or a path component is not a directory). */
function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch (err) {
    const code = errorCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw new StoreError(`cannot read ${path}: ${fsReason(err)}`, { cause: err });
  }
}

/**
 * Makes sure `dir` is a directory, creating it and its missing parents.
 * Throws a StoreError naming the first path that is not a directory or
 * could not be created.
 */
export function ensureDirectory(dir: string): void {
  const missing: string[] = [];
  // Walks up at most once per path component.
  for (let current = resolve(dir); ; current = dirname(current)) {
    const stats = statOrNull(current);
    if (stats !== null) {
      if (!stats.isDirectory()) throw new StoreError(`${current} is not a directory`);
      break;
    }
    if (dirname(current) === current) break;
    missing.push(current);
  }
  for (const path of missing.reverse()) {
    try {
      mkdirSync(path);
    } catch (err) {
      if (errorCode(err) === 'EEXIST' && statOrNull(path)?.isDirectory() === true) continue;
      throw new StoreError(`cannot create directory ${path}: ${fsReason(err)}`, { cause: err });
    }
  }
}

/** An open database file: its descriptor and its real path (symbolic links resolved). */
export interface DatabaseFile {
  readonly fd: number;
  readonly realPath: string;
  /** How many names (hard links) the file has. */
  readonly links: number;
  readonly dev: number;
  readonly inode: number;
}

/**
 * Opens (creating when missing) the database file at `path` for reading and
 * writing, after making its directory. Throws a StoreError "cannot open
 * database <path>: <reason>" ("is a directory", "permission denied", ...).
 */
export function openDatabaseFile(path: string): DatabaseFile {
  const fail = (reason: string, cause?: unknown): StoreError =>
    new StoreError(`cannot open database ${path}: ${reason}`, { cause });
  try {
    ensureDirectory(dirname(path));
  } catch (err) {
    throw fail(err instanceof Error ? err.message : String(err), err);
  }
  if (statOrNull(path)?.isDirectory() === true) throw fail('is a directory');
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o644);
  } catch (err) {
    throw fail(fsReason(err), err);
  }
  try {
    const stats = fstatSync(fd);
    const realPath = realpathSync(path);
    return { fd, realPath, links: stats.nlink, dev: stats.dev, inode: stats.ino };
  } catch (err) {
    closeSync(fd);
    throw fail(fsReason(err), err);
  }
}
