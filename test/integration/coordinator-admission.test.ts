import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

describe('coordinator admission and idempotency', () => {
  let tc: TestCoordinator | null = null;
  const peers: { close(): Promise<void> }[] = [];

  afterEach(async () => {
    await Promise.all(peers.splice(0).map((p) => p.close()));
    await tc?.close();
  });

  async function setUp(maxActiveJobs: number): Promise<RawClient> {
    tc = await startCoordinator({ maxActiveJobs });
    const c = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(c);
    return c;
  }

  it('accepts up to the limit, then rejects with a typed, retryable reply', async () => {
    const c = await setUp(2);
    await c.submit('SHA256', { text: '1' });
    await c.submit('SHA256', { text: '2' });
    const reply = await c.request({
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: '3' },
      maxAttempts: null,
      idempotencyKey: null,
      priority: null,
    });
    assert.equal(reply.type, 'SUBMIT_REJECTED');
    if (reply.type === 'SUBMIT_REJECTED') {
      assert.deepEqual([reply.activeCount, reply.limit, reply.retryable], [2, 2, true]);
      assert.ok(reply.reason.length > 0);
    }
    const list = await c.request({ type: 'LIST_JOBS', limit: null, state: null, cursor: null });
    assert.ok(list.type === 'JOB_LIST' && list.jobs.length === 2);
  });

  it('admits exactly the limit when 8 clients race at the boundary', async () => {
    await setUp(5);
    const port = (tc as TestCoordinator).coordinator.clientPort;
    const clients = await Promise.all(Array.from({ length: 8 }, () => RawClient.connect(port)));
    peers.push(...clients);
    const replies = await Promise.all(
      clients.map((c, i) =>
        c.request({
          type: 'SUBMIT_JOB',
          taskType: 'SHA256',
          payload: { text: `race ${i}` },
          maxAttempts: null,
          idempotencyKey: null,
          priority: null,
        }),
      ),
    );
    assert.equal(replies.filter((r) => r.type === 'JOB_SUBMITTED').length, 5);
    assert.equal(replies.filter((r) => r.type === 'SUBMIT_REJECTED').length, 3);
  });

  it('frees a slot when a job completes, and a known key is answered even at the limit', async () => {
    const c = await setUp(1);
    const first = await c.submit('SHA256', { text: 'k' }, { idempotencyKey: 'key-1' });
    assert.equal(await c.submit('SHA256', { text: 'k' }, { idempotencyKey: 'key-1' }), first);
    const rejected = await c.request({
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: 'k' },
      maxAttempts: null,
      idempotencyKey: 'key-2',
      priority: null,
    });
    assert.equal(rejected.type, 'SUBMIT_REJECTED');
    const w = await ScriptedWorker.register(
      (tc as TestCoordinator).coordinator.workerPort,
      'adm-w',
      1,
    );
    peers.push(w);
    w.succeed(await w.assignments.next(), 'hash');
    await c.wait(first);
    assert.equal(await c.submit('SHA256', { text: 'k' }, { idempotencyKey: 'key-1' }), first);
    const conflict = await c.request({
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: 'other' },
      maxAttempts: null,
      idempotencyKey: 'key-1',
      priority: null,
    });
    assert.ok(conflict.type === 'ERROR' && conflict.message.includes('Idempotency key'));
    await c.submit('SHA256', { text: 'k' }, { idempotencyKey: 'key-2' });
  });

  it('creates one job when 8 clients submit the same new key at once', async () => {
    await setUp(100);
    const port = (tc as TestCoordinator).coordinator.clientPort;
    const clients = await Promise.all(Array.from({ length: 8 }, () => RawClient.connect(port)));
    peers.push(...clients);
    const ids = await Promise.all(
      clients.map((c) => c.submit('SHA256', { text: 'same' }, { idempotencyKey: 'k' })),
    );
    assert.equal(new Set(ids).size, 1);
  });
});
