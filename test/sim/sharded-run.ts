/**
 * Command line for the simulation of several shard leaders over one store
 * (sharded-simulator.ts).
 *
 *   node dist/test/sim/sharded-run.js --seeds N [--start S] [--steps K]
 *       runs seeds S .. S+N-1 (S defaults to 1), prints progress and a
 *       summary; exits 1 at the first violation, printing its seed.
 *   node dist/test/sim/sharded-run.js --seed X [--steps K] [--verbose]
 *       runs one seed; with --verbose prints every step, input and effect.
 *
 * The same seed (and step count) always replays the same run.
 */
// Wall-clock time here only measures the run for the summary; the simulation never reads it.
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { parseCount } from './command-line.js';
import {
  SHARDED_DEFAULT_STEPS,
  ShardedSimulation,
  shardedReplay,
  type ShardedReport,
} from './sharded-simulator.js';
import { SimulationViolation } from './violation.js';

/** Every count of the reports, added up (nested counts by "group.name"). */
type Totals = Map<string, number>;

function add(totals: Totals, report: ShardedReport): void {
  const bump = (key: string, n: number): void => {
    totals.set(key, (totals.get(key) ?? 0) + n);
  };
  bump('seeds', 1);
  bump(`shards=${report.shards}`, 1);
  for (const [key, value] of Object.entries(report)) {
    if (typeof value === 'number' && key !== 'seed' && key !== 'shards') bump(key, value);
    if (typeof value === 'object') {
      for (const [inner, n] of Object.entries(value as Record<string, number>)) {
        bump(`${key}.${inner}`, n);
      }
    }
  }
}

function printSummary(totals: Totals, failures: number, elapsedMs: number): void {
  const n = (key: string): number => totals.get(key) ?? 0;
  const group = (prefix: string): string =>
    [...totals.entries()]
      .filter(([key]) => key.startsWith(`${prefix}.`))
      .map(([key, value]) => `${key.slice(prefix.length + 1)}=${value}`)
      .join(' ');
  console.log(
    [
      `seeds run:       ${n('seeds')} (2 shards: ${n('shards=2')}, 3: ${n('shards=3')}, 4: ${n('shards=4')})`,
      `steps:           ${n('steps') + n('quiescenceSteps')} (${n('inputs')} core inputs)`,
      `jobs:            ${n('jobsCreated')} created, ${n('jobsAcked')} acknowledged, ${n('completed')} completed, ${n('failed')} failed, ${n('cancelled')} cancelled`,
      `outbox:          ${group('outbox')}`,
      `outbox reads:    ${group('reads')}`,
      `across shards:   ${group('cross')}`,
      `restarts:        ${n('restarts')}`,
      `failovers:       ${n('failovers')} (deposed leaders' commits refused: ${n('fencedCommits')})`,
      `faults injected: ${n('faultTotal')} (${group('faults')})`,
      `failures:        ${failures}`,
      `time:            ${(elapsedMs / 1000).toFixed(1)} s`,
    ].join('\n'),
  );
}

function runMany(start: number, count: number, steps: number): number {
  const totals: Totals = new Map();
  const started = performance.now();
  let lastProgress = started;
  const replaySteps = steps === SHARDED_DEFAULT_STEPS ? undefined : steps;
  for (let seed = start; seed < start + count; seed++) {
    try {
      add(totals, new ShardedSimulation(seed, { steps }).run());
    } catch (err) {
      console.error(err instanceof Error ? err.message : String(err));
      if (!(err instanceof SimulationViolation)) {
        console.error(
          `seed ${seed} crashed the simulation; replay: ${shardedReplay(seed, replaySteps)}`,
        );
        if (err instanceof Error && err.stack !== undefined) console.error(err.stack);
      }
      console.error(`FAILED at seed ${seed}`);
      printSummary(totals, 1, performance.now() - started);
      return 1;
    }
    const now = performance.now();
    if (now - lastProgress >= 2_000) {
      lastProgress = now;
      console.log(`  ... ${totals.get('seeds')}/${count} seeds, ${totals.get('jobsCreated')} jobs`);
    }
  }
  printSummary(totals, 0, performance.now() - started);
  return 0;
}

function main(): void {
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
  const steps = parseCount('steps', values.steps, SHARDED_DEFAULT_STEPS);
  if (values.seed !== undefined) {
    const seed = parseCount('seed', values.seed, 0);
    const log = values.verbose ? (line: string) => console.log(line) : undefined;
    try {
      console.log(JSON.stringify(new ShardedSimulation(seed, { steps, log }).run(), null, 2));
    } catch (err) {
      console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exit(1);
    }
    return;
  }
  const count = parseCount('seeds', values.seeds, 100);
  const start = parseCount('start', values.start, 1);
  process.exit(runMany(start, count, steps));
}

main();
