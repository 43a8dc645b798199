/**
 * The TypeScript worker against a sharded coordinator: a fake public worker
 * port (test/helpers/fake-shard-port.ts) refuses its registration with
 * NOT_LEADER and a shard map whose worker addresses are real, unsharded
 * coordinators standing in for the shards' own worker ports. The worker
 * opens one session per address, shares its one pool among them, follows
 * the map as it changes, and still works as before against an unsharded
 * coordinator.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { shardOfQueue } from '../../src/protocol/shards.js';
import { Worker, type WorkerOptions } from '../../src/worker/worker.js';
import { HOST } from '../helpers/fake-coordinator.js';
import { FakeShardPort, shardMap } from '../helpers/fake-shard-port.js';
import { startCoordinator, testLogger, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const WORKER_ID = 'sharded-worker';

describe('worker: a sharded coordinator', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /**
   * A real unsharded coordinator standing in for one shard's worker port
   * (slow to judge a worker lost: a loaded machine must not make these
   * tests about heartbeats).
   */
  async function standIn(): Promise<TestCoordinator> {
    const tc = await startCoordinator({ heartbeatTimeoutMs: 10_000 });
    cleanups.push(() => tc.close());
    return tc;
  }

  function workerAddress(tc: TestCoordinator): string {
    return `${HOST}:${tc.coordinator.workerPort}`;
  }

  async function publicPort(addresses: (string | null)[]): Promise<FakeShardPort> {
    const fake = await FakeShardPort.listen(shardMap(addresses));
    cleanups.push(() => fake.close());
    return fake;
  }

  async function client(tc: TestCoordinator): Promise<DtpClient> {
    const c = await DtpClient.connect({ host: HOST, port: tc.coordinator.clientPort });
    cleanups.push(() => c.close());
    return c;
  }

  function startWorker(port: number, overrides: Partial<WorkerOptions> = {}): Worker {
    const worker = Worker.start({
      coordinatorHost: HOST,
      coordinatorPort: port,
      workerId: WORKER_ID,
      capacity: 2,
      heartbeatIntervalMs: 50,
      reconnectDelayMs: 30,
      shardRefreshMs: 50,
      logger: testLogger('worker'),
      ...overrides,
    });
    cleanups.push(() => worker.close());
    return worker;
  }

  /** Its sessions as [coordinator, shards, capacity], once all of them are registered. */
  async function registeredSessions(
    worker: Worker,
    count: number,
  ): Promise<[string, readonly number[], number][]> {
    return until(
      () => {
        const sessions = worker.sessions;
        if (sessions.length !== count || sessions.some((s) => s.mode !== 'registered')) {
          return null;
        }
        return sessions.map(
          (s) => [s.coordinator, s.shards, s.capacity] as [string, readonly number[], number],
        );
      },
      { what: `${count} registered sessions (now ${JSON.stringify(worker.sessions)})` },
    );
  }

  function registeredWith(tc: TestCoordinator, capacity: number): Promise<unknown> {
    return tc.waitForEvent(
      'worker.registered',
      (e) => e.workerId === WORKER_ID && e.capacity === capacity,
    );
  }

  it('goes sharded when refused with the map, and registers with every shard address', async () => {
    const [a, b] = [await standIn(), await standIn()];
    const fake = await publicPort([workerAddress(a), workerAddress(b), workerAddress(a)]);
    const worker = startWorker(fake.port, { capacity: 3 });
    const plans: unknown[] = [];
    worker.events.on('shards', (plan) => plans.push(plan));
    const sessions = await registeredSessions(worker, 2);
    // Capacity 3 split by shards led: a leads two of the three, b one.
    assert.deepEqual(sessions, [
      [workerAddress(a), [0, 2], 2],
      [workerAddress(b), [1], 1],
    ]);
    await Promise.all([registeredWith(a, 2), registeredWith(b, 1)]);
    assert.equal(worker.sharded, true);
    assert.equal(worker.registered, true);
    assert.equal(worker.mode, 'registered');
    assert.equal(fake.registrations, 1);
    assert.equal(worker.shardPlan?.count, 3);
    assert.equal(plans.length, 1);
  });

  it('completes jobs of every stand-in on its one pool, never more at once than its capacity', async () => {
    const [a, b] = [await standIn(), await standIn()];
    const fake = await publicPort([workerAddress(a), workerAddress(b)]);
    // Capacity 1 over two sessions: each registers 1, the pool runs one at a time.
    const worker = startWorker(fake.port, { capacity: 1, prefetch: 0, threads: 1 });
    await registeredSessions(worker, 2);
    const order: string[] = [];
    worker.events.on('started', (jobId) => order.push(`start ${jobId}`));
    worker.events.on('result', (result) => order.push(`end ${result.jobId}`));
    const [ca, cb] = [await client(a), await client(b)];
    const handles = await Promise.all([
      ca.submit('SLEEP', { durationMillis: 150 }),
      cb.submit('SLEEP', { durationMillis: 150 }),
    ]);
    const jobs = await Promise.all(handles.map((h) => h.wait({ timeoutMs: 10_000 })));
    assert.deepEqual(
      jobs.map((j) => j.state),
      ['COMPLETED', 'COMPLETED'],
    );
    for (const [tc, job] of [
      [a, jobs[0]],
      [b, jobs[1]],
    ] as const) {
      const done = await tc.waitForEvent('job.completed', (e) => e.jobId === job?.jobId);
      assert.equal(done.workerId, WORKER_ID);
    }
    // The second started only once the first had ended: one slot for both sessions.
    assert.equal(order.length, 4, order.join('; '));
    assert.ok(order[0]?.startsWith('start ') && order[1]?.startsWith('end '), order.join('; '));
    assert.equal(order[0]?.slice(6), order[1]?.slice(4));
    assert.equal(worker.threadCount, 1);
  });

  it('opens sessions only to the shards of its queues', async () => {
    const [a, b] = [await standIn(), await standIn()];
    const mine = shardOfQueue('alpha', 4);
    const addresses = [0, 1, 2, 3].map((n) => workerAddress(n === mine ? a : b));
    const fake = await publicPort(addresses);
    const worker = startWorker(fake.port, { queues: ['alpha'] });
    assert.deepEqual(await registeredSessions(worker, 1), [[workerAddress(a), [mine], 2]]);
    await registeredWith(a, 2);
    // A few refreshes later it still has not gone to b.
    const asked = fake.listRequests;
    await until(() => fake.listRequests >= asked + 3, { what: 'three more refreshes' });
    assert.equal(
      b.events.some((e) => e.type === 'worker.registered'),
      false,
    );
    const handle = await (
      await client(a)
    ).submit('SLEEP', { durationMillis: 1 }, { queue: 'alpha' });
    assert.equal((await handle.wait({ timeoutMs: 10_000 })).state, 'COMPLETED');
  });

  it('follows a shard that moves: registers with the new leader, drains and closes the old session', async () => {
    const [a, b] = [await standIn(), await standIn()];
    const fake = await publicPort([workerAddress(a), workerAddress(a)]);
    const worker = startWorker(fake.port, { capacity: 2 });
    assert.deepEqual(await registeredSessions(worker, 1), [[workerAddress(a), [0, 1], 2]]);
    const ca = await client(a);
    const first = await ca.submit('SLEEP', { durationMillis: 400 });
    await until(() => worker.runningCount === 1, { what: 'the first job running on the worker' });

    // Shard 1 moves to b: a session with b, and a registers again with its smaller share,
    // beside its old connection, so the job running there carries over.
    fake.shards = shardMap([workerAddress(a), workerAddress(b)]);
    assert.deepEqual(await registeredSessions(worker, 2), [
      [workerAddress(a), [0], 1],
      [workerAddress(b), [1], 1],
    ]);
    await Promise.all([registeredWith(a, 1), registeredWith(b, 1)]);
    const carried = await first.wait({ timeoutMs: 10_000 });
    assert.equal(carried.state, 'COMPLETED');
    const once = await a.waitForEvent('job.completed', (e) => e.jobId === carried.jobId);
    assert.deepEqual([once.workerId, once.attempt], [WORKER_ID, 1]);

    // a leads nothing of ours any more while a job runs there: that job finishes and reports first.
    const running = await ca.submit('SLEEP', { durationMillis: 300 });
    await until(() => worker.runningCount === 1, { what: 'the job running on the worker' });
    const closed = new Promise<string>((resolve) => worker.events.once('sessionClosed', resolve));
    fake.shards = shardMap([workerAddress(b), workerAddress(b)]);
    const job = await running.wait({ timeoutMs: 10_000 });
    assert.equal(job.state, 'COMPLETED');
    assert.equal(await closed, workerAddress(a));
    assert.deepEqual(await registeredSessions(worker, 1), [[workerAddress(b), [0, 1], 2]]);
    await registeredWith(b, 2);
    // The job's result went back on a's session before it closed.
    const done = await a.waitForEvent('job.completed', (e) => e.jobId === job.jobId);
    assert.equal(done.workerId, WORKER_ID);
  });

  it('asks for the map at once when a session loses its connection', async () => {
    const [a, b] = [await standIn(), await standIn()];
    const fake = await publicPort([workerAddress(a), workerAddress(b)]);
    // No periodic refresh within the test: only the lost session makes it ask.
    const worker = startWorker(fake.port, { shardRefreshMs: 600_000 });
    await registeredSessions(worker, 2);
    const asked = fake.listRequests;
    fake.shards = shardMap([workerAddress(b), workerAddress(b)]);
    await a.close();
    assert.deepEqual(await registeredSessions(worker, 1), [[workerAddress(b), [0, 1], 2]]);
    assert.ok(fake.listRequests > asked);
  });

  it('keeps one session and no shards against an unsharded coordinator', async () => {
    const tc = await standIn();
    const worker = startWorker(tc.coordinator.workerPort);
    assert.deepEqual(await registeredSessions(worker, 1), [[workerAddress(tc), [], 2]]);
    assert.equal(worker.sharded, false);
    assert.equal(worker.shardPlan, null);
  });
});
