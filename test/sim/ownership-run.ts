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
import { OwnershipSimulation, ownershipReplay, type OwnershipReport } from './shard-ownership.js';
import { parseRunArgs, runOneSeed, runSeedBatch } from './command-line.js';

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

function main(): void {
  const args = parseRunArgs({ seeds: 300 });
  if (args.seed !== null) {
    const seed = args.seed;
    const log = args.verbose ? (line: string) => console.log(line) : undefined;
    runOneSeed(() => new OwnershipSimulation(seed, { log }).run());
    return;
  }
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
  process.exit(
    runSeedBatch({
      start: args.start,
      count: args.seeds,
      run: (seed) => new OwnershipSimulation(seed).run(),
      add: (report) => add(totals, report),
      progress: () => `${totals.leads} leaderships taken`,
      replay: ownershipReplay,
      summary: (failures, elapsedMs) => printSummary(totals, failures, elapsedMs),
    }),
  );
}

main();
