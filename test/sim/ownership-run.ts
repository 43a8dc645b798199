/**
 * Command line for the simulation of sharded leadership (shard-ownership.ts).
 *
 *   node dist/test/sim/ownership-run.js --seeds N [--start S]
 *       runs seeds S .. S+N-1 (S defaults to 1), prints progress and a
 *       summary; exits 1 at the first violation, printing its seed.
 *   node dist/test/sim/ownership-run.js --seed X [--verbose]
 *       runs one seed; with --verbose prints every event.
 *
 * The same seed always replays the same run.
 */
// Wall-clock time here only measures the run for the summary; the simulation never reads it.
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { OwnershipSimulation, ownershipReplay, type OwnershipReport } from './shard-ownership.js';
import { SimulationViolation } from './violation.js';
import { parseCount } from './command-line.js';

interface Totals {
  seeds: number;
  steps: number;
  simulatedMs: number;
  leads: number;
  handOvers: number;
  stepDowns: number;
  operations: number;
  slowOperations: number;
  failedOperations: number;
  settledSteps: number;
  stopsChecked: number;
  faults: Map<string, number>;
}

function add(totals: Totals, report: OwnershipReport): void {
  totals.seeds++;
  totals.steps += report.steps;
  totals.simulatedMs += report.simulatedMs;
  totals.leads += report.leads;
  totals.handOvers += report.handOvers;
  totals.stepDowns += report.stepDowns;
  totals.operations += report.operations;
  totals.slowOperations += report.slowOperations;
  totals.failedOperations += report.failedOperations;
  totals.settledSteps += report.settledSteps;
  totals.stopsChecked += report.stopsChecked;
  for (const [kind, n] of Object.entries(report.faults)) {
    totals.faults.set(kind, (totals.faults.get(kind) ?? 0) + n);
  }
}

function printSummary(totals: Totals, failures: number, elapsedMs: number): void {
  const kinds = [...totals.faults.entries()].map(([k, n]) => `${k}=${n}`).join(' ');
  console.log(
    [
      `seeds run:       ${totals.seeds}`,
      `steps:           ${totals.steps} (${(totals.simulatedMs / 3_600_000).toFixed(1)} simulated hours)`,
      `leaderships:     ${totals.leads} taken, ${totals.stepDowns} ended, ${totals.handOvers} handed over`,
      `operations:      ${totals.operations} (${totals.slowOperations} slow, ${totals.failedOperations} failed)`,
      `checked:         ${totals.settledSteps} steps settled (every shard led, shares even), ${totals.stopsChecked} clean stops moved within the ttl`,
      `faults injected: ${kinds}`,
      `failures:        ${failures}`,
      `time:            ${(elapsedMs / 1000).toFixed(1)} s`,
    ].join('\n'),
  );
}

function runMany(start: number, count: number): number {
  const totals: Totals = {
    seeds: 0,
    steps: 0,
    simulatedMs: 0,
    leads: 0,
    handOvers: 0,
    stepDowns: 0,
    operations: 0,
    slowOperations: 0,
    failedOperations: 0,
    settledSteps: 0,
    stopsChecked: 0,
    faults: new Map(),
  };
  const started = performance.now();
  let lastProgress = started;
  for (let seed = start; seed < start + count; seed++) {
    try {
      add(totals, new OwnershipSimulation(seed).run());
    } catch (err) {
      console.error(err instanceof Error ? err.message : String(err));
      if (!(err instanceof SimulationViolation)) {
        console.error(`seed ${seed} crashed the simulation; replay: ${ownershipReplay(seed)}`);
        if (err instanceof Error && err.stack !== undefined) console.error(err.stack);
      }
      console.error(`FAILED at seed ${seed}`);
      printSummary(totals, 1, performance.now() - started);
      return 1;
    }
    const now = performance.now();
    if (now - lastProgress >= 2_000) {
      lastProgress = now;
      console.log(`  ... ${totals.seeds}/${count} seeds, ${totals.leads} leaderships taken`);
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
      seed: { type: 'string' },
      verbose: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.seed !== undefined) {
    const seed = parseCount('seed', values.seed, 0);
    const log = values.verbose ? (line: string) => console.log(line) : undefined;
    try {
      console.log(JSON.stringify(new OwnershipSimulation(seed, { log }).run(), null, 2));
    } catch (err) {
      console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exit(1);
    }
    return;
  }
  const count = parseCount('seeds', values.seeds, 300);
  const start = parseCount('start', values.start, 1);
  process.exit(runMany(start, count));
}

main();
