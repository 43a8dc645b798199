/**
 * Seeds that once broke an invariant (or came close), replayed by
 * sim.test.ts on every run. Each entry says what it caught; keep them even
 * after the fix, so the bug cannot come back unnoticed.
 */
export interface RegressionSeed {
  seed: number;
  /** Main-phase steps of the failing run (default: the simulator's default). */
  steps?: number;
  /** What the seed found, and where. */
  note: string;
}

export const REGRESSION_SEEDS: readonly RegressionSeed[] = [
  {
    seed: 57,
    note: 'an active dedup key made a second live job once a later job of the key (debounce) had ended',
  },
  {
    seed: 432,
    note: 'a batch took an idempotency key the store had called free, though a job made with it meanwhile had ended and left memory',
  },
  {
    seed: 1604,
    note: "the fairness check took a group's turn used by a job found expired when picked for a pass",
  },
];

/** The same for the sharded simulation (sharded-simulator.ts), replayed by sharded-sim.test.ts. */
export const SHARDED_REGRESSION_SEEDS: readonly RegressionSeed[] = [
  {
    seed: 1024,
    steps: 200,
    note: 'the signal checks did not count a waiter an event resumed when its expiry ended it in the same input',
  },
  {
    seed: 1042,
    steps: 200,
    note: "the tracker refused a recovery that cancels a waiting job for a parent of another shard whose end another child's message had stored",
  },
  {
    seed: 1053,
    steps: 200,
    note: 'the router judged a part of a split batch invalid for a key its other part repeated',
  },
  {
    seed: 1454,
    steps: 200,
    note: "the fairness check counted starts of an input whose expired job had used its group's turn between them",
  },
];
