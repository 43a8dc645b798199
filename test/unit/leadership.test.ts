import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Leadership, type LeadershipAction } from '../../src/coordinator/leadership/leadership.js';
import { MemoryLease, type LeaseHolder } from '../../src/store/lease.js';

const TTL = 1_000;
const RENEW = 200;
const holder = (nodeId: string): LeaseHolder => ({
  nodeId,
  workerAddress: `${nodeId}:1`,
  clientAddress: `${nodeId}:2`,
});

/** A leadership wired to a shared MemoryLease on a manual clock, answering at once. */
class Node {
  readonly leadership: Leadership;
  readonly log: LeadershipAction[] = [];
  constructor(
    readonly id: string,
    readonly lease: MemoryLease,
  ) {
    this.leadership = new Leadership({ ttlMs: TTL, renewIntervalMs: RENEW }, holder(id));
  }
  /** One tick at `now`, with every lease operation answered at once. */
  tick(now: number): LeadershipAction[] {
    const out: LeadershipAction[] = [];
    const run = (actions: LeadershipAction[]): void => {
      for (const action of actions) {
        out.push(action);
        if (action.kind === 'acquire') {
          run(this.leadership.acquireDone(this.lease.tryAcquireNow(holder(this.id), TTL), now));
        } else if (action.kind === 'renew') {
          run(this.leadership.renewDone(this.lease.renewNow(this.id, action.epoch, TTL), now));
        } else if (action.kind === 'release') {
          this.lease.releaseNow(this.id, action.epoch);
        }
      }
    };
    run(this.leadership.tick(now));
    this.log.push(...out);
    return out;
  }
}

const kinds = (actions: LeadershipAction[]) => actions.map((a) => a.kind);

describe('Leadership', () => {
  it('leads at once when the lease is free, and a second node stands by naming the leader', () => {
    let now = 0;
    const lease = new MemoryLease(() => now);
    const a = new Node('a', lease);
    const b = new Node('b', lease);
    assert.deepEqual(a.tick(now), [{ kind: 'acquire' }, { kind: 'lead', epoch: 1 }]);
    assert.deepEqual(kinds(b.tick(now)), ['acquire']);
    assert.equal(b.leadership.mode, 'standby');
    assert.deepEqual(b.leadership.leader, holder('a'));
    assert.equal(b.leadership.leaderEpoch, 1);
    now = 10;
    assert.equal(a.leadership.leadsAt(now), true);
  });

  it('renews every interval and keeps leading while renewals succeed', () => {
    let now = 0;
    const lease = new MemoryLease(() => now);
    const a = new Node('a', lease);
    a.tick(now);
    for (now = RENEW; now <= 10 * TTL; now += RENEW) {
      assert.deepEqual(kinds(a.tick(now)), ['renew']);
      assert.equal(a.leadership.leadsAt(now), true);
    }
  });

  it('steps down when its validity passes without a renewal, before the lease expires for others', () => {
    let now = 0;
    const lease = new MemoryLease(() => now);
    const a = new Node('a', lease);
    const b = new Node('b', lease);
    a.tick(now);
    // a's renewals never come back (frozen, partitioned): it gives up at ttl - safety ...
    const validUntil = a.leadership.nextWakeAtMs();
    a.leadership.tick(RENEW); // a renew goes out and never returns
    now = TTL - TTL / 5;
    assert.equal(a.leadership.leadsAt(now - 1), true);
    assert.deepEqual(a.leadership.tick(now), [
      { kind: 'stepDown', epoch: 1, reason: 'lease not renewed in time' },
    ]);
    assert.ok(validUntil <= now);
    // ... while b cannot take over before the lease itself expired
    assert.deepEqual(kinds(b.tick(now)), ['acquire']);
    assert.equal(b.leadership.mode, 'standby');
    now = TTL + 1;
    assert.deepEqual(kinds(b.tick(now)), ['acquire', 'lead']);
    assert.equal(b.leadership.epoch, 2);
  });

  it('steps down when a renewal finds the epoch taken over', () => {
    let now = 0;
    const lease = new MemoryLease(() => now);
    const a = new Node('a', lease);
    a.tick(now);
    // a's renewal is slow; meanwhile the lease expires and b takes it
    assert.deepEqual(a.leadership.tick(RENEW), [{ kind: 'renew', epoch: 1 }]);
    now = TTL + 1;
    const b = new Node('b', lease);
    b.tick(now);
    assert.equal(b.leadership.epoch, 2);
    assert.deepEqual(a.leadership.renewDone(lease.renewNow('a', 1, TTL), now), [
      { kind: 'stepDown', epoch: 1, reason: 'lease taken over' },
    ]);
    assert.equal(a.leadership.epoch, null);
  });

  it('ignores a renewal that was sent for an earlier epoch', () => {
    const now = 0;
    const lease = new MemoryLease(() => now);
    const a = new Node('a', lease);
    a.tick(now);
    a.leadership.tick(RENEW); // renew of epoch 1 in flight
    assert.deepEqual(kinds(a.leadership.lost('fenced', RENEW + 1)), ['stepDown']);
    assert.deepEqual(a.leadership.renewDone(true, RENEW + 2), []);
    assert.equal(a.leadership.mode, 'standby');
  });

  it('releases the lease after a failed term so that another node leads at its next try', () => {
    let now = 0;
    const lease = new MemoryLease(() => now);
    const a = new Node('a', lease);
    const b = new Node('b', lease);
    a.tick(now);
    assert.deepEqual(kinds(a.leadership.lost('failed', 5)), ['stepDown', 'release']);
    lease.releaseNow('a', 1);
    now = RENEW;
    assert.deepEqual(kinds(b.tick(now)), ['acquire', 'lead']);
    // a waits its turn and then stands by
    assert.deepEqual(kinds(a.tick(now)), []);
    now = 5 + RENEW;
    assert.deepEqual(kinds(a.tick(now)), ['acquire']);
    assert.equal(a.leadership.mode, 'standby');
  });

  it('keeps leading through failed renewals until its validity passes', () => {
    let now = 0;
    const lease = new MemoryLease(() => now);
    const a = new Node('a', lease);
    a.tick(now);
    now = RENEW;
    assert.deepEqual(kinds(a.leadership.tick(now)), ['renew']);
    assert.deepEqual(kinds(a.leadership.operationFailed(now)), []);
    now = 2 * RENEW;
    assert.deepEqual(kinds(a.leadership.tick(now)), ['renew']);
    assert.deepEqual(a.leadership.renewDone(true, now), []);
    assert.equal(a.leadership.leadsAt(now + TTL / 2), true);
  });

  it('gives the lease up on stop and does nothing more', () => {
    let now = 0;
    const lease = new MemoryLease(() => now);
    const a = new Node('a', lease);
    a.tick(now);
    assert.deepEqual(kinds(a.leadership.stop()), ['stepDown', 'release']);
    assert.deepEqual(a.leadership.tick((now = 10 * TTL)), []);
    assert.equal(a.leadership.nextWakeAtMs(), Number.POSITIVE_INFINITY);
  });

  it("asks for no wake-up while an operation is in flight, but the end of a leader's validity", () => {
    let now = 0;
    const lease = new MemoryLease(() => now);
    const a = new Leadership({ ttlMs: TTL, renewIntervalMs: RENEW }, holder('a'));
    assert.deepEqual(a.tick(now), [{ kind: 'acquire' }]);
    // The answer is slower than the renew interval: nothing to do until it comes.
    assert.equal(a.nextWakeAtMs(), Number.POSITIVE_INFINITY);
    now = 50;
    a.acquireDone(lease.tryAcquireNow(holder('a'), TTL), now);
    assert.equal(a.nextWakeAtMs(), now + RENEW);
    now += RENEW;
    assert.deepEqual(a.tick(now), [{ kind: 'renew', epoch: 1 }]);
    // A slow renewal: the next wake-up is the end of the validity, not the past renew time.
    assert.equal(a.nextWakeAtMs(), TTL - TTL / 5);
    now = TTL - TTL / 5;
    assert.deepEqual(kinds(a.tick(now)), ['stepDown']);
  });

  it('refuses a renew interval above half the ttl', () => {
    assert.throws(() => new Leadership({ ttlMs: 1_000, renewIntervalMs: 600 }, holder('a')));
  });

  it('gives back a lease whose grant came back too late to be trusted', () => {
    let now = 0;
    const lease = new MemoryLease(() => now);
    const a = new Leadership({ ttlMs: TTL, renewIntervalMs: RENEW }, holder('a'));
    assert.deepEqual(a.tick(now), [{ kind: 'acquire' }]);
    const granted = lease.tryAcquireNow(holder('a'), TTL);
    now = TTL; // the answer arrived after the lease could have ended
    assert.deepEqual(a.acquireDone(granted, now), [{ kind: 'release', epoch: 1 }]);
    assert.equal(a.mode, 'standby');
    assert.equal(a.leader, null);
  });
});
