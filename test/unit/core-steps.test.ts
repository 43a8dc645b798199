/**
 * Durable steps in the core: RECORD_STEP under the lease and in order,
 * assignments that carry what was recorded, GET_STEPS for the rest, and the
 * suspensions (a sleep, a wait for another job) that end an attempt without
 * failing it or using up maxAttempts; all across a restart.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_STEPS_PER_JOB } from '../../src/protocol/limits.js';
import type { CoordinatorToWorker, TaskAssign } from '../../src/protocol/messages.js';
import type { Effect } from '../../src/coordinator/core/types.js';
import { CoreHarness, sentTo } from '../helpers/core-harness.js';

const W = 'w1';

function harness(capacity = 1): CoreHarness {
  const h = new CoreHarness();
  h.register(W, capacity, null, { steps: true });
  return h;
}

let nextRequest = 1;

/** Sends RECORD_STEP for the job's latest attempt (or `attemptId`); returns what came back. */
function record(
  h: CoreHarness,
  jobId: string,
  index: number,
  name: string,
  result: string,
  attemptId = h.assignmentOf(jobId).attemptId,
): CoordinatorToWorker[] {
  const requestId = nextRequest++;
  const effects = h.handle({
    kind: 'workerMessage',
    connId: h.connOf(W),
    msg: { type: 'RECORD_STEP', workerId: W, jobId, attemptId, requestId, index, name, result },
  });
  return replies(effects, h, requestId);
}

function replies(effects: Effect[], h: CoreHarness, requestId: number): CoordinatorToWorker[] {
  return sentTo(effects, h.connOf(W)).filter(
    (m) =>
      (m.type === 'STEP_RECORDED' || m.type === 'ERROR' || m.type === 'STEPS') &&
      m.requestId === requestId,
  );
}

const suspend = (h: CoreHarness, ...args: Parameters<CoreHarness['suspend']>): Effect[] =>
  h.suspend(...args);

function errorCode(msgs: CoordinatorToWorker[]): string | null {
  const [msg] = msgs;
  assert.ok(
    msg !== undefined && msg.type === 'ERROR',
    `expected an ERROR, got ${JSON.stringify(msg)}`,
  );
  return msg.code;
}

describe('core: recording steps', () => {
  it('records steps in order under the current lease and answers each once durable', () => {
    const h = harness();
    const jobId = h.submit();
    const commitsBefore = h.store.commits;
    const [reply] = record(h, jobId, 0, 'fetch', '{"rows":3}');
    assert.deepEqual(reply, { type: 'STEP_RECORDED', requestId: nextRequest - 1, jobId, index: 0 });
    assert.ok(h.store.commits > commitsBefore, 'the step was committed with the reply');
    assert.deepEqual(
      h.store.committedSteps(jobId).map((s) => [s.index, s.name, s.result]),
      [[0, 'fetch', '{"rows":3}']],
    );
    assert.equal(errorCode(record(h, jobId, 2, 'later', '1')), 'STEP_OUT_OF_ORDER');
    assert.equal(errorCode(record(h, jobId, 0, 'again', '1')), 'STEP_OUT_OF_ORDER');
    assert.equal(errorCode(record(h, jobId, 1, 'dtp.sleep', '1')), 'INVALID_REQUEST');
    assert.equal(errorCode(record(h, jobId, 1, '', '1')), 'INVALID_REQUEST');
    assert.equal(errorCode(record(h, jobId, 1, 'bad', '{not json')), 'INVALID_REQUEST');
    assert.equal(h.store.committedSteps(jobId).length, 1, 'refused calls recorded nothing');
    assert.equal(h.status(jobId).state, 'RUNNING', 'a refused call costs only itself');
    assert.deepEqual(h.status(jobId).steps, [
      { name: 'fetch', atMillis: h.clock, resultBytes: 10 },
    ]);
  });

  it('refuses a stale attempt with STALE_ATTEMPT and records nothing', () => {
    const h = harness();
    const jobId = h.submit({ maxAttempts: 3 });
    const first = h.assignmentOf(jobId).attemptId;
    h.result(jobId, { success: false });
    h.tick(60_000);
    assert.notEqual(h.assignmentOf(jobId).attemptId, first);
    assert.equal(errorCode(record(h, jobId, 0, 'late', '1', first)), 'STALE_ATTEMPT');
    assert.equal(errorCode(record(h, 'no-such-job', 0, 'x', '1', first)), 'STALE_ATTEMPT');
    assert.deepEqual(h.store.committedSteps(jobId), []);
  });

  it('hands a later attempt what was recorded, and GET_STEPS pages through the rest', () => {
    const h = harness();
    const jobId = h.submit({ maxAttempts: 3 });
    const big = JSON.stringify('x'.repeat(100 * 1024));
    for (let i = 0; i < 5; i++)
      assert.equal(record(h, jobId, i, `s${i}`, big)[0]?.type, 'STEP_RECORDED');
    h.result(jobId, { success: false });
    h.tick(60_000);
    const again: TaskAssign = h.assignmentOf(jobId);
    assert.equal(again.attemptNumber, 2);
    assert.equal(again.stepCount, 5);
    const carried = again.steps ?? [];
    assert.ok(carried.length >= 1 && carried.length < 5, `carried ${carried.length}`);
    assert.deepEqual(carried[0], {
      name: 's0',
      result: big,
      atMillis: h.store.committedSteps(jobId)[0]?.atMs,
    });
    const fetched: string[] = carried.map((s) => s.name);
    for (let more = true; more;) {
      const requestId = nextRequest++;
      const effects = h.handle({
        kind: 'workerMessage',
        connId: h.connOf(W),
        msg: {
          type: 'GET_STEPS',
          workerId: W,
          jobId,
          attemptId: again.attemptId,
          requestId,
          fromIndex: fetched.length,
        },
      });
      const [reply] = replies(effects, h, requestId);
      assert.ok(reply?.type === 'STEPS');
      assert.ok(reply.steps.length > 0);
      fetched.push(...reply.steps.map((s) => s.name));
      more = reply.more;
    }
    assert.deepEqual(fetched, ['s0', 's1', 's2', 's3', 's4']);
  });

  it('sends no steps to a worker that did not ask for them', () => {
    const h = new CoreHarness();
    const plain = h.register('plain', 1);
    const jobId = h.submit({ maxAttempts: 2 });
    const first = h.assignmentOf(jobId);
    h.handle({
      kind: 'workerMessage',
      connId: plain,
      msg: {
        type: 'RECORD_STEP',
        workerId: 'plain',
        jobId,
        attemptId: first.attemptId,
        requestId: 1,
        index: 0,
        name: 's',
        result: '1',
      },
    });
    assert.equal(h.store.committedSteps(jobId).length, 1);
    h.result(jobId, { success: false });
    h.tick(60_000);
    const again = h.assignmentOf(jobId);
    assert.equal(again.attemptNumber, 2);
    assert.equal(again.steps, undefined);
    assert.equal(again.stepCount, undefined);
  });

  it('bounds the steps of one job with LIMIT_EXCEEDED', () => {
    const h = harness();
    const jobId = h.submit();
    for (let i = 0; i < MAX_STEPS_PER_JOB; i++) record(h, jobId, i, `s${i}`, '1');
    assert.equal(errorCode(record(h, jobId, MAX_STEPS_PER_JOB, 'one-more', '1')), 'LIMIT_EXCEEDED');
    const other = h.submit();
    h.result(jobId);
    const half = JSON.stringify('y'.repeat(600 * 1024));
    assert.equal(record(h, other, 0, 'a', half)[0]?.type, 'STEP_RECORDED');
    assert.equal(errorCode(record(h, other, 1, 'b', half)), 'LIMIT_EXCEEDED');
    assert.equal(h.store.committedSteps(other).length, 1);
  });
});

describe('core: sleeping and waiting', () => {
  it('a sleep ends the attempt without failing it, frees the slot, and resumes when due', () => {
    const h = harness(1);
    const sleeper = h.submit({ maxAttempts: 1 });
    const other = h.submit();
    record(h, sleeper, 0, 'before', '"b"');
    suspend(h, sleeper, { sleepMillis: 5_000 });
    const slept = h.status(sleeper);
    assert.equal(slept.state, 'SCHEDULED');
    assert.equal(slept.runAtMillis, h.clock + 5_000);
    assert.equal(h.assignmentOf(other).workerId, W, 'the freed slot runs the other job');
    h.result(other);
    h.tick(5_000);
    const resumed = h.assignmentOf(sleeper);
    assert.equal(resumed.attemptNumber, 2);
    assert.deepEqual(
      resumed.steps?.map((s) => s.name),
      ['before', 'dtp.sleep'],
    );
    h.result(sleeper, { result: 'done' });
    const done = h.status(sleeper);
    assert.equal(done.state, 'COMPLETED', 'a sleep did not use up the one attempt');
    const history = h.store.committedAttempts(sleeper).map((a) => a.outcome);
    assert.deepEqual(history, ['SUSPENDED', 'SUCCEEDED']);
  });

  it('suspensions do not count toward maxAttempts, failures still do', () => {
    const h = harness(1);
    const jobId = h.submit({ maxAttempts: 2 });
    suspend(h, jobId, { sleepMillis: 0 });
    assert.equal(h.status(jobId).suspensions, 1, 'the snapshot counts the suspension');
    h.tick(1);
    suspend(h, jobId, { sleepMillis: 0 });
    h.tick(1);
    h.result(jobId, { success: false });
    h.tick(60_000);
    assert.equal(h.status(jobId).state, 'RUNNING', 'one failure of two attempts');
    h.result(jobId, { success: false });
    const failed = h.status(jobId);
    assert.equal(failed.state, 'FAILED');
    assert.equal(failed.attempts, 4);
    assert.equal(failed.suspensions, 2, 'attempts - suspensions = the 2 that counted');
    assert.match(failed.error ?? '', /all 2 attempts used/);
  });

  it('a wait ends when the job waited for ends, and the step carries its outcome', () => {
    const h = harness(1);
    const waiter = h.submit();
    const child = h.submit();
    suspend(h, waiter, { waitForJobId: child });
    assert.equal(h.status(waiter).state, 'WAITING');
    assert.equal(h.assignmentOf(child).workerId, W);
    h.result(child, { result: '{"n":1}', resultFormat: 'json' });
    const resumed = h.assignmentOf(waiter);
    assert.equal(resumed.attemptNumber, 2);
    const step = resumed.steps?.at(-1);
    assert.equal(step?.name, 'dtp.waitFor');
    assert.deepEqual(JSON.parse(step?.result ?? 'null'), {
      jobId: child,
      state: 'COMPLETED',
      result: '{"n":1}',
      resultFormat: 'json',
      error: null,
    });
  });

  it('a wait for a job that ended long ago (only in the store) or never existed goes on at once', () => {
    const h = harness(1);
    const old = h.submit();
    h.result(old, { result: 'r' });
    const waiter = h.submit();
    suspend(h, waiter, { waitForJobId: old });
    const first = h.assignmentOf(waiter);
    assert.equal(first.attemptNumber, 2);
    assert.equal(JSON.parse(first.steps?.at(-1)?.result ?? '{}').state, 'COMPLETED');
    suspend(h, waiter, { waitForJobId: 'no-such-job' });
    const second = h.assignmentOf(waiter);
    assert.equal(second.attemptNumber, 3);
    const outcome = JSON.parse(second.steps?.at(-1)?.result ?? '{}');
    assert.equal(outcome.state, null);
    assert.equal(outcome.error, 'unknown job');
  });

  it('a wait for a delayed job beyond the near window (only in the store) goes on when it ends', () => {
    const h = new CoreHarness({
      config: { scheduledWindow: { windowMs: 1_000, limit: 10, marginMs: 100 } },
    });
    h.register(W, 1, null, { steps: true });
    const far = h.submit({ runAtMillis: h.clock + 60_000 });
    assert.equal(
      h.core.activeJobs().some((j) => j.jobId === far),
      false,
      'the delayed job is far',
    );
    const waiter = h.submit();
    suspend(h, waiter, { waitForJobId: far });
    assert.equal(h.status(waiter).state, 'WAITING');
    for (let i = 0; i < 70 && h.status(far).state !== 'RUNNING'; i++) h.tick(1_000);
    assert.equal(h.status(far).state, 'RUNNING');
    h.result(far, { result: 'late' });
    const resumed = h.assignmentOf(waiter);
    assert.equal(resumed.attemptNumber, 2);
    assert.equal(JSON.parse(resumed.steps?.at(-1)?.result ?? '{}').result, 'late');
  });

  it('ignores a suspension from an attempt that is not current', () => {
    const h = harness(1);
    const jobId = h.submit({ maxAttempts: 3 });
    const first = h.assignmentOf(jobId);
    h.result(jobId, { success: false });
    h.tick(60_000);
    h.handle({
      kind: 'workerMessage',
      connId: h.connOf(W),
      msg: { type: 'TASK_SUSPEND', workerId: W, jobId, attemptId: first.attemptId, sleepMillis: 5 },
    });
    assert.equal(h.status(jobId).state, 'RUNNING');
    assert.deepEqual(h.store.committedSteps(jobId), []);
  });

  it('refuses a bad suspension by failing the attempt for good', () => {
    const h = harness(1);
    const jobId = h.submit({ maxAttempts: 3 });
    suspend(h, jobId, { waitForJobId: jobId });
    const failed = h.status(jobId);
    assert.equal(failed.state, 'FAILED');
    assert.match(failed.error ?? '', /cannot wait for itself/);
  });

  it('a cancelled waiter stays cancelled when the job it waited for ends', () => {
    const h = harness(1);
    const waiter = h.submit();
    const child = h.submit();
    suspend(h, waiter, { waitForJobId: child });
    h.request({ type: 'CANCEL_JOB', jobId: waiter });
    h.result(child);
    assert.equal(h.status(waiter).state, 'CANCELLED');
  });

  it('sleeping and waiting jobs keep their steps across a restart', () => {
    const h = harness(1);
    const sleeper = h.submit();
    const waiter = h.submit();
    const child = h.submit({ runAtMillis: h.clock + 60_000 });
    record(h, sleeper, 0, 'a', '1');
    suspend(h, sleeper, { sleepMillis: 10_000 });
    record(h, waiter, 0, 'b', '2');
    suspend(h, waiter, { waitForJobId: child });
    h.restart();
    h.register(W, 1, null, { steps: true });
    assert.equal(h.status(sleeper).state, 'SCHEDULED');
    assert.equal(h.status(waiter).state, 'WAITING');
    assert.deepEqual([h.status(sleeper).suspensions, h.status(waiter).suspensions], [1, 1]);
    h.tick(10_000);
    assert.deepEqual(
      h.assignmentOf(sleeper).steps?.map((s) => s.name),
      ['a', 'dtp.sleep'],
    );
    h.result(sleeper);
    h.tick(50_000);
    h.result(child, { result: 'c' });
    const resumed = h.assignmentOf(waiter);
    assert.deepEqual(
      resumed.steps?.map((s) => s.name),
      ['b', 'dtp.waitFor'],
    );
    assert.equal(JSON.parse(resumed.steps?.at(-1)?.result ?? '{}').result, 'c');
  });
});
