/**
 * The even seeds of the simulation's fixed batch (sim.test.ts runs the odd
 * ones and the regression seeds): a file of its own so that the test runner
 * runs both at once.
 */
import { describe, it } from 'node:test';
import { SEED_COUNT, runSeeds } from './seed-run.js';

describe('coordinator core simulation, even seeds', () => {
  it(`keeps every invariant after every step on the even seeds of 1..${SEED_COUNT}`, () => {
    runSeeds(2);
  });
});
