/**
 * The worker uses an extension only when its coordinator offered it.
 *
 * Against the strict v1 coordinator (test/helpers/strict-v1.ts): the worker,
 * task modules loaded, registers, heartbeats, reports results, is cancelled
 * and drains the v1 way (no WORKER_DRAINING: it refuses new work, finishes
 * what runs, reports it, leaves), and is never dropped for a violation.
 *
 * Against a raw fake coordinator offering chosen features: `retryable` and
 * the deadline of `assignLimits` are used only when offered; the deadline
 * fires even when the worker is cut off from the coordinator;
 * WORKER_DRAINING is sent only with `drain`; attempts beyond capacity are
 * queued only with `prefetch`.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { afterEach, describe, it } from 'node:test';
import type { Worker } from '../../src/worker/worker.js';
import { FakeCoordinator } from '../helpers/fake-coordinator.js';
import { StrictV1Coordinator, V1Client } from '../helpers/strict-v1.js';
import { startTaskWorker } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

describe('a dtp worker on a strict v1 coordinator', { timeout: 120_000 }, () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setUp(capacity = 2): Promise<{ v1: StrictV1Coordinator; c: V1Client; w: Worker }> {
    const v1 = await StrictV1Coordinator.start();
    cleanups.push(() => v1.close());
    const w = await startTaskWorker(v1.workerPort, 'w-dtp', { capacity });
    cleanups.push(() => w.close());
    const registered = once(w.events, 'registered');
    const c = await V1Client.connect(v1.clientPort);
    cleanups.push(() => c.close());
    await registered;
    return { v1, c, w };
  }

  function assertNothingUndecodable(v1: StrictV1Coordinator): void {
    assert.deepEqual(
      v1.seen.filter((s) => s.port === 'worker' && s.undecodable !== null),
      [],
    );
    assert.deepEqual(v1.dropped, []);
  }

  it('registers without features, heartbeats, and reports results and retries', async () => {
    const { v1, c, w } = await setUp();
    assert.equal(w.features.size, 0);
    assert.deepEqual(v1.workerIds(), ['w-dtp']);
    await until(() => v1.typesSeen('worker').filter((t) => t === 'HEARTBEAT').length >= 2);
    const sha = await c.submit('SHA256', { text: 'abc' });
    const fail = await c.submit('FAIL', { failUntilAttempt: 2 }, { maxAttempts: 3 });
    const done = await until(async () => {
      const [a, b] = [await c.status(sha), await c.status(fail)];
      return a.state === 'COMPLETED' && b.state === 'COMPLETED' ? ([a, b] as const) : null;
    });
    assert.equal(
      done[0].result,
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
    assert.equal(done[1].result, 'succeeded on attempt 2');
    assertNothingUndecodable(v1);
  });

  it('stops a task when the v1 coordinator cancels it', async () => {
    const { v1, c, w } = await setUp();
    const started = once(w.events, 'started');
    const jobId = await c.submit('SLEEP', { durationMillis: 60_000 });
    await started;
    const cancelled = once(w.events, 'cancelled');
    assert.equal((await c.cancel(jobId)).cancelled, true);
    assert.equal((await cancelled)[0], jobId);
    assert.equal(w.runningCount, 0);
    assertNothingUndecodable(v1);
  });

  it('drains the v1 way: no WORKER_DRAINING, new work refused, running work reported', async () => {
    const { v1, c, w } = await setUp(2);
    const started = once(w.events, 'started');
    const running = await c.submit('SLEEP', { durationMillis: 400 });
    await started;
    const drained = w.drain(10_000);
    const refused = await c.submit('SHA256', { text: 'too late' }, { maxAttempts: 1 });
    const refusedJob = await until(async () => {
      const job = await c.status(refused);
      return job.state === 'FAILED' ? job : null;
    });
    assert.match(String(refusedJob.error), /worker is shutting down/);
    await drained;
    assert.equal((await c.status(running)).state, 'COMPLETED');
    assert.ok(!v1.typesSeen('worker').includes('WORKER_DRAINING'));
    assert.deepEqual(
      v1.dropped.filter((d) => /violation|WORKER_DRAINING/i.test(d.reason)),
      [],
    );
  });
});

describe('a dtp worker uses an extension only when offered', { timeout: 120_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setUp(features: string[] | undefined, capacity = 2) {
    const fake = await FakeCoordinator.listen();
    cleanups.push(() => fake.close());
    const w = await startTaskWorker(fake.port, 'w-features', { capacity, cancelGraceMs: 100 });
    cleanups.push(() => w.close());
    const registered = once(w.events, 'registered');
    const session = await fake.acceptNext(features);
    await registered;
    return { fake, session, w };
  }

  it('sends retryable only to a coordinator that offers it, and resultFormat always', async () => {
    for (const features of [undefined, ['retryable']]) {
      const { session } = await setUp(features);
      const refused = session.assign('job-refuse', 'refuse', {});
      const sum = session.assign('job-sum', 'stats.sum', { values: [2, 3] });
      const failure = await session.resultFor(refused);
      assert.equal(failure.success, false);
      assert.equal(failure.retryable, features === undefined ? undefined : false);
      const success = await session.resultFor(sum);
      assert.equal(success.resultFormat, 'json');
      assert.deepEqual(JSON.parse(success.result ?? ''), { n: 2, sum: 5, attempt: 1 });
    }
  });

  it('ignores TASK_ASSIGN.timeoutMillis unless assignLimits was offered', async () => {
    const { session } = await setUp(undefined);
    const lease = session.assign('job-slow', 'polite', { ms: 300 }, 1, {
      timeoutMillis: 50,
      maxAttempts: 2,
    });
    const result = await session.resultFor(lease);
    assert.equal(result.result, 'finished');
  });

  it('fires the signal at the deadline even when cut off from the coordinator', async () => {
    const { session, w } = await setUp(['assignLimits'], 1);
    // A warm thread, so that the deadline cannot pass while the task's modules load.
    await session.resultFor(session.assign('job-warm', 'reverse', { text: 'x' }));
    const started = once(w.events, 'started');
    const lease = session.assign('job-cut', 'polite', {}, 1, { timeoutMillis: 400 });
    await started;
    const assignedAtMs = performance.now();
    const disconnected = once(w.events, 'disconnected');
    const stopped = once(w.events, 'stopped');
    await session.connection.destroy('cut off');
    await disconnected;
    const [jobId, attemptId, reason, how] = (await stopped) as unknown[];
    const afterMs = performance.now() - assignedAtMs;
    assert.deepEqual(
      [jobId, attemptId, reason, how],
      ['job-cut', lease, 'deadline', 'cooperative'],
    );
    assert.ok(afterMs < 2_000, `stopped after ${afterMs.toFixed(0)} ms`);
    assert.equal(w.runningCount, 0);
  });

  it('announces a drain with WORKER_DRAINING only when drain was offered', async () => {
    for (const features of [['drain'], undefined]) {
      const { session, w } = await setUp(features);
      const started = once(w.events, 'started');
      const running = session.assign('job-run', 'polite', { ms: 200 });
      await started;
      const drained = w.drain(5_000);
      const late = session.assign('job-late', 'reverse', { text: 'x' });
      const refusal = await session.resultFor(late);
      assert.deepEqual([refusal.success, refusal.error], [false, 'worker is shutting down']);
      assert.equal((await session.resultFor(running)).result, 'finished');
      await drained;
      assert.equal(session.all('WORKER_DRAINING').length, features === undefined ? 0 : 1);
    }
  });

  it('queues assignments beyond capacity only when prefetch was offered', async () => {
    for (const features of [['prefetch'], undefined]) {
      const { session, w } = await setUp(features, 1);
      assert.equal(session.all('WORKER_REGISTER')[0]?.prefetch, 4, 'asks for 4 x capacity');
      const started = once(w.events, 'started');
      const first = session.assign('job-1', 'polite', { ms: 150 });
      await started;
      const second = session.assign('job-2', 'reverse', { text: 'ab' });
      const third = session.assign('job-3', 'reverse', { text: 'cd' });
      if (features === undefined) {
        for (const lease of [second, third]) {
          const refusal = await session.resultFor(lease);
          assert.deepEqual([refusal.success, refusal.error], [false, 'worker at capacity']);
        }
      } else {
        await until(() => w.runningCount === 3, { what: 'one attempt running, two queued' });
        assert.equal((await session.resultFor(second)).result, 'ba');
        assert.equal((await session.resultFor(third)).result, 'dc');
        const order = session.results().map((r) => r.jobId);
        assert.deepEqual(
          order,
          ['job-1', 'job-2', 'job-3'],
          'queued ones start after a slot frees',
        );
      }
      assert.equal((await session.resultFor(first)).result, 'finished');
    }
  });

  it('drops a queued attempt that is cancelled before it starts, and runs the next one', async () => {
    const { session, w } = await setUp(['prefetch'], 1);
    const started = once(w.events, 'started');
    const first = session.assign('job-1', 'polite', { ms: 150 });
    await started;
    const doomed = session.assign('job-2', 'reverse', { text: 'never' });
    const after = session.assign('job-3', 'reverse', { text: 'yes' });
    session.send({ type: 'TASK_CANCEL', jobId: 'job-2', attemptId: doomed });
    assert.equal((await session.resultFor(after)).result, 'sey');
    assert.equal((await session.resultFor(first)).result, 'finished');
    assert.equal(
      session.results().some((r) => r.attemptId === doomed),
      false,
      'a cancelled attempt is never reported',
    );
  });
});
