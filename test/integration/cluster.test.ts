import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import type { Worker } from '../../src/worker/worker.js';
import {
  startCoordinator,
  startRealWorker,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

/** A real coordinator and real workers (task threads and all), in-process. */
describe('coordinator with real workers', () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  const workers: Worker[] = [];

  function startWorker(workerId: string, capacity: number): Worker {
    const worker = startRealWorker(tc.coordinator.workerPort, workerId, capacity);
    workers.push(worker);
    return worker;
  }

  before(async () => {
    // 500 ms of heartbeat silence loses a worker: long enough for a loaded
    // test machine, short enough to prove heartbeats flow during CPU work.
    tc = await startCoordinator({ heartbeatTimeoutMs: 500 });
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    startWorker('real-1', 2);
    await until(async () => (await client.workers()).length === 1, { what: 'the worker' });
  });
  after(async () => {
    await client.close();
    await Promise.all(workers.map((w) => w.close()));
    await tc.close();
  });

  it('runs every built-in task type to the documented result', async () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ['SLEEP', { durationMillis: 5 }, 'slept 5 ms'],
      ['WORD_COUNT', { text: 'one  two\tthree\nfour' }, '4'],
      ['SHA256', { text: 'abc' }, createHash('sha256').update('abc').digest('hex')],
      ['PRIME_COUNT', { limit: 1_000_000 }, '78498'],
      ['FAIL', { failUntilAttempt: 2 }, 'succeeded on attempt 2'],
    ];
    for (const [taskType, payload, result] of cases) {
      const { jobId } = await client.submit({ taskType, payload: payload as never });
      const job = await client.wait(jobId, 20_000);
      assert.equal(job.state, 'COMPLETED', `${taskType}: ${JSON.stringify(job)}`);
      assert.equal(job.result, result);
    }
  });

  it('keeps the worker alive while it computes PRIME_COUNT 50,000,000 on every slot', async () => {
    const lost = tc.events.filter((e) => e.type === 'worker.lost').length;
    const ids = await Promise.all(
      [1, 2].map(
        async () =>
          (await client.submit({ taskType: 'PRIME_COUNT', payload: { limit: 50_000_000 } })).jobId,
      ),
    );
    for (const id of ids) {
      const job = await client.wait(id, 60_000);
      assert.deepEqual([job.state, job.attempts, job.result], ['COMPLETED', 1, '3001134']);
    }
    assert.equal(tc.events.filter((e) => e.type === 'worker.lost').length, lost);
  });

  it('cancels a CPU-bound task on a real worker: fast reply, thread stopped, slot free', async () => {
    const worker = workers[0] as Worker;
    const started = once(worker.events, 'started');
    const { jobId } = await client.submit({
      taskType: 'PRIME_COUNT',
      payload: { limit: 50_000_000 },
    });
    await started;
    const cancelledOnWorker = once(worker.events, 'cancelled');
    const t0 = performance.now();
    const reply = await client.cancel(jobId);
    assert.ok(reply.cancelled);
    assert.ok(performance.now() - t0 < 1_000, 'cancel reply took over a second');
    const [cancelledJob] = await cancelledOnWorker; // the handler has stopped
    assert.equal(cancelledJob, jobId);
    assert.equal(worker.runningCount, 0);
    const ws = await client.workers();
    assert.equal(ws.find((w) => w.workerId === 'real-1')?.activeTasks, 0);
    const { jobId: next } = await client.submit({
      taskType: 'SHA256',
      payload: { text: 'after cancel' },
    });
    assert.equal((await client.wait(next, 10_000)).state, 'COMPLETED');
    assert.equal((await client.status(jobId)).state, 'CANCELLED');
  });

  it('spreads a batch over several workers and finishes it', async () => {
    startWorker('real-2', 2);
    await until(async () => (await client.workers()).length === 2, { what: 'the second worker' });
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      ids.push((await client.submit({ taskType: 'SLEEP', payload: { durationMillis: 40 } })).jobId);
    }
    for (const id of ids) assert.equal((await client.wait(id, 20_000)).state, 'COMPLETED');
    const used = new Set(
      tc.events.flatMap((e) =>
        e.type === 'job.assigned' && ids.includes(e.jobId) ? [e.workerId] : [],
      ),
    );
    assert.deepEqual([...used].sort(), ['real-1', 'real-2']);
  });
});
