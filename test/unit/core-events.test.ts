/**
 * Progress and job events in the core: TASK_PROGRESS counts only under the
 * current lease and within its bounds, is kept on the job (and written with
 * the job's next write, not on its own), and every subscriber whose filter
 * matches is pushed each change once per input.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Effect } from '../../src/coordinator/core/types.js';
import { MAX_SUBSCRIPTIONS_PER_CONNECTION } from '../../src/protocol/limits.js';
import type { JobEventFilter } from '../../src/protocol/messages.js';
import {
  CLIENT_CONN,
  CoreHarness,
  effectsOf,
  eventsOf,
  expectReply,
} from '../helpers/core-harness.js';

function progress(
  h: CoreHarness,
  jobId: string,
  fraction: number,
  options: { attemptId?: string; message?: string | null } = {},
): Effect[] {
  const assigned = h.assignmentOf(jobId);
  return h.handle({
    kind: 'workerMessage',
    connId: h.connOf(assigned.workerId),
    msg: {
      type: 'TASK_PROGRESS',
      workerId: assigned.workerId,
      jobId,
      attemptId: options.attemptId ?? assigned.attemptId,
      fraction,
      message: options.message ?? null,
    },
  });
}

function subscribe(h: CoreHarness, filter: JobEventFilter, connId = CLIENT_CONN): void {
  const reply = h.request({ type: 'SUBSCRIBE_JOBS', filter }, connId);
  expectReply(reply, 'SUBSCRIBED');
}

const pushes = (effects: readonly Effect[], connId = CLIENT_CONN) =>
  effectsOf(effects, 'push').flatMap((e) =>
    e.connIds.filter((id) => id === connId).map(() => e.msg),
  );

describe('core: progress', () => {
  it("keeps the current lease's progress on the job and shows it in status", () => {
    const h = new CoreHarness();
    h.register('w1');
    const jobId = h.submit();
    h.clock += 10;
    const effects = progress(h, jobId, 0.5, { message: 'half' });
    assert.deepEqual(h.status(jobId).progress, {
      fraction: 0.5,
      message: 'half',
      atMillis: h.clock,
    });
    assert.equal(h.core.takeBatch(), null, 'progress alone writes nothing');
    assert.deepEqual(
      eventsOf(effects, 'job.progress').map((e) => e.accepted),
      [true],
    );
  });

  it('writes the last progress with the end of the attempt', () => {
    const h = new CoreHarness();
    h.register('w1');
    const jobId = h.submit();
    progress(h, jobId, 0.9, { message: 'nearly' });
    h.result(jobId);
    assert.equal(h.record(jobId).state, 'COMPLETED');
    assert.equal(h.record(jobId).progress?.fraction, 0.9);
    assert.equal(h.status(jobId).progress?.message, 'nearly');
  });

  it('ignores progress of a stale attempt, out of range, or with a message over 1 KiB', () => {
    const h = new CoreHarness();
    h.register('w1');
    const jobId = h.submit();
    const stale = progress(h, jobId, 0.5, { attemptId: 'not-the-lease' });
    assert.equal(eventsOf(stale, 'job.progress')[0]?.reason, 'not the current lease');
    for (const fraction of [-0.1, 1.5, Number.NaN]) progress(h, jobId, fraction);
    progress(h, jobId, 0.5, { message: 'x'.repeat(1025) });
    assert.equal(h.status(jobId).progress, undefined);
    progress(h, jobId, 1, { message: 'x'.repeat(1024) });
    assert.equal(h.status(jobId).progress?.fraction, 1);
  });

  it('starts each attempt without progress', () => {
    const h = new CoreHarness();
    h.register('w1');
    const jobId = h.submit({ maxAttempts: 2 });
    progress(h, jobId, 0.3);
    h.result(jobId, { success: false });
    h.tick(60_000);
    assert.equal(h.status(jobId).state, 'RUNNING');
    assert.equal(h.status(jobId).attempts, 2);
    assert.equal(h.status(jobId).progress, undefined);
  });
});

describe('core: job events', () => {
  it('pushes a new job, its assignment, its progress and its end to a subscriber of all jobs', () => {
    const h = new CoreHarness();
    subscribe(h, {});
    const jobId = h.submit();
    assert.deepEqual(
      pushes(h.last).map((m) => [m.event, m.job.state]),
      [['state', 'QUEUED']],
    );
    const register = h.register('w1');
    assert.ok(register > 0);
    assert.deepEqual(
      pushes(h.last).map((m) => [m.event, m.job.state, m.job.attempts]),
      [['state', 'RUNNING', 1]],
    );
    assert.deepEqual(
      pushes(progress(h, jobId, 0.25)).map((m) => [m.event, m.job.progress?.fraction]),
      [['progress', 0.25]],
    );
    assert.deepEqual(
      pushes(h.result(jobId)).map((m) => [m.event, m.job.state]),
      [['state', 'COMPLETED']],
    );
  });

  it('filters by job id, task type and queue', () => {
    const h = new CoreHarness();
    h.register('w1', 4, ['SHA256', 'resize']);
    const first = h.submit({ taskType: 'SHA256', payload: { text: 'x' } });
    subscribe(h, { jobId: first }, 1);
    subscribe(h, { taskType: 'resize' }, 2);
    subscribe(h, { queue: 'default' }, 3);
    subscribe(h, { queue: 'other' }, 4);
    h.submit({ taskType: 'resize', payload: { text: 'x' } });
    assert.deepEqual(pushes(h.last, 1), []);
    // Created and assigned in the same input: one event, with the job as it is after both.
    assert.deepEqual(
      pushes(h.last, 2).map((m) => m.job.state),
      ['RUNNING'],
    );
    assert.equal(pushes(h.last, 3).length, 1);
    assert.deepEqual(pushes(h.last, 4), []);
    h.result(first);
    assert.deepEqual(
      pushes(h.last, 1).map((m) => m.job.state),
      ['COMPLETED'],
    );
    assert.deepEqual(pushes(h.last, 2), []);
  });

  it("pushes each change once, naming every matching subscription's connection", () => {
    const h = new CoreHarness();
    subscribe(h, {}, 1);
    subscribe(h, {}, 2);
    subscribe(h, { taskType: 'SLEEP' }, 2);
    subscribe(h, { taskType: 'OTHER' }, 3);
    assert.equal(h.core.inspect().subscribers, 3);
    const jobId = h.submit();
    const [push, ...more] = effectsOf(h.last, 'push');
    assert.ok(push !== undefined);
    assert.deepEqual(more, [], 'one effect for all subscribers');
    // Connection 2 twice: two of its subscriptions match; connection 3 none.
    assert.deepEqual(push.connIds, [1, 2, 2]);
    assert.equal(push.msg.job.jobId, jobId);
    h.handle({ kind: 'clientClosed', connId: 2 });
    assert.equal(h.core.inspect().subscribers, 2);
  });

  it('refuses subscriptions beyond the bound per connection, and a filter value out of bounds', () => {
    const h = new CoreHarness();
    for (let i = 0; i < MAX_SUBSCRIPTIONS_PER_CONNECTION; i++) subscribe(h, {});
    const refused = expectReply(h.request({ type: 'SUBSCRIBE_JOBS', filter: {} }), 'ERROR');
    assert.equal(refused.code, 'TOO_MANY_SUBSCRIPTIONS');
    assert.match(refused.message, /on this connection \(limit 16\)/);
    const empty = expectReply(
      h.request({ type: 'SUBSCRIBE_JOBS', filter: { taskType: '' } }, 7),
      'ERROR',
    );
    assert.equal(empty.code, 'INVALID_REQUEST');
    assert.equal(h.core.inspect().subscriptions, MAX_SUBSCRIPTIONS_PER_CONNECTION);
    h.handle({ kind: 'clientClosed', connId: CLIENT_CONN });
    assert.equal(h.core.inspect().subscriptions, 0);
    h.submit();
    assert.deepEqual(effectsOf(h.last, 'push'), [], 'nothing for a closed connection');
  });
});
