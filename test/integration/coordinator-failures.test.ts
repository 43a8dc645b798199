import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

describe('coordinator failure handling', () => {
  let tc: TestCoordinator;
  let c: RawClient;
  const peers: { close(): Promise<void> }[] = [];

  beforeEach(async () => {
    tc = await startCoordinator({ taskTimeoutMs: 60_000 });
    c = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(c);
  });
  afterEach(async () => {
    await Promise.all(peers.splice(0).map((p) => p.close()));
    await tc.close();
  });

  async function worker(id: string, capacity = 1, heartbeatMs = 20): Promise<ScriptedWorker> {
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, id, capacity, {
      heartbeatMs,
    });
    peers.push(w);
    return w;
  }

  it('retries on another worker when a worker goes silent with its socket open', async () => {
    const hung = await worker('hung');
    const jobId = await c.submit('SLEEP', { durationMillis: 5 });
    const first = await hung.assignments.next();
    hung.stopHeartbeats();
    await tc.waitForEvent('worker.suspected', (e) => e.workerId === 'hung');
    const lost = await tc.waitForEvent('worker.lost', (e) => e.workerId === 'hung');
    assert.match(lost.reason, /heartbeat timeout/);
    await hung.closed; // the coordinator closes a lost worker's connection
    const healthy = await worker('healthy');
    const second = await healthy.assignments.next();
    assert.equal(second.jobId, jobId);
    assert.equal(second.attemptNumber, 2);
    assert.notEqual(second.attemptId, first.attemptId);
    healthy.succeed(second, 'slept');
    const job = await c.wait(jobId);
    assert.equal(job.state, 'COMPLETED');
    assert.equal(job.attempts, 2);
    assert.match(job.error ?? '', /worker hung lost \(heartbeat timeout/);
  });

  it('retries on another worker when a worker disconnects abruptly', async () => {
    const dying = await worker('dying');
    const jobId = await c.submit('SHA256', { text: 'abc' });
    await dying.assignments.next();
    await dying.close();
    const healthy = await worker('healthy');
    const second = await healthy.assignments.next();
    assert.equal(second.attemptNumber, 2);
    healthy.succeed(second, 'hash');
    const job = await c.wait(jobId);
    assert.equal(job.state, 'COMPLETED');
    assert.equal(job.attempts, 2);
    assert.match(job.error ?? '', /^worker dying lost \(/);
  });

  it('fails the job once every attempt is used, naming the count', async () => {
    const w = await worker('failing');
    const jobId = await c.submit('FAIL', { failUntilAttempt: 99 }, { maxAttempts: 2 });
    for (let attempt = 1; attempt <= 2; attempt++) {
      const a = await w.assignments.next();
      assert.equal(a.attemptNumber, attempt);
      w.fail(a, `deliberate failure on attempt ${attempt}`);
    }
    const job = await c.wait(jobId);
    assert.equal(job.state, 'FAILED');
    assert.equal(job.attempts, 2);
    assert.equal(job.maxAttempts, 2);
    assert.equal(job.error, 'deliberate failure on attempt 2 (all 2 attempts used)');
    await assert.rejects(w.assignments.next(100));
  });

  it('completes a flaky job on its second attempt and keeps the first error', async () => {
    const w = await worker('flaky');
    const jobId = await c.submit('FAIL', { failUntilAttempt: 2 });
    w.fail(await w.assignments.next(), 'deliberate failure on attempt 1');
    const second = await w.assignments.next();
    w.succeed(second, 'succeeded on attempt 2');
    const job = await c.wait(jobId);
    assert.deepEqual([job.state, job.attempts, job.maxAttempts], ['COMPLETED', 2, 3]);
    assert.equal(job.result, 'succeeded on attempt 2');
    assert.equal(job.error, 'deliberate failure on attempt 1');
  });

  it('rejects a superseded attempt result after reassignment', async () => {
    const a = await worker('super-a');
    const jobId = await c.submit('SLEEP', { durationMillis: 1 });
    const old = await a.assignments.next();
    a.stopHeartbeats();
    await tc.waitForEvent('worker.lost', (e) => e.workerId === 'super-a');
    const b = await worker('super-b');
    const current = await b.assignments.next();
    const late = await worker('super-a'); // the lost worker comes back and reports its old lease
    late.succeed(old, 'stale');
    await tc.waitForEvent('result.stale', (e) => e.attemptId === old.attemptId);
    assert.equal((await c.status(jobId)).state, 'RUNNING');
    b.succeed(current, 'fresh');
    assert.equal((await c.wait(jobId)).result, 'fresh');
  });

  it('rejects a stale result while the job waits to retry', async () => {
    await tc.close();
    tc = await startCoordinator({ retryBaseDelayMs: 60_000, retryMaxDelayMs: 60_000 });
    c = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(c);
    const w = await worker('waiting');
    const jobId = await c.submit('SLEEP', { durationMillis: 1 });
    const a = await w.assignments.next();
    w.fail(a, 'boom');
    await tc.waitForEvent('job.retryScheduled', (e) => e.jobId === jobId);
    w.succeed(a, 'too late');
    const stale = await tc.waitForEvent('result.stale', (e) => e.jobId === jobId);
    assert.match(stale.reason, /RETRY_WAIT/);
    const job = await c.status(jobId);
    assert.deepEqual([job.state, job.result], ['RETRY_WAIT', null]);
  });

  it('applies a duplicate result of the same attempt only once', async () => {
    const w = await worker('dup');
    const jobId = await c.submit('SLEEP', { durationMillis: 1 });
    const a = await w.assignments.next();
    w.succeed(a, 'first');
    w.succeed(a, 'second');
    await tc.waitForEvent('result.stale', (e) => e.jobId === jobId);
    const job = await c.wait(jobId);
    assert.deepEqual([job.state, job.result, job.attempts], ['COMPLETED', 'first', 1]);
    assert.equal(
      tc.events.filter((e) => e.type === 'job.completed' && e.jobId === jobId).length,
      1,
    );
  });

  it('revokes an attempt past its deadline on a healthy worker and retries it elsewhere', async () => {
    await tc.close();
    tc = await startCoordinator({ taskTimeoutMs: 100 });
    c = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(c);
    const slow = await worker('slow');
    const jobId = await c.submit('SLEEP', { durationMillis: 1 });
    const first = await slow.assignments.next();
    const cancel = await slow.cancels.next();
    assert.deepEqual([cancel.jobId, cancel.attemptId], [first.jobId, first.attemptId]);
    const fast = await worker('fast');
    // The retry may go to `slow` again before `fast` has registered (a loaded
    // machine): that attempt misses its deadline too, and a later one is fast's.
    const second = await fast.assignments.next();
    assert.ok(second.attemptNumber >= 2, `attempt ${second.attemptNumber}`);
    slow.succeed(first, 'late result');
    await tc.waitForEvent('result.stale', (e) => e.attemptId === first.attemptId);
    fast.succeed(second, 'in time');
    const job = await c.wait(jobId);
    assert.deepEqual(
      [job.state, job.result, job.attempts],
      ['COMPLETED', 'in time', second.attemptNumber],
    );
    assert.equal(job.error, 'execution deadline exceeded (100 ms) on worker slow');
    const workers = await c.request({ type: 'LIST_WORKERS' });
    assert.ok(workers.type === 'WORKER_LIST' && workers.workers.some((x) => x.workerId === 'slow'));
  });

  it('fails the job when the final attempt misses its deadline', async () => {
    await tc.close();
    tc = await startCoordinator({ taskTimeoutMs: 50 });
    c = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(c);
    const w = await worker('sluggish');
    const jobId = await c.submit('SLEEP', { durationMillis: 1 }, { maxAttempts: 1 });
    await w.assignments.next();
    await w.cancels.next();
    const job = await c.wait(jobId);
    assert.equal(job.state, 'FAILED');
    assert.equal(
      job.error,
      'execution deadline exceeded (50 ms) on worker sluggish (all 1 attempts used)',
    );
  });
});
