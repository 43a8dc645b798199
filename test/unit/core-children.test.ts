/**
 * Child jobs in the core (children.ts): ENQUEUE_CHILD makes an ordinary job
 * that names its parent; the same (parent, key) gives the same child across
 * the parent's attempts and across a restart; stale leases, bad input and
 * limits are refused for that call only; the parent's status lists them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Effect } from '../../src/coordinator/core/types.js';
import { MAX_CHILDREN_PER_JOB } from '../../src/protocol/limits.js';
import type { CoordinatorToWorker, EnqueueChild } from '../../src/protocol/messages.js';
import { CoreHarness, expectReply, sentTo } from '../helpers/core-harness.js';

/** Children of this type stay QUEUED: the test worker runs SLEEP only. */
const CHILD_TYPE = 'child.work';

let nextRequestId = 1;

function enqueue(
  h: CoreHarness,
  parentId: string,
  fields: Partial<EnqueueChild> = {},
): { effects: Effect[]; answer: CoordinatorToWorker | undefined } {
  const assigned = h.assignmentOf(parentId);
  const requestId = fields.requestId ?? nextRequestId++;
  const connId = h.connOf(assigned.workerId);
  const effects = h.handle({
    kind: 'workerMessage',
    connId,
    msg: {
      type: 'ENQUEUE_CHILD',
      workerId: assigned.workerId,
      jobId: parentId,
      attemptId: assigned.attemptId,
      requestId,
      key: 'o:0',
      taskType: CHILD_TYPE,
      payload: { n: 1 },
      ...fields,
    },
  });
  const answer = sentTo(effects, connId).find(
    (m) => (m.type === 'CHILD_ENQUEUED' || m.type === 'ERROR') && m.requestId === requestId,
  );
  return { effects, answer };
}

function childId(answer: CoordinatorToWorker | undefined, created?: boolean): string {
  assert.equal(
    answer?.type,
    'CHILD_ENQUEUED',
    `expected CHILD_ENQUEUED, got ${JSON.stringify(answer)}`,
  );
  if (answer?.type !== 'CHILD_ENQUEUED') throw new Error('unreachable');
  if (created !== undefined) assert.equal(answer.created, created);
  return answer.jobId;
}

function errorCode(answer: CoordinatorToWorker | undefined): string | null {
  assert.equal(answer?.type, 'ERROR', `expected ERROR, got ${JSON.stringify(answer)}`);
  return answer?.type === 'ERROR' ? answer.code : null;
}

function running(): { h: CoreHarness; parent: string } {
  const h = new CoreHarness();
  h.register('w1', 1, ['SLEEP']);
  const parent = h.submit({ maxAttempts: 3 });
  assert.equal(h.status(parent).state, 'RUNNING');
  return { h, parent };
}

describe('core: child jobs', () => {
  it('makes an ordinary job naming its parent, listed in the parent status', () => {
    const { h, parent } = running();
    const { effects, answer } = enqueue(h, parent, { key: 'k:thumb', priority: 'HIGH' });
    const child = childId(answer, true);
    assert.ok(h.core.takeBatch() === null, 'the child was committed with its input');
    assert.equal(effects.filter((e) => e.kind === 'send').length, 1);
    const snapshot = h.status(child);
    assert.equal(snapshot.parentJobId, parent);
    assert.equal(snapshot.state, 'QUEUED');
    assert.equal(snapshot.priority, 'HIGH');
    assert.equal(h.status(parent).children?.join(), child);
    assert.equal(h.record(child).childKey, 'k:thumb');
    assert.equal(h.store.committedJob(child)?.parentJobId, parent);
  });

  it('gives the same child for the same key in a later attempt, and new ones for new keys', () => {
    const { h, parent } = running();
    const keyed = childId(enqueue(h, parent, { key: 'k:a' }).answer, true);
    const first = childId(enqueue(h, parent, { key: 'o:0' }).answer, true);
    h.result(parent, { success: false });
    h.tick(1_000);
    assert.equal(h.assignmentsOf(parent).length, 2, 'retried');
    assert.equal(childId(enqueue(h, parent, { key: 'k:a' }).answer, false), keyed);
    assert.equal(childId(enqueue(h, parent, { key: 'o:0' }).answer, false), first);
    const second = childId(enqueue(h, parent, { key: 'o:1' }).answer, true);
    // `k:0` and `o:0` are different keys: an explicit key never meets an ordinal.
    const explicitZero = childId(enqueue(h, parent, { key: 'k:0' }).answer, true);
    assert.notEqual(explicitZero, first);
    assert.deepEqual(h.status(parent).children, [keyed, first, second, explicitZero]);
  });

  it('keeps the dedupe across a restart (the index is rebuilt from the store)', () => {
    const { h, parent } = running();
    const child = childId(enqueue(h, parent, { key: 'k:a' }).answer, true);
    h.restart();
    h.register('w1', 1, ['SLEEP']);
    assert.equal(h.status(parent).children?.join(), child);
    assert.equal(childId(enqueue(h, parent, { key: 'k:a' }).answer, false), child);
  });

  it('lists the children of a finished parent from the store', () => {
    const { h, parent } = running();
    const child = childId(enqueue(h, parent).answer, true);
    h.result(parent);
    h.restart();
    assert.equal(h.status(parent).state, 'COMPLETED');
    assert.deepEqual(h.status(parent).children, [child]);
    assert.equal(h.status(child).parentJobId, parent);
  });

  it('refuses a call of a lease that is not current, and changes nothing', () => {
    const { h, parent } = running();
    const { answer } = enqueue(h, parent, { attemptId: 'old-attempt' });
    assert.equal(errorCode(answer), 'STALE_ATTEMPT');
    assert.equal(h.status(parent).children, undefined);
    assert.equal(h.core.activeJobs().length, 1);
  });

  it('refuses bad children with the codes of a submission, for that call only', () => {
    const { h, parent } = running();
    const invalid = enqueue(h, parent, { taskType: 'SLEEP', payload: { durationMillis: -5 } });
    assert.equal(errorCode(invalid.answer), 'INVALID_PAYLOAD');
    assert.equal(
      errorCode(enqueue(h, parent, { taskType: 'no spaces' }).answer),
      'INVALID_TASK_TYPE',
    );
    assert.equal(
      errorCode(enqueue(h, parent, { maxAttempts: 1_000_000 }).answer),
      'INVALID_REQUEST',
    );
    assert.equal(errorCode(enqueue(h, parent, { key: 'x' }).answer), 'INVALID_REQUEST');
    assert.equal(errorCode(enqueue(h, parent, { key: 'o:-1' }).answer), 'INVALID_REQUEST');
    assert.equal(errorCode(enqueue(h, parent, { idempotencyKey: 'i' }).answer), 'INVALID_REQUEST');
    assert.equal(h.events('worker.lost').length, 0);
    assert.equal(h.status(parent).state, 'RUNNING');
    childId(enqueue(h, parent).answer, true);
  });

  it('applies admission control to children', () => {
    const h = new CoreHarness({ config: { maxActiveJobs: 2 } });
    h.register('w1', 1, ['SLEEP']);
    const parent = h.submit();
    childId(enqueue(h, parent, { key: 'o:0' }).answer, true);
    assert.equal(errorCode(enqueue(h, parent, { key: 'o:1' }).answer), 'LIMIT_EXCEEDED');
  });

  it(`bounds the children of one parent at ${MAX_CHILDREN_PER_JOB}`, () => {
    const h = new CoreHarness({ config: { maxActiveJobs: 2 * MAX_CHILDREN_PER_JOB } });
    h.register('w1', 1, ['SLEEP']);
    const parent = h.submit();
    let seventh = '';
    for (let i = 0; i < MAX_CHILDREN_PER_JOB; i++) {
      const id = childId(enqueue(h, parent, { key: `k:${i}` }).answer);
      if (i === 7) seventh = id;
    }
    assert.equal(errorCode(enqueue(h, parent, { key: 'k:new' }).answer), 'LIMIT_EXCEEDED');
    // A call of a key already made is still answered.
    assert.equal(childId(enqueue(h, parent, { key: 'k:7' }).answer, false), seventh);
  });

  it('reads the stored children of a re-run parent before it makes any', () => {
    const h = new CoreHarness();
    h.register('w1', 1, ['SLEEP']);
    const parent = h.submit({ maxAttempts: 1 });
    const child = childId(enqueue(h, parent, { key: 'k:a' }).answer, true);
    h.result(parent, { success: false });
    assert.equal(h.status(parent).state, 'FAILED');
    h.tick(0);
    const rerun = h.request({ type: 'RERUN_JOBS', queue: 'default', state: 'FAILED' });
    expectReply(rerun, 'JOBS_RERUN');
    assert.equal(h.status(parent).state, 'RUNNING');
    assert.equal(childId(enqueue(h, parent, { key: 'k:a' }).answer, false), child);
    const fresh = childId(enqueue(h, parent, { key: 'k:b' }).answer, true);
    assert.deepEqual(h.status(parent).children, [child, fresh]);
  });
});
