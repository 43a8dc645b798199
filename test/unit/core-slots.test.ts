/**
 * Workers above 1,024 slots (feature `slots`): a registration sends
 * `capacity: 1024` and `slots: 1025..10,000`, and the session's capacity is
 * `slots` everywhere (routing, prefetch bound, LIST_WORKERS, events). The
 * v1 field keeps its range: a capacity above 1,024 is still refused, and so
 * is `slots` out of range or beside another capacity. Prefetch stops
 * growing at 4,096 whatever the capacity.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_CAPACITY, MAX_PREFETCH, MAX_SLOTS, maxPrefetch } from '../../src/protocol/limits.js';
import { CoreHarness, eventsOf, expectReply, messagesOf } from '../helpers/core-harness.js';

function listed(h: CoreHarness) {
  return expectReply(h.request({ type: 'LIST_WORKERS' }), 'WORKER_LIST').workers;
}

/** The ERROR a registration got, or undefined when it was accepted. */
function refusal(
  h: CoreHarness,
  connId: number,
): { code: string | null; message: string } | undefined {
  return messagesOf(h.last, 'ERROR', connId)[0];
}

describe('core: a worker with more than 1,024 slots', () => {
  it('offers slots and uses them as the session capacity in the listing and the events', () => {
    const h = new CoreHarness();
    const connId = h.register('big', MAX_CAPACITY, null, { slots: 5000 });
    const [registered] = messagesOf(h.last, 'WORKER_REGISTERED', connId);
    assert.ok(registered?.features?.includes('slots'), 'the feature is offered');
    assert.equal(eventsOf(h.last, 'worker.registered')[0]?.capacity, 5000);
    assert.equal(listed(h)[0]?.capacity, 5000);
    assert.equal(h.core.inspect().freeSlots, 5000);
  });

  it('runs more than 1,024 attempts at once on one session', () => {
    const h = new CoreHarness();
    h.register('big', MAX_CAPACITY, null, { slots: 1100 });
    for (let i = 0; i < 1100; i++) h.submit();
    const extra = h.submit();
    assert.equal(h.running().get('big')?.length, 1100);
    assert.equal(h.status(extra).state, 'QUEUED', 'the 1,101st waits for a slot');
    assert.deepEqual(
      [listed(h)[0]?.activeTasks, h.core.inspect().freeSlots],
      [1100, 0],
      'every slot is busy',
    );
  });

  it('prefers the worker with the most idle slots among large and small ones', () => {
    const h = new CoreHarness();
    h.register('small', 4);
    h.register('big', MAX_CAPACITY, null, { slots: 2000 });
    const jobId = h.submit();
    assert.equal(h.assignmentOf(jobId).workerId, 'big');
  });

  it('refuses slots out of range, beside another capacity, and a v1 capacity above 1,024', () => {
    const cases: [number, number | undefined, RegExp][] = [
      [MAX_CAPACITY, MAX_CAPACITY, /slots must be 1025\.\.10000, got 1024/],
      [MAX_CAPACITY, MAX_SLOTS + 1, /slots must be 1025\.\.10000, got 10001/],
      [512, 5000, /slots must come with capacity 1024, got capacity 512/],
      [MAX_CAPACITY + 1, undefined, /capacity must be 1\.\.1024, got 1025/],
      [5000, 5000, /capacity must be 1\.\.1024, got 5000/],
    ];
    for (const [capacity, slots, message] of cases) {
      const h = new CoreHarness();
      const connId = h.register('w', capacity, null, slots === undefined ? {} : { slots });
      const error = refusal(h, connId);
      assert.equal(error?.code, 'INVALID_REGISTRATION', `capacity ${capacity}, slots ${slots}`);
      assert.match(error?.message ?? '', message);
      assert.equal(h.core.inspect().workers.length, 0);
    }
  });

  it('accepts the largest slot count', () => {
    const h = new CoreHarness();
    const connId = h.register('w', MAX_CAPACITY, null, { slots: MAX_SLOTS });
    assert.equal(refusal(h, connId), undefined);
    assert.equal(listed(h)[0]?.capacity, MAX_SLOTS);
  });
});

describe('core: the prefetch bound', () => {
  it('is 4 x capacity up to 1,024 and 4,096 beyond', () => {
    assert.equal(maxPrefetch(1), 4);
    assert.equal(maxPrefetch(MAX_CAPACITY), MAX_PREFETCH);
    assert.equal(maxPrefetch(MAX_SLOTS), MAX_PREFETCH);
    assert.equal(MAX_PREFETCH, 4096);
  });

  it('takes 4,096 from a worker of 10,000 slots and refuses one more', () => {
    const ok = new CoreHarness();
    const okConn = ok.register('w', MAX_CAPACITY, null, { slots: MAX_SLOTS, prefetch: 4096 });
    assert.equal(refusal(ok, okConn), undefined);
    assert.equal(ok.core.inspect().workers[0]?.prefetch, 4096);
    const over = new CoreHarness();
    const overConn = over.register('w', MAX_CAPACITY, null, { slots: MAX_SLOTS, prefetch: 4097 });
    assert.match(refusal(over, overConn)?.message ?? '', /prefetch must be 0\.\.4096/);
  });

  it('keeps 4 x capacity for a v1 capacity', () => {
    const h = new CoreHarness();
    const connId = h.register('w', 2, null, { prefetch: 9 });
    assert.match(refusal(h, connId)?.message ?? '', /prefetch must be 0\.\.8 /);
  });
});
