/**
 * Workers that hold many attempts, against a real coordinator over
 * 127.0.0.1: a registration with `slots: 5000` is listed with capacity 5000
 * and handed more than 1,024 attempts at once; an attempt requeued by its
 * worker (`requeue`) runs again at once without counting, and its count
 * survives in SQLite; a held list in two parts (`moreHeld`, HELD_ATTEMPTS)
 * takes every attempt back.
 */
import assert from 'node:assert/strict';
import { after, afterEach, describe, it } from 'node:test';
import type { TaskAssign } from '../../src/protocol/messages.js';
import { MAX_CAPACITY } from '../../src/protocol/limits.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';

describe('coordinator: workers that hold many attempts', () => {
  const temp = tempDir('dtp-many-');
  let tc: TestCoordinator | null = null;
  const peers: { close(): Promise<void> }[] = [];

  async function start(databasePath = ':memory:'): Promise<TestCoordinator> {
    const ports =
      tc === null
        ? {}
        : { workerPort: tc.coordinator.workerPort, clientPort: tc.coordinator.clientPort };
    await tc?.close();
    tc = await startCoordinator({
      databasePath,
      taskTimeoutMs: 60_000,
      // Thousands of assignments keep this process busy: no worker is lost for a late heartbeat.
      heartbeatTimeoutMs: 30_000,
      metricsPort: 0,
      ...ports,
    });
    return tc;
  }
  /** One sample of the coordinator's metrics (a line `name value`). */
  async function metric(name: string): Promise<number> {
    const port = (tc as TestCoordinator).coordinator.metricsPort;
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    assert.ok(line !== undefined, `no sample ${name}`);
    return Number(line.slice(name.length + 1));
  }
  async function client(): Promise<RawClient> {
    const c = await RawClient.connect((tc as TestCoordinator).coordinator.clientPort);
    peers.push(c);
    return c;
  }
  async function worker(
    id: string,
    capacity: number,
    extensions: Parameters<typeof ScriptedWorker.register>[3] = {},
  ): Promise<ScriptedWorker> {
    const port = (tc as TestCoordinator).coordinator.workerPort;
    const w = await ScriptedWorker.register(port, id, capacity, extensions);
    peers.push(w);
    return w;
  }

  afterEach(async () => {
    await Promise.all(peers.splice(0).map((p) => p.close()));
    await tc?.close();
    tc = null;
  });
  after(() => temp.remove());

  it('lists a worker registered with 5,000 slots at 5,000 and hands it more than 1,024 attempts', async () => {
    await start();
    const c = await client();
    const big = await worker('big', MAX_CAPACITY, { extensions: { slots: 5000 } });
    assert.ok(big.features.includes('slots'));
    const listed = await c.request({ type: 'LIST_WORKERS' });
    assert.equal(listed.type, 'WORKER_LIST');
    assert.deepEqual(
      listed.type === 'WORKER_LIST' ? listed.workers.map((w) => [w.workerId, w.capacity]) : [],
      [['big', 5000]],
    );
    assert.equal(await metric('dtp_worker_slots'), 5000);
    const jobs = Array.from({ length: 1000 }, () => ({
      taskType: 'SLEEP',
      payload: { durationMillis: 1 },
    }));
    for (let batch = 0; batch < 2; batch++) {
      const reply = await c.request({ type: 'SUBMIT_JOBS', jobs });
      assert.equal(reply.type, 'JOBS_SUBMITTED');
    }
    const assigned: TaskAssign[] = [];
    while (assigned.length < 2000) assigned.push(await big.assignments.next());
    const after = await c.request({ type: 'LIST_WORKERS' });
    assert.equal(after.type === 'WORKER_LIST' ? after.workers[0]?.activeTasks : -1, 2000);
  });

  it('runs a requeued attempt again at once without counting it, and keeps the count in SQLite', async () => {
    const db = `${temp.dir}/requeue.sqlite`;
    await start(db);
    let c = await client();
    const w = await worker('w1', 1);
    assert.ok(w.features.includes('requeue'));
    const jobId = await c.submit('SLEEP', { durationMillis: 1 }, { maxAttempts: 1 });
    const first = await w.assignments.next();
    w.requeue(first, 'its task thread was ended for another attempt');
    const second = await w.assignments.next();
    assert.deepEqual([second.jobId, second.attemptNumber], [jobId, 2]);
    const running = await c.status(jobId);
    assert.deepEqual([running.state, running.attempts, running.requeues], ['RUNNING', 2, 1]);
    assert.equal(await metric('dtp_attempts_requeued_total'), 1);
    w.fail(second, 'boom');
    const failed = await c.wait(jobId);
    assert.deepEqual(
      [failed.state, failed.requeues, failed.error],
      ['FAILED', 1, 'boom (all 1 attempts used)'],
      'the requeued attempt did not count',
    );
    await start(db); // the stored job, read back from SQLite
    c = await client();
    const reply = await c.request({ type: 'GET_JOB_STATUS', jobId, attempts: true });
    assert.equal(reply.type, 'JOB_STATUS');
    if (reply.type !== 'JOB_STATUS') return;
    assert.equal(reply.job.requeues, 1);
    assert.deepEqual(
      (reply.attempts ?? []).map((a) => [a.outcome, a.error]),
      [
        ['REQUEUED', 'its task thread was ended for another attempt'],
        ['FAILED', 'boom'],
      ],
    );
  });

  it('takes every attempt back from a held list sent in two parts', async () => {
    await start();
    const c = await client();
    const before = await worker('w1', 3);
    const jobIds = [
      await c.submit('SLEEP', { durationMillis: 1 }),
      await c.submit('SLEEP', { durationMillis: 1 }),
      await c.submit('SLEEP', { durationMillis: 1 }),
    ];
    const held = [
      await before.assignments.next(),
      await before.assignments.next(),
      await before.assignments.next(),
    ];
    const [a, ...rest] = held.map(({ jobId, attemptId }) => ({ jobId, attemptId }));
    const after = await worker('w1', 3, {
      extensions: { heldAttempts: a === undefined ? [] : [a], moreHeld: true },
    });
    assert.ok(after.features.includes('moreHeld'));
    after.send({ type: 'HELD_ATTEMPTS', workerId: 'w1', heldAttempts: rest, more: false });
    const ended = await (tc as TestCoordinator).waitForEvent('worker.heldListEnded');
    assert.deepEqual([ended.listed, ended.revoked, ended.timedOut], [3, 0, false]);
    for (const assign of held) after.succeed(assign, 'done');
    for (const jobId of jobIds) {
      const job = await c.wait(jobId);
      assert.deepEqual([job.state, job.attempts], ['COMPLETED', 1], 'the first attempt counted');
    }
  });
});
