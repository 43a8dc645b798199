import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';
import type { TaskAssign } from '../../src/protocol/messages.js';

describe('coordinator scheduling', () => {
  let tc: TestCoordinator;
  const peers: { close(): Promise<void> }[] = [];

  before(async () => {
    tc = await startCoordinator();
  });
  after(async () => {
    await Promise.all(peers.map((p) => p.close()));
    await tc.close();
  });

  async function worker(id: string, capacity = 1): Promise<ScriptedWorker> {
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, id, capacity);
    peers.push(w);
    return w;
  }
  async function client(): Promise<RawClient> {
    const c = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(c);
    return c;
  }

  it('assigns queued jobs in submission order when a worker registers', async () => {
    const c = await client();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await c.submit('SHA256', { text: `order-${i}` }));
    const w = await worker('order-w', 1);
    for (const id of ids) {
      const a = await w.assignments.next();
      assert.equal(a.jobId, id);
      assert.equal(a.attemptNumber, 1);
      w.succeed(a, 'ok');
    }
    const job = await c.wait(ids[2] as string);
    assert.equal(job.state, 'COMPLETED');
    await w.close();
  });

  it('runs up to capacity at once on one worker and never more', async () => {
    const c = await client();
    const w = await worker('cap-w', 3);
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await c.submit('SLEEP', { durationMillis: 1 }));
    const first = [
      await w.assignments.next(),
      await w.assignments.next(),
      await w.assignments.next(),
    ];
    await assert.rejects(w.assignments.next(100), /no TASK_ASSIGN/);
    const listed = await c.request({ type: 'LIST_WORKERS' });
    assert.equal(listed.type, 'WORKER_LIST');
    if (listed.type === 'WORKER_LIST') {
      assert.deepEqual(
        listed.workers.map((x) => [x.workerId, x.activeTasks]),
        [['cap-w', 3]],
      );
    }
    w.succeed(first[0] as TaskAssign, 'done');
    const fourth = await w.assignments.next();
    assert.equal(fourth.jobId, ids[3]);
    for (const a of [first[1], first[2], fourth]) w.succeed(a as TaskAssign, 'done');
    w.succeed(await w.assignments.next(), 'done');
    for (const id of ids) assert.equal((await c.wait(id)).state, 'COMPLETED');
    await w.close();
  });

  it('gives each job to the worker with the most free slots, ties by worker id', async () => {
    const c = await client();
    const small = await worker('tie-b', 1);
    const big = await worker('tie-c', 2);
    const other = await worker('tie-a', 1);
    const jobA = await c.submit('SLEEP', { durationMillis: 1 });
    const a1 = await big.assignments.next();
    assert.equal(a1.jobId, jobA);
    const jobB = await c.submit('SLEEP', { durationMillis: 1 });
    const a2 = await other.assignments.next(); // all have 1 free: lowest id wins
    assert.equal(a2.jobId, jobB);
    const jobC = await c.submit('SLEEP', { durationMillis: 1 });
    const a3 = await small.assignments.next();
    assert.equal(a3.jobId, jobC);
    for (const [w, a] of [
      [big, a1],
      [other, a2],
      [small, a3],
    ] as const) {
      w.succeed(a, 'x');
    }
    for (const id of [jobA, jobB, jobC]) assert.equal((await c.wait(id)).state, 'COMPLETED');
    await Promise.all([small.close(), big.close(), other.close()]);
  });

  it('assigns each of 60 jobs from 4 concurrent clients exactly once across 5 workers', async () => {
    const workers = await Promise.all([1, 2, 3, 4, 5].map((i) => worker(`many-${i}`, 2)));
    const assigned = new Map<string, number>();
    const stop = { done: false };
    const serve = workers.map(async (w) => {
      while (!stop.done) {
        let a: TaskAssign;
        try {
          a = await w.assignments.next(200);
        } catch {
          continue;
        }
        assigned.set(a.jobId, (assigned.get(a.jobId) ?? 0) + 1);
        w.succeed(a, `done by ${w.workerId}`);
      }
    });
    const clients = await Promise.all([1, 2, 3, 4].map(() => client()));
    const ids = (
      await Promise.all(
        clients.map(async (c, k) => {
          const mine = [];
          for (let i = 0; i < 15; i++)
            mine.push(await c.submit('WORD_COUNT', { text: `c${k} j${i}` }));
          return mine;
        }),
      )
    ).flat();
    for (const id of ids)
      assert.equal((await (clients[0] as RawClient).wait(id)).state, 'COMPLETED');
    stop.done = true;
    await Promise.all(serve);
    assert.equal(ids.length, 60);
    assert.equal(new Set(ids).size, 60);
    assert.deepEqual(
      [...assigned.values()].filter((n) => n !== 1),
      [],
    );
    assert.equal(assigned.size, 60);
    await Promise.all(workers.map((w) => w.close()));
  });

  it('replaces the old session when a live worker id registers again', async () => {
    const c = await client();
    const old = await worker('twin', 1);
    const jobId = await c.submit('SLEEP', { durationMillis: 1 });
    const first = await old.assignments.next();
    const fresh = await worker('twin', 1);
    await old.closed;
    const second = await fresh.assignments.next();
    assert.equal(second.jobId, jobId);
    assert.equal(second.attemptNumber, 2);
    fresh.succeed(second, 'from the new session');
    old.succeed(first, 'from the old session');
    const job = await c.wait(jobId);
    assert.equal(job.result, 'from the new session');
    assert.match(job.error ?? '', /worker twin lost \(worker re-registered\)/);
    await until(() =>
      tc.events.some((e) => e.type === 'worker.lost' && e.reason === 'worker re-registered'),
    );
    await fresh.close();
  });

  it('lists workers sorted by id with their active task counts', async () => {
    const c = await client();
    await until(async () => {
      const r = await c.request({ type: 'LIST_WORKERS' });
      return r.type === 'WORKER_LIST' && r.workers.length === 0;
    });
    const b = await worker('list-b', 2);
    const a = await worker('list-a', 1);
    const r = await c.request({ type: 'LIST_WORKERS' });
    assert.equal(r.type, 'WORKER_LIST');
    if (r.type === 'WORKER_LIST') {
      assert.deepEqual(
        r.workers.map((w) => [w.workerId, w.capacity, w.activeTasks]),
        [
          ['list-a', 1, 0],
          ['list-b', 2, 0],
        ],
      );
    }
    await Promise.all([a.close(), b.close()]);
  });
});
