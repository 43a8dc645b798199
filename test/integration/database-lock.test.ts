/**
 * One coordinator per SQLite file: a second one on the same file fails at
 * start, naming the lock and its holder, and changes nothing in the live
 * database (a single-attempt job that runs stays RUNNING and completes); the
 * lock goes away with its holder, even after SIGKILL. The lock is the
 * file's own: a symbolic link, a hard link or a new name of a held file
 * meets it, and a hard-linked file is refused even when nobody holds it.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, linkSync, renameSync, symlinkSync, unlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { DatabaseLock, DatabaseLockedError } from '../../src/store/sqlite/database-lock.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, tempDir } from '../helpers/test-coordinator.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function database(): string {
  const { dir, remove } = tempDir();
  cleanups.push(remove);
  return join(dir, 'sub', 'coordinator.db');
}

const MODULE_URL = new URL('../../src/store/sqlite/database-lock.js', import.meta.url).href;

/** A child process's script that takes the lock of `databasePath` and keeps it. */
function holderScript(databasePath: string): string {
  return `
    const { DatabaseLock } = await import(${JSON.stringify(MODULE_URL)});
    DatabaseLock.acquire(${JSON.stringify(databasePath)});
    process.stdout.write('locked\\n');
    setInterval(() => {}, 1000);
  `;
}

/**
 * A child process's script: a plain SQLite connection that tries to take the
 * database for itself; exits 0 if it was refused, 3 if it got it.
 */
function sqliteGrab(databasePath: string): string {
  const module = createRequire(import.meta.url).resolve('better-sqlite3');
  return `
    const db = new (require(${JSON.stringify(module)}))(${JSON.stringify(databasePath)});
    db.pragma('busy_timeout = 0');
    let code = 3;
    try {
      db.pragma('locking_mode = EXCLUSIVE');
      db.exec('BEGIN EXCLUSIVE');
    } catch (err) {
      if (err.code === 'SQLITE_BUSY') code = 0;
    }
    process.exit(code);
  `;
}

/** A child process that holds the lock of `databasePath` until it is killed. */
async function holdInChild(databasePath: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', holderScript(databasePath)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  cleanups.push(() => void child.kill('SIGKILL'));
  await once(child.stdout, 'data');
  return child;
}

describe('database lock', () => {
  it('refuses a second coordinator on the same file and leaves the live database alone', async () => {
    const databasePath = database();
    const first = await startCoordinator({ databasePath });
    cleanups.push(() => first.close());
    const worker = await ScriptedWorker.register(first.coordinator.workerPort, 'w1', 1);
    cleanups.push(() => worker.close());
    const client = await RawClient.connect(first.coordinator.clientPort);
    cleanups.push(() => client.close());
    const jobId = await client.submit('SLEEP', { durationMillis: 1 }, { maxAttempts: 1 });
    const assign = await worker.assignments.next();

    await assert.rejects(startCoordinator({ databasePath }), (err: unknown) => {
      assert.ok(err instanceof DatabaseLockedError, String(err));
      assert.equal(err.code, 'DATABASE_LOCKED');
      assert.match(err.message, /in use by another coordinator/);
      assert.ok(err.message.includes(`${databasePath}.lock`), err.message);
      assert.match(err.message, new RegExp(`held by pid ${process.pid} `));
      return true;
    });
    // The refused coordinator recovered nothing into the live file.
    assert.equal((await client.status(jobId)).state, 'RUNNING');
    worker.succeed(assign, 'done');
    assert.equal((await client.wait(jobId)).state, 'COMPLETED');
  });

  it('lets the next coordinator in once the holder has closed', async () => {
    const databasePath = database();
    const first = await startCoordinator({ databasePath });
    await first.close();
    assert.equal(existsSync(`${databasePath}.lock-holder`), false);
    const second = await startCoordinator({ databasePath });
    await second.close();
  });

  it('is released by the kernel when its holder is killed', async () => {
    const databasePath = database();
    const child = await holdInChild(databasePath);
    assert.throws(() => DatabaseLock.acquire(databasePath), DatabaseLockedError);
    child.kill('SIGKILL');
    await once(child, 'exit');
    // The holder file of the dead holder is still there; the lock is not.
    assert.equal(existsSync(`${databasePath}.lock-holder`), true);
    const lock = DatabaseLock.acquire(databasePath);
    lock.release();
    lock.release();
  });

  it('is met under a symbolic link, a hard link and a new name, held by another process', async (t) => {
    if (!DatabaseLock.inodeLockAvailable) return t.skip('no inode lock on this platform');
    const databasePath = database();
    const holder = await holdInChild(databasePath);
    const symlink = join(dirname(databasePath), 'symlink.db');
    symlinkSync(databasePath, symlink);
    assert.throws(
      () => DatabaseLock.acquire(symlink),
      /in use by another coordinator .*held by pid/,
    );
    const hardLink = join(dirname(databasePath), 'hard.db');
    linkSync(databasePath, hardLink);
    assert.throws(
      () => DatabaseLock.acquire(hardLink),
      /hard\.db is in use by another coordinator .*locked under another name \(a hard link\)/,
    );
    const renamed = join(dirname(databasePath), 'renamed.db');
    unlinkSync(hardLink);
    renameSync(databasePath, renamed);
    assert.throws(
      () => DatabaseLock.acquire(renamed),
      /renamed\.db is in use by another coordinator .*locked under another name \(renamed\)/,
    );
    holder.kill('SIGKILL');
    await once(holder, 'exit');
    DatabaseLock.acquire(renamed).release();
  });

  it("keeps the live coordinator's SQLite locks after a refusal in its own process", async () => {
    const databasePath = database();
    const first = await startCoordinator({ databasePath });
    cleanups.push(() => first.close());
    const symlink = join(dirname(databasePath), 'symlink.db');
    symlinkSync(databasePath, symlink);
    for (const path of [databasePath, symlink]) {
      await assert.rejects(startCoordinator({ databasePath: path }), /\(this process\)/);
    }
    // Had a refusal opened and closed the database file, the kernel would
    // have dropped every fcntl lock this process's SQLite connections hold
    // on it: another process could then take the database for itself (and
    // a plain connection closing would delete the live write-ahead log).
    const child = spawn(process.execPath, ['-e', sqliteGrab(databasePath)], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    assert.deepEqual(await once(child, 'exit'), [0, null], 'another process took the database');
    assert.equal(existsSync(`${databasePath}-wal`), true, 'the live write-ahead log is gone');
    const client = await RawClient.connect(first.coordinator.clientPort);
    cleanups.push(() => client.close());
    await client.submit('SLEEP', { durationMillis: 1 });
  });

  it('without the inode lock, still meets a symbolic link and refuses a hard-linked file', () => {
    const databasePath = database();
    const lock = DatabaseLock.acquire(databasePath, { inodeLock: false });
    cleanups.push(() => lock.release());
    const symlink = join(dirname(databasePath), 'symlink.db');
    symlinkSync(databasePath, symlink);
    assert.throws(
      () => DatabaseLock.acquire(symlink, { inodeLock: false }),
      (err: unknown) => {
        assert.ok(err instanceof DatabaseLockedError);
        assert.ok(err.message.includes(`lock file ${databasePath}.lock`), err.message);
        return true;
      },
    );
    linkSync(databasePath, join(dirname(databasePath), 'hard.db'));
    lock.release();
    // Nobody holds it now, and it is still refused: two names, two logs.
    assert.throws(
      () => DatabaseLock.acquire(databasePath, { inodeLock: false }),
      /has 2 hard links/,
    );
  });
});
