/**
 * Several coordinators on one PostgreSQL database, in-process: one leads,
 * the others stand by and say NOT_LEADER with the leader's address; a
 * standby takes over with the jobs when the leader stops; a leader whose
 * epoch was superseded stops writing at once.
 */
import assert from 'node:assert/strict';
import { runClientCli } from '../../src/cli/client-cli.js';
import { after, afterEach, describe, it } from 'node:test';
import type { Coordinator } from '../../src/coordinator/coordinator.js';
import { rawConnection, RawClient } from '../helpers/raw-peers.js';
import {
  createTestDatabase,
  dropTestDatabase,
  postgresSkip,
  queryDatabase,
} from '../helpers/postgres.js';
import { DtpClient } from '../../src/client/client.js';
import { Worker } from '../../src/worker/worker.js';
import { startCoordinator, testLogger, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const skip = postgresSkip();
const databases: string[] = [];
let running: TestCoordinator[] = [];
let peers: { close(): Promise<void> }[] = [];

after(async () => {
  for (const url of databases) await dropTestDatabase(url);
});
afterEach(async () => {
  await Promise.all(peers.map((p) => p.close()));
  await Promise.all(running.map((tc) => tc.close()));
  peers = [];
  running = [];
});

/**
 * `n` coordinators on a fresh database, the first one leading. `leaseTtlMs`
 * (renewed at a tenth of it): short where a test waits for a lease to run
 * out, long where a test needs the leader to stay one on a loaded machine.
 */
async function cluster(
  n: number,
  leaseTtlMs = 1_000,
): Promise<{ url: string; nodes: TestCoordinator[] }> {
  const url = await createTestDatabase();
  databases.push(url);
  const nodes: TestCoordinator[] = [];
  for (let k = 0; k < n; k++) {
    const tc = await startCoordinator({
      databasePath: url,
      leaseTtlMs,
      leaseRenewIntervalMs: leaseTtlMs / 10,
      metricsPort: 0,
    });
    running.push(tc);
    nodes.push(tc);
    // the first one leads before the next one starts
    if (k === 0) await until(() => tc.coordinator.status().role === 'leader', { what: 'a leader' });
  }
  return { url, nodes };
}

async function client(c: Coordinator): Promise<RawClient> {
  const raw = await RawClient.connect(c.clientPort);
  peers.push(raw);
  return raw;
}

async function healthz(c: Coordinator): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`http://127.0.0.1:${c.metricsPort}/healthz`);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('coordinators sharing PostgreSQL', { skip }, () => {
  it('has one leader; a standby answers every request and AUTH with NOT_LEADER naming the leader', async () => {
    const { nodes } = await cluster(2, 10_000);
    const [leader, standby] = nodes.map((n) => n.coordinator) as [Coordinator, Coordinator];
    await until(() => standby.status().leaderClient !== null, {
      what: 'the standby to see the leader',
    });
    assert.equal(standby.status().role, 'standby');
    const raw = await client(standby);
    for (const request of [
      { type: 'AUTH', token: 'x' } as const,
      { type: 'LIST_WORKERS' } as const,
      { type: 'GET_JOB_STATUS', jobId: 'nope' } as const,
    ]) {
      const reply = await raw.request(request);
      assert.ok(reply.type === 'ERROR', JSON.stringify(reply));
      assert.equal(reply.code, 'NOT_LEADER');
      assert.match(reply.message, /NOT_LEADER/);
      assert.equal(reply.leader, `127.0.0.1:${leader.clientPort}`);
    }
    const worker = await rawConnection(standby.workerPort);
    worker.conn.send({ type: 'WORKER_REGISTER', workerId: 'w1', capacity: 1, taskTypes: null });
    const refusal = await worker.inbox.next();
    assert.ok(refusal.type === 'ERROR' && refusal.code === 'NOT_LEADER');
    assert.equal(refusal.leader, `127.0.0.1:${leader.workerPort}`);
    await worker.closed;

    assert.deepEqual(await healthz(standby), {
      status: 503,
      body: {
        status: 'standby',
        role: 'standby',
        epoch: 1,
        leader: `127.0.0.1:${leader.clientPort}`,
      },
    });
    assert.equal((await healthz(leader)).status, 200);
    const list = await (await client(leader)).request({ type: 'LIST_WORKERS' });
    assert.ok(list.type === 'WORKER_LIST');
    assert.equal(list.leader, `127.0.0.1:${leader.clientPort}`);
    assert.equal(list.epoch, 1);
    // The CLI's `workers` shows them too, through either coordinator.
    let stdout = '';
    const code = await runClientCli(
      [
        'workers',
        '--json',
        '--host',
        `127.0.0.1:${standby.clientPort},127.0.0.1:${leader.clientPort}`,
      ],
      {
        stdout: (text) => (stdout += text),
        stderr: () => undefined,
        env: {},
        color: false,
        interactive: false,
      },
    );
    assert.equal(code, 0);
    assert.deepEqual(JSON.parse(stdout), {
      workers: [],
      leader: `127.0.0.1:${leader.clientPort}`,
      epoch: 1,
    });
  });

  it('hands over on a clean stop: the standby leads under the next epoch with every job', async () => {
    const { nodes } = await cluster(2);
    const [first, second] = nodes as [TestCoordinator, TestCoordinator];
    const c1 = await client(first.coordinator);
    const done = await c1.submit('SHA256', { text: 'before' }, { idempotencyKey: 'k1' });
    const queued = await c1.submit('SLEEP', { durationMillis: 1 });
    await first.close();
    await until(() => second.coordinator.status().role === 'leader', {
      timeoutMs: 3_000,
      what: 'the standby to take over',
    });
    assert.equal(second.coordinator.status().epoch, 2);
    const c2 = await client(second.coordinator);
    assert.equal((await c2.status(done)).state, 'QUEUED');
    assert.equal((await c2.status(queued)).state, 'QUEUED');
    // the key is still known: the same submission gets the same job
    assert.equal(await c2.submit('SHA256', { text: 'before' }, { idempotencyKey: 'k1' }), done);
  });

  it('says in the history that the leader changed, with both epochs, for an attempt the failover interrupted', async () => {
    const { nodes } = await cluster(2);
    const [first, second] = nodes as [TestCoordinator, TestCoordinator];
    const worker = await rawConnection(first.coordinator.workerPort);
    peers.push({ close: () => worker.conn.destroy() });
    worker.conn.send({ type: 'WORKER_REGISTER', workerId: 'w1', capacity: 2, taskTypes: null });
    assert.equal((await worker.inbox.next()).type, 'WORKER_REGISTERED');
    const c1 = await client(first.coordinator);
    const requeued = await c1.submit('SLEEP', { durationMillis: 60_000 });
    const failed = await c1.submit('SLEEP', { durationMillis: 60_000 }, { maxAttempts: 1 });
    for (let k = 0; k < 2; k++) assert.equal((await worker.inbox.next()).type, 'TASK_ASSIGN');
    await first.close();
    await until(() => second.coordinator.status().role === 'leader', {
      timeoutMs: 3_000,
      what: 'the standby to take over',
    });
    assert.equal(second.coordinator.status().epoch, 2);
    const c2 = await client(second.coordinator);
    // Kept for w1 a heartbeat timeout; w1 never comes to the new leader.
    await until(async () => (await c2.status(requeued)).state === 'QUEUED', {
      what: 'the kept attempt to end',
    });
    const again = await c2.request({ type: 'GET_JOB_STATUS', jobId: requeued, attempts: true });
    assert.ok(again.type === 'JOB_STATUS', JSON.stringify(again));
    assert.equal(again.job.state, 'QUEUED');
    const interrupted =
      'leader changed (epoch 1 → 2) during attempt 1; outcome unknown (worker w1)';
    assert.equal(again.job.error, interrupted);
    assert.deepEqual(
      again.attempts?.map((a) => [a.outcome, a.error]),
      [['INTERRUPTED', interrupted]],
    );
    assert.equal(
      (await c2.status(failed)).error,
      'leader changed (epoch 1 → 2) during final attempt; outcome unknown (worker w1; all 1 attempts used)',
    );
  });

  it('stops at once when its epoch is superseded: drops connections, writes nothing more, stands by', async () => {
    const { url, nodes } = await cluster(1);
    const leader = (nodes[0] as TestCoordinator).coordinator;
    const raw = await client(leader);
    await raw.submit('SHA256', { text: 'one' });
    // Another coordinator takes the lease (as after this one froze past its lease).
    await queryDatabase(
      url,
      `UPDATE dtp.leader_lease SET epoch = epoch + 1, holder = 'intruder',
         client_address = 'elsewhere:1', expires_at = clock_timestamp() + interval '1 hour'`,
    );
    const reply = raw
      .request({
        type: 'SUBMIT_JOB',
        taskType: 'SHA256',
        payload: { text: 'two' },
        maxAttempts: null,
        idempotencyKey: null,
        priority: null,
      })
      .catch((err: unknown) => err);
    await until(() => leader.status().role === 'standby', { what: 'the leader to step down' });
    assert.ok((await reply) instanceof Error, 'no answer: the connection was dropped');
    const rows = await queryDatabase<{ n: number }>(
      url,
      'SELECT count(*)::integer AS n FROM dtp.jobs',
    );
    assert.deepEqual(rows, [{ n: 1 }]);
    const again = await client(leader);
    const refused = await again.request({ type: 'LIST_WORKERS' });
    assert.ok(refused.type === 'ERROR' && refused.code === 'NOT_LEADER');
    await until(() => leader.status().leaderClient === 'elsewhere:1', { what: 'the new leader' });
  });

  it('has a worker with several addresses find the leader, and follow it to the next one', async () => {
    const { nodes } = await cluster(2);
    const [first, second] = nodes as [TestCoordinator, TestCoordinator];
    await until(() => second.coordinator.status().leaderWorker !== null, {
      what: 'a known leader',
    });
    // The standby first: it names the leader, which the worker dials next.
    const worker = Worker.start({
      coordinatorHost: `127.0.0.1:${second.coordinator.workerPort},127.0.0.1:${first.coordinator.workerPort}`,
      coordinatorPort: 1,
      workerId: 'follower',
      capacity: 2,
      heartbeatIntervalMs: 50,
      reconnectDelayMs: 50,
      logger: testLogger('worker'),
    });
    peers.push({ close: () => worker.close() });
    await until(() => first.coordinator.inspect().workers.length === 1, { what: 'registration' });
    const c1 = await client(first.coordinator);
    const job1 = await c1.submit('SHA256', { text: 'abc' });
    assert.equal((await c1.wait(job1)).state, 'COMPLETED');

    await first.close();
    await until(() => second.coordinator.inspect().workers.length === 1, {
      timeoutMs: 5_000,
      what: 'the worker to register with the new leader',
    });
    const c2 = await client(second.coordinator);
    const job2 = await c2.submit('SHA256', { text: 'abc' });
    assert.equal((await c2.wait(job2)).state, 'COMPLETED');
  });

  it('has a client with several addresses follow the leader: keyed submissions and waits survive a failover', async () => {
    const { nodes } = await cluster(2);
    const [first, second] = nodes as [TestCoordinator, TestCoordinator];
    const hosts = [second, first].map((n) => `127.0.0.1:${n.coordinator.clientPort}`).join(',');
    const c = await DtpClient.connect({ host: hosts, port: 1, followTimeoutMs: 10_000 });
    peers.push(c);
    // Sent to the standby first: NOT_LEADER, then to the leader it names.
    const { jobId } = await c.submit({
      taskType: 'SHA256',
      payload: { text: 'abc' },
      idempotencyKey: 'k',
    });
    const waiting = c.wait(jobId, 20_000);
    await until(() => first.coordinator.inspect().pendingWaits === 1, {
      what: 'the wait to arrive',
    });
    // The leader goes away with the wait pending; the standby takes over.
    await first.close();
    const worker = Worker.start({
      coordinatorHost: hosts
        .replaceAll(String(first.coordinator.clientPort), String(first.coordinator.workerPort))
        .replaceAll(String(second.coordinator.clientPort), String(second.coordinator.workerPort)),
      coordinatorPort: 1,
      workerId: 'w',
      capacity: 1,
      heartbeatIntervalMs: 50,
      reconnectDelayMs: 50,
      logger: testLogger('worker'),
    });
    peers.push({ close: () => worker.close() });
    const done = await waiting;
    assert.equal(done.state, 'COMPLETED');
    assert.equal(done.result, 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    // The same keyed submission, resent, is the same job on the new leader.
    const again = await c.submit({
      taskType: 'SHA256',
      payload: { text: 'abc' },
      idempotencyKey: 'k',
    });
    assert.equal(again.jobId, jobId);
  });
});
