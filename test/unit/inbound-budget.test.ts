/**
 * The inbound budget's pools: per class and per address, reservations that
 * wait instead of failing, granted oldest first, moved when a connection
 * authenticates, and never more than the limit in total.
 */
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, it } from 'node:test';
import {
  InboundBudget,
  PENDING_MAX_FRAME_BYTES,
  type InboundAccount,
} from '../../src/net/inbound-budget.js';
import { encodeMessage } from '../../src/protocol/codec.js';
import {
  MAX_CAPACITY,
  MAX_TASK_TYPES_PER_WORKER,
  MAX_WORKER_ID_LENGTH,
} from '../../src/protocol/limits.js';

const MIB = 1024 * 1024;

/** Lets the budget's deferred grants run. */
const settle = (): Promise<void> => nextTurn();

function waiter(account: InboundAccount, bytes: number, log: string[], name: string): void {
  account.wait(bytes, () => log.push(name));
}

describe('InboundBudget', () => {
  it('splits the limit into pools that add up to it, with a share per address', () => {
    const budget = new InboundBudget(16 * MIB);
    assert.deepEqual(budget.usage('pending'), {
      limitBytes: 4 * MIB,
      perAddressBytes: MIB,
      usedBytes: 0,
      waiting: 0,
    });
    assert.equal(budget.usage('client').limitBytes, 6 * MIB);
    assert.equal(budget.usage('worker').perAddressBytes, 2 * MIB);
  });

  it('keeps peers that have not authenticated out of the room of those that have', () => {
    const budget = new InboundBudget(16 * MIB);
    // Many addresses fill the whole pending pool...
    for (let i = 0; i < 4; i++) {
      for (let j = 0; j < 8; j++) {
        assert.ok(budget.account(`10.0.0.${i}`, 'pending').reserve(128 * 1024));
      }
    }
    assert.equal(budget.account('10.0.0.9', 'pending').reserve(128 * 1024), false);
    // ...and a client and a worker from one of those very addresses still get a frame each.
    assert.ok(budget.account('10.0.0.1', 'client').reserve(MIB));
    assert.ok(budget.account('10.0.0.1', 'worker').reserve(MIB));
    assert.ok(budget.usedBytes <= budget.limitBytes);
  });

  it('paces one address against its own share only', () => {
    const budget = new InboundBudget(16 * MIB);
    const flood = [1, 2].map(() => budget.account('::ffff:10.0.0.66', 'client'));
    assert.ok(flood[0]?.reserve(MIB));
    assert.ok(flood[1]?.reserve(MIB));
    assert.equal(budget.account('10.0.0.66', 'client').reserve(1), false, 'its share is full');
    assert.ok(budget.account('10.0.0.7', 'client').reserve(MIB), 'another address is not');
  });

  it('grants waiters oldest first as room frees, and never a closed one', async () => {
    const budget = new InboundBudget(16 * MIB);
    const holder = budget.account('10.0.0.1', 'client');
    assert.ok(holder.reserve(2 * MIB));
    const log: string[] = [];
    const [a, b, c] = ['a', 'b', 'c'].map(() => budget.account('10.0.0.1', 'client'));
    waiter(a as InboundAccount, MIB, log, 'a');
    waiter(b as InboundAccount, MIB, log, 'b');
    waiter(c as InboundAccount, MIB, log, 'c');
    // A newcomer does not jump the queue, even where the pool would have room.
    assert.equal(budget.account('10.0.0.1', 'client').reserve(1), false);
    await settle();
    assert.deepEqual(log, []);
    b?.close();
    holder.release();
    await settle();
    assert.deepEqual(log, ['a', 'c']);
    assert.equal(a?.reservedBytes, MIB);
    assert.equal(b?.reservedBytes, 0);
    assert.equal(budget.usage('client').usedBytes, 2 * MIB);
    assert.equal(budget.waitingCount, 0);
  });

  it('grants any one frame when an address holds nothing, however small the limit', async () => {
    const budget = new InboundBudget(MIB);
    const first = budget.account('10.0.0.1', 'worker');
    assert.ok(first.reserve(MIB), 'one frame always fits an empty share');
    const second = budget.account('10.0.0.1', 'worker');
    const log: string[] = [];
    assert.equal(second.reserve(MIB), false);
    waiter(second, MIB, log, 'second');
    first.release();
    await settle();
    assert.deepEqual(log, ['second']);
  });

  it('moves a reservation and a wait to the class a connection joins', async () => {
    const budget = new InboundBudget(16 * MIB);
    const conn = budget.account('10.0.0.1', 'pending');
    assert.ok(conn.reserve(100_000));
    conn.reclassify('client');
    assert.equal(budget.usage('pending').usedBytes, 0);
    assert.equal(budget.usage('client').usedBytes, 100_000);
    const full = budget.account('10.0.0.2', 'pending');
    for (let i = 0; i < 8; i++) budget.account('10.0.0.2', 'pending').reserve(128 * 1024);
    const log: string[] = [];
    waiter(full, 128 * 1024, log, 'moved');
    full.reclassify('client');
    await settle();
    assert.deepEqual(log, ['moved'], 'the client pool had room');
    conn.close();
    full.close();
    assert.equal(budget.usage('client').usedBytes, 0);
  });

  it('lets the largest legal WORKER_REGISTER through the cap before registration', () => {
    const frame = encodeMessage({
      type: 'WORKER_REGISTER',
      workerId: 'w'.repeat(MAX_WORKER_ID_LENGTH),
      capacity: MAX_CAPACITY,
      taskTypes: Array.from(
        { length: MAX_TASK_TYPES_PER_WORKER },
        (_, i) => `T${String(i).padStart(4, '0')}${'x'.repeat(59)}`,
      ),
      heartbeatAck: true,
      prefetch: 4 * MAX_CAPACITY,
      authToken: 't'.repeat(1_024),
    });
    assert.ok(frame.length < 80_000, `${frame.length} bytes`);
    assert.ok(frame.length - 4 <= PENDING_MAX_FRAME_BYTES);
  });
});
