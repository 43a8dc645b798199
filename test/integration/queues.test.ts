/**
 * Named queues with real coordinators and workers: a concurrency limit held
 * across several workers, a rate held in every window, workers restricted to
 * queues, settings and pauses surviving a restart, group keys taking turns
 * across task types with workers that run different types, and a worker
 * that refuses to start with `queues` against a coordinator that does not
 * offer them.
 */
import assert from 'node:assert/strict';
import { after, afterEach, describe, it } from 'node:test';
import {
  DtpClient,
  FeatureUnsupportedError,
  RemoteError,
  UnsupportedFeatureError,
} from '../../src/client/index.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import { Worker } from '../../src/worker/worker.js';
import { FakeCoordinator } from '../helpers/fake-coordinator.js';
import { StrictV1Coordinator } from '../helpers/strict-v1.js';
import {
  startCoordinator,
  startRealWorker,
  startTaskWorker,
  tempDir,
  testLogger,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

/** Most attempts that ran at the same time, from the jobs' start and end times. */
function maxOverlap(jobs: readonly JobSnapshot[]): number {
  const edges: [number, number][] = [];
  for (const job of jobs) {
    edges.push([job.startedAtMillis ?? 0, 1], [job.finishedAtMillis ?? 0, -1]);
  }
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, step] of edges) {
    now += step;
    most = Math.max(most, now);
  }
  return most;
}

describe('named queues (coordinator, workers, client)', () => {
  const temp = tempDir('dtp-queues-');
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });
  after(() => temp.remove());

  async function cluster(databasePath = ':memory:'): Promise<{
    tc: TestCoordinator;
    client: DtpClient;
  }> {
    const tc = await startCoordinator({ databasePath });
    closers.push(() => tc.close());
    const client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    closers.push(() => client.close());
    return { tc, client };
  }

  function worker(tc: TestCoordinator, id: string, capacity: number): Worker {
    const w = startRealWorker(tc.coordinator.workerPort, id, capacity);
    closers.push(() => w.close());
    return w;
  }

  it('holds a queue to its concurrency across three workers', async () => {
    const { tc, client } = await cluster();
    await client.queues.set('q', { concurrency: 2 });
    for (const id of ['w1', 'w2', 'w3']) worker(tc, id, 2);
    const handles = await Promise.all(
      Array.from({ length: 8 }, () =>
        client.submit('SLEEP', { durationMillis: 60 }, { queue: 'q' }),
      ),
    );
    const jobs = await Promise.all(handles.map((h) => h.wait({ timeoutMs: 20_000 })));
    assert.ok(jobs.every((j) => j.state === 'COMPLETED'));
    assert.ok(maxOverlap(jobs) <= 2, `more than 2 ran at once: ${maxOverlap(jobs)}`);
  });

  it('holds a queue to its rate in every window', async () => {
    const { tc, client } = await cluster();
    await client.queues.set('slow', { rateLimit: { max: 3, intervalMillis: 300 } });
    worker(tc, 'w1', 8);
    const handles = await Promise.all(
      Array.from({ length: 9 }, () =>
        client.submit('SLEEP', { durationMillis: 1 }, { queue: 'slow' }),
      ),
    );
    const jobs = await Promise.all(handles.map((h) => h.wait({ timeoutMs: 20_000 })));
    const starts = jobs.map((j) => j.startedAtMillis ?? 0).sort((a, b) => a - b);
    for (let i = 0; i + 3 < starts.length; i++) {
      assert.ok(
        (starts[i + 3] as number) - (starts[i] as number) >= 300,
        `4 starts within 300 ms: ${starts.join(', ')}`,
      );
    }
  });

  it('gives a queue restricted worker only its queues, and every queue to the others', async () => {
    const { tc, client } = await cluster();
    const mail = Worker.start({
      coordinatorHost: '127.0.0.1',
      coordinatorPort: tc.coordinator.workerPort,
      workerId: 'mail',
      capacity: 2,
      heartbeatIntervalMs: 50,
      reconnectDelayMs: 50,
      logger: testLogger('worker'),
      queues: ['emails'],
    });
    closers.push(() => mail.close());
    await until(async () => (await client.workerList()).workers.length === 1, {
      timeoutMs: 5_000,
    });
    const report = await client.submit('SLEEP', { durationMillis: 1 }, { queue: 'reports' });
    const email = await client.submit('SLEEP', { durationMillis: 1 }, { queue: 'emails' });
    assert.equal((await email.wait({ timeoutMs: 10_000 })).workerId, null);
    assert.equal((await report.status()).state, 'QUEUED');
    worker(tc, 'any', 1);
    assert.equal((await report.wait({ timeoutMs: 10_000 })).state, 'COMPLETED');
  });

  it('lets tenants take turns across task types, each worker serving the types it runs', async () => {
    const { tc, client } = await cluster();
    const backlog = await Promise.all(
      Array.from({ length: 30 }, () =>
        client.submit('SLEEP', { durationMillis: 20 }, { groupKey: 'tenant-a' }),
      ),
    );
    // tenant-b's type only the worker with the task module runs; tenant-c's both do.
    const b = await client.submit('reverse', { text: 'b' }, { groupKey: 'tenant-b' });
    const c = await client.submit('SHA256', { text: 'c' }, { groupKey: 'tenant-c' });
    worker(tc, 'builtins', 2);
    await tc.waitForEvent('job.assigned', (e) => e.workerId === 'builtins');
    const own = await startTaskWorker(tc.coordinator.workerPort, 'own', { capacity: 1 });
    closers.push(() => own.close());
    for (const h of [b, c, ...backlog]) {
      assert.equal((await h.wait({ timeoutMs: 20_000 })).state, 'COMPLETED');
    }
    const tenantOf = new Map<string, string>([
      [b.jobId, 'b'],
      [c.jobId, 'c'],
    ]);
    for (const h of backlog) tenantOf.set(h.jobId, 'a');
    const starts = tc.events.flatMap((e) =>
      e.type === 'job.assigned' ? [{ tenant: tenantOf.get(e.jobId), workerId: e.workerId }] : [],
    );
    /** The starts before `tenant`'s on workers in `on`: one per other tenant at most. */
    const before = (tenant: string, on: readonly string[]): string[] =>
      starts
        .slice(
          0,
          starts.findIndex((s) => s.tenant === tenant),
        )
        .filter((s) => on.includes(s.workerId))
        .map((s) => s.tenant ?? '?');
    const ahead = (tenants: string[]): number =>
      Math.max(0, ...[...new Set(tenants)].map((t) => tenants.filter((x) => x === t).length));
    assert.ok(ahead(before('c', ['builtins', 'own'])) <= 1, JSON.stringify(starts.slice(0, 8)));
    assert.ok(ahead(before('b', ['own'])) <= 1, JSON.stringify(starts.slice(0, 8)));
  });

  it('keeps a pause and limits across a restart on the same database', async () => {
    const db = `${temp.dir}/restart.sqlite`;
    let { tc, client } = await cluster(db);
    await client.queues.pause('reports');
    await client.queues.set('reports', {
      concurrency: 4,
      groupRateLimit: { max: 1, intervalMillis: 50 },
    });
    const held = await client.submit(
      'SLEEP',
      { durationMillis: 1 },
      {
        queue: 'reports',
        groupKey: 'tenant-1',
      },
    );
    for (const close of closers.splice(0).reverse()) await close();
    ({ tc, client } = await cluster(db));
    worker(tc, 'w1', 2);
    const [reports] = (await client.queues.list()).filter((q) => q.name === 'reports');
    assert.equal(reports?.paused, true);
    assert.equal(reports?.concurrency, 4);
    assert.deepEqual(reports?.groupRateLimit, { max: 1, intervalMillis: 50 });
    assert.deepEqual(reports?.counts, { QUEUED: 1 });
    const snapshot = await client.status(held.jobId);
    assert.deepEqual(
      [snapshot.state, snapshot.queue, snapshot.groupKey],
      ['QUEUED', 'reports', 'tenant-1'],
    );
    await client.queues.resume('reports');
    assert.equal((await client.wait(held.jobId, 10_000)).state, 'COMPLETED');
  });

  it('says plainly that a v1 coordinator does not support queues', async () => {
    const v1 = await StrictV1Coordinator.start();
    closers.push(() => v1.close());
    const client = await DtpClient.connect({ host: '127.0.0.1', port: v1.clientPort });
    closers.push(() => client.close());
    await assert.rejects(client.queues.list(), (err: unknown) => {
      assert.ok(err instanceof FeatureUnsupportedError);
      assert.match(err.message, /this coordinator does not support queues/);
      return true;
    });
  });

  it('refuses to submit into a named queue on a v1 coordinator, which would ignore it', async () => {
    const v1 = await StrictV1Coordinator.start();
    closers.push(() => v1.close());
    const client = await DtpClient.connect({ host: '127.0.0.1', port: v1.clientPort });
    closers.push(() => client.close());
    for (const options of [{ queue: 'emails' }, { groupKey: 'tenant-1' }]) {
      await assert.rejects(client.submit('SHA256', { text: 'x' }, options), (err: unknown) => {
        assert.ok(err instanceof UnsupportedFeatureError);
        assert.match(err.message, /does not support named queues/);
        return true;
      });
    }
    // The default queue needs no queues at all.
    const plain = await client.submit('SHA256', { text: 'x' }, { queue: 'default' });
    assert.equal(plain.snapshot.state, 'QUEUED');
  });

  it("puts a schedule's jobs in its queue, held by that queue's pause", async () => {
    const { tc, client } = await cluster();
    worker(tc, 'w1', 2);
    await client.queues.pause('nightly');
    const set = await client.schedules.set('report', 'SHA256', {
      everyMs: 60_000,
      payload: { text: 'r' },
      queue: 'nightly',
    });
    assert.equal(set.queue, 'nightly');
    const tick = await client.schedules.trigger('report');
    assert.equal(tick.snapshot.queue, 'nightly');
    const listed = await client.queues.list();
    assert.equal(listed.find((q) => q.name === 'nightly')?.counts.QUEUED, 1);
    await client.queues.resume('nightly');
    assert.equal((await tick.wait({ timeoutMs: 10_000 })).state, 'COMPLETED');
    // A bad queue name is refused by the coordinator, naming the field.
    await assert.rejects(
      client.schedules.set('bad', 'SHA256', { everyMs: 60_000, queue: '9nope' }),
      (err: unknown) => err instanceof RemoteError && /queue/.test(err.message),
    );
  });

  it('stops a worker with queues when the coordinator does not offer them, taking nothing', async () => {
    const fake = await FakeCoordinator.listen();
    closers.push(() => fake.close());
    const w = Worker.start({
      coordinatorHost: '127.0.0.1',
      coordinatorPort: fake.port,
      workerId: 'picky',
      capacity: 1,
      heartbeatIntervalMs: 50,
      reconnectDelayMs: 50,
      logger: testLogger('worker'),
      queues: ['emails'],
    });
    closers.push(() => w.close());
    const refused = new Promise<Error>((resolve) => w.events.once('refused', resolve));
    const [session, register] = await fake.nextRegistration();
    assert.deepEqual(register.queues, ['emails']);
    session.send({ type: 'WORKER_REGISTERED', workerId: 'picky', features: ['drain'] });
    const err = await refused;
    assert.match(err.message, /does not support queues/);
  });
});
