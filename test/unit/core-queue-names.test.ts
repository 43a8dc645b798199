/**
 * The core and queue names that do not exist yet: a pause or resume of a
 * queue without jobs or settings (refused for a resume and for a near miss
 * of an existing name, `UNKNOWN_QUEUE`, unless `create`; a new name is
 * paused and said `created`), and JOB_SUBMITTED saying that the job's queue
 * is paused.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SetQueue } from '../../src/protocol/messages.js';
import { CoreHarness, expectReply } from '../helpers/core-harness.js';

function setQueue(h: CoreHarness, msg: Omit<SetQueue, 'type'>) {
  return h.request({ type: 'SET_QUEUE', ...msg });
}

function storedPaused(h: CoreHarness, name: string): boolean | undefined {
  return h.store.committedQueues().find((q) => q.name === name)?.paused;
}

describe('core: pausing and resuming queues that do not exist', () => {
  it('pauses a new name ahead of its first job, and says the queue was created', () => {
    const h = new CoreHarness();
    const reply = expectReply(setQueue(h, { name: 'nightly', paused: true }), 'QUEUE_INFO');
    assert.equal(reply.created, true);
    assert.equal(reply.queue.paused, true);
    assert.equal(storedPaused(h, 'nightly'), true);
    // Known from now on (a setting): pausing again is no creation.
    const again = expectReply(setQueue(h, { name: 'nightly', paused: true }), 'QUEUE_INFO');
    assert.equal(again.created, undefined);
  });

  it('refuses a near miss of a queue that has jobs, naming it, and changes nothing', () => {
    const h = new CoreHarness();
    h.submit({ queue: 'reports' });
    const reply = expectReply(setQueue(h, { name: 'reprots', paused: true }), 'ERROR');
    assert.equal(reply.code, 'UNKNOWN_QUEUE');
    assert.match(reply.message, /Unknown queue "reprots".*did you mean "reports"\?.*--create/);
    assert.equal(storedPaused(h, 'reprots'), undefined);
    const created = setQueue(h, { name: 'reprots', paused: true, create: true });
    assert.equal(expectReply(created, 'QUEUE_INFO').created, true);
    assert.equal(storedPaused(h, 'reprots'), true);
  });

  it('refuses a near miss of a queue that has only a setting', () => {
    const h = new CoreHarness();
    expectReply(setQueue(h, { name: 'emails', concurrency: 2 }), 'QUEUE_INFO');
    const reply = expectReply(setQueue(h, { name: 'email', paused: true }), 'ERROR');
    assert.match(reply.message, /did you mean "emails"/);
  });

  it('refuses to resume a queue without jobs or settings, unless create', () => {
    const h = new CoreHarness();
    const reply = expectReply(setQueue(h, { name: 'ghost', paused: false }), 'ERROR');
    assert.equal(reply.code, 'UNKNOWN_QUEUE');
    assert.match(reply.message, /nothing to resume/);
    assert.equal(h.store.committedQueues().length, 0);
    expectReply(setQueue(h, { name: 'ghost', paused: false, create: true }), 'QUEUE_INFO');
  });

  it('pauses and resumes a queue known only by its jobs, without a word about creation', () => {
    const h = new CoreHarness();
    h.submit({ queue: 'reports' });
    const paused = expectReply(setQueue(h, { name: 'reports', paused: true }), 'QUEUE_INFO');
    assert.equal(paused.created, undefined);
    assert.deepEqual(paused.queue.counts, { QUEUED: 1 });
    assert.equal(storedPaused(h, 'reports'), true);
    expectReply(setQueue(h, { name: 'reports', paused: false }), 'QUEUE_INFO');
    assert.equal(storedPaused(h, 'reports'), false);
  });

  it('never refuses set, which is how settings are made', () => {
    const h = new CoreHarness();
    h.submit({ queue: 'reports' });
    const reply = expectReply(setQueue(h, { name: 'reprots', concurrency: 3 }), 'QUEUE_INFO');
    assert.equal(reply.queue.concurrency, 3);
  });

  it('applies changes of one queue in the order they came, whatever order their reads answer in', () => {
    const h = new CoreHarness();
    h.submit({ queue: 'reports' });
    h.holdReads = true;
    h.handle({
      kind: 'clientRequest',
      connId: 7,
      requestId: 1,
      msg: { type: 'SET_QUEUE', name: 'reports', paused: true, concurrency: 2 },
    });
    h.handle({
      kind: 'clientRequest',
      connId: 7,
      requestId: 2,
      msg: { type: 'SET_QUEUE', name: 'reports', paused: false, clear: ['concurrency'] },
    });
    assert.equal(h.heldReads.length, 1, 'the second waits behind the first, without a read');
    h.holdReads = false;
    // Latest first: a store may answer concurrent reads in any order.
    for (const read of [...h.heldReads].reverse()) {
      h.handle({ kind: 'readDone', readId: read.readId, result: h.store.readNow(read.read) });
    }
    const replies = h.log.flatMap((e) =>
      e.kind === 'reply' && e.connId === 7 ? [[e.requestId, e.msg.type]] : [],
    );
    assert.deepEqual(replies, [
      [1, 'QUEUE_INFO'],
      [2, 'QUEUE_INFO'],
    ]);
    const settings = h.store.committedQueues().find((q) => q.name === 'reports');
    assert.deepEqual(
      [settings?.paused, settings?.concurrency],
      [false, null],
      'the later one wins',
    );
  });

  it('still refuses an invalid change at once, before looking for the queue', () => {
    const h = new CoreHarness();
    const reply = expectReply(setQueue(h, { name: '9bad', paused: true }), 'ERROR');
    assert.equal(reply.code, 'INVALID_REQUEST');
  });
});

describe('core: submitting into a paused queue', () => {
  it('says so in JOB_SUBMITTED (queuePaused), and not for a queue that runs', () => {
    const h = new CoreHarness();
    const running = expectReply(h.submitRequest({ queue: 'reports' }), 'JOB_SUBMITTED');
    assert.equal(running.queuePaused, undefined);
    expectReply(setQueue(h, { name: 'reports', paused: true }), 'QUEUE_INFO');
    const held = expectReply(h.submitRequest({ queue: 'reports' }), 'JOB_SUBMITTED');
    assert.equal(held.queuePaused, true);
    const other = expectReply(h.submitRequest({ queue: 'alerts' }), 'JOB_SUBMITTED');
    assert.equal(other.queuePaused, undefined);
  });
});
