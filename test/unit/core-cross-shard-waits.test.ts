/**
 * `ctx.waitFor` on a job of another shard, in the core: the waiting job
 * suspends WAITING and, in the same commit, its shard sends a `watch` of the
 * job to that job's shard, which answers with a `parentEnded` naming the
 * waiter once the job has ended (at once if it had). The wait then ends
 * with the outcome it carries, as a wait for a job of its own shard does.
 * Two cores of a two-shard database share one outbox (core-shards.ts); the
 * tests restart either side between a commit and an apply, and deliver a
 * message twice.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { OutboxMessage } from '../../src/store/store.js';
import type { CoreHarness } from '../helpers/core-harness.js';
import { QUEUE, cluster, outboxKinds, pump } from '../helpers/core-shards.js';

/** Registers a worker that records steps (so its assignments carry them). */
function stepWorker(h: CoreHarness, workerId: string): void {
  h.register(workerId, 1, null, { steps: true });
}

/** The outcome the latest assignment of a job carries in its last step, a wait. */
function waitOutcome(h: CoreHarness, jobId: string): Record<string, unknown> {
  const step = h.assignmentOf(jobId).steps?.at(-1);
  assert.equal(step?.name, 'dtp.waitFor');
  return JSON.parse(step?.result ?? 'null') as Record<string, unknown>;
}

describe('core: ctx.waitFor on a job of another shard', () => {
  it('waits until the job ends there, then goes on with its result', () => {
    const c = cluster();
    stepWorker(c.a, 'wa');
    c.b.register('wb', 1);
    const target = c.b.submit({ queue: QUEUE[1] });
    const waiter = c.a.submit({ queue: QUEUE[0] });
    c.a.suspend(waiter, { waitForJobId: target });
    assert.equal(c.a.status(waiter).state, 'WAITING');
    assert.deepEqual(c.a.status(waiter).waitingFor, { jobId: target, untilMillis: null });
    // The suspension and the watch of the target are one commit.
    assert.deepEqual(outboxKinds(c), [[1, 'watch']]);
    pump(c);
    assert.equal(c.a.status(waiter).state, 'WAITING', 'the target is still running');
    assert.equal(c.b.core.inspect().shardLinks.watched, 1, 'shard 1 knows who waits');
    c.b.result(target, { result: '{"n":1}', resultFormat: 'json' });
    assert.deepEqual(outboxKinds(c), [[0, 'parentEnded']]);
    pump(c);
    assert.equal(c.a.assignmentOf(waiter).attemptNumber, 2);
    assert.deepEqual(waitOutcome(c.a, waiter), {
      jobId: target,
      state: 'COMPLETED',
      result: '{"n":1}',
      resultFormat: 'json',
      error: null,
    });
    assert.equal(c.b.core.inspect().shardLinks.watched, 0);
  });

  it('gets a failed job’s error, an ended one’s outcome at once, and an unknown one as unknown', () => {
    const c = cluster();
    stepWorker(c.a, 'wa');
    c.b.register('wb', 1);
    const failing = c.b.submit({ queue: QUEUE[1], maxAttempts: 1 });
    c.b.result(failing, { success: false, error: 'broken' });
    assert.equal(c.b.status(failing).state, 'FAILED');
    const done = c.b.submit({ queue: QUEUE[1] });
    c.b.result(done, { result: 'r' });
    c.b.restart(); // both are in the store only now
    const waiter = c.a.submit({ queue: QUEUE[0] });
    c.a.suspend(waiter, { waitForJobId: failing });
    pump(c);
    assert.deepEqual(waitOutcome(c.a, waiter), {
      jobId: failing,
      state: 'FAILED',
      result: null,
      resultFormat: null,
      error: c.b.status(failing).error,
    });
    assert.match(String(waitOutcome(c.a, waiter).error), /broken/);
    c.a.suspend(waiter, { waitForJobId: done });
    pump(c);
    assert.equal(c.a.assignmentOf(waiter).attemptNumber, 3);
    assert.deepEqual(
      [waitOutcome(c.a, waiter).state, waitOutcome(c.a, waiter).result],
      ['COMPLETED', 'r'],
    );
    const ghost = 'id-999-s001'; // names shard 1, which never made it
    c.a.suspend(waiter, { waitForJobId: ghost });
    assert.equal(c.a.status(waiter).state, 'WAITING', 'only the job’s shard can say');
    pump(c);
    assert.deepEqual(waitOutcome(c.a, waiter), {
      jobId: ghost,
      state: null,
      result: null,
      resultFormat: null,
      error: 'unknown job',
    });
    assert.equal(c.b.core.inspect().shardLinks.watched, 0, 'nobody is remembered for those');
  });

  it('waits on across restarts of either shard; the end heard twice changes nothing', () => {
    const c = cluster();
    stepWorker(c.a, 'wa');
    const target = c.b.submit({ queue: QUEUE[1] });
    const waiter = c.a.submit({ queue: QUEUE[0] });
    c.a.suspend(waiter, { waitForJobId: target });
    // The waiter's shard restarts with its watch not read yet: it waits again.
    c.a.restart();
    stepWorker(c.a, 'wa');
    assert.equal(c.a.status(waiter).state, 'WAITING');
    pump(c);
    // The target's shard restarts after applying the watch: it recovers the waiter.
    c.b.restart();
    assert.equal(c.b.core.inspect().shardLinks.watched, 1);
    c.b.register('wb', 1);
    c.b.result(target, { result: 'late' });
    const [ended] = c.outbox.all() as [OutboxMessage];
    assert.equal(ended.body.type, 'parentEnded');
    // The waiter's shard restarts before it hears the end: it waits on, then hears it.
    c.a.restart();
    stepWorker(c.a, 'wa');
    assert.equal(c.a.status(waiter).state, 'WAITING');
    pump(c);
    assert.equal(c.a.assignmentOf(waiter).attemptNumber, 2);
    assert.equal(waitOutcome(c.a, waiter).result, 'late');
    // The same end again (a read of a message whose deletion it did not see): nothing moves.
    const steps = c.a.store.committedSteps(waiter);
    const assignments = c.a.assignmentsOf(waiter).length;
    c.outbox.insert([ended]);
    pump(c);
    assert.deepEqual(c.a.store.committedSteps(waiter), steps);
    assert.equal(c.a.assignmentsOf(waiter).length, assignments);
    assert.equal(c.a.status(waiter).state, 'RUNNING');
    // A restart once the end was applied: the wait is over, its outcome kept.
    c.a.restart();
    assert.notEqual(c.a.status(waiter).state, 'WAITING');
    assert.deepEqual(c.a.store.committedSteps(waiter), steps);
  });

  it('leaves a waiter cancelled meanwhile as it is, and a wait in its own shard as before', () => {
    const c = cluster();
    stepWorker(c.a, 'wa');
    c.b.register('wb', 1);
    const target = c.b.submit({ queue: QUEUE[1] });
    const cancelled = c.a.submit({ queue: QUEUE[0] });
    c.a.suspend(cancelled, { waitForJobId: target });
    pump(c);
    c.a.request({ type: 'CANCEL_JOB', jobId: cancelled });
    c.b.result(target, { result: 'x' });
    pump(c);
    assert.equal(c.a.status(cancelled).state, 'CANCELLED');
    // A job of its own shard: waited for in memory, no message.
    const waiter = c.a.submit({ queue: QUEUE[0] });
    const local = c.a.submit({ queue: QUEUE[0] });
    c.a.suspend(waiter, { waitForJobId: local });
    assert.deepEqual(outboxKinds(c), []);
    c.a.result(local, { result: 'here' });
    assert.equal(waitOutcome(c.a, waiter).result, 'here');
  });
});
