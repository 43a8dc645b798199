/**
 * SUBMIT_FLOW in the core: refs resolved in any order, one commit for the
 * whole flow, and every refusal (cycle, unknown or duplicate ref, empty,
 * invalid payload, admission) leaving nothing created.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { ClientReply, FlowJob } from '../../src/protocol/messages.js';
import { CoreHarness, expectReply } from '../helpers/core-harness.js';

function flow(h: CoreHarness, jobs: FlowJob[]): ClientReply | undefined {
  return h.request({ type: 'SUBMIT_FLOW', jobs });
}

const sleep = (ref: string, dependsOn?: string[]): FlowJob => ({
  ref,
  taskType: 'SLEEP',
  payload: { durationMillis: 10 },
  ...(dependsOn === undefined ? {} : { dependsOn }),
});

describe('core: flows', () => {
  it('creates every job in one commit, resolving forward refs to ids', () => {
    const h = new CoreHarness();
    const commitsBefore = h.store.commits;
    const reply = expectReply(
      flow(h, [sleep('last', ['a', 'b']), sleep('a'), sleep('b', ['a'])]),
      'FLOW_SUBMITTED',
    );
    assert.deepEqual(
      reply.jobs.map((j) => j.ref),
      ['last', 'a', 'b'],
    );
    assert.equal(h.store.commits, commitsBefore + 1, 'the whole flow is one batch');
    const id = new Map(reply.jobs.map((j) => [j.ref, j.jobId]));
    assert.deepEqual(h.status(id.get('last') as string).dependsOn, [id.get('a'), id.get('b')]);
    assert.equal(h.status(id.get('a') as string).state, 'QUEUED');
    assert.equal(h.status(id.get('b') as string).state, 'WAITING');
    h.register('w1', 4);
    h.result(id.get('a') as string, { result: 'a' });
    h.result(id.get('b') as string, { result: 'b' });
    assert.equal(h.assignmentsOf(id.get('last') as string).length, 1);
  });

  it('accepts existing jobs as parents by id', () => {
    const h = new CoreHarness();
    const existing = h.submit();
    const reply = expectReply(flow(h, [sleep('x', [existing])]), 'FLOW_SUBMITTED');
    assert.deepEqual(h.status(reply.jobs[0]?.jobId as string).dependsOn, [existing]);
  });

  const refusals: [string, FlowJob[], string][] = [
    ['a cycle', [sleep('a', ['c']), sleep('b', ['a']), sleep('c', ['b'])], ErrorCode.FlowCycle],
    ['a job that depends on itself', [sleep('a', ['a'])], ErrorCode.FlowCycle],
    ['an unknown ref', [sleep('a', ['nowhere'])], ErrorCode.UnknownJob],
    ['a duplicate ref', [sleep('a'), sleep('a')], ErrorCode.InvalidFlow],
    ['an empty list', [], ErrorCode.InvalidFlow],
    [
      'an invalid payload',
      [sleep('a'), { ref: 'b', taskType: 'SLEEP', payload: { durationMillis: -1 } }],
      ErrorCode.InvalidPayload,
    ],
  ];
  for (const [what, jobs, code] of refusals) {
    it(`creates nothing for ${what}`, () => {
      const h = new CoreHarness();
      const commitsBefore = h.store.commits;
      const reply = expectReply(flow(h, jobs), 'ERROR');
      assert.equal(reply.code, code, reply.message);
      assert.equal(h.core.activeJobs().length, 0);
      assert.equal(h.store.commits, commitsBefore);
    });
  }

  it('refuses the whole flow when admission cannot take all of it', () => {
    const h = new CoreHarness({ config: { maxActiveJobs: 3 } });
    h.submit();
    const reply = expectReply(flow(h, [sleep('a'), sleep('b'), sleep('c')]), 'SUBMIT_REJECTED');
    assert.equal(reply.activeCount, 1);
    assert.equal(h.core.activeJobs().length, 1);
  });

  it('takes a flow of 10,000 jobs in one request', () => {
    const h = new CoreHarness({ config: { maxActiveJobs: 20_000 } });
    const jobs = Array.from({ length: 10_000 }, (_, i) =>
      sleep(`j${i}`, i === 0 ? [] : [`j${i - 1}`]),
    );
    const reply = expectReply(flow(h, jobs), 'FLOW_SUBMITTED');
    assert.equal(reply.jobs.length, 10_000);
    assert.equal(h.core.activeJobs().length, 10_000);
  });

  it('indexes the dependents that have not ended, for reading, across a restart', () => {
    const h = new CoreHarness();
    const reply = expectReply(
      flow(h, [sleep('a'), sleep('b', ['a']), sleep('c', ['a', 'b'])]),
      'FLOW_SUBMITTED',
    );
    const id = new Map(reply.jobs.map((j) => [j.ref, j.jobId]));
    const [a, b, c] = ['a', 'b', 'c'].map((ref) => id.get(ref) as string) as [
      string,
      string,
      string,
    ];
    assert.deepEqual(h.core.dependentsOf(a, 10), [b, c]);
    assert.deepEqual(h.core.dependentsOf(a, 1), [b], 'bounded');
    h.restart();
    assert.deepEqual(h.core.dependentsOf(a, 10), [b, c], 'rebuilt by recovery');
    h.register('w1', 4);
    h.result(a);
    assert.deepEqual(
      h.core.dependentsOf(a, 10),
      [b, c],
      'a parent that ended keeps its open dependents',
    );
    h.result(b);
    assert.deepEqual(h.core.dependentsOf(a, 10), [c]);
    h.result(c);
    assert.deepEqual(h.core.dependentsOf(a, 10), []);
    assert.deepEqual(h.core.dependentsOf(b, 10), []);
  });
});
