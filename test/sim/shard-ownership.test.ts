/**
 * The simulation of sharded leadership (shard-ownership.ts) as a test: a
 * fixed batch of seeds, each checked against every invariant at every
 * step; that a seed replays identically; that the batch reaches what the
 * invariants are about (settled stretches, clean stops, hand-overs, every
 * fault); and that each invariant does fail on a planted bug (a checker
 * that can never fail proves nothing).
 *
 * More seeds: `node dist/test/sim/ownership-run.js --seeds 10000`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  OwnershipSimulation,
  ownershipReplay,
  type OwnershipReport,
  type Sabotage,
} from './shard-ownership.js';
import { SimMembership } from './sim-membership.js';
import { SimulationViolation } from './violation.js';

const SEEDS = 300;

function runSeed(seed: number): OwnershipReport {
  try {
    return new OwnershipSimulation(seed).run();
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    return assert.fail(
      `ownership seed ${seed} failed; replay: ${ownershipReplay(seed)}\n${detail}`,
    );
  }
}

/** The first violation a planted bug causes in seeds 1..40. */
function firstViolation(sabotage: Sabotage): SimulationViolation {
  for (let seed = 1; seed <= 40; seed++) {
    try {
      new OwnershipSimulation(seed, { sabotage }).run();
    } catch (err) {
      if (err instanceof SimulationViolation) return err;
      throw err;
    }
  }
  return assert.fail(`no seed of 1..40 caught the planted bug ${sabotage}`);
}

describe('sharded leadership simulation', () => {
  it(`keeps every invariant at every step on seeds 1..${SEEDS}, and reaches what they are about`, () => {
    const reports = Array.from({ length: SEEDS }, (_, i) => runSeed(i + 1));
    const sum = (pick: (r: OwnershipReport) => number): number =>
      reports.reduce((total, r) => total + pick(r), 0);
    assert.ok(sum((r) => r.settledSteps) > 0, 'no step was checked settled');
    assert.ok(sum((r) => r.stopsChecked) > 20, 'too few clean stops were checked');
    assert.ok(sum((r) => r.handOvers) > 0, 'no shard was handed over');
    assert.ok(sum((r) => r.slowOperations) > 0 && sum((r) => r.failedOperations) > 0);
    for (const kind of ['kill', 'freeze', 'restart', 'add', 'stop'] as const) {
      assert.ok(sum((r) => r.faults[kind]) > 0, `no ${kind} fault`);
    }
    assert.ok(reports.some((r) => r.shards === 1) && reports.some((r) => r.shards === 64));
  });

  it('replays a seed identically when run twice', () => {
    const first = new OwnershipSimulation(4242).run();
    assert.deepEqual(new OwnershipSimulation(4242).run(), first);
    assert.ok(first.leads > 0 && first.steps > 0);
  });

  it('catches leases that end before their holders stop trusting them (fencing)', () => {
    const violation = firstViolation('shortLeases');
    assert.match(violation.description, /both lead|leads under epoch \d+, but the lease is at/);
    assert.match(violation.message, /ownership-run\.js --seed \d+/);
  });

  it('catches a clean stop that releases nothing (its shards wait for expiry)', () => {
    const violation = firstViolation('stopWithoutRelease');
    assert.match(violation.description, /were not led elsewhere within the ttl/);
  });

  it('catches rounds that hand over one shard at most (balance takes too long)', () => {
    const violation = firstViolation('oneHandOverPerRound');
    assert.match(violation.description, /led by no running process|leads \d+ of \d+ shards/);
  });
});

describe('SimMembership', () => {
  it('lists the live members sorted; an entry lives while lastSeen + ttl >= now; leave drops it', () => {
    let now = 0;
    const membership = new SimMembership(() => now);
    assert.deepEqual(membership.heartbeat('b', 100), ['b']);
    now = 50;
    assert.deepEqual(membership.heartbeat('a', 100), ['a', 'b']);
    now = 100;
    assert.deepEqual(membership.live(), ['a', 'b']);
    now = 101;
    assert.deepEqual(membership.live(), ['a']);
    assert.deepEqual(membership.heartbeat('b', 100), ['a', 'b']);
    membership.leave('a');
    assert.deepEqual(membership.live(), ['b']);
  });
});
