/**
 * The worker-port call mechanism, piece by piece: the task thread's open
 * calls (thread-calls.ts), the worker's calls in flight by requestId
 * (worker-calls.ts), and the core's lease fence (worker-calls.ts of the core).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode, LocalErrorCode } from '../../src/protocol/error-codes.js';
import { DtpError } from '../../src/protocol/errors.js';
import { MAX_CALLS_PER_ATTEMPT } from '../../src/protocol/limits.js';
import type { EnqueueChild, JsonObject } from '../../src/protocol/messages.js';
import { AttemptCalls } from '../../src/worker/thread-calls.js';
import type { CallOutcome } from '../../src/worker/thread-messages.js';
import { WorkerCalls } from '../../src/worker/worker-calls.js';
import { CoreHarness, eventsOf, sentTo } from '../helpers/core-harness.js';

const CALL: JsonObject = { type: 'ENQUEUE_CHILD', key: 'o:0', taskType: 'SLEEP', payload: {} };

async function rejection(promise: Promise<unknown>): Promise<DtpError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof DtpError, `expected a DtpError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected a rejection');
}

describe('task thread: open calls of one attempt', () => {
  it('posts each call with a fresh id and resolves it with its reply', async () => {
    const posted: [number, JsonObject][] = [];
    const calls = new AttemptCalls((callId, call) => posted.push([callId, call]));
    const first = calls.call(CALL);
    const second = calls.call(CALL);
    assert.deepEqual(
      posted.map(([id]) => id),
      [1, 2],
    );
    calls.settle(2, { ok: true, reply: { type: 'CHILD_ENQUEUED', jobId: 'b' } });
    calls.settle(1, { ok: true, reply: { type: 'CHILD_ENQUEUED', jobId: 'a' } });
    assert.equal((await first).jobId, 'a');
    assert.equal((await second).jobId, 'b');
    assert.equal(calls.openCount, 0);
  });

  it('rejects a refused call with the code it was refused with', async () => {
    const calls = new AttemptCalls(() => undefined);
    const refused = calls.call(CALL);
    calls.settle(1, { ok: false, code: ErrorCode.StaleAttempt, message: 'not current' });
    const err = await rejection(refused);
    assert.equal(err.code, 'STALE_ATTEMPT');
    assert.equal(err.message, 'not current');
  });

  it(`refuses the call beyond ${MAX_CALLS_PER_ATTEMPT} open ones without sending it`, async () => {
    let posted = 0;
    const calls = new AttemptCalls(() => posted++);
    const open = Array.from({ length: MAX_CALLS_PER_ATTEMPT }, () => calls.call(CALL));
    const err = await rejection(calls.call(CALL));
    assert.equal(err.code, LocalErrorCode.TooManyCalls);
    assert.equal(posted, MAX_CALLS_PER_ATTEMPT);
    calls.close('done');
    await Promise.allSettled(open);
  });

  it('fails every open call, and every later one, once the attempt is stopped', async () => {
    const calls = new AttemptCalls(() => undefined);
    const open = calls.call(CALL);
    calls.close('the attempt was stopped');
    assert.equal((await rejection(open)).code, LocalErrorCode.CallAborted);
    assert.equal((await rejection(calls.call(CALL))).code, LocalErrorCode.CallAborted);
    // A late answer changes nothing.
    calls.settle(1, { ok: true, reply: {} });
  });
});

describe('worker: calls in flight by requestId', () => {
  const record = (): { outcomes: CallOutcome[]; answer: (o: CallOutcome) => void } => {
    const outcomes: CallOutcome[] = [];
    return { outcomes, answer: (o) => outcomes.push(o) };
  };

  it('hands out requestIds unique across connections and routes each answer home', () => {
    const calls = new WorkerCalls();
    const [one, two] = [{}, {}];
    const a = record();
    const b = record();
    const idA = calls.open(one, 'att-1', a.answer);
    const idB = calls.open(two, 'att-2', b.answer);
    assert.ok(idA !== null && idB !== null && idA !== idB);
    assert.equal(calls.settle(one, idB, { ok: true, reply: {} }), false, 'other connection');
    assert.equal(calls.settle(two, idB, { ok: true, reply: { n: 2 } }), true);
    assert.deepEqual(b.outcomes, [{ ok: true, reply: { n: 2 } }]);
    assert.equal(calls.settle(two, idB, { ok: true, reply: {} }), false, 'answered once');
    assert.equal(a.outcomes.length, 0);
  });

  it('fails the calls of a connection that ended with CONNECTION_LOST', () => {
    const calls = new WorkerCalls();
    const [one, two] = [{}, {}];
    const a = record();
    const b = record();
    calls.open(one, 'att-1', a.answer);
    calls.open(two, 'att-2', b.answer);
    calls.connectionLost(one, 'reset');
    assert.equal(a.outcomes.length, 1);
    const [lost] = a.outcomes;
    assert.ok(lost !== undefined && !lost.ok && lost.code === LocalErrorCode.ConnectionLost);
    assert.equal(b.outcomes.length, 0);
    assert.equal(calls.openCount, 1);
  });

  it('forgets the calls of an attempt that ended, and bounds calls per attempt', () => {
    const calls = new WorkerCalls();
    const conn = {};
    const a = record();
    for (let i = 0; i < MAX_CALLS_PER_ATTEMPT; i++) calls.open(conn, 'att-1', a.answer);
    assert.equal(calls.open(conn, 'att-1', a.answer), null);
    const [refused] = a.outcomes;
    assert.ok(refused !== undefined && !refused.ok && refused.code === LocalErrorCode.TooManyCalls);
    assert.notEqual(calls.open(conn, 'att-2', a.answer), null, 'another attempt has its own bound');
    calls.forgetAttempt('att-1');
    assert.equal(calls.openFor('att-1'), 0);
    assert.equal(calls.openCount, 1);
  });
});

describe('core: the lease fence of calls', () => {
  function enqueue(h: CoreHarness, jobId: string, fields: Partial<EnqueueChild> = {}) {
    const assigned = h.assignmentOf(jobId);
    const msg: EnqueueChild = {
      type: 'ENQUEUE_CHILD',
      workerId: assigned.workerId,
      jobId,
      attemptId: assigned.attemptId,
      requestId: 1,
      key: 'o:0',
      taskType: 'SLEEP',
      payload: { durationMillis: 1 },
      ...fields,
    };
    return h.handle({ kind: 'workerMessage', connId: h.connOf(assigned.workerId), msg });
  }

  it('answers a call of a lease that is not current STALE_ATTEMPT, and the session goes on', () => {
    const h = new CoreHarness();
    h.register('w1');
    const jobId = h.submit();
    const effects = enqueue(h, jobId, { attemptId: 'not-the-lease', requestId: 5 });
    const [error] = sentTo(effects, h.connOf('w1'));
    assert.deepEqual(error, {
      type: 'ERROR',
      code: 'STALE_ATTEMPT',
      message: error?.type === 'ERROR' ? error.message : '',
      requestId: 5,
    });
    assert.equal(eventsOf(effects, 'call.stale').length, 1);
    assert.equal(eventsOf(effects, 'worker.lost').length, 0);
    assert.equal(h.status(jobId).state, 'RUNNING');
  });

  it('loses a worker whose call has a requestId that cannot be answered', () => {
    const h = new CoreHarness();
    h.register('w1');
    const jobId = h.submit();
    const effects = enqueue(h, jobId, { requestId: 0 });
    assert.equal(eventsOf(effects, 'worker.lost')[0]?.cause, 'protocol_violation');
  });
});
