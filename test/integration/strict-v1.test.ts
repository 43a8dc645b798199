import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { StrictV1Coordinator, V1Client, V1Worker } from '../helpers/strict-v1.js';
import { until } from '../helpers/until.js';
import { rawConnection } from '../helpers/raw-peers.js';
import { startCoordinator } from '../helpers/test-coordinator.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function fake(options = {}): Promise<StrictV1Coordinator> {
  const coordinator = await StrictV1Coordinator.start(options);
  cleanups.push(() => coordinator.close());
  return coordinator;
}

async function client(port: number): Promise<V1Client> {
  const c = await V1Client.connect(port);
  cleanups.push(() => c.close());
  return c;
}

async function worker(port: number, id: string, capacity = 1, heartbeatMs = 20): Promise<V1Worker> {
  const w = await V1Worker.register(port, id, capacity, heartbeatMs);
  cleanups.push(() => w.close());
  return w;
}

describe('strict v1 coordinator (test peer)', () => {
  it('answers an unknown request type as undecodable and closes', async () => {
    const v1 = await fake();
    const { conn, inbox, closed } = await rawConnection(v1.clientPort);
    cleanups.push(() => conn.destroy('done'));
    conn.send({ type: 'WAIT_JOB', jobId: 'x', timeoutMillis: 0 });
    const reply = await inbox.next();
    assert.equal(reply.type, 'ERROR');
    assert.match(
      reply.type === 'ERROR' ? reply.message : '',
      /^Malformed request: Undecodable message: Could not resolve type id 'WAIT_JOB'/,
    );
    await closed;
  });

  it('keeps the connection after a well-formed message that is not a request', async () => {
    const v1 = await fake();
    const c = await client(v1.clientPort);
    const reply = await c.request({ type: 'HEARTBEAT', workerId: 'w' });
    assert.equal(reply.type, 'ERROR');
    assert.match(String(reply.message), /Unsupported request/);
    assert.deepEqual(await c.workers(), []);
  });

  it('ignores unknown fields and sends no extension field', async () => {
    const v1 = await fake();
    const c = await client(v1.clientPort);
    const reply = await c.request({
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: 'abc' },
    });
    assert.deepEqual(Object.keys(reply).sort(), ['jobId', 'type']);
    const { conn, inbox } = await rawConnection(v1.clientPort);
    cleanups.push(() => conn.destroy('done'));
    conn.send({ type: 'LIST_JOBS', limit: 1, state: 'RUNNING', cursor: 'c' });
    const list = await inbox.next();
    assert.equal(list.type, 'JOB_LIST');
    assert.equal(list.type === 'JOB_LIST' ? list.jobs.length : -1, 1, 'limit and state ignored');
    assert.equal(list.type === 'JOB_LIST' ? list.nextCursor : 'x', null, 'decoded as absent');
  });

  it('runs jobs on registered workers: results, retries, failure after the last attempt', async () => {
    const v1 = await fake();
    const w = await worker(v1.workerPort, 'w1');
    assert.deepEqual(Object.keys(w.registered ?? {}).sort(), ['type', 'workerId']);
    const c = await client(v1.clientPort);
    const ok = await c.submit('SHA256', { text: 'abc' });
    w.succeed(await w.assignments.next(), 'hash');
    await until(async () => (await c.status(ok)).state === 'COMPLETED');
    const flaky = await c.submit('FAIL', { failUntilAttempt: 9 }, { maxAttempts: 2 });
    const first = await w.assignments.next();
    w.fail(first, 'boom 1');
    const second = await w.assignments.next();
    assert.equal(second.attemptNumber, 2);
    assert.notEqual(second.attemptId, first.attemptId);
    w.succeed(first, 'stale result, ignored');
    w.fail(second, 'boom 2');
    const job = await until(async () => {
      const s = await c.status(flaky);
      return s.state === 'FAILED' ? s : null;
    });
    assert.equal(job.error, 'boom 2 (all 2 attempts used)');
    assert.equal(job.result, null);
  });

  it('sends TASK_CANCEL for a running job and drops a worker that breaks v1', async () => {
    const v1 = await fake();
    const w = await worker(v1.workerPort, 'w1');
    const c = await client(v1.clientPort);
    const jobId = await c.submit('SLEEP', { durationMillis: 1000 });
    const assign = await w.assignments.next();
    const reply = await c.cancel(jobId);
    assert.equal(reply.cancelled, true);
    const cancel = await w.cancels.next();
    assert.deepEqual([cancel.jobId, cancel.attemptId], [assign.jobId, assign.attemptId]);
    const draining = await worker(v1.workerPort, 'w2');
    const { conn } = await rawConnection(v1.workerPort);
    cleanups.push(() => conn.destroy('done'));
    conn.send({ type: 'WORKER_REGISTER', workerId: 'w3', capacity: 1, taskTypes: null });
    await until(() => v1.workerIds().includes('w3'));
    conn.send({ type: 'WORKER_DRAINING', workerId: 'w3' });
    await until(() => v1.dropped.some((d) => d.workerId === 'w3'));
    assert.match(v1.dropped.find((d) => d.workerId === 'w3')?.reason ?? '', /WORKER_DRAINING/);
    draining.stopHeartbeats();
    await until(() => v1.dropped.some((d) => d.workerId === 'w2' && /heartbeat/.test(d.reason)));
    await draining.closed;
  });

  it('retries the running job of a worker it loses', async () => {
    const v1 = await fake();
    const w1 = await worker(v1.workerPort, 'w1');
    const c = await client(v1.clientPort);
    const jobId = await c.submit('SHA256', { text: 'x' });
    await w1.assignments.next();
    const w2 = await worker(v1.workerPort, 'w2');
    w1.close();
    const again = await w2.assignments.next();
    assert.equal(again.jobId, jobId);
    assert.equal(again.attemptNumber, 2);
  });
});

describe('the dtp coordinator driven by v1-style peers', () => {
  it('serves a v1 client and a v1 worker: submit, status, list, results, retries, cancel', async () => {
    const tc = await startCoordinator();
    cleanups.push(() => tc.close());
    const w = await worker(tc.coordinator.workerPort, 'v1-worker', 2);
    const c = await client(tc.coordinator.clientPort);
    const done = await c.submit('SHA256', { text: 'abc' }, { priority: 'HIGH' });
    w.succeed(await w.assignments.next(), 'digest');
    const retried = await c.submit('FAIL', { failUntilAttempt: 2 }, { maxAttempts: 3 });
    const first = await w.assignments.next();
    assert.equal(first.jobId, retried);
    w.fail(first, 'deliberate failure on attempt 1');
    const second = await w.assignments.next(10_000);
    assert.equal(second.attemptNumber, 2);
    w.succeed(second, 'succeeded on attempt 2');
    const job = await until(async () => {
      const s = await c.status(retried);
      return s.state === 'COMPLETED' ? s : null;
    });
    assert.deepEqual([job.attempts, job.result], [2, 'succeeded on attempt 2']);
    assert.equal((await c.status(done)).result, 'digest');

    const running = await c.submit('SLEEP', { durationMillis: 60_000 });
    const assign = await w.assignments.next();
    const cancel = await c.cancel(running);
    assert.equal(cancel.cancelled, true);
    assert.equal((await w.cancels.next()).attemptId, assign.attemptId);

    const listed = await c.list();
    assert.deepEqual(
      listed.map((j) => j.jobId),
      [running, retried, done],
    );
    const workers = await c.workers();
    assert.deepEqual(
      workers.map((x) => x.workerId),
      ['v1-worker'],
    );
    await assert.rejects(c.status('no-such-job'), /Unknown job/);
    assert.deepEqual(c.foreign, [], 'every reply decodes for a v1 client');
    assert.deepEqual(w.foreign, [], 'the worker got no message a v1 worker cannot decode');
    assert.ok(!w.received.includes('HEARTBEAT_ACK'));
  });

  it('gives a v1 worker only built-in task types and keeps a v1 connection after a bad request', async () => {
    const tc = await startCoordinator();
    cleanups.push(() => tc.close());
    const w = await worker(tc.coordinator.workerPort, 'v1-worker', 1);
    const c = await client(tc.coordinator.clientPort);
    const bad = await c.request({ type: 'SUBMIT_JOB', taskType: 'SHA256', payload: { text: 1 } });
    assert.equal(bad.type, 'ERROR');
    assert.match(String(bad.message), /^Invalid payload:.*text/);
    const jobId = await c.submit('WORD_COUNT', { text: 'a b c' });
    const assign = await w.assignments.next();
    assert.deepEqual([assign.jobId, assign.taskType], [jobId, 'WORD_COUNT']);
    assert.deepEqual(w.foreign, []);
  });

  it('keeps the v1 capacity range: 1,024 is listed as such, 1,025 without slots is refused', async () => {
    const tc = await startCoordinator();
    cleanups.push(() => tc.close());
    await worker(tc.coordinator.workerPort, 'v1-largest', 1024);
    const c = await client(tc.coordinator.clientPort);
    assert.deepEqual(
      (await c.workers()).map((x) => [x.workerId, x.capacity]),
      [['v1-largest', 1024]],
    );
    await assert.rejects(
      V1Worker.register(tc.coordinator.workerPort, 'v1-too-large', 1025),
      /connection closed before WORKER_REGISTERED/,
    );
    const refused = await tc.waitForEvent('worker.rejected');
    assert.match(refused.reason, /capacity must be 1\.\.1024, got 1025/);
    assert.deepEqual(c.foreign, []);
  });
});
