/**
 * The redrive of FAILED jobs with a real coordinator (SQLite file), workers
 * and the client library: the jobs of one queue run again as the same jobs
 * with a fresh attempt budget and their history, the fresh budget survives a
 * restart, bad options are refused before anything is sent, and a v1
 * coordinator's "not understood" becomes UnsupportedFeatureError.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import { DtpClient, UnsupportedFeatureError } from '../../src/client/index.js';
import { StrictV1Coordinator } from '../helpers/strict-v1.js';
import { startCoordinator, startRealWorker, tempDir } from '../helpers/test-coordinator.js';

describe('rerun of FAILED jobs (coordinator, workers, client)', () => {
  const temp = tempDir('dtp-rerun-');
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });
  after(() => temp.remove());

  it('runs the FAILED jobs of a queue again, with their history, and keeps the budget across a restart', async () => {
    const databasePath = join(temp.dir, 'rerun.db');
    let tc = await startCoordinator({ databasePath });
    // Closed in afterEach whichever comes last, also when an assertion fails
    // first (the closures read the current coordinator and client).
    closers.push(() => tc.close());
    let client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    closers.push(() => client.close());
    const w = startRealWorker(tc.coordinator.workerPort, 'w1', 2);
    closers.push(() => w.close());
    // Fails on its first two attempts, then succeeds; one attempt allowed.
    const payload = { failUntilAttempt: 3 };
    // One after another: concurrent submissions may be created in any order,
    // and the test needs handles[0] to be the oldest.
    const handles = [];
    for (let i = 0; i < 3; i++) {
      handles.push(await client.submit('FAIL', payload, { queue: 'imports', maxAttempts: 1 }));
    }
    const other = await client.submit('FAIL', payload, { queue: 'other', maxAttempts: 1 });
    for (const h of [...handles, other]) assert.equal((await h.wait()).state, 'FAILED');
    await w.close();

    const first = await client.rerun({ queue: 'imports', limit: 2, maxAttempts: 1 });
    assert.equal(first.rerun, 2);
    assert.equal(first.more, true);
    const second = await client.rerun({ queue: 'imports', maxAttempts: 2 });
    assert.deepEqual(second, { rerun: 1, jobIds: [handles[0]?.jobId], more: false });
    assert.equal((await client.status(other.jobId)).state, 'FAILED');

    // Restart before any worker takes them: the fresh budget is in the store.
    await client.close();
    await tc.close();
    tc = await startCoordinator({ databasePath });
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    const oldest = handles[0]?.jobId as string;
    const queued = await client.status(oldest);
    assert.equal(queued.state, 'QUEUED');
    assert.equal(queued.maxAttempts, 3);

    const w2 = startRealWorker(tc.coordinator.workerPort, 'w2', 2);
    closers.push(() => w2.close());
    const done = await client.wait(oldest, 20_000);
    assert.equal(done.state, 'COMPLETED');
    const { attempts } = await client.status(oldest, { attempts: true });
    assert.deepEqual(
      attempts?.map((a) => [a.attemptNumber, a.outcome]),
      [
        [1, 'FAILED'],
        [2, 'FAILED'],
        [3, 'SUCCEEDED'],
      ],
    );
    // The two re-run with a budget of one fail again on attempt 2.
    for (const id of first.jobIds) assert.equal((await client.wait(id, 20_000)).state, 'FAILED');
  });

  it('refuses bad options before sending anything', async () => {
    const tc = await startCoordinator();
    closers.push(() => tc.close());
    const client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    closers.push(() => client.close());
    await assert.rejects(client.rerun({ queue: '9bad' }), /queue/);
    await assert.rejects(client.rerun({ queue: 'q', limit: 0 }), RangeError);
    await assert.rejects(client.rerun({ queue: 'q', maxAttempts: 1001 }), RangeError);
  });

  it('says plainly that a v1 coordinator does not support it', async () => {
    const v1 = await StrictV1Coordinator.start();
    closers.push(() => v1.close());
    const client = await DtpClient.connect({ host: '127.0.0.1', port: v1.clientPort });
    closers.push(() => client.close());
    await assert.rejects(client.rerun({ queue: 'q' }), (err: unknown) => {
      assert.ok(err instanceof UnsupportedFeatureError);
      assert.match(err.message, /this coordinator does not support the re-run of failed jobs/);
      return true;
    });
  });
});
