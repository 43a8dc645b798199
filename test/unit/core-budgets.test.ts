/**
 * The core's budgets per address: pending waits and subscriptions of the
 * connections of one address count together against `maxWaitsPerAddress`
 * and `maxSubscriptionsPerAddress` (another address, and the in-process
 * client, keep being served); and a subscriber that has left its events
 * unread for `subscriberStallMs` is dropped to make room for a newcomer
 * before the newcomer is refused (TOO_MANY_SUBSCRIPTIONS).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CoreConfig, Effect } from '../../src/coordinator/core/types.js';
import type { ClientReply, ClientRequest } from '../../src/protocol/messages.js';
import { DEFAULT_COORDINATOR_OPTIONS } from '../../src/coordinator/options.js';
import { CoreHarness, effectsOf, eventsOf, expectReply } from '../helpers/core-harness.js';

const A = '10.0.0.1';
const B = '10.0.0.2';
const STALL_MS = 5_000;

function harness(config: Partial<CoreConfig>): CoreHarness {
  return new CoreHarness({ config: { subscriberStallMs: STALL_MS, ...config } });
}

let nextRequestId = 1;

/** A request from `address` on `connId`; its reply (undefined for a held wait) and all effects. */
function ask(
  h: CoreHarness,
  msg: ClientRequest,
  connId: number,
  address: string | null,
): { reply: ClientReply | undefined; effects: Effect[] } {
  const requestId = nextRequestId++;
  const effects = h.handle({
    kind: 'clientRequest',
    connId,
    requestId,
    msg,
    ...(address !== null && { address }),
  });
  const reply = effectsOf(effects, 'reply').find(
    (e) => e.connId === connId && e.requestId === requestId,
  );
  return { reply: reply?.msg, effects };
}

const SUBSCRIBE: ClientRequest = { type: 'SUBSCRIBE_JOBS', filter: {} };
const waitFor = (jobId: string): ClientRequest => ({
  type: 'WAIT_JOB',
  jobId,
  timeoutMillis: 60_000,
});

function stalled(h: CoreHarness, connId: number, isStalled = true): void {
  assert.deepEqual(h.handle({ kind: 'subscriberStalled', connId, stalled: isStalled }), []);
}

describe('core: pending waits per address', () => {
  it('counts the waits of every connection of an address together, and serves another address', () => {
    const h = harness({ maxWaitsPerAddress: 3 });
    const jobId = h.submit();
    for (const connId of [1, 2, 3])
      assert.equal(ask(h, waitFor(jobId), connId, A).reply, undefined);
    const refused = expectReply(ask(h, waitFor(jobId), 4, A).reply, 'ERROR');
    assert.equal(refused.code, 'TOO_MANY_WAITS');
    assert.match(refused.message, /from this address \(limit 3\)/);
    assert.equal(ask(h, waitFor(jobId), 5, B).reply, undefined, 'another address waits');
    assert.equal(ask(h, waitFor(jobId), 6, null).reply, undefined, 'the in-process client waits');
    assert.deepEqual(
      h.core.budgets().waitsByAddress,
      new Map([
        [A, 3],
        [B, 1],
      ]),
    );
    h.handle({ kind: 'clientClosed', connId: 2 });
    assert.equal(ask(h, waitFor(jobId), 4, A).reply, undefined, 'room again once one left');
  });

  it("with the coordinator's defaults, lets one host wait on each job of a bulk load of 100,000 and leaves room for others", () => {
    const { maxWaits, maxWaitsPerAddress, maxWaitsPerConnection } = DEFAULT_COORDINATOR_OPTIONS;
    const h = harness({ maxWaits, maxWaitsPerAddress, maxWaitsPerConnection });
    const jobId = h.submit();
    // 100,000 waits over 16 connections of one address, as a producer host waiting on every job.
    for (let i = 0; i < 100_000; i++) {
      assert.equal(ask(h, waitFor(jobId), 1 + (i % 16), A).reply, undefined);
    }
    const refused = expectReply(ask(h, waitFor(jobId), 1, A).reply, 'ERROR');
    assert.equal(refused.code, 'TOO_MANY_WAITS');
    for (let i = 0; i < 1_000; i++) {
      assert.equal(
        ask(h, waitFor(jobId), 100 + (i % 4), B).reply,
        undefined,
        'another address waits',
      );
    }
  });

  it('gives the address its place back when a wait ends in each way', () => {
    const h = harness({ maxWaitsPerAddress: 10 });
    h.register('w1', 1);
    const jobId = h.submit();
    ask(h, waitFor(jobId), 1, A);
    ask(h, waitFor(jobId), 1, A);
    ask(h, waitFor(jobId), 2, A);
    h.handle({ kind: 'releaseWaits', connId: 2 });
    assert.equal(h.core.budgets().waitsByAddress.get(A), 2);
    h.result(jobId);
    assert.deepEqual(h.core.budgets().waitsByAddress, new Map());
  });
});

describe('core: a wait whose read is out when its connection closes', () => {
  it('is not held once the read comes back, and costs its address nothing', () => {
    const h = new CoreHarness({
      config: { scheduledWindow: { windowMs: 10_000, limit: 100, marginMs: 0 } },
    });
    // Due far beyond the near window: a wait on it needs a read of the store.
    const far = h.submit({ runAtMillis: h.clock + 600_000 });
    h.holdReads = true;
    assert.equal(ask(h, waitFor(far), 1, A).reply, undefined);
    assert.equal(h.heldReads.length, 1);
    h.handle({ kind: 'clientClosed', connId: 1 });
    h.holdReads = false;
    const effects = h.answerHeldReads();
    assert.deepEqual(effectsOf(effects, 'armWait'), []);
    assert.equal(h.core.inspect().pendingWaits, 0);
    assert.deepEqual(h.core.budgets().waitsByAddress, new Map());
  });
});

describe('core: subscriptions per address', () => {
  it('refuses an address its budget and serves another address', () => {
    const h = harness({ maxSubscriptionsPerAddress: 2 });
    expectReply(ask(h, SUBSCRIBE, 1, A).reply, 'SUBSCRIBED');
    expectReply(ask(h, SUBSCRIBE, 2, A).reply, 'SUBSCRIBED');
    const refused = expectReply(ask(h, SUBSCRIBE, 3, A).reply, 'ERROR');
    assert.equal(refused.code, 'TOO_MANY_SUBSCRIPTIONS');
    assert.match(refused.message, /from this address \(limit 2\)/);
    expectReply(ask(h, SUBSCRIBE, 4, B).reply, 'SUBSCRIBED');
    expectReply(ask(h, SUBSCRIBE, 5, null).reply, 'SUBSCRIBED');
    assert.deepEqual(
      h.core.budgets().subscriptionsByAddress,
      new Map([
        [A, 2],
        [B, 1],
      ]),
    );
  });

  it('drops the subscriber of the address that stopped reading first, once stalled long enough', () => {
    const h = harness({ maxSubscriptionsPerAddress: 2 });
    expectReply(ask(h, SUBSCRIBE, 1, A).reply, 'SUBSCRIBED');
    expectReply(ask(h, SUBSCRIBE, 2, A).reply, 'SUBSCRIBED');
    expectReply(ask(h, SUBSCRIBE, 3, B).reply, 'SUBSCRIBED');
    stalled(h, 3); // another address: never dropped for A's budget
    h.clock += 1_000;
    stalled(h, 2);
    stalled(h, 1);
    h.clock += STALL_MS - 1;
    const early = ask(h, SUBSCRIBE, 4, A);
    assert.equal(expectReply(early.reply, 'ERROR').code, 'TOO_MANY_SUBSCRIPTIONS');
    assert.deepEqual(effectsOf(early.effects, 'close'), [], 'not stalled long enough yet');
    h.clock += 1;
    const { reply, effects } = ask(h, SUBSCRIBE, 4, A);
    expectReply(reply, 'SUBSCRIBED');
    assert.deepEqual(
      effectsOf(effects, 'close').map((e) => e.connId),
      [2],
      'the one that stalled first',
    );
    assert.deepEqual(eventsOf(effects, 'subscriber.dropped'), [
      { type: 'subscriber.dropped', connId: 2, address: A, stalledMs: STALL_MS, budget: 'address' },
    ]);
    h.submit();
    const pushed = effectsOf(h.last, 'push').flatMap((p) => p.connIds);
    assert.deepEqual(pushed.sort(), [1, 3, 4], 'the dropped subscriber is told nothing more');
  });

  it('keeps a subscriber that read again, and never drops the asking connection', () => {
    const h = harness({ maxSubscriptionsPerAddress: 2 });
    expectReply(ask(h, SUBSCRIBE, 1, A).reply, 'SUBSCRIBED');
    expectReply(ask(h, SUBSCRIBE, 2, A).reply, 'SUBSCRIBED');
    stalled(h, 1);
    stalled(h, 2);
    h.clock += STALL_MS;
    stalled(h, 1, false);
    const own = ask(h, SUBSCRIBE, 2, A);
    assert.equal(expectReply(own.reply, 'ERROR').code, 'TOO_MANY_SUBSCRIPTIONS');
    assert.deepEqual(effectsOf(own.effects, 'close'), []);
    assert.deepEqual(h.core.budgets().stalledSubscribers, new Map([[2, 1_000_000]]));
  });
});

describe('core: the total of subscriptions', () => {
  it('drops a stalled subscriber of any address for a newcomer, else refuses it', () => {
    const h = harness({ maxSubscriptions: 2 });
    expectReply(ask(h, SUBSCRIBE, 1, A).reply, 'SUBSCRIBED');
    expectReply(ask(h, SUBSCRIBE, 2, B).reply, 'SUBSCRIBED');
    const refused = expectReply(ask(h, SUBSCRIBE, 3, B).reply, 'ERROR');
    assert.match(refused.message, /on this coordinator \(limit 2\)/);
    stalled(h, 1);
    h.clock += STALL_MS;
    const { reply, effects } = ask(h, SUBSCRIBE, 3, B);
    expectReply(reply, 'SUBSCRIBED');
    assert.deepEqual(
      eventsOf(effects, 'subscriber.dropped').map((e) => [e.connId, e.address, e.budget]),
      [[1, A, 'total']],
    );
    assert.equal(h.core.inspect().subscriptions, 2);
    // The dropped connection's end comes later and changes nothing more.
    assert.deepEqual(h.handle({ kind: 'clientClosed', connId: 1 }), []);
  });

  it('ignores a stall reported for a connection without subscriptions', () => {
    const h = harness({ maxSubscriptions: 1 });
    stalled(h, 7);
    expectReply(ask(h, SUBSCRIBE, 1, A).reply, 'SUBSCRIBED');
    h.clock += STALL_MS;
    assert.equal(
      expectReply(ask(h, SUBSCRIBE, 2, B).reply, 'ERROR').code,
      'TOO_MANY_SUBSCRIPTIONS',
    );
  });
});
