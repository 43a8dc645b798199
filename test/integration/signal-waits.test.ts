/**
 * `ctx.waitForSignal` and `ctx.waitForEvent` on a real worker against a raw
 * fake coordinator: with `signals` offered the attempt ends with a
 * TASK_SUSPEND naming the wait (and no result); the next assignment, with
 * the coordinator's recorded step, replays it and the handler goes on with
 * the signal or event it carries; a step recorded under another name fails
 * the job for good. Without `signals` the handler's call is refused and the
 * attempt fails saying why, suspending nothing.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, it } from 'node:test';
import type { JsonObject, RecordedStep } from '../../src/protocol/messages.js';
import { startWorker } from '../../src/worker/start-worker.js';
import { FakeCoordinator, HOST, type FakeSession } from '../helpers/fake-coordinator.js';
import { RawClient } from '../helpers/raw-peers.js';
import { startCoordinator, testLogger } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const IO_TASKS = fileURLToPath(new URL('../fixtures/io-tasks.js', import.meta.url));
const FEATURES = ['steps', 'signals', 'retryable', 'batches', 'assignLimits'];

describe('signal and event waits on a worker', { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setUp(features: string[]): Promise<FakeSession> {
    const fake = await FakeCoordinator.listen();
    cleanups.push(() => fake.close());
    const w = await startWorker({
      coordinatorHost: HOST,
      coordinatorPort: fake.port,
      workerId: 'w-signals',
      capacity: 8,
      threads: 1,
      heartbeatIntervalMs: 100,
      reconnectDelayMs: 50,
      tasks: [IO_TASKS],
      logger: testLogger('worker'),
    });
    cleanups.push(() => w.close());
    const registered = once(w.events, 'registered');
    const session = await fake.acceptNext(features);
    await registered;
    return session;
  }

  /** Assigns attempt `n` of a job with its recorded steps; returns the lease. */
  function assign(
    session: FakeSession,
    jobId: string,
    taskType: string,
    payload: JsonObject,
    n: number,
    steps: RecordedStep[],
  ): string {
    const attemptId = `${jobId}-attempt-${n}`;
    session.send({
      type: 'TASK_ASSIGN',
      jobId,
      attemptId,
      attemptNumber: n,
      taskType,
      payload,
      steps,
      stepCount: steps.length,
    });
    return attemptId;
  }

  it('suspends with waitForSignal and waitForEvent, then replays the recorded wait', async () => {
    const session = await setUp(FEATURES);
    const signalLease = assign(session, 'job-s', 'io.waitSignal', {}, 1, []);
    const eventLease = assign(
      session,
      'job-e',
      'io.waitEvent',
      { name: 'order.paid', key: 'order-7', timeoutMs: 60_000 },
      1,
      [],
    );
    const signalSuspend = await session.waitFor('TASK_SUSPEND', (m) => m.jobId === 'job-s');
    const eventSuspend = await session.waitFor('TASK_SUSPEND', (m) => m.jobId === 'job-e');
    assert.deepEqual(signalSuspend, {
      type: 'TASK_SUSPEND',
      workerId: 'w-signals',
      jobId: 'job-s',
      attemptId: signalLease,
      waitForSignal: { name: 'approve' },
    });
    assert.deepEqual(eventSuspend, {
      type: 'TASK_SUSPEND',
      workerId: 'w-signals',
      jobId: 'job-e',
      attemptId: eventLease,
      waitForEvent: { name: 'order.paid', key: 'order-7', timeoutMillis: 60_000 },
    });
    const signal = { name: 'approve', payload: { by: 'ann' }, atMillis: 1_700_000_000_000 };
    const event = {
      name: 'order.paid',
      payload: { amount: 12 },
      key: 'order-7',
      eventId: 'ev-1',
      atMillis: 1_700_000_000_001,
    };
    const again = assign(session, 'job-s', 'io.waitSignal', {}, 2, [
      { name: 'dtp.waitForSignal', result: JSON.stringify({ signal }), atMillis: 1 },
    ]);
    const eventAgain = assign(
      session,
      'job-e',
      'io.waitEvent',
      { name: 'order.paid', key: 'order-7', timeoutMs: 60_000 },
      2,
      [{ name: 'dtp.waitForEvent', result: JSON.stringify({ event }), atMillis: 1 }],
    );
    const result = await session.resultFor(again);
    assert.deepEqual([result.success, result.resultFormat], [true, 'json']);
    assert.deepEqual(JSON.parse(result.result ?? ''), { approved: { by: 'ann' } });
    const eventResult = await session.resultFor(eventAgain);
    assert.deepEqual(JSON.parse(eventResult.result ?? ''), { event });
    assert.equal(session.all('TASK_SUSPEND').length, 2, 'a replayed wait suspends again');
  });

  it('replays a wait that timed out as null', async () => {
    const session = await setUp(FEATURES);
    const lease = assign(session, 'job-t', 'io.waitSignal', { timeoutMs: 1_000 }, 2, [
      { name: 'dtp.waitForSignal', result: '{"signal":null}', atMillis: 1 },
    ]);
    const result = await session.resultFor(lease);
    assert.deepEqual(JSON.parse(result.result ?? ''), { timedOut: true });
  });

  it('fails the job for good when another step was recorded where the handler waits', async () => {
    const session = await setUp(FEATURES);
    const lease = assign(session, 'job-d', 'io.waitSignal', {}, 2, [
      { name: 'dtp.sleep', result: '{"untilMillis":5}', atMillis: 1 },
    ]);
    const result = await session.resultFor(lease);
    assert.equal(result.success, false);
    assert.equal(result.retryable, false);
    assert.match(
      result.error ?? '',
      /^NON_DETERMINISTIC: step 0 was recorded as "dtp.sleep", this run calls "dtp.waitForSignal" there/,
    );
  });

  it('refuses the waits where the coordinator does not offer signals, suspending nothing', async () => {
    const session = await setUp(['steps', 'retryable', 'batches']);
    const signalLease = assign(session, 'job-n', 'io.waitSignal', {}, 1, []);
    const eventLease = assign(session, 'job-m', 'io.waitEvent', { name: 'order.paid' }, 1, []);
    for (const lease of [signalLease, eventLease]) {
      const result = await session.resultFor(lease);
      assert.equal(result.success, false, lease);
      assert.match(
        result.error ?? '',
        /ctx\.waitFor(Signal|Event): the coordinator does not offer signals and events \(feature "signals"\)/,
      );
    }
    assert.deepEqual(session.all('TASK_SUSPEND'), []);
  });
});

describe('signal and event waits on a worker against the coordinator', { timeout: 60_000 }, () => {
  it('goes on with a signal, an event of its key, and null once the timeout passed', async () => {
    const tc = await startCoordinator({});
    const client = await RawClient.connect(tc.coordinator.clientPort);
    const w = await startWorker({
      coordinatorHost: HOST,
      coordinatorPort: tc.coordinator.workerPort,
      workerId: 'w-signals-real',
      capacity: 4,
      threads: 1,
      heartbeatIntervalMs: 100,
      reconnectDelayMs: 50,
      tasks: [IO_TASKS],
      logger: testLogger('worker'),
    });
    try {
      const approval = await client.submit('io.waitSignal', {});
      const event = await client.submit('io.waitEvent', { name: 'order.paid', key: 'A-17' });
      const timed = await client.submit('io.waitSignal', { name: 'never', timeoutMs: 200 });
      // Each waits: its snapshot names the wait (this client, naming no states, sees QUEUED).
      for (const jobId of [approval, event]) {
        await until(async () => (await client.status(jobId)).waitingFor != null, {
          what: `${jobId} waiting`,
        });
      }
      const signalled = await client.request({
        type: 'SIGNAL_JOB',
        jobId: approval,
        name: 'approve',
        payload: { by: 'ann' },
      });
      assert.ok(signalled.type === 'JOB_SIGNALLED' && signalled.resumed, JSON.stringify(signalled));
      const otherKey = await client.request({
        type: 'PUBLISH_EVENT',
        name: 'order.paid',
        payload: 1,
        key: 'B-2',
      });
      assert.ok(otherKey.type === 'EVENT_PUBLISHED' && otherKey.resumed === 0);
      const published = await client.request({
        type: 'PUBLISH_EVENT',
        name: 'order.paid',
        payload: { amount: 12 },
        key: 'A-17',
        eventId: 'ev-real-1',
      });
      assert.ok(published.type === 'EVENT_PUBLISHED' && published.resumed === 1);

      const approved = await client.wait(approval);
      assert.deepEqual(JSON.parse(approved.result ?? ''), { approved: { by: 'ann' } });
      const woke = await client.wait(event);
      const got = (JSON.parse(woke.result ?? '') as { event: Record<string, unknown> }).event;
      assert.deepEqual(
        [got.name, got.payload, got.key, got.eventId, typeof got.atMillis],
        ['order.paid', { amount: 12 }, 'A-17', 'ev-real-1', 'number'],
      );
      const gaveUp = await client.wait(timed);
      assert.deepEqual(JSON.parse(gaveUp.result ?? ''), { timedOut: true });
      for (const done of [approved, woke, gaveUp]) {
        assert.deepEqual([done.state, done.attempts, done.suspensions], ['COMPLETED', 2, 1]);
      }
    } finally {
      await w.close();
      await client.close();
      await tc.close();
    }
  });
});
