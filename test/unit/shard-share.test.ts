import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaderElection } from '../../src/coordinator/leadership/leader-election.js';
import { Leadership, type LeadershipAction } from '../../src/coordinator/leadership/leadership.js';
import { ShardShare } from '../../src/coordinator/leadership/shard-share.js';
import { MemoryLease, type LeaseHolder, type LeaseView } from '../../src/store/lease.js';
import { silentLogger } from '../helpers/logger.js';

const holder = (nodeId: string): LeaseHolder => ({
  nodeId,
  workerAddress: null,
  clientAddress: null,
});

describe('ShardShare', () => {
  it('gives every member floor or ceil of shards/members, adding up to the shards', () => {
    for (const [shards, count] of [
      [16, 1],
      [16, 2],
      [16, 3],
      [16, 5],
      [3, 8],
      [1024, 7],
    ] as const) {
      const ids = Array.from({ length: count }, (_, i) => `node-${i}`);
      const share = new ShardShare(shards, 'node-0', 1_000);
      share.membersSeen(ids);
      const shares = ids.map((id) => share.shareOf(id));
      assert.equal(
        shares.reduce((a, b) => a + b, 0),
        shards,
      );
      assert.ok(Math.max(...shares) - Math.min(...shares) <= 1, `${shares.join(',')}`);
    }
  });

  it('counts itself among the members even when the list missed it', () => {
    const share = new ShardShare(16, 'b', 1_000);
    share.membersSeen(['a', 'c']);
    assert.deepEqual(share.members, ['a', 'b', 'c']);
    assert.equal(share.shareOf(), 5);
    assert.equal(share.shareOf('a'), 6);
  });

  it('lets a standby try only while led + tries in flight stay below the share', () => {
    const share = new ShardShare(16, 'a', 1_000);
    share.membersSeen(['a', 'b']);
    assert.equal(share.mayAcquire(7, 0, 0), true);
    assert.equal(share.mayAcquire(7, 1, 0), false);
    assert.equal(share.mayAcquire(8, 0, 0), false);
    // A shard free for long is anyone's.
    assert.equal(share.mayAcquire(8, 0, 1_000), true);
  });

  it('hands over what it leads above its share, all in one round', () => {
    const share = new ShardShare(16, 'a', 1_000);
    share.membersSeen(['a']);
    assert.equal(share.toHandOver(16), 0);
    share.membersSeen(['a', 'b', 'c']);
    assert.equal(share.shareOf(), 6);
    // A coordinator joining a database of 64 shards waits one round for its
    // part, not 32: the simulation's liveness bound (3 ttl + 2 renewals).
    assert.equal(share.toHandOver(16), 10);
    assert.equal(share.toHandOver(7), 1);
    assert.equal(share.toHandOver(6), 0);
    assert.equal(share.toHandOver(2), 0);
  });
});

describe('Leadership with an acquire gate', () => {
  const config = { ttlMs: 1_000, renewIntervalMs: 200 };

  it('does not try to take the lease while the gate is shut, and tries once it opens', () => {
    let open = false;
    const lease = new MemoryLease(() => 0);
    const node = new Leadership(config, holder('a'), { mayAcquire: () => open });
    assert.deepEqual(node.tick(0), []);
    assert.equal(node.acquiring, false);
    open = true;
    assert.deepEqual(node.tick(100), [], 'waits for its next round');
    const actions = node.tick(200);
    assert.deepEqual(actions, [{ kind: 'acquire' }]);
    assert.equal(node.acquiring, true);
    const lead = node.acquireDone(lease.tryAcquireNow(holder('a'), 1_000), 200);
    assert.deepEqual(lead, [{ kind: 'lead', epoch: 1 }]);
  });

  it('keeps renewing while leading whatever the gate says', () => {
    let open = true;
    const lease = new MemoryLease(() => 0);
    const node = new Leadership(config, holder('a'), { mayAcquire: () => open });
    node.tick(0);
    node.acquireDone(lease.tryAcquireNow(holder('a'), 1_000), 0);
    open = false;
    assert.deepEqual(node.tick(200), [{ kind: 'renew', epoch: 1 }]);
  });

  it('takes its turn now when asked to (tryNow) only if the gate held it back at the last one', () => {
    let open = false;
    const lease = new MemoryLease(() => 0);
    const node = new Leadership(config, holder('a'), { mayAcquire: () => open });
    assert.deepEqual(node.tryNow(0), [], 'not held back yet: it has not had a turn');
    assert.deepEqual(node.tick(0), []);
    assert.deepEqual(node.tryNow(50), [], 'the gate still says no');
    open = true;
    // Not at its next turn (250): a round just opened the gate.
    assert.deepEqual(node.tryNow(60), [{ kind: 'acquire' }]);
    assert.deepEqual(node.tryNow(70), [], 'a try is in flight');
    node.acquireDone({ acquired: false, current: lease.view() }, 80);
    assert.deepEqual(node.tryNow(90), [], 'it tried: the next try waits for its turn');
    assert.deepEqual(node.tick(260), [{ kind: 'acquire' }]);
    node.acquireDone(lease.tryAcquireNow(holder('a'), 1_000), 270);
    assert.deepEqual(node.tryNow(280), [], 'a leader has nothing to try');
  });

  it('hands its lease over: steps down and releases, so another takes it at once', () => {
    let now = 0;
    const lease = new MemoryLease(() => now);
    const a = new Leadership(config, holder('a'));
    a.tick(0);
    a.acquireDone(lease.tryAcquireNow(holder('a'), 1_000), 0);
    now = 300;
    const actions: LeadershipAction[] = a.handOver(now);
    assert.deepEqual(
      actions.map((x) => x.kind),
      ['stepDown', 'release'],
    );
    assert.equal(a.mode, 'standby');
    lease.releaseNow('a', 1);
    assert.deepEqual(lease.tryAcquireNow(holder('b'), 1_000), { acquired: true, epoch: 2 });
    assert.deepEqual(a.handOver(now), [], 'a standby has nothing to hand over');
  });
});

describe('LeaderElection', () => {
  it('tells the shell whom a failed try found holding the lease (acquireFailed)', async () => {
    const lease = new MemoryLease(() => 0);
    lease.tryAcquireNow(holder('x'), 60_000);
    const seen: LeaseView[] = [];
    let resolve: () => void = () => undefined;
    const failed = new Promise<void>((done) => (resolve = done));
    const election = new LeaderElection(
      { ttlMs: 60_000, renewIntervalMs: 10_000 },
      holder('a'),
      lease,
      {
        lead: () => assert.fail('a held lease cannot be taken'),
        stepDown: () => undefined,
        acquireFailed: (current) => {
          seen.push(current);
          resolve();
        },
      },
      silentLogger(),
    );
    election.start();
    await failed;
    await election.stop();
    assert.deepEqual(seen, [{ epoch: 1, holder: holder('x'), live: true }]);
  });
});
