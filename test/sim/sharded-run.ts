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
import { parseRunArgs, runOneSeed, runSeedBatch } from './command-line.js';
import {
  SHARDED_DEFAULT_STEPS,
  ShardedSimulation,
  shardedReplay,
  type ShardedReport,
} from './sharded-simulator.js';

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

function main(): void {
  const args = parseRunArgs({ seeds: 100, steps: SHARDED_DEFAULT_STEPS });
  const { steps } = args;
  if (args.seed !== null) {
    const seed = args.seed;
    const log = args.verbose ? (line: string) => console.log(line) : undefined;
    runOneSeed(() => new ShardedSimulation(seed, { steps, log }).run());
    return;
  }
  const totals: Totals = new Map();
  process.exit(
    runSeedBatch({
      start: args.start,
      count: args.seeds,
      run: (seed) => new ShardedSimulation(seed, { steps }).run(),
      add: (report) => add(totals, report),
      progress: () => `${totals.get('jobsCreated') ?? 0} jobs`,
      replay: (seed) => shardedReplay(seed, steps === SHARDED_DEFAULT_STEPS ? undefined : steps),
      summary: (failures, elapsedMs) => printSummary(totals, failures, elapsedMs),
    }),
  );
}

main();
