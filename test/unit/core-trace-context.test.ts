/**
 * Trace context in the core: a submission's `traceparent`/`tracestate` is
 * checked, kept with the job (and in the store, so a restart keeps it), and
 * sent with each assignment to a worker that asked for it, to no other.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { SubmitJob } from '../../src/protocol/messages.js';
import { MAX_TRACESTATE_LENGTH } from '../../src/protocol/trace-context.js';
import { CoreHarness, expectReply } from '../helpers/core-harness.js';

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

function submitJob(fields: Partial<SubmitJob>): SubmitJob {
  return {
    type: 'SUBMIT_JOB',
    taskType: 'SLEEP',
    payload: { durationMillis: 10 },
    maxAttempts: null,
    idempotencyKey: null,
    priority: null,
    ...fields,
  };
}

function submitTraced(h: CoreHarness, fields: Partial<SubmitJob>): string {
  return expectReply(h.request(submitJob(fields)), 'JOB_SUBMITTED').jobId;
}

describe('core: trace context', () => {
  it('sends the recorded context with the assignment to a worker that asked for it', () => {
    const h = new CoreHarness();
    h.register('w1', 1, null, { traceContext: true });
    const jobId = submitTraced(h, { traceparent: TRACEPARENT, tracestate: 'vendor=1' });
    const assigned = h.assignmentOf(jobId);
    assert.equal(assigned.traceparent, TRACEPARENT);
    assert.equal(assigned.tracestate, 'vendor=1');
    assert.deepEqual(h.record(jobId).traceContext, {
      traceparent: TRACEPARENT,
      tracestate: 'vendor=1',
    });
  });

  it('sends no context to a worker that did not ask, and none for a job without one', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const traced = submitTraced(h, { traceparent: TRACEPARENT });
    assert.equal(h.assignmentOf(traced).traceparent, undefined);
    h.result(traced);
    h.register('w2', 1, null, { traceContext: true });
    h.closeWorker('w1');
    const plain = h.submit();
    const assigned = h.assignmentOf(plain);
    assert.equal(assigned.workerId, 'w2');
    assert.equal(assigned.traceparent, undefined);
    assert.equal(assigned.tracestate, undefined);
    assert.equal(h.record(plain).traceContext, null);
  });

  it('names a named queue beside the context, to a worker that asked only', () => {
    const h = new CoreHarness();
    h.register('w1', 1, null, { traceContext: true });
    const named = submitTraced(h, { traceparent: TRACEPARENT, queue: 'mail' });
    assert.equal(h.assignmentOf(named).queue, 'mail');
    h.result(named);
    // The default queue goes unnamed: absent means `default`.
    const plain = submitTraced(h, {});
    assert.equal(h.assignmentOf(plain).queue, undefined);
    h.result(plain);
    h.register('w2', 1);
    h.closeWorker('w1');
    const untold = submitTraced(h, { queue: 'mail' });
    assert.equal(h.assignmentOf(untold).workerId, 'w2');
    assert.equal(h.assignmentOf(untold).queue, undefined);
  });

  it('keeps the context of a waiting job across a restart', () => {
    const h = new CoreHarness();
    const jobId = submitTraced(h, { traceparent: TRACEPARENT });
    h.restart();
    h.register('w1', 1, null, { traceContext: true });
    assert.equal(h.assignmentOf(jobId).traceparent, TRACEPARENT);
  });

  it('refuses a malformed traceparent or an oversized tracestate, naming the field', () => {
    const h = new CoreHarness();
    const bad: Partial<SubmitJob>[] = [
      { traceparent: 'not-a-trace' },
      { traceparent: TRACEPARENT.toUpperCase() },
      { traceparent: `00-${'0'.repeat(32)}-b7ad6b7169203331-01` },
      { traceparent: `00-0af7651916cd43dd8448eb211c80319c-${'0'.repeat(16)}-01` },
      { traceparent: `01${TRACEPARENT.slice(2)}` },
      { traceparent: TRACEPARENT, tracestate: 'x'.repeat(MAX_TRACESTATE_LENGTH + 1) },
      { tracestate: 'vendor=1' },
    ];
    for (const fields of bad) {
      const reply = expectReply(h.request(submitJob(fields)), 'ERROR');
      assert.equal(reply.code, ErrorCode.InvalidRequest, JSON.stringify(fields));
      assert.match(reply.message, /trace(parent|state)/);
    }
    assert.equal(h.core.inspect().activeCount, 0, 'nothing was created');
  });
});
