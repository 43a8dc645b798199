/**
 * Seeds of the sharded simulation (sharded-simulator.ts) as test steps:
 * each run checked after every step, a failure naming the command that
 * replays exactly that seed. sharded-sim.test.ts runs the odd seeds of the
 * fixed batch, sharded-sim-even-seeds.test.ts the even ones, side by side.
 */
import assert from 'node:assert/strict';
import { ShardedSimulation, shardedReplay, type ShardedReport } from './sharded-simulator.js';

/** Seeds 1..SHARDED_SEED_COUNT run on every `npm test`, each of this many main steps. */
export const SHARDED_SEED_COUNT = 80;
export const SHARDED_TEST_STEPS = 60;

export function runShardedSeed(seed: number, steps = SHARDED_TEST_STEPS): ShardedReport {
  try {
    return new ShardedSimulation(seed, { steps }).run();
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    return assert.fail(
      `sharded simulation seed ${seed} failed; replay: ${shardedReplay(seed, steps)}\n${detail}`,
    );
  }
}

/** Every other seed of 1..SHARDED_SEED_COUNT, from `first` (1: the odd seeds, 2: the even ones). */
export function runShardedSeeds(first: 1 | 2): ShardedReport[] {
  const reports: ShardedReport[] = [];
  for (let seed = first; seed <= SHARDED_SEED_COUNT; seed += 2) reports.push(runShardedSeed(seed));
  return reports;
}
