/**
 * Command line for the simulation.
 *
 *   node dist/test/sim/run.js --seeds N [--start S] [--steps K]
 *       runs seeds S .. S+N-1 (S defaults to 1), prints progress and a
 *       summary; exits 1 at the first violation, printing its seed.
 *   node dist/test/sim/run.js --seed X [--steps K] [--verbose]
 *       runs one seed; with --verbose prints every step, input and effect.
 *
 * The same seed (and step count) always replays the same run.
 */
import { DEFAULT_STEPS, Simulation, type SimulationReport } from './simulator.js';
import { replayCommand } from './violation.js';
import { parseRunArgs, runOneSeed, runSeedBatch } from './command-line.js';

interface Totals {
  seeds: number;
  steps: number;
  inputs: number;
  jobs: number;
  acked: number;
  completed: number;
  failed: number;
  cancelled: number;
  restarts: number;
  failovers: number;
  fencedCommits: number;
  prefetchedSteps: number;
  assignBatches: number;
  resultBatches: number;
  queueStarts: number;
  limitedStarts: number;
  contestedStarts: number;
  keptLeases: number;
  reclaimedLeases: number;
  endingConnections: number;
  faults: number;
  faultKinds: Map<string, number>;
  dependents: number;
  children: number;
  cascaded: number;
  subscribersDropped: number;
  subscriptionsRefused: number;
  stepsRecorded: number;
  suspended: number;
  requeued: number;
  requeuesCounted: number;
  heldLists: number;
  dedupKeyed: number;
  dedupMatched: number;
  replaced: number;
  expired: number;
  rateLimited: number;
  rateLimitedGroup: number;
  rateLimitedQueue: number;
  schedules: Map<string, number>;
  signals: Map<string, number>;
}

function add(totals: Totals, report: SimulationReport): void {
  totals.seeds++;
  totals.steps += report.steps + report.quiescenceSteps;
  totals.inputs += report.inputs;
  totals.jobs += report.jobsCreated;
  totals.acked += report.jobsAcked;
  totals.completed += report.completed;
  totals.failed += report.failed;
  totals.cancelled += report.cancelled;
  totals.dependents += report.dependents;
  totals.children += report.children;
  totals.cascaded += report.cascaded;
  totals.subscribersDropped += report.subscribersDropped;
  totals.subscriptionsRefused += report.subscriptionsRefused;
  totals.stepsRecorded += report.stepsRecorded;
  totals.suspended += report.suspended;
  totals.requeued += report.requeued;
  totals.requeuesCounted += report.requeuesCounted;
  totals.heldLists += report.heldLists;
  totals.dedupKeyed += report.dedupKeyed;
  totals.dedupMatched += report.dedupMatched;
  totals.replaced += report.replaced;
  totals.expired += report.expired;
  totals.rateLimited += report.rateLimited;
  totals.rateLimitedGroup += report.rateLimitedGroup;
  totals.rateLimitedQueue += report.rateLimitedQueue;
  totals.restarts += report.restarts;
  totals.failovers += report.failovers;
  totals.fencedCommits += report.fencedCommits;
  totals.prefetchedSteps += report.prefetchedSteps;
  totals.assignBatches += report.assignBatches;
  totals.resultBatches += report.resultBatches;
  totals.queueStarts += report.queueStarts;
  totals.limitedStarts += report.limitedStarts;
  totals.contestedStarts += report.contestedStarts;
  totals.keptLeases += report.keptLeases;
  totals.reclaimedLeases += report.reclaimedLeases;
  totals.endingConnections += report.endingConnections;
  totals.faults += report.faultTotal;
  for (const [kind, n] of Object.entries(report.schedules) as [string, number][]) {
    totals.schedules.set(kind, (totals.schedules.get(kind) ?? 0) + n);
  }
  for (const [kind, n] of Object.entries(report.signals) as [string, number][]) {
    totals.signals.set(kind, (totals.signals.get(kind) ?? 0) + n);
  }
  for (const [kind, n] of Object.entries(report.faults)) {
    totals.faultKinds.set(kind, (totals.faultKinds.get(kind) ?? 0) + n);
  }
}

function printSummary(totals: Totals, failures: number, elapsedMs: number): void {
  const kinds = [...totals.faultKinds.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, n]) => `${k}=${n}`)
    .join(' ');
  const sch = (kind: string): number => totals.schedules.get(kind) ?? 0;
  const sig = (kind: string): number => totals.signals.get(kind) ?? 0;
  console.log(
    [
      `seeds run:       ${totals.seeds}`,
      `steps:           ${totals.steps} (${totals.inputs} core inputs)`,
      `jobs:            ${totals.jobs} created, ${totals.acked} acknowledged, ${totals.completed} completed, ${totals.failed} failed, ${totals.cancelled} cancelled`,
      `dependencies:    ${totals.dependents} jobs with parents, ${totals.cascaded} cancelled by a failed parent; ${totals.children} children enqueued by handlers`,
      `budgets:         ${totals.subscriptionsRefused} subscriptions refused for a full budget, ${totals.subscribersDropped} stalled subscribers dropped for a newcomer`,
      `steps:           ${totals.stepsRecorded} recorded, ${totals.suspended} attempts suspended (sleeps and waits)`,
      `requeues:        ${totals.requeued} attempts requeued by their worker without counting, ${totals.requeuesCounted} past the bound that counted`,
      `dedup keys:      ${totals.dedupKeyed} keyed jobs created, ${totals.dedupMatched} submissions deduplicated (${totals.replaced} replaced a debounced job's payload)`,
      `expiry:          ${totals.expired} jobs expired before an attempt started`,
      `rate limits:     ${totals.rateLimited} attempts rate limited by their handler (${totals.rateLimitedGroup} held a group, ${totals.rateLimitedQueue} a whole queue)`,
      `schedules:       ${sch('fired')} ticks fired (${sch('catchUps')} catch-up jobs after a recovery), skipped: ${sch('skippedOverlap')} overlap, ${sch('skippedMissed')} missed, ${sch('skippedLimit')} limit; ${sch('triggers')} triggers; ${sch('set')} definitions set, ${sch('invalid')} refused as invalid`,
      `signals:         ${sig('signals')} signals acknowledged, ${sig('taken')} taken by a wait; ${sig('events')} events published, ${sig('woken')} waiting jobs woken, ${sig('triggerJobs')} jobs made by triggers; ${sig('timedOut')} waits timed out`,
      `restarts:        ${totals.restarts}`,
      `failovers:       ${totals.failovers} (deposed leaders' commits refused: ${totals.fencedCommits})`,
      `prefetch:        ${totals.prefetchedSteps} steps ended with a worker holding more leases than its capacity`,
      `batches:         ${totals.assignBatches} TASK_ASSIGNS delivered, ${totals.resultBatches} TASK_RESULTS written`,
      `queues:          ${totals.queueStarts} starts checked, ${totals.limitedStarts} under a concurrency or rate limit, ${totals.contestedStarts} with another group waiting (group turns checked)`,
      `stalls:          ${totals.keptLeases} attempts kept for their worker after a stall or a restart, ${totals.reclaimedLeases} taken back by a new session (${totals.heldLists} lists in several parts); ${totals.endingConnections} connection ends read before their last frames`,
      `faults injected: ${totals.faults} (${kinds})`,
      `failures:        ${failures}`,
      `time:            ${(elapsedMs / 1000).toFixed(1)} s`,
    ].join('\n'),
  );
}

function newTotals(): Totals {
  return {
    seeds: 0,
    steps: 0,
    inputs: 0,
    jobs: 0,
    acked: 0,
    completed: 0,
    failed: 0,
    cancelled: 0,
    dependents: 0,
    children: 0,
    cascaded: 0,
    subscribersDropped: 0,
    subscriptionsRefused: 0,
    stepsRecorded: 0,
    suspended: 0,
    requeued: 0,
    requeuesCounted: 0,
    heldLists: 0,
    dedupKeyed: 0,
    dedupMatched: 0,
    replaced: 0,
    expired: 0,
    rateLimited: 0,
    rateLimitedGroup: 0,
    rateLimitedQueue: 0,
    restarts: 0,
    failovers: 0,
    fencedCommits: 0,
    prefetchedSteps: 0,
    assignBatches: 0,
    resultBatches: 0,
    queueStarts: 0,
    limitedStarts: 0,
    contestedStarts: 0,
    keptLeases: 0,
    reclaimedLeases: 0,
    endingConnections: 0,
    faults: 0,
    faultKinds: new Map(),
    schedules: new Map(),
    signals: new Map(),
  };
}

function main(): void {
  const args = parseRunArgs({ seeds: 100, steps: DEFAULT_STEPS });
  const { steps } = args;
  if (args.seed !== null) {
    const seed = args.seed;
    const log = args.verbose ? (line: string) => console.log(line) : undefined;
    runOneSeed(() => new Simulation(seed, { steps, log }).run());
    return;
  }
  const totals = newTotals();
  process.exit(
    runSeedBatch({
      start: args.start,
      count: args.seeds,
      run: (seed) => new Simulation(seed, { steps }).run(),
      add: (report) => add(totals, report),
      progress: () => `${totals.jobs} jobs, ${totals.restarts} restarts`,
      replay: (seed) => replayCommand(seed, steps === DEFAULT_STEPS ? undefined : steps),
      summary: (failures, elapsedMs) => printSummary(totals, failures, elapsedMs),
    }),
  );
}

main();
