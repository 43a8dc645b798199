/**
 * Idempotency keys in SUBMIT_FLOW: a keyed job whose key names an existing
 * job with the same submission (its parents the same jobs) is that job; the
 * flow's other jobs are created; a key used differently refuses the whole
 * flow. Keys memory does not know are looked up in the store first.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { ClientReply, FlowJob } from '../../src/protocol/messages.js';
import { CoreHarness, eventsOf, expectReply, repliesOf } from '../helpers/core-harness.js';

function flow(h: CoreHarness, jobs: FlowJob[]): ClientReply | undefined {
  return h.request({ type: 'SUBMIT_FLOW', jobs });
}

const sleep = (ref: string, key: string | null, dependsOn?: string[], ms = 10): FlowJob => ({
  ref,
  taskType: 'SLEEP',
  payload: { durationMillis: ms },
  ...(key === null ? {} : { idempotencyKey: key }),
  ...(dependsOn === undefined ? {} : { dependsOn }),
});

const ids = (reply: ClientReply | undefined): Record<string, string> =>
  Object.fromEntries(expectReply(reply, 'FLOW_SUBMITTED').jobs.map((j) => [j.ref, j.jobId]));

const keyed = (): FlowJob[] => [
  sleep('a', 'k-a'),
  sleep('b', 'k-b', ['a']),
  sleep('c', 'k-c', ['a']),
  sleep('d', 'k-d', ['b', 'c']),
];

describe('core: idempotency keys in flows', () => {
  it('answers a resubmitted flow with its existing jobs and creates nothing', () => {
    const h = new CoreHarness();
    const first = ids(flow(h, keyed()));
    assert.equal(h.status(first.a as string).idempotencyKey, 'k-a');
    const commits = h.store.commits;
    const again = ids(flow(h, keyed()));
    assert.deepEqual(again, first);
    assert.equal(h.core.activeJobs().length, 4);
    assert.equal(h.store.commits, commits, 'nothing written');
    assert.equal(h.events('job.deduplicated').length, 4);
  });

  it('finds the keys in the store once the jobs left memory', () => {
    const h = new CoreHarness();
    const first = ids(flow(h, keyed()));
    h.register('w1', 4);
    for (const ref of ['a', 'b', 'c', 'd']) h.result(first[ref] as string);
    assert.equal(h.status(first.d as string).state, 'COMPLETED');
    h.restart(); // memory now holds no job: every key is the store's
    assert.equal(h.core.activeJobs().length, 0);
    assert.deepEqual(ids(flow(h, keyed())), first);
    assert.equal(h.core.activeJobs().length, 0, 'nothing created');
  });

  it('creates the jobs whose keys are new (and keyless ones), depending on the existing ones', () => {
    const h = new CoreHarness();
    const a = h.submit({ idempotencyKey: 'k-a' });
    const got = ids(
      flow(h, [sleep('a', 'k-a'), sleep('b', null, ['a']), sleep('c', 'k-c', ['b'])]),
    );
    assert.equal(got.a, a);
    assert.equal(h.core.activeJobs().length, 3);
    assert.deepEqual(h.status(got.b as string).dependsOn, [a]);
    assert.equal(h.status(got.b as string).state, 'WAITING');
    assert.equal(h.status(got.c as string).idempotencyKey, 'k-c');
  });

  const conflicts: [string, FlowJob[], FlowJob[]][] = [
    ['a different payload', [sleep('a', 'k-a')], [sleep('a', 'k-a', undefined, 20)]],
    [
      'a parent ref that would be a new job',
      [sleep('a', null), sleep('b', 'k-b', ['a'])],
      [sleep('a', null), sleep('b', 'k-b', ['a'])],
    ],
    [
      'other parents',
      [sleep('a', 'k-a'), sleep('b', 'k-b')],
      [sleep('a', 'k-a'), sleep('b', 'k-b', ['a'])],
    ],
  ];
  for (const [what, before, after] of conflicts) {
    it(`refuses the whole flow for a key used with ${what}`, () => {
      const h = new CoreHarness();
      ids(flow(h, before));
      const active = h.core.activeJobs().length;
      const reply = expectReply(flow(h, [sleep('new', null), ...after]), 'ERROR');
      assert.equal(reply.code, ErrorCode.IdempotencyConflict, reply.message);
      assert.match(reply.message, /nothing was created$/);
      assert.equal(h.core.activeJobs().length, active, 'nothing created');
    });
  }

  it('refuses one key on two jobs of a flow', () => {
    const h = new CoreHarness();
    const reply = expectReply(flow(h, [sleep('a', 'k'), sleep('b', 'k')]), 'ERROR');
    assert.equal(reply.code, ErrorCode.InvalidFlow);
    assert.match(reply.message, /jobs\[1\]: idempotency key "k" is also the key of ref "a"/);
  });

  it('sees a job made with the key while its store lookup was out', () => {
    const h = new CoreHarness();
    h.holdReads = true;
    h.submitRequest({ idempotencyKey: 'k-a' }); // its key lookup is held too
    flow(h, [sleep('a', 'k-a'), sleep('b', null, ['a'])]);
    h.holdReads = false;
    const replies = repliesOf(h.answerHeldReads());
    const submitted = replies.find((r) => r.type === 'JOB_SUBMITTED');
    const flowed = replies.find((r) => r.type === 'FLOW_SUBMITTED');
    assert.ok(submitted?.type === 'JOB_SUBMITTED' && flowed?.type === 'FLOW_SUBMITTED');
    assert.equal(flowed.jobs.find((j) => j.ref === 'a')?.jobId, submitted.jobId);
    assert.equal(h.core.activeJobs().length, 2, 'one job for the key');
  });

  it('answers a failed key lookup with an error and creates nothing', () => {
    const h = new CoreHarness();
    h.holdReads = true;
    flow(h, [sleep('a', 'k-a'), sleep('b', 'k-b')]);
    h.holdReads = false;
    const replies = repliesOf(h.answerHeldReads(true));
    assert.equal(replies.length, 1);
    const reply = expectReply(replies[0], 'ERROR');
    assert.equal(reply.code, ErrorCode.StoreReadFailed);
    assert.equal(h.core.activeJobs().length, 0);
  });

  it('answers a key another submission took (and whose job ended) after the store said it was free', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const { made, requestId, effects } = h.loseKeyToExpiringJob((spec) =>
      flow(h, [{ ref: 'a', taskType: 'SLEEP', ...spec }, sleep('b', 'other', ['a'])]),
    );
    const reply = effects.find(
      (e) => e.kind === 'reply' && e.requestId === requestId && e.msg.type === 'FLOW_SUBMITTED',
    );
    assert.ok(
      reply?.kind === 'reply' && reply.msg.type === 'FLOW_SUBMITTED',
      JSON.stringify(effects),
    );
    assert.equal(reply.msg.jobs[0]?.jobId, made, 'the key names the job made meanwhile');
    assert.equal(eventsOf(effects, 'job.submitted').length, 1, 'only b was made');
  });
});
