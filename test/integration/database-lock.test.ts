/**
 * One coordinator per SQLite file: a second one on the same file fails at
 * start, naming the lock and its holder, and changes nothing in the live
 * database (a single-attempt job that runs stays RUNNING and completes); the
 * lock goes away with its holder, even after SIGKILL. The lock is the
 * file's own: a symbolic link, a hard link or a new name of a held file
 * meets it, and a hard-linked file is refused even when nobody holds it.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, linkSync, renameSync, symlinkSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { DatabaseLock, DatabaseLockedError } from '../../src/coordinator/database-lock.js';
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
    const moduleUrl = new URL('../../src/coordinator/database-lock.js', import.meta.url).href;
    const script = `
      const { DatabaseLock } = await import(${JSON.stringify(moduleUrl)});
      DatabaseLock.acquire(${JSON.stringify(databasePath)});
      process.stdout.write('locked\\n');
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    cleanups.push(() => void child.kill('SIGKILL'));
    await once(child.stdout, 'data');
    assert.throws(() => DatabaseLock.acquire(databasePath), DatabaseLockedError);
    child.kill('SIGKILL');
    await once(child, 'exit');
    // The holder file of the dead holder is still there; the lock is not.
    assert.equal(existsSync(`${databasePath}.lock-holder`), true);
    const lock = DatabaseLock.acquire(databasePath);
    lock.release();
    lock.release();
  });

  it('is met under a symbolic link, a hard link and a new name, on the file itself', (t) => {
    if (!DatabaseLock.inodeLockAvailable) return t.skip('no inode lock on this platform');
    const databasePath = database();
    const lock = DatabaseLock.acquire(databasePath);
    cleanups.push(() => lock.release());
    assert.equal(lock.inodeLocked, true);
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
