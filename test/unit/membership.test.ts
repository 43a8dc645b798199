import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryMembership, type Member } from '../../src/store/membership.js';

const TTL = 1_000;
const member = (nodeId: string): Member => ({
  nodeId,
  clientAddress: `${nodeId}:1`,
  workerAddress: `${nodeId}:2`,
});

/** A membership on a manual clock. */
function setUp(): { membership: MemoryMembership; clock: { now: number } } {
  const clock = { now: 0 };
  return { membership: new MemoryMembership(() => clock.now), clock };
}

describe('MemoryMembership', () => {
  it('lists every live member, the caller included, sorted by nodeId', () => {
    const { membership, clock } = setUp();
    membership.heartbeatNow(member('c'), TTL);
    membership.heartbeatNow(member('a'), TTL);
    clock.now = 10;
    assert.deepEqual(membership.heartbeatNow(member('b'), TTL), [
      member('a'),
      member('b'),
      member('c'),
    ]);
  });

  it('drops a member that stopped heartbeating once its ttl passed, and forgets it after 10 ttls', () => {
    const { membership, clock } = setUp();
    membership.heartbeatNow(member('gone'), TTL);
    clock.now = TTL;
    assert.deepEqual(membership.heartbeatNow(member('stays'), TTL), [
      member('gone'),
      member('stays'),
    ]);
    clock.now = TTL + 1;
    assert.deepEqual(membership.heartbeatNow(member('stays'), TTL), [member('stays')]);
    assert.equal(membership.recorded().length, 2, 'dead but not yet forgotten');
    clock.now = TTL + 10 * TTL + 1;
    membership.heartbeatNow(member('stays'), TTL);
    assert.deepEqual(membership.recorded(), [member('stays')]);
  });

  it('takes a member back when it heartbeats again, with its new addresses', () => {
    const { membership, clock } = setUp();
    membership.heartbeatNow(member('a'), TTL);
    clock.now = 2 * TTL;
    const moved = { ...member('a'), clientAddress: 'elsewhere:1', httpAddress: 'a:3' };
    assert.deepEqual(membership.heartbeatNow(moved, TTL), [moved]);
  });

  it('removes a member that leaves at once', async () => {
    const { membership } = setUp();
    await membership.heartbeat(member('a'), TTL);
    await membership.heartbeat(member('b'), TTL);
    await membership.leave('a');
    assert.deepEqual(await membership.heartbeat(member('b'), TTL), [member('b')]);
    await membership.close();
  });

  it('sorts by code point, not by locale', () => {
    const { membership } = setUp();
    for (const id of ['b', 'B', 'a', 'Z']) membership.heartbeatNow(member(id), TTL);
    assert.deepEqual(
      membership.heartbeatNow(member('a'), TTL).map((m) => m.nodeId),
      ['B', 'Z', 'a', 'b'],
    );
  });
});
