import assert from 'node:assert/strict';
import { after, afterEach, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { DtpClient } from '../../src/client/index.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import {
  startCoordinator,
  tempDir,
  startRealWorker,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import type { CoordinatorOptions } from '../../src/coordinator/options.js';
import { until } from '../helpers/until.js';

/** Restarts on one SQLite file; each restart reuses the previous ports. */
describe('coordinator restart recovery', () => {
  const temp = tempDir('dtp-restart-');
  let n = 0;
  let db = '';
  let tc: TestCoordinator | null = null;
  const peers: { close(): Promise<void> }[] = [];

  async function start(overrides: Partial<CoordinatorOptions> = {}): Promise<TestCoordinator> {
    const ports =
      tc === null
        ? {}
        : { workerPort: tc.coordinator.workerPort, clientPort: tc.coordinator.clientPort };
    await tc?.close();
    tc = await startCoordinator({ databasePath: db, ...ports, ...overrides });
    return tc;
  }
  async function client(): Promise<RawClient> {
    const c = await RawClient.connect((tc as TestCoordinator).coordinator.clientPort);
    peers.push(c);
    return c;
  }
  async function worker(id: string, capacity = 1): Promise<ScriptedWorker> {
    const w = await ScriptedWorker.register(
      (tc as TestCoordinator).coordinator.workerPort,
      id,
      capacity,
    );
    peers.push(w);
    return w;
  }

  afterEach(async () => {
    await Promise.all(peers.splice(0).map((p) => p.close()));
    await tc?.close();
    tc = null;
    db = `${temp.dir}/db-${++n}.sqlite`;
  });
  after(() => temp.remove());
  db = `${temp.dir}/db-0.sqlite`;

  it('keeps a completed job and requeues a running one whose worker does not come back, counting the interrupted attempt', async () => {
    await start();
    let c = await client();
    const w = await worker('before');
    const done = await c.submit('SHA256', { text: 'abc' });
    w.succeed(await w.assignments.next(), 'hash-abc');
    await c.wait(done);
    const running = await c.submit('SLEEP', { durationMillis: 60_000 });
    await w.assignments.next();
    await start();
    c = await client();
    const kept = await c.status(done);
    assert.deepEqual([kept.state, kept.result, kept.attempts], ['COMPLETED', 'hash-abc', 1]);
    assert.equal((await c.status(running)).state, 'RUNNING', 'kept for its worker a while');
    const cc = c;
    await until(async () => (await cc.status(running)).state === 'QUEUED', {
      what: 'the kept attempt ended (its worker never came back)',
    });
    const requeued = await c.status(running);
    assert.deepEqual([requeued.state, requeued.attempts, requeued.workerId], ['QUEUED', 1, null]);
    assert.match(requeued.error ?? '', /coordinator restarted during attempt 1; outcome unknown/);
    const after = await worker('after');
    const again = await after.assignments.next();
    assert.deepEqual([again.jobId, again.attemptNumber], [running, 2]);
    after.succeed(again, 'slept');
    const finished = await c.wait(running);
    assert.deepEqual(
      [finished.state, finished.result, finished.attempts],
      ['COMPLETED', 'slept', 2],
    );
  });

  it('fails a job whose final attempt was running when the coordinator stopped', async () => {
    await start();
    let c = await client();
    const w = await worker('final');
    const jobId = await c.submit('SLEEP', { durationMillis: 60_000 }, { maxAttempts: 1 });
    await w.assignments.next();
    await start();
    c = await client();
    const cc = c;
    await until(async () => (await cc.status(jobId)).state === 'FAILED', {
      what: 'the kept final attempt ended',
    });
    const job = await c.status(jobId);
    assert.match(job.error ?? '', /coordinator restarted during final attempt; outcome unknown/);
  });

  it('gives a recovered job a fresh deadline instead of expiring it (200 ms timeout, 400 ms down)', async () => {
    await start({ taskTimeoutMs: 200 });
    const c = await client();
    const w = await worker('deadline');
    const jobId = await c.submit('SLEEP', { durationMillis: 1 });
    await w.assignments.next();
    await tc?.close();
    await delay(400); // the outage itself, longer than the job's timeout
    await start({ taskTimeoutMs: 200 });
    const c2 = await client();
    const w2 = await worker('deadline-2');
    const a = await w2.assignments.next();
    assert.equal(a.attemptNumber, 2);
    w2.succeed(a, 'in time');
    const job = await c2.wait(jobId);
    assert.deepEqual([job.state, job.attempts], ['COMPLETED', 2]);
    assert.equal(
      (tc as TestCoordinator).events.filter((e) => e.type === 'job.deadlineExceeded').length,
      0,
    );
  });

  it('lets a worker reattach its running attempt after a restart, the queue limit held meanwhile', async () => {
    await start({ heartbeatTimeoutMs: 3_000 });
    const port = () => (tc as TestCoordinator).coordinator.clientPort;
    const before = await DtpClient.connect({ host: '127.0.0.1', port: port() });
    await before.queues.set('api', { concurrency: 1 });
    peers.push(startRealWorker((tc as TestCoordinator).coordinator.workerPort, 'holder', 1));
    const first = await before.submit('SLEEP', { durationMillis: 1_500 }, { queue: 'api' });
    await until(async () => (await first.status()).state === 'RUNNING', { what: 'first running' });
    await before.close();
    await start({ heartbeatTimeoutMs: 3_000 });
    peers.push(startRealWorker((tc as TestCoordinator).coordinator.workerPort, 'idle', 1));
    const after = await DtpClient.connect({ host: '127.0.0.1', port: port() });
    peers.push(after);
    const second = await after.submit('SLEEP', { durationMillis: 1 }, { queue: 'api' });
    const ended = await after.wait(first.jobId, 20_000);
    assert.deepEqual([ended.state, ended.attempts], ['COMPLETED', 1], 'the attempt went on');
    const next = await second.wait({ timeoutMs: 20_000 });
    assert.equal(next.state, 'COMPLETED');
    assert.ok(
      (next.startedAtMillis ?? 0) >= (ended.finishedAtMillis ?? Infinity),
      'the limit of 1 held across the restart',
    );
  });

  it("keeps a waiting retry's absolute eligibility time across a restart", async () => {
    await start({ retryBaseDelayMs: 1_500, retryMaxDelayMs: 1_500 });
    const c = await client();
    const w = await worker('retry');
    const jobId = await c.submit('SLEEP', { durationMillis: 1 });
    w.fail(await w.assignments.next(), 'boom');
    await (tc as TestCoordinator).waitForEvent('job.retryScheduled', (e) => e.jobId === jobId);
    await tc?.close();
    const store = await SqliteStore.open({ path: db });
    const read = await store.read({ op: 'job', jobId, withAttempts: false });
    const retryAtMs = (read.op === 'job' ? read.job?.retryAtMs : null) as number;
    await store.close();
    assert.ok(retryAtMs > Date.now(), 'the back-off should still be running');
    await start({ retryBaseDelayMs: 1_500, retryMaxDelayMs: 1_500 });
    const c2 = await client();
    assert.equal((await c2.status(jobId)).state, 'RETRY_WAIT');
    const w2 = await worker('retry-2');
    const again = await w2.assignments.next(5_000);
    assert.ok(Date.now() >= retryAtMs, 'assigned before its eligibility time');
    assert.equal(again.attemptNumber, 2);
  });

  it('lets a real worker reconnect and register again with a coordinator restarted on the same ports', async () => {
    await start();
    const real = startRealWorker((tc as TestCoordinator).coordinator.workerPort, 'returning', 1);
    peers.push(real);
    const client1 = await DtpClient.connect({
      host: '127.0.0.1',
      port: (tc as TestCoordinator).coordinator.clientPort,
    });
    await until(async () => (await client1.workers()).length === 1, { what: 'registration' });
    await client1.close();
    await start();
    const client2 = await DtpClient.connect({
      host: '127.0.0.1',
      port: (tc as TestCoordinator).coordinator.clientPort,
    });
    peers.push(client2);
    await until(async () => (await client2.workers()).some((w) => w.workerId === 'returning'), {
      what: 're-registration',
    });
    const { jobId } = await client2.submit({ taskType: 'SHA256', payload: { text: 'back again' } });
    assert.equal((await client2.wait(jobId, 10_000)).state, 'COMPLETED');
  });

  it("keeps a client's wait going across a coordinator restart: it reconnects and waits again", async () => {
    await start();
    const waiter = await DtpClient.connect({
      host: '127.0.0.1',
      port: (tc as TestCoordinator).coordinator.clientPort,
      followTimeoutMs: 10_000,
    });
    peers.push(waiter);
    // No worker yet: the job stays QUEUED while the coordinator goes away.
    const { jobId } = await waiter.submit({ taskType: 'SHA256', payload: { text: 'still there' } });
    const waited = waiter.wait(jobId, 20_000);
    await until(() => (tc as TestCoordinator).coordinator.inspect().pendingWaits > 0, {
      what: 'the wait held by the coordinator',
    });
    await start();
    const real = startRealWorker(
      (tc as TestCoordinator).coordinator.workerPort,
      'after-restart',
      1,
    );
    peers.push(real);
    const job = await waited;
    assert.equal(job.state, 'COMPLETED');
    assert.equal(job.jobId, jobId);
  });

  it('gives up a wait once the coordinator stayed away for followTimeoutMs', async () => {
    await start();
    const waiter = await DtpClient.connect({
      host: '127.0.0.1',
      port: (tc as TestCoordinator).coordinator.clientPort,
      followTimeoutMs: 300,
    });
    peers.push(waiter);
    const { jobId } = await waiter.submit({ taskType: 'SHA256', payload: { text: 'gone' } });
    const waited = waiter.wait(jobId);
    await until(() => (tc as TestCoordinator).coordinator.inspect().pendingWaits > 0, {
      what: 'the wait held by the coordinator',
    });
    await tc?.close();
    tc = null;
    await assert.rejects(waited, (err: Error & { code?: string }) => {
      assert.match(String(err.code), /^CONNECT(ION_LOST|_FAILED)$/);
      return true;
    });
  });

  it('rebuilds the active count from non-terminal jobs and honours a lowered limit', async () => {
    await start({ maxActiveJobs: 10 });
    const c = await client();
    const w = await worker('count');
    const finished = await c.submit('SHA256', { text: 'done' });
    w.succeed(await w.assignments.next(), 'x');
    await c.wait(finished);
    const queued: string[] = [];
    for (let i = 0; i < 3; i++) queued.push(await c.submit('SHA256', { text: `q${i}` }));
    await w.close();
    await start({ maxActiveJobs: 2 });
    const c2 = await client();
    const rejected = await c2.request({
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: 'new' },
      maxAttempts: null,
      idempotencyKey: null,
      priority: null,
    });
    assert.ok(
      rejected.type === 'SUBMIT_REJECTED' && rejected.activeCount === 3 && rejected.limit === 2,
    );
    const w2 = await worker('count-2');
    for (let i = 0; i < 2; i++) w2.succeed(await w2.assignments.next(), 'ok'); // recovered jobs still run
    await until(async () => (await c2.status(queued[1] as string)).state === 'COMPLETED');
    await c2.submit('SHA256', { text: 'fits now' });
  });

  it('keeps priority and submission order across a restart', async () => {
    await start();
    const c = await client();
    const ids = {
      low: await c.submit('SLEEP', { durationMillis: 1 }, { priority: 'LOW' }),
      normal: await c.submit('SLEEP', { durationMillis: 1 }),
      high1: await c.submit('SLEEP', { durationMillis: 1 }, { priority: 'HIGH' }),
      high2: await c.submit('SLEEP', { durationMillis: 1 }, { priority: 'HIGH' }),
    };
    await start();
    await client();
    const w = await worker('order');
    const order: string[] = [];
    for (let i = 0; i < 4; i++) {
      const a = await w.assignments.next();
      order.push(Object.entries(ids).find(([, id]) => id === a.jobId)?.[0] ?? a.jobId);
      w.succeed(a, 'ok');
    }
    assert.deepEqual(order, ['high1', 'high2', 'normal', 'low']);
  });
});
