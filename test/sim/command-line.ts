/**
 * What the simulations' command lines (run.ts, ownership-run.ts,
 * sharded-run.ts) share: their flags, one seed printed whole, and a batch
 * of seeds with progress, the first failure's seed and a summary.
 */
// Wall-clock time here only measures a batch for its summary; no simulation reads it.
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { SimulationViolation } from './violation.js';

/** `value` of `--name` as a non-negative integer, `fallback` when absent; exit 2 otherwise. */
export function parseCount(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) {
    console.error(`--${name} needs a non-negative integer, got ${value}`);
    process.exit(2);
  }
  return n;
}

/** A runner's flags: `--seeds N [--start S]`, or `--seed X [--verbose]`; `--steps K` where it takes one. */
export interface RunArgs {
  /** The one seed to run; null: a batch. */
  seed: number | null;
  seeds: number;
  start: number;
  steps: number;
  verbose: boolean;
}

/** Reads the flags; `steps` undefined: the runner takes no `--steps` (exit 2 when given). */
export function parseRunArgs(defaults: { seeds: number; steps?: number }): RunArgs {
  const { values } = parseArgs({
    options: {
      seeds: { type: 'string' },
      start: { type: 'string' },
      steps: { type: 'string' },
      seed: { type: 'string' },
      verbose: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (defaults.steps === undefined && values.steps !== undefined) {
    console.error('--steps is not an option of this simulation');
    process.exit(2);
  }
  return {
    seed: values.seed === undefined ? null : parseCount('seed', values.seed, 0),
    seeds: parseCount('seeds', values.seeds, defaults.seeds),
    start: parseCount('start', values.start, 1),
    steps: parseCount('steps', values.steps, defaults.steps ?? 0),
    verbose: values.verbose,
  };
}

/** Runs one seed and prints its report; on a failure prints the stack and exits 1. */
export function runOneSeed(run: () => unknown): void {
  try {
    console.log(JSON.stringify(run(), null, 2));
  } catch (err) {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  }
}

/** A batch of seeds: how to run one, add up its report, and say where the batch is. */
export interface SeedBatch<R> {
  start: number;
  count: number;
  run(seed: number): R;
  add(report: R): void;
  /** A line of progress (printed every 2 s). */
  progress(): string;
  /** The command that replays a seed. */
  replay(seed: number): string;
  summary(failures: number, elapsedMs: number): void;
}

/**
 * Runs seeds start .. start+count-1, printing progress and a summary; stops
 * at the first failure, printing its seed (and, for a crash rather than a
 * violation, the replay command and the stack). Returns the exit status.
 */
export function runSeedBatch<R>(batch: SeedBatch<R>): number {
  const started = performance.now();
  let lastProgress = started;
  for (let seed = batch.start; seed < batch.start + batch.count; seed++) {
    try {
      batch.add(batch.run(seed));
    } catch (err) {
      console.error(err instanceof Error ? err.message : String(err));
      if (!(err instanceof SimulationViolation)) {
        console.error(`seed ${seed} crashed the simulation; replay: ${batch.replay(seed)}`);
        if (err instanceof Error && err.stack !== undefined) console.error(err.stack);
      }
      console.error(`FAILED at seed ${seed}`);
      batch.summary(1, performance.now() - started);
      return 1;
    }
    const now = performance.now();
    if (now - lastProgress >= 2_000) {
      lastProgress = now;
      console.log(`  ... ${seed - batch.start + 1}/${batch.count} seeds, ${batch.progress()}`);
    }
  }
  batch.summary(0, performance.now() - started);
  return 0;
}
