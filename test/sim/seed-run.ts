/**
 * One seed of the simulation as a test step: runs it and, when an invariant
 * breaks, fails with the command that replays exactly that seed.
 */
import assert from 'node:assert/strict';
import { Simulation } from './simulator.js';
import { replayCommand } from './violation.js';

/**
 * Seeds 1..SEED_COUNT run on every `npm test`: the odd ones in sim.test.ts,
 * the even ones in sim-even-seeds.test.ts, so that the two files run side by
 * side on a two-core machine (about a minute each there, alone).
 */
export const SEED_COUNT = 180;

export function runSeed(seed: number, steps?: number): void {
  try {
    new Simulation(seed, steps === undefined ? {} : { steps }).run();
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    assert.fail(`simulation seed ${seed} failed; replay: ${replayCommand(seed, steps)}\n${detail}`);
  }
}

/** Every other seed of 1..SEED_COUNT, from `first` (1: the odd seeds, 2: the even ones). */
export function runSeeds(first: 1 | 2): void {
  for (let seed = first; seed <= SEED_COUNT; seed += 2) runSeed(seed);
}
