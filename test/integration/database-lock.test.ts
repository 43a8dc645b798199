/**
 * One coordinator per SQLite file: a second one on the same file fails at
 * start, naming the lock and its holder, and changes nothing in the live
 * database (a single-attempt job that runs stays RUNNING and completes); the
 * lock goes away with its holder, even after SIGKILL.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
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
});
