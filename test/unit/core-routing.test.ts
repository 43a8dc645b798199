/**
 * The core with users' own task types: routing by declared type, jobs that
 * wait for a worker without blocking others, serving-worker counts, worker
 * snapshots, non-retryable failures, result formats, per-job deadlines and
 * the assignment limits sent to workers.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_TASK_TYPES_PER_WORKER } from '../../src/protocol/limits.js';
import {
  CoreHarness,
  effectsOf,
  expectReply,
  messagesOf,
  sentTo,
} from '../helpers/core-harness.js';

const RESIZE = { taskType: 'resize', payload: { path: 'a.png', width: 10 } };

describe('core: routing by declared task type', () => {
  it('keeps a custom job QUEUED while no live worker declared its type, then assigns it', () => {
    const h = new CoreHarness();
    h.register('w-v1', 4, null);
    h.register('w-sha', 4, ['SHA256']);
    const jobId = h.submit(RESIZE);
    assert.equal(h.status(jobId).state, 'QUEUED');
    assert.equal(
      h.assignmentsOf(jobId).length,
      0,
      'never handed to a worker that did not declare it',
    );
    const own = h.register('w-own', 1, ['resize', 'SHA256']);
    assert.equal(h.status(jobId).state, 'RUNNING');
    assert.equal(h.assignmentOf(jobId).connId, own);
  });

  it('gives a v1 worker (no taskTypes) only built-in jobs', () => {
    const h = new CoreHarness();
    const v1 = h.register('w-v1', 8, null);
    const custom = h.submit(RESIZE);
    const builtins = [
      h.submit({ taskType: 'SHA256', payload: { text: 'x' } }),
      h.submit({ taskType: 'WORD_COUNT', payload: { text: 'x' } }),
      h.submit({ taskType: 'PRIME_COUNT', payload: { limit: 10 } }),
      h.submit({ taskType: 'FAIL', payload: { failUntilAttempt: 0 } }),
      h.submit(),
    ];
    for (const jobId of builtins) assert.equal(h.assignmentOf(jobId).connId, v1);
    assert.equal(h.status(custom).state, 'QUEUED');
    assert.ok(messagesOf(h.log, 'TASK_ASSIGN', v1).every((m) => m.taskType !== 'resize'));
  });

  it('never lets a queued job of an unserved type hold back other types, whatever its priority', () => {
    const h = new CoreHarness({ config: { agingStepMs: 1 } });
    h.register('w1', 1, ['SLEEP']);
    const blocked = h.submit({ ...RESIZE, priority: 'HIGH' });
    h.tick(10_000); // old and HIGH: first in scheduling order
    const low = h.submit({ priority: 'LOW' });
    assert.equal(h.status(low).state, 'RUNNING');
    assert.equal(h.status(blocked).state, 'QUEUED');
  });

  it('reports the live workers that serve a type when a job is submitted', () => {
    const h = new CoreHarness();
    const none = expectReply(h.submitRequest(RESIZE), 'JOB_SUBMITTED');
    assert.equal(none.servingWorkers, 0);
    h.register('w1', 1, ['resize']);
    h.register('w2', 1, ['resize', 'thumbnail']);
    h.register('w3', 1, null);
    assert.equal(expectReply(h.submitRequest(RESIZE), 'JOB_SUBMITTED').servingWorkers, 2);
    assert.equal(expectReply(h.submitRequest(), 'JOB_SUBMITTED').servingWorkers, 1);
    h.handle({
      kind: 'workerMessage',
      connId: h.connOf('w1'),
      msg: { type: 'WORKER_DRAINING', workerId: 'w1' },
    });
    assert.equal(expectReply(h.submitRequest(RESIZE), 'JOB_SUBMITTED').servingWorkers, 1);
  });

  it('shows declared types, draining and running jobs in WORKER_LIST', () => {
    const h = new CoreHarness();
    h.register('w1', 2, ['resize', 'SHA256']);
    h.register('w2', 1, null);
    const jobId = h.submit(RESIZE);
    h.handle({
      kind: 'workerMessage',
      connId: h.connOf('w1'),
      msg: { type: 'WORKER_DRAINING', workerId: 'w1' },
    });
    const list = expectReply(h.request({ type: 'LIST_WORKERS' }), 'WORKER_LIST').workers;
    assert.deepEqual(
      list.map((w) => [w.workerId, w.taskTypes, w.draining, w.runningJobs]),
      [
        ['w1', ['resize', 'SHA256'], true, [jobId]],
        ['w2', null, false, []],
      ],
    );
  });

  it('keeps WORKER_LIST within a frame when workers declare many long names', () => {
    const h = new CoreHarness();
    const names = Array.from(
      { length: MAX_TASK_TYPES_PER_WORKER },
      (_, i) => `t${String(i).padStart(4, '0')}${'x'.repeat(58)}`,
    );
    for (let i = 0; i < 20; i++) h.register(`w${i}`, 1, names);
    const list = expectReply(h.request({ type: 'LIST_WORKERS' }), 'WORKER_LIST').workers;
    assert.equal(list.length, 20);
    assert.ok(Buffer.byteLength(JSON.stringify(list)) < 1_048_576);
    assert.equal(list[0]?.taskTypes, undefined, 'the lists are left out rather than the workers');
  });

  it('refuses a registration whose taskTypes holds an invalid name or too many', () => {
    for (const taskTypes of [
      ['resize', 'bad name'],
      ['sha256'],
      Array.from({ length: MAX_TASK_TYPES_PER_WORKER + 1 }, (_, i) => `t${i}`),
    ]) {
      const h = new CoreHarness();
      const connId = h.register('w1', 1, taskTypes);
      const [error] = messagesOf(h.last, 'ERROR', connId);
      assert.match(error?.message ?? '', /taskTypes/);
      assert.equal(error?.code, 'INVALID_REGISTRATION');
      assert.deepEqual(
        effectsOf(h.last, 'close').map((c) => c.connId),
        [connId],
      );
    }
  });
});

describe('core: results of users own tasks', () => {
  it('fails the job at once when the worker says a failure is not retryable', () => {
    const h = new CoreHarness();
    h.register('w1', 1, ['resize']);
    const jobId = h.submit({ ...RESIZE, maxAttempts: 5 });
    h.result(jobId, {
      success: false,
      error: 'Invalid payload: width must be > 0',
      retryable: false,
    });
    const job = h.status(jobId);
    assert.equal(job.state, 'FAILED');
    assert.equal(job.attempts, 1);
    assert.equal(job.error, 'Invalid payload: width must be > 0');
    assert.equal(h.events('job.failed')[0]?.cause, 'non_retryable');
  });

  it('retries a failure that is retryable (or says nothing) per the policy', () => {
    const h = new CoreHarness();
    h.register('w1', 1, ['resize']);
    const jobId = h.submit(RESIZE);
    h.result(jobId, { success: false, error: 'disk busy', retryable: true });
    assert.equal(h.status(jobId).state, 'RETRY_WAIT');
    h.tick(1_000);
    h.result(jobId, { success: false, error: 'disk busy' });
    h.tick(1_000);
    h.result(jobId, { success: false, error: 'disk busy' });
    const job = h.status(jobId);
    assert.equal(job.state, 'FAILED');
    assert.equal(job.attempts, 3);
    assert.equal(job.error, 'disk busy (all 3 attempts used)');
  });

  it('stores and shows how to read a result: json when the worker says so, text otherwise', () => {
    const h = new CoreHarness();
    h.register('w1', 2, ['resize', 'SHA256']);
    const json = h.submit(RESIZE);
    const text = h.submit({ taskType: 'SHA256', payload: { text: 'x' } });
    assert.equal(h.status(json).resultFormat ?? null, null, 'no format before a result');
    h.result(json, { result: '{"width":10}', resultFormat: 'json' });
    h.result(text, { result: 'abc' });
    assert.equal(h.status(json).resultFormat, 'json');
    assert.equal(h.record(json).resultFormat, 'json');
    assert.equal(h.status(text).resultFormat, 'text');
  });
});

describe('core: per-job deadline and assignment limits', () => {
  it('tells the worker the attempt deadline and attempt limit with each assignment', () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 1, ['resize']);
    const jobId = h.submit({ ...RESIZE, timeoutMillis: 1_500, maxAttempts: 7 });
    const [assign] = messagesOf(h.log, 'TASK_ASSIGN', connId);
    assert.equal(assign?.jobId, jobId);
    assert.equal(assign?.timeoutMillis, 1_500);
    assert.equal(assign?.maxAttempts, 7);
  });

  it("revokes an attempt at the job's own deadline instead of the coordinator's", () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 1, ['resize']);
    const jobId = h.submit({ ...RESIZE, timeoutMillis: 200 });
    h.tick(200);
    assert.equal(h.status(jobId).state, 'RUNNING', 'not past it yet');
    const effects = h.tick(1);
    assert.equal(messagesOf(effects, 'TASK_CANCEL', connId).length, 1);
    assert.match(h.status(jobId).error ?? '', /deadline exceeded \(200 ms\)/);
  });

  it('counts timeoutMillis in the idempotency comparison (the effective value)', () => {
    const h = new CoreHarness();
    const first = h.submit({ ...RESIZE, idempotencyKey: 'k', timeoutMillis: 5_000 });
    assert.equal(h.submit({ ...RESIZE, idempotencyKey: 'k', timeoutMillis: 5_000 }), first);
    const conflict = expectReply(
      h.submitRequest({ ...RESIZE, idempotencyKey: 'k', timeoutMillis: 6_000 }),
      'ERROR',
    );
    assert.equal(conflict.code, 'IDEMPOTENCY_CONFLICT');
    const byDefault = h.submit({ ...RESIZE, idempotencyKey: 'd' });
    const explicit = h.submit({
      ...RESIZE,
      idempotencyKey: 'd',
      timeoutMillis: h.config.taskTimeoutMs,
    });
    assert.equal(explicit, byDefault);
  });

  it('sends TASK_CANCEL to the worker when a running custom job is cancelled', () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 1, ['resize']);
    const jobId = h.submit(RESIZE);
    const reply = expectReply(h.request({ type: 'CANCEL_JOB', jobId }), 'JOB_CANCEL');
    assert.equal(reply.cancelled, true);
    assert.deepEqual(
      sentTo(h.last, connId).map((m) => m.type),
      ['TASK_CANCEL'],
    );
  });
});
