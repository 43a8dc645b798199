import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import type { Worker } from '../../src/worker/worker.js';
import {
  startCoordinator,
  startRealWorker,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

describe('worker drain', () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  const workers: Worker[] = [];

  function startWorker(workerId: string, capacity: number): Worker {
    const worker = startRealWorker(tc.coordinator.workerPort, workerId, capacity);
    workers.push(worker);
    return worker;
  }

  before(async () => {
    // A long heartbeat timeout: a retry can only come from the drain, not from silence.
    tc = await startCoordinator({
      heartbeatTimeoutMs: 60_000,
      retryBaseDelayMs: 60_000,
      retryMaxDelayMs: 60_000,
    });
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  after(async () => {
    await client.close();
    await Promise.all(workers.map((w) => w.close()));
    await tc.close();
  });

  it('finishes what it can, takes nothing new, and has the rest retried at once', async () => {
    const leaving = startWorker('leaving', 2);
    await until(async () => (await client.workers()).length === 1, { what: 'registration' });
    const short = (await client.submit({ taskType: 'SLEEP', payload: { durationMillis: 300 } }))
      .jobId;
    const long = (await client.submit({ taskType: 'SLEEP', payload: { durationMillis: 60_000 } }))
      .jobId;
    await until(() => leaving.runningCount === 2, { what: 'both tasks to run' });

    const drained = leaving.drain(1_000);
    await tc.waitForEvent('worker.draining', (e) => e.workerId === 'leaving');
    const later = (await client.submit({ taskType: 'SHA256', payload: { text: 'not for you' } }))
      .jobId;
    assert.equal(
      (await client.status(later)).state,
      'QUEUED',
      'a draining worker must take no new job',
    );

    const startedAt = Date.now();
    await drained;
    assert.equal((await client.wait(short, 5_000)).state, 'COMPLETED');
    const lost = await tc.waitForEvent('worker.lost', (e) => e.workerId === 'leaving');
    assert.match(lost.reason, /while draining/);

    const staying = startWorker('staying', 2);
    // The back-off is 60 s here: running again within seconds means "at once".
    await until(async () => (await client.status(long)).state === 'RUNNING', {
      what: 'the released job to run',
    });
    const job = await client.status(long);
    assert.deepEqual([job.workerId, job.attempts], ['staying', 2]);
    assert.match(job.error ?? '', /worker leaving lost \(.* while draining\)/);
    assert.ok(Date.now() - startedAt < 10_000, 'the release must not wait for a heartbeat timeout');
    assert.equal((await client.wait(later, 5_000)).state, 'COMPLETED');
    await client.cancel(long);
    await staying.close();
  });

  it('drains at once when nothing runs', async () => {
    const idle = startWorker('idle', 1);
    await until(async () => (await client.workers()).some((w) => w.workerId === 'idle'), {
      what: 'registration',
    });
    const t0 = Date.now();
    await idle.drain(30_000);
    assert.ok(Date.now() - t0 < 2_000);
    await until(async () => !(await client.workers()).some((w) => w.workerId === 'idle'), {
      what: 'removal',
    });
  });
});
