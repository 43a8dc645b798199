/**
 * The even seeds of the sharded simulation's fixed batch
 * (sharded-sim.test.ts runs the odd ones): a file of its own so that the
 * test runner runs both at once.
 */
import { describe, it } from 'node:test';
import { SHARDED_SEED_COUNT, runShardedSeeds } from './sharded-seed-run.js';

describe('sharded simulation, even seeds', () => {
  it(`keeps every invariant after every step on the even seeds of 1..${SHARDED_SEED_COUNT}`, () => {
    runShardedSeeds(2);
  });
});
