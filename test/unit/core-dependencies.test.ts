/**
 * Dependencies in the core: WAITING until every parent COMPLETED, the
 * cascade of a failed or cancelled parent, `onParentFailure: run`, parents
 * that ended before the submission, the parents' results in the assignment,
 * bad input, purge, and restart recovery.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { MAX_PARENTS } from '../../src/protocol/limits.js';
import { CoreHarness, expectReply } from '../helpers/core-harness.js';

/** A harness with one busy worker slot taken by nothing yet; parents run on `w1`. */
function harness(): CoreHarness {
  return new CoreHarness();
}

describe('core: dependencies', () => {
  it('keeps a dependent WAITING until its parent completes, then queues and runs it', () => {
    const h = harness();
    h.register('w1', 2, null, { parents: true });
    const parent = h.submit();
    const child = h.submit({ dependsOn: [parent] });
    assert.equal(h.status(child).state, 'WAITING');
    assert.deepEqual(h.status(child).dependsOn, [parent]);
    assert.equal(h.assignmentsOf(child).length, 0, 'a free slot must not run a WAITING job');
    h.result(parent, { result: 'parent result' });
    const assigned = h.assignmentOf(child);
    assert.deepEqual(assigned.parents, [
      {
        jobId: parent,
        taskType: 'SLEEP',
        state: 'COMPLETED',
        result: 'parent result',
        resultFormat: 'text',
      },
    ]);
  });

  it('sends no parents to a worker that did not ask for them', () => {
    const h = harness();
    h.register('w1', 2);
    const parent = h.submit();
    const child = h.submit({ dependsOn: [parent] });
    h.result(parent, { result: 'r' });
    assert.equal(h.assignmentOf(child).parents, undefined);
  });

  it('waits for every parent of a fan-in', () => {
    const h = harness();
    h.register('w1', 3);
    const a = h.submit();
    const b = h.submit();
    const child = h.submit({ dependsOn: [a, b, a] });
    assert.deepEqual(h.status(child).dependsOn, [a, b], 'duplicates are dropped, order kept');
    h.result(a, { result: 'a' });
    assert.equal(h.status(child).state, 'WAITING');
    h.result(b, { result: 'b' });
    assert.equal(h.assignmentsOf(child).length, 1);
  });

  it('cancels dependents transitively when a parent fails, naming the parent', () => {
    const h = harness();
    h.register('w1', 1);
    const parent = h.submit({ maxAttempts: 1 });
    const child = h.submit({ dependsOn: [parent] });
    const grandchild = h.submit({ dependsOn: [child] });
    h.result(parent, { success: false, error: 'broke' });
    for (const id of [child, grandchild]) {
      assert.equal(h.status(id).state, 'CANCELLED', id);
    }
    assert.match(h.status(child).error ?? '', new RegExp(`parent job ${parent} ended FAILED`));
    assert.match(
      h.status(grandchild).error ?? '',
      new RegExp(`parent job ${child} ended CANCELLED`),
    );
  });

  it('cascades a cancelled parent the same way', () => {
    const h = harness();
    const parent = h.submit();
    const child = h.submit({ dependsOn: [parent] });
    h.request({ type: 'CANCEL_JOB', jobId: parent });
    assert.equal(h.status(child).state, 'CANCELLED');
  });

  it('runs a dependent with onParentFailure run after its parent failed', () => {
    const h = harness();
    h.register('w1', 1, null, { parents: true });
    const parent = h.submit({ maxAttempts: 1 });
    const child = h.submit({ dependsOn: [parent], onParentFailure: 'run' });
    h.result(parent, { success: false, error: 'broke' });
    assert.deepEqual(h.assignmentOf(child).parents, [
      { jobId: parent, taskType: 'SLEEP', state: 'FAILED', result: null },
    ]);
  });

  it('creates a dependent of an already failed parent and cancels it at once', () => {
    const h = harness();
    h.register('w1', 1);
    const parent = h.submit({ maxAttempts: 1 });
    h.result(parent, { success: false, error: 'broke' });
    h.tick(); // the parent's end is committed and it leaves memory
    const reply = expectReply(h.submitRequest({ dependsOn: [parent] }), 'JOB_SUBMITTED');
    assert.equal(reply.job?.state, 'CANCELLED');
    assert.match(reply.job?.error ?? '', /ended FAILED/);
  });

  it('queues at once a dependent whose parent completed earlier (read from the store)', () => {
    const h = harness();
    h.register('w1', 1, null, { parents: true });
    const parent = h.submit();
    h.result(parent, { result: 'old' });
    h.tick();
    assert.equal(
      h.core.activeJobs().some((j) => j.jobId === parent),
      false,
    );
    const child = h.submit({ dependsOn: [parent] });
    assert.equal(h.assignmentOf(child).parents?.[0]?.result, 'old');
  });

  it('refuses an unknown parent and creates nothing', () => {
    const h = harness();
    const known = h.submit();
    const reply = expectReply(h.submitRequest({ dependsOn: [known, 'no-such-job'] }), 'ERROR');
    assert.equal(reply.code, ErrorCode.UnknownJob);
    assert.match(reply.message, /Unknown job: no-such-job/);
    assert.equal(h.core.activeJobs().length, 1);
  });

  it(`refuses more than ${MAX_PARENTS} parents`, () => {
    const h = harness();
    const ids = Array.from({ length: MAX_PARENTS + 1 }, (_, i) => `p${i}`);
    const reply = expectReply(h.submitRequest({ dependsOn: ids }), 'ERROR');
    assert.equal(reply.code, ErrorCode.InvalidRequest);
    assert.match(reply.message, /at most 1000 parents/);
  });

  it('settles a chain of 10,000 dependents without exhausting the stack', () => {
    const h = new CoreHarness({ config: { maxActiveJobs: 20_000 } });
    const first = h.submit();
    let previous = first;
    const chain: string[] = [];
    for (let i = 0; i < 10_000; i++) {
      previous = h.submit({ dependsOn: [previous] });
      chain.push(previous);
    }
    h.request({ type: 'CANCEL_JOB', jobId: first });
    assert.equal(h.status(chain.at(-1) as string).state, 'CANCELLED');
    assert.equal(h.core.activeJobs().length, 0);
  });

  it('does not purge a parent whose dependent still waits for its result', () => {
    const h = harness();
    h.register('w1', 1);
    const a = h.submit();
    const b = h.submit();
    const child = h.submit({ dependsOn: [a, b] });
    h.result(a, { result: 'a' });
    h.tick(10_000);
    const purged = expectReply(
      h.request({ type: 'PURGE_JOBS', state: 'COMPLETED', olderThanMillis: 0 }),
      'JOBS_PURGED',
    );
    assert.equal(purged.deleted, 0);
    assert.ok(h.store.committedJob(a) !== undefined);
    h.result(b, { result: 'b' });
    h.result(child, { result: 'c' });
    h.tick(10_000);
    const after = expectReply(
      h.request({ type: 'PURGE_JOBS', state: 'COMPLETED', olderThanMillis: 0 }),
      'JOBS_PURGED',
    );
    assert.equal(after.deleted, 3);
  });

  it('rebuilds WAITING jobs and the finished parents they need after a restart', () => {
    const h = harness();
    h.register('w1', 1);
    const a = h.submit();
    const b = h.submit();
    const child = h.submit({ dependsOn: [a, b] });
    h.result(a, { result: 'from a' });
    h.restart();
    assert.equal(h.status(child).state, 'WAITING');
    // b was RUNNING on w1 when the coordinator stopped: kept for w1, which comes back for it.
    const { attemptId } = h.assignmentOf(b);
    h.register('w1', 1, null, { parents: true, heldAttempts: [{ jobId: b, attemptId }] });
    h.result(b, { result: 'from b' });
    const parents = h.assignmentOf(child).parents ?? [];
    assert.deepEqual(
      parents.map((p) => [p.jobId, p.result]),
      [
        [a, 'from a'],
        [b, 'from b'],
      ],
    );
  });

  it('cancels a WAITING dependent after a restart when its parent then fails', () => {
    const h = harness();
    const parent = h.submit({ maxAttempts: 1 });
    const child = h.submit({ dependsOn: [parent] });
    h.restart();
    h.register('w1', 1);
    h.result(parent, { success: false, error: 'broke' });
    assert.equal(h.status(child).state, 'CANCELLED');
  });
});
