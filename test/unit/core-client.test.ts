/**
 * The core's client side: CANCEL_JOB, admission control, idempotency keys,
 * payload validation, GET_JOB_STATUS and WAIT_JOB.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_WAIT_MS, MAX_WAIT_MS } from '../../src/coordinator/core/client-requests.js';
import type { JobState } from '../../src/protocol/messages.js';
import {
  CLIENT_CONN,
  CoreHarness,
  effectsOf,
  eventsOf,
  expectReply,
  messagesOf,
  type SubmitOptions,
} from '../helpers/core-harness.js';

function cancel(h: CoreHarness, jobId: string): { cancelled: boolean; state: JobState } {
  const reply = expectReply(h.request({ type: 'CANCEL_JOB', jobId }), 'JOB_CANCEL');
  return { cancelled: reply.cancelled, state: reply.job.state };
}

/** A harness with one job (maxAttempts 2) in the wanted state; w1 has capacity 1. */
function jobIn(state: JobState, options: SubmitOptions = {}): { h: CoreHarness; jobId: string } {
  const h = new CoreHarness();
  const jobId = h.submit({ maxAttempts: 2, ...options });
  if (state !== 'QUEUED') h.register('w1', 1);
  if (state === 'RETRY_WAIT' || state === 'FAILED') h.result(jobId, { success: false });
  if (state === 'FAILED') {
    h.tick(1_000);
    h.result(jobId, { success: false });
  }
  if (state === 'COMPLETED') h.result(jobId);
  if (state === 'CANCELLED') cancel(h, jobId);
  assert.equal(h.status(jobId).state, state);
  return { h, jobId };
}

describe('core: CANCEL_JOB', () => {
  it('cancels a QUEUED job so it is never assigned', () => {
    const h = new CoreHarness();
    const jobId = h.submit();
    assert.deepEqual(cancel(h, jobId), { cancelled: true, state: 'CANCELLED' });
    assert.deepEqual(h.events('job.cancelled'), [{ type: 'job.cancelled', jobId, from: 'QUEUED' }]);
    assert.equal(h.core.activeCount, 0);
    h.register('w1', 1);
    assert.equal(messagesOf(h.log, 'TASK_ASSIGN').length, 0);
    assert.equal(h.store.committedJob(jobId)?.state, 'CANCELLED');
  });

  it('cancels a RETRY_WAIT job so it is never requeued', () => {
    const { h, jobId } = jobIn('RETRY_WAIT');
    assert.deepEqual(cancel(h, jobId), { cancelled: true, state: 'CANCELLED' });
    h.tick(10_000);
    assert.equal(h.events('job.requeued').length, 0);
    assert.equal(h.assignmentsOf(jobId).length, 1);
    assert.equal(h.status(jobId).state, 'CANCELLED');
  });

  it('sends TASK_CANCEL with the same ids and frees the slot when the job is RUNNING', () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 1);
    const jobId = h.submit();
    const next = h.submit();
    const { attemptId } = h.assignmentOf(jobId);
    const reply = expectReply(h.request({ type: 'CANCEL_JOB', jobId }), 'JOB_CANCEL');
    assert.equal(reply.cancelled, true);
    assert.equal(reply.job.state, 'CANCELLED');
    assert.equal(reply.job.workerId, null);
    assert.deepEqual(messagesOf(h.last, 'TASK_CANCEL', connId), [
      { type: 'TASK_CANCEL', jobId, attemptId },
    ]);
    assert.equal(messagesOf(h.last, 'TASK_ASSIGN', connId)[0]?.jobId, next, 'slot reused');
  });

  it('answers cancelled false with the real state when the job is terminal', () => {
    for (const state of ['COMPLETED', 'FAILED', 'CANCELLED'] as const) {
      const { h, jobId } = jobIn(state);
      const before = h.store.committedJob(jobId);
      assert.deepEqual(cancel(h, jobId), { cancelled: false, state });
      assert.deepEqual(h.store.committedJob(jobId), before);
      assert.equal(messagesOf(h.last, 'TASK_CANCEL').length, 0);
    }
  });

  it('answers ERROR Unknown job when the job does not exist', () => {
    const h = new CoreHarness();
    const reply = expectReply(h.request({ type: 'CANCEL_JOB', jobId: 'ghost' }), 'ERROR');
    assert.match(reply.message, /Unknown job/);
    const status = expectReply(h.request({ type: 'GET_JOB_STATUS', jobId: 'ghost' }), 'ERROR');
    assert.match(status.message, /Unknown job/);
  });

  it('keeps the job CANCELLED when a late result of its attempt arrives', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    cancel(h, jobId);
    const effects = h.result(jobId, { result: 'too late' });
    assert.equal(eventsOf(effects, 'result.stale').length, 1);
    const job = h.status(jobId);
    assert.equal(job.state, 'CANCELLED');
    assert.equal(job.result, null);
  });
});

describe('core: admission control', () => {
  const config = { maxActiveJobs: 2 };

  it('rejects with SUBMIT_REJECTED and creates nothing when the limit is reached', () => {
    const h = new CoreHarness({ config });
    h.submit();
    h.submit();
    const reply = expectReply(h.submitRequest({ idempotencyKey: 'k3' }), 'SUBMIT_REJECTED');
    assert.equal(reply.activeCount, 2);
    assert.equal(reply.limit, 2);
    assert.equal(reply.retryable, true);
    assert.ok(reply.reason.length > 0);
    assert.equal(eventsOf(h.last, 'job.submitted').length, 0);
    assert.equal(eventsOf(h.last, 'job.rejected').length, 1);
    assert.equal(h.store.maxSeq(), 2);
    assert.equal(h.store.committedJobByKey('k3'), undefined);
    assert.equal(h.core.activeJobs().length, 2);
    assert.equal(h.core.activeCount, 2);
  });

  const freers: [string, (h: CoreHarness, jobId: string) => void][] = [
    ['completion', (h, jobId) => h.result(jobId)],
    ['failure', (h, jobId) => h.result(jobId, { success: false })],
    ['cancel', (h, jobId) => cancel(h, jobId)],
  ];
  for (const [what, free] of freers) {
    it(`accepts again when a ${what} frees a slot`, () => {
      const h = new CoreHarness({ config });
      h.register('w1', 2);
      const a = h.submit({ maxAttempts: 1 });
      h.submit({ maxAttempts: 1 });
      expectReply(h.submitRequest(), 'SUBMIT_REJECTED');
      free(h, a);
      assert.equal(h.core.activeCount, 1);
      expectReply(h.submitRequest(), 'JOB_SUBMITTED');
      expectReply(h.submitRequest(), 'SUBMIT_REJECTED');
    });
  }

  it('counts a retrying job as exactly one active job through its attempts', () => {
    const h = new CoreHarness({ config: { maxActiveJobs: 1 } });
    h.register('w1', 1);
    const jobId = h.submit();
    h.result(jobId, { success: false });
    assert.equal(h.core.activeCount, 1);
    expectReply(h.submitRequest(), 'SUBMIT_REJECTED');
    h.tick(100);
    assert.equal(h.status(jobId).state, 'RUNNING');
    assert.equal(h.core.activeCount, 1);
    expectReply(h.submitRequest(), 'SUBMIT_REJECTED');
    h.result(jobId);
    assert.equal(h.core.activeCount, 0);
    expectReply(h.submitRequest(), 'JOB_SUBMITTED');
  });
});

describe('core: idempotency keys', () => {
  const states: JobState[] = [
    'QUEUED',
    'RUNNING',
    'RETRY_WAIT',
    'COMPLETED',
    'FAILED',
    'CANCELLED',
  ];
  for (const state of states) {
    it(`returns the original job when the same key is resubmitted in ${state}`, () => {
      const { h, jobId } = jobIn(state, { idempotencyKey: 'key-1' });
      const seq = h.store.maxSeq();
      const again = h.submit({ idempotencyKey: 'key-1', maxAttempts: 2 });
      assert.equal(again, jobId);
      assert.equal(eventsOf(h.last, 'job.deduplicated').length, 1);
      assert.equal(h.store.maxSeq(), seq, 'no new job');
      assert.equal(h.status(jobId).state, state);
      const inMemory = h.core.activeJobs().some((j) => j.jobId === jobId);
      assert.equal(inMemory, !['COMPLETED', 'FAILED', 'CANCELLED'].includes(state));
    });
  }

  const conflicts: [string, SubmitOptions][] = [
    ['payload', { payload: { durationMillis: 11 } }],
    ['task type', { taskType: 'WORD_COUNT', payload: { text: 'a b' } }],
    ['maxAttempts', { maxAttempts: 4 }],
    ['priority', { priority: 'HIGH' }],
  ];
  for (const [what, change] of conflicts) {
    for (const terminal of [false, true]) {
      it(`answers ERROR Idempotency key when the ${what} differs${terminal ? ' after the job finished' : ''}`, () => {
        const h = new CoreHarness();
        h.register('w1', 1);
        const jobId = h.submit({ idempotencyKey: 'k' });
        if (terminal) h.result(jobId);
        const before = h.store.committedJob(jobId);
        const reply = expectReply(h.submitRequest({ idempotencyKey: 'k', ...change }), 'ERROR');
        assert.match(reply.message, /Idempotency key/);
        assert.deepEqual(h.store.committedJob(jobId), before);
        assert.equal(h.store.maxSeq(), 1);
      });
    }
  }

  it('answers a known key when the active-job limit is reached', () => {
    const h = new CoreHarness({ config: { maxActiveJobs: 1 } });
    const jobId = h.submit({ idempotencyKey: 'k' });
    expectReply(h.submitRequest(), 'SUBMIT_REJECTED');
    assert.equal(h.submit({ idempotencyKey: 'k' }), jobId);
  });

  it('treats explicit defaults like absent ones when comparing submissions', () => {
    const h = new CoreHarness({ config: { defaultMaxAttempts: 3 } });
    const jobId = h.submit({ idempotencyKey: 'k', maxAttempts: null, priority: null });
    for (const maxAttempts of [0, -5, null, 3]) {
      for (const priority of [null, 'NORMAL'] as const) {
        assert.equal(h.submit({ idempotencyKey: 'k', maxAttempts, priority }), jobId);
      }
    }
    expectReply(h.submitRequest({ idempotencyKey: 'k', priority: 'LOW' }), 'ERROR');
  });

  it('matches payloads whatever their key order or number spelling', () => {
    const h = new CoreHarness();
    const payload = { text: 'a', extra: { b: 1, a: [1, 2] } };
    const jobId = h.submit({ taskType: 'SHA256', payload, idempotencyKey: 'k' });
    const reordered = { extra: { a: [1, 2], b: 1 }, text: 'a' };
    assert.equal(h.submit({ taskType: 'SHA256', payload: reordered, idempotencyKey: 'k' }), jobId);
    const sleep = h.submit({ payload: { durationMillis: 0 }, idempotencyKey: 'z' });
    // JSON has one zero; -0 from a decoder is the same submission.
    assert.equal(h.submit({ payload: { durationMillis: -0 }, idempotencyKey: 'z' }), sleep);
  });

  it('creates separate jobs when keys differ or are absent', () => {
    const h = new CoreHarness();
    const ids = new Set([
      h.submit({ idempotencyKey: 'a' }),
      h.submit({ idempotencyKey: 'b' }),
      h.submit(),
      h.submit(),
    ]);
    assert.equal(ids.size, 4);
  });
});

describe('core: payload validation', () => {
  it('answers ERROR Invalid payload and stores nothing when the payload is invalid', () => {
    const h = new CoreHarness();
    const reply = expectReply(
      h.submitRequest({ payload: { durationMillis: -1 }, idempotencyKey: 'k' }),
      'ERROR',
    );
    assert.match(reply.message, /^Invalid payload/);
    assert.match(reply.message, /durationMillis/);
    assert.equal(h.store.maxSeq(), 0);
    assert.equal(h.store.committedJobByKey('k'), undefined);
    assert.equal(h.core.activeCount, 0);
    assert.equal(h.submit(), 'id-1', 'no id was drawn for the invalid one');
  });

  it('answers ERROR Invalid task type and stores nothing when the name is not a task type', () => {
    const h = new CoreHarness();
    for (const taskType of [
      '',
      'bad type!',
      '9lives',
      'x'.repeat(65),
      'sha256',
      'Sleep',
      'PRIME-COUNT',
    ]) {
      const reply = expectReply(h.submitRequest({ taskType, payload: {} }), 'ERROR');
      assert.match(reply.message, /^Invalid task type/, taskType);
      assert.equal(reply.code, 'INVALID_TASK_TYPE');
    }
    assert.equal(h.store.maxSeq(), 0);
  });

  it('accepts a custom task type as given and leaves its payload to the worker', () => {
    const h = new CoreHarness();
    const jobId = h.submit({
      taskType: 'images.resize',
      payload: { anything: [1, { deep: true }] },
    });
    const job = h.status(jobId);
    assert.equal(job.taskType, 'images.resize');
    assert.equal(job.state, 'QUEUED');
  });

  it('answers ERROR Invalid request when timeoutMillis is outside 1..86400000', () => {
    const h = new CoreHarness();
    for (const timeoutMillis of [0, -5, 86_400_001]) {
      const reply = expectReply(h.submitRequest({ timeoutMillis }), 'ERROR');
      assert.equal(reply.code, 'INVALID_REQUEST');
      assert.match(reply.message, /timeoutMillis/);
    }
    assert.equal(h.store.maxSeq(), 0);
    const jobId = h.submit({ timeoutMillis: 86_400_000 });
    assert.equal(h.status(jobId).timeoutMillis, 86_400_000);
  });

  it('answers ERROR when maxAttempts is above the limit', () => {
    const h = new CoreHarness();
    expectReply(h.submitRequest({ maxAttempts: 1_001 }), 'ERROR');
    assert.equal(h.store.maxSeq(), 0);
  });
});

describe('core: WAIT_JOB', () => {
  it('answers at once when the job is already terminal', () => {
    const { h, jobId } = jobIn('COMPLETED');
    const reply = h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 5_000 });
    assert.equal(expectReply(reply, 'JOB_STATUS').job.state, 'COMPLETED');
    assert.equal(effectsOf(h.last, 'armWait').length, 0);
  });

  it('arms a timer and answers on completion when the job is active', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    const requestId = h.peekRequestId();
    assert.equal(h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 5_000 }), undefined);
    assert.deepEqual(effectsOf(h.last, 'armWait'), [
      { kind: 'armWait', connId: CLIENT_CONN, requestId, timeoutMs: 5_000 },
    ]);
    assert.equal(h.core.inspect().pendingWaits, 1);
    const other = h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: null }, CLIENT_CONN + 1);
    assert.equal(other, undefined);
    assert.equal(effectsOf(h.last, 'armWait')[0]?.timeoutMs, DEFAULT_WAIT_MS);

    const effects = h.result(jobId, { result: 'r' });
    const replies = effectsOf(effects, 'reply');
    assert.deepEqual(
      replies.map((r) => [r.connId, r.msg.type]),
      [
        [CLIENT_CONN, 'JOB_STATUS'],
        [CLIENT_CONN + 1, 'JOB_STATUS'],
      ],
    );
    assert.equal(replies[0]?.requestId, requestId);
    assert.equal(expectReply(replies[0]?.msg, 'JOB_STATUS').job.result, 'r');
    assert.equal(h.core.inspect().pendingWaits, 0);
    assert.deepEqual(h.handle({ kind: 'waitExpired', connId: CLIENT_CONN, requestId }), []);
  });

  it('answers with the current state when the wait expires', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    const requestId = h.peekRequestId();
    h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 100 });
    const effects = h.handle({ kind: 'waitExpired', connId: CLIENT_CONN, requestId });
    const reply = effectsOf(effects, 'reply');
    assert.equal(reply.length, 1);
    assert.equal(reply[0]?.requestId, requestId);
    assert.equal(expectReply(reply[0]?.msg, 'JOB_STATUS').job.state, 'RUNNING');
    assert.equal(h.core.inspect().pendingWaits, 0);
    assert.equal(effectsOf(h.result(jobId), 'reply').length, 0, 'answered only once');
  });

  it('drops the waits of a client when its connection closes', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    const requestId = h.peekRequestId();
    h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 1_000 });
    h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 1_000 });
    assert.equal(h.core.inspect().pendingWaits, 2);
    assert.deepEqual(h.handle({ kind: 'clientClosed', connId: CLIENT_CONN }), []);
    assert.equal(h.core.inspect().pendingWaits, 0);
    assert.equal(effectsOf(h.result(jobId), 'reply').length, 0);
    assert.deepEqual(h.handle({ kind: 'waitExpired', connId: CLIENT_CONN, requestId }), []);
  });

  it('answers at once with the current state when the timeout is 0', () => {
    const h = new CoreHarness();
    const jobId = h.submit();
    const reply = h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 0 });
    assert.equal(expectReply(reply, 'JOB_STATUS').job.state, 'QUEUED');
  });

  it('caps the timer when the timeout asked for is very long', () => {
    const h = new CoreHarness();
    const jobId = h.submit();
    h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: MAX_WAIT_MS * 10 });
    assert.equal(effectsOf(h.last, 'armWait')[0]?.timeoutMs, MAX_WAIT_MS);
  });

  it('answers ERROR Unknown job when the job does not exist', () => {
    const h = new CoreHarness();
    const reply = h.request({ type: 'WAIT_JOB', jobId: 'ghost', timeoutMillis: 10 });
    assert.match(expectReply(reply, 'ERROR').message, /Unknown job/);
    assert.equal(h.core.inspect().pendingWaits, 0);
  });
});
