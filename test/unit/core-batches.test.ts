/**
 * SUBMIT_JOBS in the core: validation by index, keys (in memory, in the
 * store, while other lookups are out), admission as a whole, one write batch.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JsonObject } from '../../src/protocol/messages.js';
import { CoreHarness, eventsOf, expectReply } from '../helpers/core-harness.js';

const sleep = (ms: number, key?: string): JsonObject => ({
  taskType: 'SLEEP',
  payload: { durationMillis: ms },
  ...(key !== undefined && { idempotencyKey: key }),
});

describe('core: SUBMIT_JOBS', () => {
  it('creates the jobs in order in one write batch', () => {
    const h = new CoreHarness();
    const reply = expectReply(
      h.request({ type: 'SUBMIT_JOBS', jobs: [sleep(1), sleep(2), sleep(3)] }),
      'JOBS_SUBMITTED',
    );
    assert.equal(reply.jobIds.length, 3);
    assert.deepEqual(
      reply.jobIds.map((id) => h.record(id).payloadJson),
      ['{"durationMillis":1}', '{"durationMillis":2}', '{"durationMillis":3}'],
    );
    assert.equal(eventsOf(h.last, 'job.submitted').length, 3);
  });

  it('names the first invalid job by index and creates nothing', () => {
    const h = new CoreHarness();
    const bad = { taskType: 'SLEEP', payload: { durationMillis: -1 } };
    const reply = expectReply(
      h.request({ type: 'SUBMIT_JOBS', jobs: [sleep(1), bad, { taskType: 7 }] }),
      'ERROR',
    );
    assert.equal(reply.index, 1);
    assert.match(reply.message, /index 1/);
    const shape = expectReply(h.request({ type: 'SUBMIT_JOBS', jobs: [{ taskType: 7 }] }), 'ERROR');
    assert.equal(shape.code, 'INVALID_REQUEST');
    assert.equal(shape.index, 0);
    assert.equal(h.core.activeCount, 0);
  });

  it('admits the new jobs as a whole', () => {
    const h = new CoreHarness({ config: { maxActiveJobs: 3 } });
    h.submit();
    const rejected = h.request({ type: 'SUBMIT_JOBS', jobs: [sleep(1), sleep(2), sleep(3)] });
    assert.equal(rejected?.type, 'SUBMIT_REJECTED');
    assert.equal(h.core.activeCount, 1);
    expectReply(h.request({ type: 'SUBMIT_JOBS', jobs: [sleep(1), sleep(2)] }), 'JOBS_SUBMITTED');
  });

  it('answers a key whose job ended and left memory while another key was looked up', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const original = h.submit({ idempotencyKey: 'k', payload: { durationMillis: 5 } });
    h.holdReads = true;
    const requestId = h.peekRequestId();
    const held = h.request({ type: 'SUBMIT_JOBS', jobs: [sleep(5, 'k'), sleep(6, 'new')] });
    assert.equal(held, undefined, 'held while the store is asked about "new"');
    h.holdReads = false;
    h.result(original, { result: 'done' }); // ends, commits, leaves memory
    const effects = h.answerHeldReads();
    const reply = effects.find(
      (e) => e.kind === 'reply' && e.requestId === requestId && e.msg.type === 'JOBS_SUBMITTED',
    );
    assert.ok(reply?.kind === 'reply' && reply.msg.type === 'JOBS_SUBMITTED');
    assert.equal(reply.msg.jobIds[0], original, 'the key still names its job');
    assert.equal(eventsOf(effects, 'job.submitted').length, 1, 'only the new key made a job');
  });

  it('answers a key another submission took (and whose job ended) after the store said it was free', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const { made, requestId, effects } = h.loseKeyToExpiringJob((spec) =>
      h.request({ type: 'SUBMIT_JOBS', jobs: [{ taskType: 'SLEEP', ...spec }, sleep(6, 'new')] }),
    );
    const reply = effects.find(
      (e) => e.kind === 'reply' && e.requestId === requestId && e.msg.type === 'JOBS_SUBMITTED',
    );
    assert.ok(reply?.kind === 'reply' && reply.msg.type === 'JOBS_SUBMITTED');
    assert.equal(reply.msg.jobIds[0], made, 'the key names the job made meanwhile');
    assert.equal(eventsOf(effects, 'job.submitted').length, 1, 'only the new key made a job');
  });
});
