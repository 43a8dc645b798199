import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

describe('coordinator client requests', () => {
  let tc: TestCoordinator;
  let c: RawClient;
  const peers: { close(): Promise<void> }[] = [];

  before(async () => {
    tc = await startCoordinator();
    c = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(c);
  });
  after(async () => {
    await Promise.all(peers.map((p) => p.close()));
    await tc.close();
  });

  it('rejects invalid submissions with a clear error and creates nothing', async () => {
    const before = await c.request({ type: 'LIST_JOBS', limit: null, state: null, cursor: null });
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['SLEEP', { durationMillis: 'soon' }, /^Invalid payload: .*durationMillis/],
      ['PRIME_COUNT', { limit: 1 }, /^Invalid payload: .*limit/],
      ['bad type!', {}, /^Invalid task type/],
    ];
    for (const [taskType, payload, pattern] of cases) {
      const reply = await c.request({
        type: 'SUBMIT_JOB',
        taskType,
        payload: payload as never,
        maxAttempts: null,
        idempotencyKey: null,
        priority: null,
      });
      assert.equal(reply.type, 'ERROR');
      if (reply.type === 'ERROR') assert.match(reply.message, pattern);
    }
    const afterwards = await c.request({
      type: 'LIST_JOBS',
      limit: null,
      state: null,
      cursor: null,
    });
    assert.deepEqual(afterwards, before);
  });

  it('answers a bad enum value with an ERROR and keeps the connection', async () => {
    c.conn.send({ type: 'LIST_JOBS', limit: null, state: 'DONE' as never, cursor: null });
    const reply = await c.inbox.next();
    assert.equal(reply.type, 'ERROR');
    const next = await c.request({ type: 'LIST_WORKERS' });
    assert.equal(next.type, 'WORKER_LIST');
  });

  it('gives jobs version 7 UUIDs that sort in submission order', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await c.submit('SHA256', { text: `order ${i}` }));
    for (const id of ids) {
      assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    assert.deepEqual([...ids].sort(), ids);
    for (const jobId of ids) await c.request({ type: 'CANCEL_JOB', jobId }); // leave no work behind
  });

  it('cancels a queued job so that it never runs', async () => {
    const jobId = await c.submit('SHA256', { text: 'never' });
    const reply = await c.request({ type: 'CANCEL_JOB', jobId });
    assert.ok(reply.type === 'JOB_CANCEL' && reply.cancelled && reply.job.state === 'CANCELLED');
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, 'cancel-w', 1);
    peers.push(w);
    await assert.rejects(w.assignments.next(150));
    const again = await c.request({ type: 'CANCEL_JOB', jobId });
    assert.ok(again.type === 'JOB_CANCEL' && !again.cancelled && again.job.state === 'CANCELLED');
    await w.close();
  });

  it('cancels a running job: the worker is told, the slot is freed, late results are stale', async () => {
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, 'running-w', 1);
    peers.push(w);
    const jobId = await c.submit('SLEEP', { durationMillis: 10_000 });
    const a = await w.assignments.next();
    const reply = await c.request({ type: 'CANCEL_JOB', jobId });
    assert.ok(reply.type === 'JOB_CANCEL' && reply.cancelled);
    const cancel = await w.cancels.next();
    assert.deepEqual([cancel.jobId, cancel.attemptId], [jobId, a.attemptId]);
    const next = await c.submit('SLEEP', { durationMillis: 1 });
    const b = await w.assignments.next();
    assert.equal(b.jobId, next); // the slot was freed at once
    w.succeed(a, 'resurrected?');
    await tc.waitForEvent('result.stale', (e) => e.attemptId === a.attemptId);
    assert.equal((await c.status(jobId)).state, 'CANCELLED');
    w.succeed(b, 'ok');
    await c.wait(next);
    await w.close();
  });

  it('reports cancelled=false for a completed job and Unknown job for a missing one', async () => {
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, 'done-w', 1);
    peers.push(w);
    const jobId = await c.submit('WORD_COUNT', { text: 'a b c' });
    w.succeed(await w.assignments.next(), '3');
    await c.wait(jobId);
    const reply = await c.request({ type: 'CANCEL_JOB', jobId });
    assert.ok(reply.type === 'JOB_CANCEL' && !reply.cancelled && reply.job.state === 'COMPLETED');
    for (const type of ['CANCEL_JOB', 'GET_JOB_STATUS'] as const) {
      const r = await c.request({ type, jobId: 'nope' });
      assert.ok(r.type === 'ERROR' && r.message.includes('Unknown job'));
    }
    await w.close();
  });

  it('answers WAIT_JOB when the job finishes, or with its state at the timeout', async () => {
    const jobId = await c.submit('SLEEP', { durationMillis: 1 });
    const started = Date.now();
    const timedOut = await c.wait(jobId, 150);
    assert.equal(timedOut.state, 'QUEUED');
    assert.ok(Date.now() - started >= 140);
    const waiter = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(waiter);
    const pending = waiter.wait(jobId, 10_000);
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, 'wait-w', 1);
    peers.push(w);
    w.succeed(await w.assignments.next(), 'finished');
    const job = await pending;
    assert.deepEqual([job.state, job.result], ['COMPLETED', 'finished']);
    await w.close();
  });

  it('keeps replies in request order when a WAIT_JOB is answered late', async () => {
    const jobId = await c.submit('SLEEP', { durationMillis: 1 });
    c.conn.send({ type: 'WAIT_JOB', jobId, timeoutMillis: 100 });
    c.conn.send({ type: 'GET_JOB_STATUS', jobId });
    const first = await c.inbox.next();
    const second = await c.inbox.next();
    assert.ok(first.type === 'JOB_STATUS' && second.type === 'JOB_STATUS');
    await c.request({ type: 'CANCEL_JOB', jobId });
  });
});
