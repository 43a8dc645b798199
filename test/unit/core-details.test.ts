/**
 * What the dashboard needs from the core, through client requests: a job's
 * payload (`GET_JOB_STATUS.payload`), lookup by idempotency key
 * (`LIST_JOBS.idempotencyKey`), and queue depth by priority in `inspect()`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { messageToJson } from '../../src/protocol/codec.js';
import { MAX_FRAME_BYTES } from '../../src/protocol/framing.js';
import type { JobState, JsonObject } from '../../src/protocol/messages.js';
import { CoreHarness, expectReply } from '../helpers/core-harness.js';

function statusWithPayload(h: CoreHarness, jobId: string, attempts = false) {
  return expectReply(
    h.request({ type: 'GET_JOB_STATUS', jobId, payload: true, attempts }),
    'JOB_STATUS',
  );
}

function byKey(
  h: CoreHarness,
  key: string,
  filters: { state?: JobState; taskType?: string } = {},
): string[] {
  const reply = expectReply(
    h.request({
      type: 'LIST_JOBS',
      limit: null,
      state: filters.state ?? null,
      cursor: null,
      taskType: filters.taskType ?? null,
      idempotencyKey: key,
    }),
    'JOB_LIST',
  );
  assert.equal(reply.nextCursor, null);
  return reply.jobs.map((job) => job.jobId);
}

describe('core: GET_JOB_STATUS with payload', () => {
  const payload: JsonObject = { text: 'hello', nested: { n: [1, 2, 3] } };

  it('returns the payload as submitted while the job is active', () => {
    const h = new CoreHarness();
    const jobId = h.submit({ taskType: 'CUSTOM_X', payload });
    const reply = statusWithPayload(h, jobId);
    assert.deepEqual(reply.payload, payload);
    assert.equal(reply.payloadOmitted, undefined);
    assert.equal(reply.attempts, undefined);
  });

  it('returns the payload and attempts of a finished job read from the store', () => {
    const h = new CoreHarness();
    h.register('w1');
    const jobId = h.submit({ taskType: 'SHA256', payload: { text: 'abc' } });
    h.result(jobId);
    assert.equal(
      h.core.activeJobs().some((job) => job.jobId === jobId),
      false,
    );
    const reply = statusWithPayload(h, jobId, true);
    assert.equal(reply.job.state, 'COMPLETED');
    assert.deepEqual(reply.payload, { text: 'abc' });
    assert.equal(reply.attempts?.length, 1);
  });

  it('leaves the payload out when the reply would not fit in a frame', () => {
    const h = new CoreHarness();
    const big = { blob: 'x'.repeat(MAX_FRAME_BYTES - 900) };
    const jobId = h.submit({ taskType: 'CUSTOM_X', payload: big });
    const reply = statusWithPayload(h, jobId);
    assert.ok(reply.payload === undefined, 'payload left out');
    assert.equal(reply.payloadOmitted, true);
    assert.ok(Buffer.byteLength(messageToJson(reply)) < MAX_FRAME_BYTES);
  });

  it('sends no payload unless asked', () => {
    const h = new CoreHarness();
    const jobId = h.submit({ taskType: 'CUSTOM_X', payload });
    const reply = expectReply(h.request({ type: 'GET_JOB_STATUS', jobId }), 'JOB_STATUS');
    assert.equal(reply.payload, undefined);
  });
});

describe('core: LIST_JOBS by idempotency key', () => {
  it('finds an active job by its key', () => {
    const h = new CoreHarness();
    h.submit({ idempotencyKey: 'other' });
    const jobId = h.submit({ idempotencyKey: 'order-7' });
    assert.deepEqual(byKey(h, 'order-7'), [jobId]);
  });

  it('finds a finished job whose key only the store remembers', () => {
    const h = new CoreHarness();
    h.register('w1');
    const jobId = h.submit({ idempotencyKey: 'order-7' });
    h.result(jobId);
    assert.deepEqual(byKey(h, 'order-7'), [jobId]);
  });

  it('answers an empty page for an unknown key', () => {
    const h = new CoreHarness();
    h.submit({ idempotencyKey: 'a' });
    assert.deepEqual(byKey(h, 'nope'), []);
  });

  it('applies the state and task type filters to the job found', () => {
    const h = new CoreHarness();
    const jobId = h.submit({ idempotencyKey: 'k', taskType: 'SLEEP' });
    assert.deepEqual(byKey(h, 'k', { state: 'QUEUED' }), [jobId]);
    assert.deepEqual(byKey(h, 'k', { state: 'RUNNING' }), []);
    assert.deepEqual(byKey(h, 'k', { taskType: 'SHA256' }), []);
    assert.deepEqual(byKey(h, 'k', { taskType: 'SLEEP' }), [jobId]);
  });
});

describe('core: inspect() queue depth by priority', () => {
  it('counts QUEUED jobs per base priority, not running ones', () => {
    const h = new CoreHarness();
    h.submit({ priority: 'HIGH' });
    h.submit({ priority: 'LOW' });
    h.submit({ priority: 'LOW' });
    h.submit();
    assert.deepEqual(h.core.inspect().queuedByPriority, { HIGH: 1, NORMAL: 1, LOW: 2 });
    h.register('w1');
    assert.deepEqual(h.core.inspect().queuedByPriority, { HIGH: 0, NORMAL: 1, LOW: 2 });
  });
});
