/**
 * Delayed jobs beyond the near window, through a real coordinator (in
 * process, SQLite in memory, a window of 300 ms): they are in the store
 * only, yet status, listing, queue counts, idempotency keys, cancel, wait
 * and job events all find them, and they run at their time.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import { ScriptedWorker } from '../helpers/raw-peers.js';
import { until } from '../helpers/until.js';

describe('coordinator: delayed jobs beyond the near window', () => {
  let tc: TestCoordinator;
  let client: DtpClient;

  before(async () => {
    tc = await startCoordinator({}, { scheduledWindow: { windowMs: 300, limit: 2, marginMs: 50 } });
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  after(async () => {
    await client.close();
    await tc.close();
  });

  it('finds far jobs everywhere, cancels one durably, and runs the others at their time', async () => {
    const far = async (delayMs: number, key?: string): Promise<string> =>
      (
        await client.submit(
          'SLEEP',
          { durationMillis: 1 },
          {
            delayMs,
            ...(key !== undefined && { idempotencyKey: key }),
          },
        )
      ).jobId;
    const cancelled = await far(60_000);
    const keyed = await far(1_500, 'far-key');
    const waited = await far(1_500);
    const view = tc.coordinator.inspect();
    assert.equal(view.farScheduledCount, 2, 'the two without a key are in the store only');
    assert.equal(view.scheduledCount, 1, 'a keyed delayed job stays in memory');

    assert.equal((await client.status(keyed)).state, 'SCHEDULED');
    const listed = await client.listPage({ state: 'SCHEDULED' });
    assert.deepEqual(new Set(listed.jobs.map((j) => j.jobId)), new Set([cancelled, keyed, waited]));
    const queue = (await client.queues.list()).find((q) => q.name === 'default');
    assert.equal(queue?.counts['SCHEDULED'], 3);
    assert.equal(await far(1_500, 'far-key'), keyed, 'the key finds the far job');

    const outcome = await client.cancel(cancelled);
    assert.equal(outcome.job.state, 'CANCELLED');
    assert.equal((await client.status(cancelled)).state, 'CANCELLED');

    const events: string[] = [];
    const watching = (async () => {
      for await (const e of client.watch(waited)) events.push(e.job.state);
    })();
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, 'far-w', 2);
    try {
      const done = client.wait(waited, 10_000);
      for (let i = 0; i < 2; i++) {
        const a = await w.assignments.next(10_000);
        assert.ok(a.jobId === keyed || a.jobId === waited);
        w.succeed(a, 'ok');
      }
      assert.equal((await done).state, 'COMPLETED');
      await watching;
      assert.equal(events.at(-1), 'COMPLETED');
      assert.ok(events.includes('SCHEDULED') || events.includes('QUEUED'));
      const started = await client.status(waited);
      assert.ok((started.startedAtMillis ?? 0) >= (started.runAtMillis ?? Infinity));
      await until(() => tc.coordinator.inspect().farScheduledCount === 0, { timeoutMs: 2_000 });
      assert.equal((await client.status(cancelled)).state, 'CANCELLED', 'not brought back');
    } finally {
      await w.close();
    }
  });
});
