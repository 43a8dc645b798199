/**
 * Progress end to end, in-process: a handler's `ctx.progress` reaches the
 * job's snapshot while it runs (pushed by the worker, throttled, the last
 * value always delivered), stays on the finished job, survives a restart of
 * the coordinator once the job has ended, and bad values are refused in the
 * handler.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { PROGRESS_MESSAGES_PER_SECOND } from '../../src/protocol/limits.js';
import type { JsonObject } from '../../src/protocol/messages.js';
import {
  startCoordinator,
  startTaskWorker,
  tempDir,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

describe('progress, end to end', { timeout: 60_000 }, () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  let worker: { close(): Promise<void> };

  before(async () => {
    tc = await startCoordinator();
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    worker = await startTaskWorker(tc.coordinator.workerPort, 'w-progress', { capacity: 2 });
    await tc.waitForEvent('worker.registered');
  });
  after(async () => {
    await worker.close();
    await client.close();
    await tc.close();
  });

  it("shows a running job's progress in its status", async () => {
    const { jobId } = await client.submit({ taskType: 'progress.hold', payload: { ms: 30_000 } });
    const job = await until(
      async () => {
        const status = await client.status(jobId);
        return status.progress?.fraction === 0.5 ? status : null;
      },
      { what: 'progress in status', timeoutMs: 5_000 },
    );
    assert.equal(job.state, 'RUNNING');
    assert.equal(job.progress?.message, 'half way');
    assert.equal(typeof job.progress?.atMillis, 'number');
    await client.cancel(jobId);
  });

  it('throttles the reports but always delivers the last, which the finished job keeps', async () => {
    const { jobId } = await client.submit({
      taskType: 'progress.steps',
      payload: { steps: 40, stepMs: 10 },
    });
    const done = await client.wait(jobId, 10_000);
    assert.equal(done.state, 'COMPLETED');
    assert.deepEqual(
      { fraction: done.progress?.fraction, message: done.progress?.message },
      { fraction: 1, message: 'step 40' },
    );
    const reports = tc.events.filter((e) => e.type === 'job.progress' && e.jobId === jobId);
    // 40 reports over >= 400 ms: a few a second reach the coordinator, not 40.
    const runMs = (done.finishedAtMillis ?? 0) - (done.startedAtMillis ?? 0);
    const allowed = Math.ceil((runMs / 1_000) * PROGRESS_MESSAGES_PER_SECOND) + 2;
    assert.ok(reports.length >= 2, `${reports.length} reports`);
    assert.ok(reports.length <= allowed, `${reports.length} reports in ${runMs} ms`);
  });

  it('refuses a fraction outside 0..1 or a message over 1 KiB in the handler', async () => {
    const payloads: JsonObject[] = [{ fraction: 1.5 }, { fraction: -1 }, { messageBytes: 1025 }];
    for (const payload of payloads) {
      const { jobId } = await client.submit({ taskType: 'progress.bad', payload });
      const done = await client.wait(jobId, 10_000);
      assert.match(done.result ?? '', /^RangeError: ctx\.progress/);
      assert.equal(done.progress, undefined);
    }
    const { jobId } = await client.submit({
      taskType: 'progress.bad',
      payload: { messageBytes: 1024 },
    });
    assert.equal((await client.wait(jobId, 10_000)).result, 'accepted');
  });
});

describe('progress across a restart', { timeout: 60_000 }, () => {
  it('keeps the last progress of a finished job in the store', async () => {
    const dir = tempDir();
    const databasePath = `${dir.dir}/dtp.db`;
    try {
      let tc = await startCoordinator({ databasePath });
      const worker = await startTaskWorker(tc.coordinator.workerPort, 'w-restart');
      let client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
      const { jobId } = await client.submit({
        taskType: 'progress.steps',
        payload: { steps: 3, stepMs: 0 },
      });
      assert.equal((await client.wait(jobId, 10_000)).progress?.message, 'step 3');
      await client.close();
      await worker.close();
      await tc.close();
      tc = await startCoordinator({ databasePath });
      client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
      const job = await client.status(jobId);
      assert.deepEqual([job.progress?.fraction, job.progress?.message], [1, 'step 3']);
      await client.close();
      await tc.close();
    } finally {
      dir.remove();
    }
  });
});
