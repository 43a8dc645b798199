/**
 * Start-up writes nothing until the coordinator holds its ports: a second
 * coordinator pointed at a live one's database that cannot bind leaves the
 * database exactly as it was (its recovery would otherwise have failed the
 * live coordinator's running single-attempt job).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';

describe('coordinator start-up order', () => {
  const tmp = tempDir('dtp-start-order-');
  const closers: { close(): Promise<void> }[] = [];
  after(async () => {
    for (const c of closers.reverse()) await c.close();
    tmp.remove();
  });

  it('commits no recovery when it cannot bind its ports', async () => {
    const databasePath = join(tmp.dir, 'db.sqlite');
    const live: TestCoordinator = await startCoordinator({ databasePath });
    closers.push(live);
    const c = await RawClient.connect(live.coordinator.clientPort);
    const w = await ScriptedWorker.register(live.coordinator.workerPort, 'busy', 1);
    closers.push(c, w);
    const jobId = await c.submit('SLEEP', { durationMillis: 60_000 }, { maxAttempts: 1 });
    await w.assignments.next();
    await assert.rejects(
      startCoordinator({
        databasePath,
        workerPort: live.coordinator.workerPort,
        clientPort: live.coordinator.clientPort,
      }),
    );
    const store = await SqliteStore.open({ path: join(tmp.dir, 'db.sqlite') });
    const read = await store.read({ op: 'job', jobId, withAttempts: false });
    await store.close();
    assert.equal(read.op === 'job' ? read.job?.state : null, 'RUNNING');
    assert.equal((await c.status(jobId)).state, 'RUNNING');
  });
});
