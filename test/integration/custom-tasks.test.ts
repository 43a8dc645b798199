/**
 * Users' own tasks end to end, in-process: a real coordinator, real workers
 * that load the fixture task module (test/fixtures/custom-tasks.ts) through
 * the embedding API, and the client library. Routing by declared type,
 * schema rejection at the worker, non-retryable and retried failures, the
 * handler's context, and preemption by cancel and by deadline, cooperative
 * and not.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, afterEach, before, describe, it } from 'node:test';
import { DtpClient, type SubmitRequest } from '../../src/client/index.js';
import type { JobSnapshot, JsonObject } from '../../src/protocol/messages.js';
import type { Worker } from '../../src/worker/worker.js';
import { ScriptedWorker } from '../helpers/raw-peers.js';
import {
  startCoordinator,
  startRealWorker,
  startTaskWorker,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { orTimeout, until } from '../helpers/until.js';

describe('users own tasks, end to end', { timeout: 120_000 }, () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  const workers: { close(): Promise<void> }[] = [];

  before(async () => {
    tc = await startCoordinator();
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
    await until(() => tc.coordinator.inspect().workers.length === 0, { what: 'workers gone' });
  });
  after(async () => {
    await client.close();
    await tc.close();
  });

  async function worker(id: string, options: Parameters<typeof startTaskWorker>[2] = {}) {
    const started = await startTaskWorker(tc.coordinator.workerPort, id, options);
    workers.push(started);
    await tc.waitForEvent('worker.registered', (e) => e.workerId === id);
    return started;
  }

  function submit(taskType: string, payload: JsonObject, more: Partial<SubmitRequest> = {}) {
    return client.submit({ taskType, payload, ...more });
  }

  async function run(taskType: string, payload: JsonObject, more: Partial<SubmitRequest> = {}) {
    const { jobId } = await submit(taskType, payload, more);
    return client.wait(jobId, 10_000);
  }

  function assignedTo(jobId: string): string[] {
    return tc.events.flatMap((e) =>
      e.type === 'job.assigned' && e.jobId === jobId ? [e.workerId] : [],
    );
  }

  it('runs a custom task and returns strings as they are, other values as JSON', async () => {
    await worker('w-own');
    const reversed = await run('reverse', { text: 'hello' });
    assert.equal(reversed.state, 'COMPLETED');
    assert.equal(reversed.result, 'olleh');
    assert.equal(reversed.resultFormat, 'text');
    assert.equal(reversed.taskType, 'reverse');
    const sum = await run('stats.sum', { values: [1, 2, 3] });
    assert.equal(sum.state, 'COMPLETED');
    assert.equal(sum.resultFormat, 'json');
    assert.deepEqual(JSON.parse(sum.result ?? ''), { n: 3, sum: 6, attempt: 1 });
    const sha = await run('SHA256', { text: 'abc' });
    assert.equal(sha.result, 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('routes custom jobs only to workers that declared them; built-ins to any', async () => {
    await worker('w-own', { capacity: 4 });
    const plain = startRealWorker(tc.coordinator.workerPort, 'w-plain', 4);
    workers.push(plain);
    await tc.waitForEvent('worker.registered', (e) => e.workerId === 'w-plain');
    const custom = await Promise.all(
      [1, 2, 3, 4, 5, 6].map((i) => run('reverse', { text: `${i}` })),
    );
    for (const job of custom) {
      assert.equal(job.state, 'COMPLETED');
      assert.deepEqual(assignedTo(job.jobId), ['w-own']);
    }
    const listed = await client.workers();
    assert.deepEqual(
      listed.map((w) => [w.workerId, w.taskTypes?.includes('reverse')]),
      [
        ['w-own', true],
        ['w-plain', false],
      ],
    );
  });

  it('keeps a custom job QUEUED while no live worker serves it, without blocking others', async () => {
    const v1 = await ScriptedWorker.register(tc.coordinator.workerPort, 'w-v1', 4);
    workers.push(v1);
    const submitted = await submit('reverse', { text: 'later' }, { priority: 'HIGH' });
    assert.equal(submitted.snapshot.state, 'QUEUED');
    const sha = await submit('SHA256', { text: 'now' }, { priority: 'LOW' });
    const assign = await v1.assignments.next();
    assert.equal(assign.jobId, sha.jobId, 'the v1 worker gets the built-in, never the custom job');
    v1.succeed(assign, 'hash');
    assert.equal((await client.wait(sha.jobId, 5_000)).state, 'COMPLETED');
    assert.equal((await client.status(submitted.jobId)).state, 'QUEUED');
    assert.equal(v1.assignments.size, 0);
    await worker('w-own');
    const done = await client.wait(submitted.jobId, 10_000);
    assert.equal(done.state, 'COMPLETED');
    assert.equal(done.result, 'retal');
  });

  it('fails the job at once, without retries, when the worker rejects the payload', async () => {
    await worker('w-own');
    const job = await run('reverse', { text: 5 }, { maxAttempts: 3 });
    assert.equal(job.state, 'FAILED');
    assert.equal(job.attempts, 1);
    assert.match(job.error ?? '', /^Invalid payload: text /);
  });

  it('fails the job at once when the handler throws NonRetryableError', async () => {
    await worker('w-own');
    const job = await run('refuse', {}, { maxAttempts: 5 });
    assert.equal(job.state, 'FAILED');
    assert.equal(job.attempts, 1);
    assert.equal(job.error, 'cannot ever work');
  });

  it('records the error and retries per policy when a handler throws', async () => {
    await worker('w-own');
    const job = await run('flaky', {}, { maxAttempts: 3 });
    assert.equal(job.state, 'FAILED');
    assert.equal(job.attempts, 3);
    assert.equal(job.error, 'flaky failure on attempt 3 (all 3 attempts used)');
  });

  it('gives the handler its job, attempt, limits and deadline', async () => {
    await worker('w-own');
    const before = Date.now();
    const job = await run('context', {}, { maxAttempts: 4, timeoutMillis: 30_000 });
    const ctx = JSON.parse(job.result ?? '{}') as Record<string, unknown>;
    const attemptId = tc.events.find((e) => e.type === 'job.assigned' && e.jobId === job.jobId);
    assert.equal(ctx.jobId, job.jobId);
    assert.equal(ctx.attemptId, attemptId?.type === 'job.assigned' ? attemptId.attemptId : null);
    assert.equal(ctx.attemptNumber, 1);
    assert.equal(ctx.maxAttempts, 4);
    assert.equal(ctx.aborted, false);
    const deadline = ctx.deadlineAtMs as number;
    assert.ok(
      deadline >= before + 30_000 && deadline <= Date.now() + 30_000,
      `deadline ${deadline}`,
    );
  });
});

describe('preemption of users own tasks', { timeout: 120_000 }, () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  let w: Worker;

  before(async () => {
    // The coordinator sweeps its deadlines slowly here, so that the worker's own
    // deadline (from TASK_ASSIGN.timeoutMillis) is the one that fires first.
    tc = await startCoordinator({ sweepIntervalMs: 1_000 });
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    w = await startTaskWorker(tc.coordinator.workerPort, 'w-preempt', { cancelGraceMs: 300 });
    await tc.waitForEvent('worker.registered');
  });
  after(async () => {
    await w.close();
    await client.close();
    await tc.close();
  });

  async function started(taskType: string, payload: JsonObject, timeoutMillis?: number) {
    const running = once(w.events, 'started');
    const { jobId } = await client.submit({
      taskType,
      payload,
      timeoutMillis: timeoutMillis ?? null,
      // One attempt: a revoked attempt is not retried into the next test.
      maxAttempts: 1,
    });
    const began = await orTimeout(running, 10_000, null);
    assert.ok(began !== null, `${taskType} did not start within 10 s`);
    const [startedJob, attemptId] = began as [string, string];
    assert.equal(startedJob, jobId);
    return { jobId, attemptId };
  }

  /** The slot is free again: a quick job completes on this capacity-1 worker. */
  async function slotIsFree(): Promise<void> {
    const { jobId } = await client.submit({ taskType: 'reverse', payload: { text: 'ok' } });
    assert.equal((await client.wait(jobId, 5_000)).state, 'COMPLETED');
  }

  function sentResultFor(attemptId: string): boolean {
    return tc.events.some(
      (e) =>
        (e.type === 'result.stale' || e.type === 'job.completed') &&
        'attemptId' in e &&
        e.attemptId === attemptId,
    );
  }

  it('stops a cooperative handler at once when its job is cancelled', async () => {
    const { jobId, attemptId } = await started('polite', {});
    const stopped = once(w.events, 'stopped');
    const cancelledAtMs = performance.now();
    assert.equal((await client.cancel(jobId)).cancelled, true);
    assert.deepEqual(await stopped, [jobId, attemptId, 'cancel', 'cooperative']);
    assert.ok(performance.now() - cancelledAtMs < 300, 'before the grace ran out');
    await slotIsFree();
    assert.equal((await client.status(jobId)).state, 'CANCELLED');
  });

  it('terminates a handler that ignores its signal after the grace; its result is never accepted', async () => {
    const { jobId, attemptId } = await started('stubborn', { ms: 1_000 });
    const stopped = once(w.events, 'stopped');
    const cancelledAtMs = performance.now();
    await client.cancel(jobId);
    assert.deepEqual(await stopped, [jobId, attemptId, 'cancel', 'terminated']);
    const stopMs = performance.now() - cancelledAtMs;
    assert.ok(stopMs >= 250, `terminated after ${stopMs.toFixed(0)} ms, before the grace`);
    await slotIsFree();
    const job = await client.status(jobId);
    assert.equal(job.state, 'CANCELLED');
    assert.equal(job.result, null);
    assert.equal(sentResultFor(attemptId), false);
  });

  it('fires the signal at the deadline; the coordinator fails the attempt as late', async () => {
    const stopped = once(w.events, 'stopped');
    const { jobId, attemptId } = await started('polite', {}, 400);
    const [, , reason, how] = (await stopped) as unknown[];
    // The worker's own deadline timer and the coordinator's TASK_CANCEL for
    // the same deadline race (in one process, under load, either can come
    // first); the cut-off case, where only the worker's timer can fire, is
    // tested against a scripted coordinator in worker-negotiation.test.ts.
    assert.ok(reason === 'deadline' || reason === 'cancel', String(reason));
    assert.equal(how, 'cooperative');
    const job: JobSnapshot = await until(
      async () => {
        const current = await client.status(jobId);
        return current.state !== 'RUNNING' ? current : null;
      },
      { what: 'the attempt to be revoked' },
    );
    assert.match(job.error ?? '', /execution deadline exceeded \(400 ms\)/);
    assert.equal(job.state, 'FAILED');
    assert.equal(sentResultFor(attemptId), false);
  });

  it('terminates a handler that ignores the deadline after the grace', async () => {
    const stopped = once(w.events, 'stopped');
    const { jobId, attemptId } = await started('stubborn', { ms: 5_000 }, 300);
    assert.deepEqual(await stopped, [jobId, attemptId, 'deadline', 'terminated']);
    assert.equal((await client.wait(jobId, 5_000)).state, 'FAILED');
    await slotIsFree();
  });
});
