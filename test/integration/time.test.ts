/**
 * Delayed jobs and schedules end to end in one process: the client library
 * (submit with delayMs/runAt, client.schedules.*), a coordinator on SQLite
 * and a real worker, with millisecond delays; a restart of the coordinator
 * with SCHEDULED jobs and a schedule; and a coordinator without time
 * support, to which the client refuses to send a delayed job.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import { RemoteError, UnsupportedFeatureError } from '../../src/client/errors.js';
import { FeatureCache } from '../../src/client/negotiation.js';
import type { Worker } from '../../src/worker/worker.js';
import {
  startCoordinator,
  startRealWorker,
  tempDir,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { StrictV1Coordinator } from '../helpers/strict-v1.js';
import { until } from '../helpers/until.js';

describe('time: delayed jobs and schedules (in-process)', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function start(databasePath: string): Promise<{ tc: TestCoordinator; client: DtpClient }> {
    const tc = await startCoordinator({ databasePath });
    const client = await DtpClient.connect({
      host: '127.0.0.1',
      port: tc.coordinator.clientPort,
      featureCache: new FeatureCache(),
    });
    return { tc, client };
  }

  function worker(tc: TestCoordinator, id: string): Worker {
    const w = startRealWorker(tc.coordinator.workerPort, id, 2);
    cleanups.push(() => w.close());
    return w;
  }

  it('runs a delayed job no earlier than its time, and within 100 ms after it', async () => {
    const dir = tempDir();
    cleanups.push(dir.remove);
    const { tc, client } = await start(join(dir.dir, 'db.sqlite'));
    cleanups.push(
      () => tc.close(),
      () => client.close(),
    );
    worker(tc, 'w1');
    await until(() => tc.coordinator.inspect().freeSlots > 0, { timeoutMs: 10_000 });
    const job = await client.submit('SHA256', { text: 'abc' }, { delayMs: 300 });
    assert.equal(job.snapshot.state, 'SCHEDULED');
    const runAt = job.snapshot.runAtMillis as number;
    const listed = await client.listPage({ state: 'SCHEDULED' });
    assert.deepEqual(
      listed.jobs.map((j) => j.jobId),
      [job.jobId],
    );
    const done = await client.wait(job.jobId, 10_000);
    assert.equal(done.state, 'COMPLETED');
    const started = done.startedAtMillis as number;
    assert.ok(started >= runAt, `started ${started} before its time ${runAt}`);
    // Timer-driven: the sweep of the test timings (10 ms) could hide this, so
    // the wake-up itself is checked: the job fell due no later than 100 ms after.
    const due = await tc.waitForEvent('job.due', (e) => e.jobId === job.jobId);
    assert.ok(due.lateMs < 100, `fell due ${due.lateMs} ms late`);
  });

  it('keeps SCHEDULED jobs and a schedule across a restart; overdue jobs run at once, once', async () => {
    const dir = tempDir();
    cleanups.push(dir.remove);
    const path = join(dir.dir, 'db.sqlite');
    const first = await start(path);
    const delayed = await first.client.submit('SHA256', { text: 'later' }, { delayMs: 200 });
    const far = await first.client.submit('SHA256', { text: 'far' }, { delayMs: 3_600_000 });
    await first.client.schedules.set('tick', 'SHA256', { everyMs: 1_000, payload: { text: 'x' } });
    await first.client.close();
    await first.tc.close();
    // The delayed job's time passes while no coordinator runs.
    const dueMs = delayed.snapshot.runAtMillis ?? 0;
    await until(() => Date.now() > dueMs, { timeoutMs: 5_000, intervalMs: 10 });
    const second = await start(path);
    cleanups.push(
      () => second.tc.close(),
      () => second.client.close(),
    );
    worker(second.tc, 'w2');
    assert.equal((await second.client.wait(delayed.jobId, 10_000)).state, 'COMPLETED');
    assert.equal((await second.client.status(far.jobId)).state, 'SCHEDULED');
    const shown = await second.client.schedules.get('tick');
    assert.equal(shown.everyMillis, 1_000);
    await until(async () => (await second.client.schedules.get('tick')).recentJobs.length >= 2, {
      timeoutMs: 10_000,
    });
    const jobs = (await second.client.schedules.get('tick')).recentJobs;
    const ticks = jobs.map((j) => j.runAtMillis);
    assert.equal(new Set(ticks).size, ticks.length, `a tick made two jobs: ${ticks.join(',')}`);
    const triggered = await second.client.schedules.trigger('tick');
    assert.equal(triggered.snapshot.scheduleName, 'tick');
    await second.client.schedules.delete('tick');
    assert.deepEqual(await second.client.schedules.list(), []);
  });

  it('refuses a cron that never fires (INVALID_SCHEDULE) and goes on serving', async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const { tc, client } = await start(join(dir.dir, 'db.sqlite'));
    cleanups.push(() => tc.close());
    cleanups.push(() => client.close());
    for (const cron of ['0 0 31 2 *', '0 0 31 4,6,9,11 *', '0 0 30 2 *']) {
      await assert.rejects(
        client.schedules.set('never', 'SHA256', { cron, payload: { text: 'x' } }),
        (err: unknown) =>
          err instanceof RemoteError &&
          err.code === 'INVALID_SCHEDULE' &&
          /never fires/.test(err.message),
      );
    }
    assert.deepEqual(await client.schedules.list(), []);
    const set = await client.schedules.set('leap', 'SHA256', {
      cron: '0 0 29 2 *',
      payload: { text: 'x' },
    });
    assert.equal(new Date(set.nextRunAtMillis as number).getUTCDate(), 29);
  });

  it('refuses to send a delayed job or a schedule to a coordinator without them', async () => {
    const fake = await StrictV1Coordinator.start();
    cleanups.push(() => fake.close());
    const client = await DtpClient.connect({
      host: '127.0.0.1',
      port: fake.clientPort,
      featureCache: new FeatureCache(),
    });
    cleanups.push(() => client.close());
    await assert.rejects(
      client.submit('SHA256', { text: 'abc' }, { delayMs: 1_000 }),
      (err: unknown) => err instanceof UnsupportedFeatureError && /delayed jobs/.test(err.message),
    );
    await assert.rejects(client.schedules.list(), UnsupportedFeatureError);
    assert.ok(!fake.typesSeen('client').includes('SUBMIT_JOB'), 'the delayed job was sent');
  });
});
