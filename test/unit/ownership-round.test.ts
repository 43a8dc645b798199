import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Leadership } from '../../src/coordinator/leadership/leadership.js';
import { ShardShare } from '../../src/coordinator/leadership/shard-share.js';
import {
  OwnershipRound,
  type ShardElection,
} from '../../src/coordinator/sharding/ownership-round.js';
import { MemoryLease, type LeaseHolder, type LeaseView } from '../../src/store/lease.js';

const ORPHAN_MS = 1_000;
const FREE: LeaseView = { epoch: 1, holder: null, live: false };
const held = (nodeId: string): LeaseView => ({
  epoch: 1,
  holder: { nodeId, workerAddress: null, clientAddress: null },
  live: true,
});
const holder = (nodeId: string): LeaseHolder => ({
  nodeId,
  workerAddress: null,
  clientAddress: null,
});

const standby: ShardElection = { mode: 'standby', acquiring: false };
const trying: ShardElection = { mode: 'standby', acquiring: true };
const leader: ShardElection = { mode: 'leader', acquiring: false };

/** A round of `self` among `members` on `shards` shards. */
function roundOf(self: string, members: string[], shards: number): OwnershipRound {
  const round = new OwnershipRound(new ShardShare(shards, self, ORPHAN_MS));
  round.observe(
    members,
    Array.from({ length: shards }, () => FREE),
    0,
  );
  return round;
}

describe('OwnershipRound', () => {
  it('lets no standby try before its first round (the share is not known yet)', () => {
    const round = new OwnershipRound(new ShardShare(4, 'a', ORPHAN_MS));
    const elections = [standby, standby, standby, standby];
    assert.deepEqual(round.admitted(elections, 0), []);
    assert.equal(round.mayAcquire(0, elections, 0), false);
    round.observe(['a'], [FREE, FREE, FREE, FREE], 0);
    assert.deepEqual(round.admitted(elections, 0), [0, 1, 2, 3]);
  });

  it('admits only shards seen free, as many as it is short of its share, tries in flight counted', () => {
    const round = new OwnershipRound(new ShardShare(8, 'a', ORPHAN_MS));
    round.observe(['a', 'b'], [FREE, held('b'), FREE, FREE, held('b'), FREE, FREE, FREE], 0);
    const elections = Array.from({ length: 8 }, () => standby);
    // Share 4; shards 1 and 4 are held: a try there could only fail.
    assert.deepEqual(round.admitted(elections, 0), [0, 2, 6, 7]);
    assert.equal(round.mayAcquire(1, elections, 0), false);
    elections[0] = leader;
    elections[2] = trying;
    assert.deepEqual(round.admitted(elections, 0), [6, 7]);
    elections[6] = leader;
    elections[7] = leader;
    assert.deepEqual(round.admitted(elections, 0), []);
    assert.equal(round.mayAcquire(5, elections, 0), false);
  });

  it('prefers its own class of shards, then the others highest first, so members short at once do not collide', () => {
    const shards = 6;
    const elections = Array.from({ length: shards }, () => standby);
    const a = roundOf('a', ['a', 'b'], shards);
    const b = roundOf('b', ['a', 'b'], shards);
    // Three shards each, and the orders of preference: a 0 2 4 5 3 1, b 1 3 5 4 2 0.
    assert.deepEqual(a.admitted(elections, 0), [0, 2, 4]);
    assert.deepEqual(b.admitted(elections, 0), [1, 3, 5]);
    const c = roundOf('a', ['a', 'b'], shards);
    c.leaseSeen(2, held('b'), 0);
    c.leaseSeen(4, held('b'), 0);
    assert.deepEqual(c.admitted(elections, 0), [0, 5, 3]);
  });

  it('lets anyone take a shard free for orphanAfterMs, whatever its share', () => {
    const round = new OwnershipRound(new ShardShare(2, 'a', ORPHAN_MS));
    round.observe(['a', 'b'], [held('a'), FREE], 0);
    const elections = [leader, standby];
    assert.deepEqual(round.admitted(elections, 500), []);
    // A read that failed (null) keeps what was seen: the shard is still free since 0.
    round.observe(['a', 'b'], [held('a'), null], 600);
    assert.equal(round.freeForMs(1, 999), 999);
    assert.deepEqual(round.admitted(elections, ORPHAN_MS), [1]);
    // Seen held again: the count starts over.
    round.leaseSeen(1, held('b'), 1_100);
    assert.equal(round.freeForMs(1, 1_200), 0);
    round.leaseSeen(1, FREE, 1_300);
    assert.equal(round.freeForMs(1, 1_400), 100);
  });

  it('hands over the highest-numbered led shards, as many as it leads above its share', () => {
    const round = roundOf('a', ['a', 'b', 'c'], 9);
    const elections = [leader, leader, standby, leader, leader, leader, standby, leader, standby];
    assert.deepEqual(round.toHandOver(elections), [7, 5, 4]);
    const decision = round.decide(elections, 0);
    assert.deepEqual(decision.handOver, [7, 5, 4]);
    assert.deepEqual(decision.tryNow, [], 'at its share after the hand-over: nothing to take');
    assert.equal(decision.led, 6);
    round.observe(
      ['a'],
      Array.from({ length: 9 }, () => FREE),
      0,
    );
    assert.deepEqual(round.toHandOver(elections), []);
    assert.deepEqual(round.decide(elections, 0).tryNow, [2, 6, 8]);
  });

  it('gates a Leadership with the answers of the moment, and a round lets the admitted try at once', () => {
    let now = 0;
    const config = { ttlMs: 1_000, renewIntervalMs: 200 };
    const leases = [new MemoryLease(() => now), new MemoryLease(() => now)];
    const round = new OwnershipRound(new ShardShare(2, 'b', ORPHAN_MS));
    const elections: Leadership[] = [0, 1].map(
      (shard) =>
        new Leadership(
          config,
          holder('b'),
          round.gate(
            shard,
            () => elections,
            () => now,
          ),
        ),
    );
    // Before a round: held back.
    assert.deepEqual(elections[0]!.tick(now), []);
    assert.deepEqual(elections[1]!.tick(now), []);
    leases[1]!.tryAcquireNow(holder('a'), 1_000);
    now = 50;
    round.observe(
      ['a', 'b'],
      leases.map((l) => l.view()),
      now,
    );
    const decision = round.decide(elections, now);
    assert.deepEqual(decision.tryNow, [0]);
    assert.deepEqual(elections[0]!.tryNow(now), [{ kind: 'acquire' }]);
    assert.deepEqual(elections[0]!.acquireDone(leases[0]!.tryAcquireNow(holder('b'), 1_000), now), [
      { kind: 'lead', epoch: 1 },
    ]);
    // At its share: the standby of the shard a holds is held back at its turn.
    now = 200;
    assert.deepEqual(elections[1]!.tick(now), []);
  });

  it('refuses a round that read a lease count other than its shards', () => {
    const round = new OwnershipRound(new ShardShare(2, 'a', ORPHAN_MS));
    assert.throws(() => round.observe(['a'], [FREE], 0), RangeError);
  });
});
