/**
 * The simulation of several shard leaders over one store
 * (sharded-simulator.ts) as a test: the odd seeds of a fixed batch (the
 * even ones are sharded-sim-even-seeds.test.ts), each checked against every
 * shard's invariants and those across shards after every step; that the
 * batch reaches what the checks across shards are about; that a seed
 * replays identically; and that planted bugs are caught (a checker that can
 * never fail proves nothing).
 *
 * More seeds: `node dist/test/sim/sharded-run.js --seeds 10000`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SHARDED_REGRESSION_SEEDS } from './regression-seeds.js';
import {
  SHARDED_DEFAULT_STEPS,
  ShardedSimulation,
  type ShardSabotage,
} from './sharded-simulator.js';
import {
  SHARDED_SEED_COUNT,
  SHARDED_TEST_STEPS,
  runShardedSeed,
  runShardedSeeds,
} from './sharded-seed-run.js';
import { SimulationViolation } from './violation.js';

/** The first violation a planted bug causes in seeds 1..30. */
function firstViolation(sabotage: ShardSabotage): SimulationViolation {
  for (let seed = 1; seed <= 30; seed++) {
    try {
      new ShardedSimulation(seed, { steps: SHARDED_TEST_STEPS, sabotage }).run();
    } catch (err) {
      if (err instanceof SimulationViolation) return err;
      throw err;
    }
  }
  return assert.fail(`no seed of 1..30 caught the planted bug ${sabotage}`);
}

describe('sharded simulation', () => {
  it(`keeps every invariant after every step on the odd seeds of 1..${SHARDED_SEED_COUNT}, and reaches what they are about`, () => {
    const reports = runShardedSeeds(1);
    const sum = (pick: (r: (typeof reports)[number]) => number): number =>
      reports.reduce((total, r) => total + pick(r), 0);
    for (const shards of [2, 3, 4]) {
      assert.ok(
        reports.some((r) => r.shards === shards),
        `no run with ${shards} shards`,
      );
    }
    assert.ok(sum((r) => r.outbox.createJobs) > 0, 'no flow crossed shards');
    assert.ok(sum((r) => r.outbox.watch) > 0 && sum((r) => r.outbox.parentEnded) > 0);
    assert.ok(
      sum((r) => r.cross.ackedElsewhere) > 0,
      'no job acknowledged before its shard made it',
    );
    assert.ok(sum((r) => r.cross.remoteCascades) > 0, 'no dependent cancelled across shards');
    assert.ok(
      sum((r) => r.cross.remoteWaits) > 0,
      'no ctx.waitFor ended on a job of another shard',
    );
    assert.ok(sum((r) => r.reads.duplicated) > 0 && sum((r) => r.reads.failed) > 0);
    assert.ok(sum((r) => r.restarts) > 0 && sum((r) => r.failovers) > 0);
    assert.ok(sum((r) => r.fencedCommits) > 0, "no deposed leader's commit was refused");
  });

  for (const regression of SHARDED_REGRESSION_SEEDS) {
    it(`keeps every invariant on regression seed ${regression.seed} (${regression.note})`, () => {
      runShardedSeed(regression.seed, regression.steps ?? SHARDED_DEFAULT_STEPS);
    });
  }

  it('replays a seed identically when run twice', () => {
    const first = new ShardedSimulation(4242, { steps: SHARDED_TEST_STEPS }).run();
    assert.deepEqual(new ShardedSimulation(4242, { steps: SHARDED_TEST_STEPS }).run(), first);
    assert.ok(first.jobsCreated > 0 && first.outbox.applied > 0);
  });

  it('catches a message applied again before the batch that applied it committed', () => {
    const violation = firstViolation('readsClaimAll');
    assert.match(violation.description, /applied by a second committed batch|told twice/);
    assert.match(violation.message, /sharded-run\.js --seed \d+/);
  });

  it('catches an outbox that loses the jobs a flow sends to another shard', () => {
    const violation = firstViolation('losesJobs');
    assert.match(violation.description, /neither in its shard nor on its way|never made there/);
  });
});
