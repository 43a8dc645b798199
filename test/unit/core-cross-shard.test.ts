/**
 * Flows and dependencies across shards in the core: two cores, one per
 * shard of a two-shard database, each with its own store, wired through the
 * one outbox they share (MemoryOutbox, as the shards of a PostgreSQL
 * database share `dtp.shard_outbox`). A message exists once the batch that
 * sends it committed and is gone once the batch that applies it did; the
 * tests deliver messages by hand (what a shard's term does on each poll),
 * restart either side between a commit and an apply, and deliver messages
 * twice.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FlowJob } from '../../src/protocol/messages.js';
import { shardOfJobId, shardOfQueue } from '../../src/protocol/shards.js';
import type { OutboxMessage } from '../../src/store/store.js';
import { expectReply, sentTo, type CoreHarness } from '../helpers/core-harness.js';
import { QUEUE, SHARDS, cluster, pump, statusIn } from '../helpers/core-shards.js';

const job = (
  ref: string,
  queue: string,
  dependsOn?: string[],
  extra: Partial<FlowJob> = {},
): FlowJob => ({
  ref,
  taskType: 'SLEEP',
  payload: { durationMillis: 10 },
  queue,
  ...(dependsOn === undefined ? {} : { dependsOn }),
  ...extra,
});

function submitFlow(h: CoreHarness, jobs: FlowJob[]): Map<string, string> {
  const reply = expectReply(h.request({ type: 'SUBMIT_FLOW', jobs }), 'FLOW_SUBMITTED');
  return new Map(reply.jobs.map((j) => [j.ref, j.jobId]));
}

function idOf(ids: Map<string, string>, ref: string): string {
  const id = ids.get(ref);
  assert.ok(id !== undefined, `no job for ref ${ref}`);
  return id;
}

describe('core: flows and dependencies across shards', () => {
  it('runs a flow across two shards in dependency order', () => {
    const c = cluster();
    c.a.register('wa', 4, null, { parents: true });
    c.b.register('wb', 4, null, { parents: true });
    const ids = submitFlow(c.a, [
      job('root', QUEUE[0]),
      job('mid', QUEUE[1], ['root']),
      job('side', QUEUE[1], ['root']),
      job('leaf', QUEUE[0], ['mid', 'side']),
    ]);
    // The reply names every job at once, each id naming its queue's shard.
    for (const [ref, shard] of [
      ['root', 0],
      ['mid', 1],
      ['side', 1],
      ['leaf', 0],
    ] as const) {
      assert.equal(shardOfJobId(idOf(ids, ref), SHARDS), shard, ref);
    }
    // One commit made shard 0's jobs and the message with shard 1's.
    assert.deepEqual(
      c.outbox.all().map((m) => [m.targetShard, m.body.type]),
      [[1, 'createJobs']],
    );
    assert.equal(statusIn(c, idOf(ids, 'leaf')).state, 'WAITING');
    assert.equal(c.a.assignmentsOf(idOf(ids, 'root')).length, 1);
    pump(c);
    const mid = statusIn(c, idOf(ids, 'mid'));
    assert.equal(mid.state, 'WAITING', 'a child waits for its parent in the other shard');
    assert.deepEqual(mid.dependsOn, [idOf(ids, 'root')]);
    assert.equal(c.a.core.inspect().shardLinks.watched, 1, 'shard 0 knows who waits for root');

    c.a.result(idOf(ids, 'root'), { result: 'r' });
    // The end and its message to the children's shard are one commit.
    assert.deepEqual(
      c.outbox.all().map((m) => [m.targetShard, m.body.type]),
      [[1, 'parentEnded']],
    );
    pump(c);
    for (const ref of ['mid', 'side']) {
      const assigned = c.b.assignmentOf(idOf(ids, ref));
      assert.deepEqual(
        assigned.parents?.map((p) => [p.jobId, p.state, p.result]),
        [[idOf(ids, 'root'), 'COMPLETED', 'r']],
        `${ref} gets its remote parent's result`,
      );
    }
    c.b.result(idOf(ids, 'mid'), { result: 'm' });
    pump(c);
    assert.equal(statusIn(c, idOf(ids, 'leaf')).state, 'WAITING', 'one parent is still running');
    c.b.result(idOf(ids, 'side'), { result: 's' });
    pump(c);
    const leaf = c.a.assignmentOf(idOf(ids, 'leaf'));
    assert.deepEqual(
      leaf.parents?.map((p) => p.result),
      ['m', 's'],
    );
    c.a.result(idOf(ids, 'leaf'));
    for (const ref of ['root', 'mid', 'side', 'leaf']) {
      assert.equal(statusIn(c, idOf(ids, ref)).state, 'COMPLETED', ref);
    }
    assert.equal(c.outbox.all().length, 0);
    assert.equal(c.a.core.inspect().shardLinks.watched, 0);
    assert.equal(c.b.core.inspect().shardLinks.watched, 0);
  });

  it('cancels a remote child when its parent fails, and runs one that asked to run anyway', () => {
    const c = cluster();
    c.a.register('wa', 1);
    c.b.register('wb', 2);
    const ids = submitFlow(c.a, [
      job('parent', QUEUE[0], undefined, { maxAttempts: 1 }),
      job('strict', QUEUE[1], ['parent']),
      job('lenient', QUEUE[1], ['parent'], { onParentFailure: 'run' }),
      job('grandchild', QUEUE[0], ['strict']),
    ]);
    pump(c);
    c.a.result(idOf(ids, 'parent'), { success: false, error: 'broken' });
    pump(c);
    const strict = statusIn(c, idOf(ids, 'strict'));
    assert.equal(strict.state, 'CANCELLED');
    assert.match(strict.error ?? '', /ended FAILED/);
    assert.equal(statusIn(c, idOf(ids, 'lenient')).state, 'RUNNING');
    // The cancel goes on across the shards: strict's child is cancelled too.
    const grandchild = statusIn(c, idOf(ids, 'grandchild'));
    assert.equal(grandchild.state, 'CANCELLED');
    assert.match(grandchild.error ?? '', new RegExp(`${idOf(ids, 'strict')} ended CANCELLED`));
  });

  it('answers at once for a parent that ended already, even one only the store remembers', () => {
    const c = cluster();
    c.a.register('wa', 1);
    c.b.register('wb', 1);
    const parent = c.a.submit({ queue: QUEUE[0] });
    c.a.result(parent, { result: 'done' });
    c.a.restart(); // the parent is in the store only now
    c.a.register('wa', 1);
    const child = c.b.submit({ queue: QUEUE[1], dependsOn: [parent] });
    assert.equal(c.b.status(child).state, 'WAITING');
    pump(c);
    assert.equal(c.b.status(child).state, 'RUNNING');
    assert.equal(c.a.core.inspect().shardLinks.watched, 0, 'nobody is remembered for an ended job');
  });

  it('cancels a child whose parent no shard has', () => {
    const c = cluster();
    const ghost = 'id-999-s000'; // names shard 0, which never made it
    const child = c.b.submit({ queue: QUEUE[1], dependsOn: [ghost], onParentFailure: 'run' });
    assert.equal(c.b.status(child).state, 'WAITING');
    pump(c);
    const ended = c.b.status(child);
    assert.equal(ended.state, 'CANCELLED');
    assert.match(ended.error ?? '', /unknown/);
    // A flow's job of the other shard naming an unknown parent of its own shard: the same.
    const ids = submitFlow(c.a, [job('x', QUEUE[0]), job('y', QUEUE[1], ['x', 'id-998-s001'])]);
    pump(c);
    assert.equal(statusIn(c, idOf(ids, 'y')).state, 'CANCELLED');
    assert.match(statusIn(c, idOf(ids, 'y')).error ?? '', /id-998-s001 is unknown/);
  });

  it('makes a child in its parent’s shard only, refusing one of another shard’s queue', () => {
    const c = cluster();
    assert.equal(shardOfQueue(undefined, SHARDS), 0, 'the default queue is in shard 0');
    c.b.register('wb', 1);
    const parent = c.b.submit({ queue: QUEUE[1] });
    const { attemptId } = c.b.assignmentOf(parent);
    const connId = c.b.connOf('wb');
    const enqueue = (requestId: number, queue?: string) =>
      sentTo(
        c.b.handle({
          kind: 'workerMessage',
          connId,
          msg: {
            type: 'ENQUEUE_CHILD',
            workerId: 'wb',
            jobId: parent,
            attemptId,
            requestId,
            key: `o:${requestId}`,
            taskType: 'SLEEP',
            payload: { durationMillis: 1 },
            ...(queue !== undefined && { queue }),
          },
        }),
        connId,
      ).find((m) => 'requestId' in m && m.requestId === requestId);
    // No queue is the default one, in shard 0; so is QUEUE[0]: both refused, nothing made.
    for (const [requestId, queue] of [
      [1, undefined],
      [2, QUEUE[0]],
    ] as const) {
      const answer = enqueue(requestId, queue);
      assert.equal(answer?.type, 'ERROR', JSON.stringify(answer));
      assert.match(
        answer?.type === 'ERROR' ? answer.message : '',
        /in shard 0, its parent in shard 1/,
      );
    }
    assert.equal(c.b.core.activeJobs().length, 1, 'only the parent');
    assert.equal(c.outbox.all().length, 0);
    // A queue of the parent's shard: the child is made there.
    const made = enqueue(3, QUEUE[1]);
    assert.equal(made?.type, 'CHILD_ENQUEUED', JSON.stringify(made));
    const child = made?.type === 'CHILD_ENQUEUED' ? made.jobId : '';
    assert.equal(shardOfJobId(child, SHARDS), 1);
    assert.equal(c.b.status(child).parentJobId, parent);
  });

  it('refuses keys on a flow job of another shard, creating nothing', () => {
    const c = cluster();
    const reply = expectReply(
      c.a.request({
        type: 'SUBMIT_FLOW',
        jobs: [job('x', QUEUE[0]), job('y', QUEUE[1], ['x'], { idempotencyKey: 'k' })],
      }),
      'ERROR',
    );
    assert.match(reply.message, /idempotencyKey or dedupKey/);
    assert.equal(c.a.core.activeJobs().length, 0);
    assert.equal(c.outbox.all().length, 0);
  });

  it('changes nothing when a message is delivered twice, in one term or after a restart', () => {
    const c = cluster();
    c.a.register('wa', 1);
    c.b.register('wb', 2);
    const ids = submitFlow(c.a, [job('p', QUEUE[0]), job('q', QUEUE[1], ['p'])]);
    const [create] = c.outbox.all() as [OutboxMessage];
    // A read that began before the apply's commit brings the message again:
    // the core knows it applied it (it says which batches the read saw).
    c.b.deliverOutbox();
    const created = c.b.core.activeJobs().length;
    c.b.handle({ kind: 'outboxMessages', messages: [create], committedThrough: 0 });
    assert.equal(c.b.core.activeJobs().length, created);
    // After a restart (a new term) the message comes again: its jobs are in
    // the store, so nothing is made twice (the store would refuse it).
    c.b.restart();
    c.b.register('wb', 2);
    c.outbox.insert([create]);
    const redelivered = c.outbox.all().at(-1) as OutboxMessage;
    c.b.deliverOutbox();
    assert.equal(c.b.events('job.submitted', c.b.last).length, 0);
    assert.ok(!c.outbox.all().some((m) => m.id === redelivered.id), 'applied, hence deleted');
    pump(c);
    c.a.result(idOf(ids, 'p'), { result: 'once' });
    const [ended] = c.outbox.all() as [OutboxMessage];
    pump(c);
    assert.equal(statusIn(c, idOf(ids, 'q')).state, 'RUNNING');
    c.b.result(idOf(ids, 'q'));
    // The same end, heard again once its child has finished: nothing waits for it.
    c.outbox.insert([ended]);
    pump(c);
    assert.equal(statusIn(c, idOf(ids, 'q')).state, 'COMPLETED');
    // And a watch delivered twice remembers the child once.
    const late = c.b.submit({ queue: QUEUE[1], dependsOn: [c.a.submit({ queue: QUEUE[0] })] });
    const [watch] = c.outbox.all() as [OutboxMessage];
    c.outbox.insert([watch]);
    pump(c);
    assert.equal(c.a.core.inspect().shardLinks.watched, 1);
    assert.equal(c.b.status(late).state, 'WAITING');
  });

  it('applies messages in order: one waiting for a read holds back the later ones', () => {
    const c = cluster();
    const first = submitFlow(c.a, [job('x', QUEUE[0]), job('y', QUEUE[1], ['x'])]);
    const second = submitFlow(c.a, [job('x', QUEUE[0]), job('y', QUEUE[1])]);
    c.b.holdReads = true;
    c.b.deliverOutbox();
    // The first createJobs asks the store about its jobs; the second is held behind it.
    assert.equal(c.b.heldReads.length, 1);
    c.b.deliverOutbox();
    assert.equal(c.b.heldReads.length, 1, 'nothing is applied twice, nothing overtakes');
    // Its read fails: nothing was applied, and both come again with the next read.
    c.b.answerHeldReads(true);
    assert.equal(c.b.core.activeJobs().length, 0);
    assert.equal(c.outbox.all().length, 2);
    c.b.deliverOutbox();
    assert.equal(c.b.heldReads.length, 1);
    // The read comes back: the first applies, then the second right behind it.
    c.b.holdReads = false;
    c.b.answerHeldReads();
    assert.equal(c.b.heldReads.length, 0);
    assert.equal(c.b.status(idOf(first, 'y')).state, 'WAITING');
    assert.equal(c.b.status(idOf(second, 'y')).state, 'QUEUED');
    assert.ok(
      c.b.record(idOf(first, 'y')).seq < c.b.record(idOf(second, 'y')).seq,
      'created in the order sent',
    );
    assert.deepEqual(
      c.outbox.all().map((m) => [m.targetShard, m.body.type]),
      [[0, 'watch']],
      'both applied; the first one’s child asks its parent’s shard',
    );
  });

  it('finds a parent that ended and left memory while the store was asked about the flow’s jobs', () => {
    const c = cluster();
    c.b.register('wb', 1);
    const parent = c.b.submit({ queue: QUEUE[1] });
    const ids = submitFlow(c.a, [job('x', QUEUE[0]), job('y', QUEUE[1], [parent])]);
    c.b.holdReads = true;
    c.b.deliverOutbox(); // the store is asked about y; its parent is in memory
    assert.equal(c.b.heldReads.length, 1);
    c.b.result(parent, { result: 'p' }); // it ends, and leaves memory once committed
    c.b.holdReads = false;
    c.b.answerHeldReads();
    const y = c.b.status(idOf(ids, 'y'));
    assert.equal(y.state, 'RUNNING', y.error ?? '');
  });

  it('survives a restart of either side between a commit and the apply', () => {
    const c = cluster();
    const ids = submitFlow(c.a, [
      job('p1', QUEUE[0]),
      job('p2', QUEUE[0]),
      job('child', QUEUE[1], ['p1', 'p2']),
    ]);
    // The sender restarts with its message unread: it is in the outbox still.
    c.a.restart();
    pump(c);
    // The receiver of the watches restarts after applying them: its
    // remote dependents are recovered.
    c.a.restart();
    assert.equal(c.a.core.inspect().shardLinks.watched, 2);
    c.a.register('wa', 2);
    c.b.register('wb', 1, null, { parents: true });
    c.a.result(idOf(ids, 'p1'), { result: 'one' });
    // The child's shard restarts before it hears of p1's end...
    c.b.restart();
    c.b.register('wb', 1, null, { parents: true });
    pump(c);
    assert.equal(statusIn(c, idOf(ids, 'child')).state, 'WAITING');
    // ...and again after: it recovers p1's end, and waits for p2 only.
    c.b.restart();
    c.b.register('wb', 1, null, { parents: true });
    assert.equal(statusIn(c, idOf(ids, 'child')).state, 'WAITING');
    c.a.result(idOf(ids, 'p2'), { result: 'two' });
    pump(c);
    const assigned = c.b.assignmentOf(idOf(ids, 'child'));
    assert.deepEqual(
      assigned.parents?.map((p) => [p.jobId, p.result]),
      [
        [idOf(ids, 'p1'), 'one'],
        [idOf(ids, 'p2'), 'two'],
      ],
    );
    // A restart with the child released keeps its parents' results.
    c.b.restart();
    c.b.tick(60_000 * 60 * 2); // its worker never came back: the attempt was interrupted
    c.b.register('wb', 1, null, { parents: true });
    c.b.tick(60_000);
    assert.equal(c.b.assignmentsOf(idOf(ids, 'child')).length, 2);
    const again = c.b.assignmentOf(idOf(ids, 'child'));
    assert.deepEqual(
      again.parents?.map((p) => p.result),
      ['one', 'two'],
    );
  });
});
