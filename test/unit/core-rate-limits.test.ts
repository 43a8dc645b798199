/**
 * Rate limits a handler sets (`TASK_RESULT.rateLimited`): the attempt ends
 * RATE_LIMITED without counting, the job is SCHEDULED after `retryAfter`;
 * scope `group` / `queue` holds back every start of that group / queue until
 * then (running attempts go on), durably across a restart; the queue list
 * shows it; 1,000 in a row fail the job. A re-run's budget comes on top of
 * the attempts that counted (rate-limited ones left out, suspensions too).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_RATE_LIMITED_IN_A_ROW } from '../../src/protocol/limits.js';
import type { RateLimitScope } from '../../src/protocol/messages.js';
import { CoreHarness, START_MS, expectReply, rerunWithOneMore } from '../helpers/core-harness.js';

function limit(h: CoreHarness, jobId: string, retryAfterMillis: number, scope: RateLimitScope) {
  return h.result(jobId, {
    success: false,
    error: 'RATE_LIMITED: 429 from the API',
    rateLimited: { retryAfterMillis, scope },
  });
}

function outcomes(h: CoreHarness, jobId: string): string[] {
  const reply = h.request({ type: 'GET_JOB_STATUS', jobId, attempts: true });
  return (expectReply(reply, 'JOB_STATUS').attempts ?? []).map((a) => a.outcome);
}

function queueInfo(h: CoreHarness, name: string) {
  const list = expectReply(h.request({ type: 'LIST_QUEUES' }), 'QUEUE_LIST');
  const info = list.queues.find((q) => q.name === name);
  assert.ok(info !== undefined, `queue ${name} listed`);
  return info;
}

describe('core: rate limits set by a handler', () => {
  it('job scope: SCHEDULED after retryAfter, the attempt not counted; others run meanwhile', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    const other = h.submit({});
    limit(h, jobId, 1_000, 'job');
    const job = h.status(jobId);
    assert.deepEqual([job.state, job.runAtMillis], ['SCHEDULED', START_MS + 1_000]);
    assert.deepEqual([job.attempts, job.rateLimited], [1, 1], 'the snapshot says it did not count');
    assert.equal(h.status(other).state, 'RUNNING', 'the queue is not held');
    assert.deepEqual(
      h.events('job.rateLimited').map((e) => [e.scope, e.untilMs, e.inARow]),
      [['job', START_MS + 1_000, 1]],
    );
    h.result(other);
    h.tick(1_000);
    assert.equal(h.status(jobId).state, 'RUNNING');
    h.result(jobId);
    assert.equal(h.status(jobId).state, 'COMPLETED', 'its one counted attempt was still there');
    assert.deepEqual(outcomes(h, jobId), ['RATE_LIMITED', 'SUCCEEDED']);
    h.restart(); // the ended job is the store's now: its read counts the attempts
    assert.deepEqual([h.status(jobId).attempts, h.status(jobId).rateLimited], [2, 1]);
  });

  it('gives a re-run its budget on top of the attempts that counted', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    limit(h, jobId, 1_000, 'job');
    h.tick(1_000);
    h.result(jobId, { success: false, error: 'boom' });
    assert.equal(h.status(jobId).state, 'FAILED');
    rerunWithOneMore(h, jobId);
  });

  it('gives a re-run its budget on top of the attempts that counted, leaving out suspensions', () => {
    const h = new CoreHarness();
    h.register('w1', 1, null, { steps: true });
    const jobId = h.submit({ maxAttempts: 1 });
    h.suspend(jobId, { sleepMillis: 10 });
    h.tick(10);
    h.result(jobId, { success: false, error: 'boom' });
    assert.deepEqual([h.status(jobId).state, h.status(jobId).suspensions], ['FAILED', 1]);
    h.request({ type: 'RERUN_JOBS', queue: 'default', state: 'FAILED', maxAttempts: 1 });
    assert.equal(h.record(jobId).maxAttempts, 2, '1 counted + a budget of 1');
  });

  it('group scope: nothing of that group starts until then, other groups do', () => {
    const h = new CoreHarness();
    h.register('w1', 2);
    const a1 = h.submit({ queue: 'api', groupKey: 'tenant-a' });
    const a2 = h.submit({ queue: 'api', groupKey: 'tenant-a' });
    limit(h, a1, 5_000, 'group');
    assert.equal(h.status(a2).state, 'RUNNING', 'a running attempt of the group goes on');
    h.result(a2);
    const a3 = h.submit({ queue: 'api', groupKey: 'tenant-a' });
    const b1 = h.submit({ queue: 'api', groupKey: 'tenant-b' });
    assert.equal(h.status(a3).state, 'QUEUED');
    assert.equal(h.status(b1).state, 'RUNNING');
    const info = queueInfo(h, 'api');
    assert.equal(info.rateLimitedUntilMillis, null);
    assert.deepEqual(info.heldGroups, [{ groupKey: 'tenant-a', untilMillis: START_MS + 5_000 }]);
    h.tick(4_999);
    assert.equal(h.status(a3).state, 'QUEUED');
    h.tick(1);
    assert.ok(
      [a1, a3].some((id) => h.status(id).state === 'RUNNING'),
      'the group starts again',
    );
  });

  it('queue scope: nothing of the queue starts until then, across a restart; queue list shows it', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const first = h.submit({ queue: 'api' });
    limit(h, first, 10_000, 'queue');
    const waiting = h.submit({ queue: 'api' });
    const elsewhere = h.submit({ queue: 'other' });
    assert.equal(h.status(waiting).state, 'QUEUED');
    assert.equal(h.status(elsewhere).state, 'RUNNING');
    assert.equal(queueInfo(h, 'api').rateLimitedUntilMillis, START_MS + 10_000);
    h.result(elsewhere);
    h.restart();
    h.register('w1', 1);
    h.tick(5_000);
    assert.equal(h.status(waiting).state, 'QUEUED', 'still held after the restart');
    assert.equal(queueInfo(h, 'api').rateLimitedUntilMillis, START_MS + 10_000);
    h.tick(5_000);
    assert.equal([first, waiting].filter((id) => h.status(id).state === 'RUNNING').length, 1);
    assert.equal(queueInfo(h, 'api').rateLimitedUntilMillis, null);
  });

  it('group holds survive a restart', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const a1 = h.submit({ groupKey: 'a' });
    limit(h, a1, 10_000, 'group');
    h.restart();
    h.register('w1', 1);
    const a2 = h.submit({ groupKey: 'a' });
    assert.equal(h.status(a2).state, 'QUEUED');
    h.tick(10_000);
    assert.ok([a1, a2].some((id) => h.status(id).state === 'RUNNING'));
  });

  it(`fails a job rate limited ${MAX_RATE_LIMITED_IN_A_ROW} times in a row`, () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    for (let n = 1; n < MAX_RATE_LIMITED_IN_A_ROW; n++) {
      limit(h, jobId, 1, 'job');
      h.tick(1);
    }
    assert.equal(h.status(jobId).state, 'RUNNING');
    limit(h, jobId, 1, 'job');
    const job = h.status(jobId);
    assert.equal(job.state, 'FAILED');
    assert.match(job.error ?? '', /rate limited 1000 times in a row/);
  });

  it('a retryAfter out of bounds is a protocol violation', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({});
    limit(h, jobId, 0, 'job');
    assert.deepEqual(
      h.events('worker.lost').map((e) => e.cause),
      ['protocol_violation'],
    );
  });
});
