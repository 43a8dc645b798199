/**
 * `npm run bench [-- <name>...] [--smoke] [--reps N] [--out file.json]`: runs the
 * benchmarks, prints a Markdown report (medians of several runs; the machine
 * is shared and noisy, so compare ratios within one report) and writes the
 * same tables as JSON (default bench-results.json). Names: queue-depth,
 * routing, fairness, rate, recovery, throughput, bulk, overload, latency,
 * security, subscribers, delayed, flows, many-attempts, dedup, signals, sharded. Every run is bounded in jobs and
 * time, and talks only to 127.0.0.1.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { machine, median } from './harness.js';
import { overloadExperiment, type OverloadRun } from './overload.js';
import { assignmentsPerSecond } from './queue-depth.js';
import { ROUTING_CASES, routingAssignmentsPerSecond } from './routing.js';
import { measureRecovery, writeHistory, type RecoveryRun } from './recovery.js';
import { HEARTBEAT_TIMEOUT_MS, latencies, type LatencyRun } from './latencies.js';
import { connectCosts, stormMemory, type StormMemory } from './security.js';
import { httpAttackTable, httpAttacks } from './attack-http.js';
import { attackBudgetTables } from './attack-budgets.js';
import { waitAttack, waitAttackTable } from './attack-waits.js';
import { throughput, type ThroughputRun } from './throughput.js';
import { bulkRun, type BulkRun } from './bulk.js';
import { subscriberRun, type SubscriberPlace, type SubscriberRun } from './subscribers.js';
import { delayedBench } from './delayed.js';
import { fanInRun, layeredRun, type FanInRun, type HandOff, type LayeredRun } from './flows.js';
import { FAIRNESS_CASES, fairnessAssignmentsPerSecond, groupMemory } from './fairness.js';
import { coreRateRun, rateRun, type RateRun } from './rate.js';
import { manyAttempts, type ManyAttemptsRun } from './many-attempts.js';
import { KEY_CASES, heldGroupsAssignmentsPerSecond, submissionMicros } from './dedup.js';
import { signalMicros, wakeRun } from './signals.js';
import {
  MEASURED_TIMINGS,
  SHARDS,
  SMOKE_TIMINGS,
  shardedRun,
  startPostgres,
  type ShardedRun,
} from './sharded.js';

/** `--smoke`: every benchmark once, at a small size (CI runs it; figures mean nothing). */
const SMOKE = process.argv.includes('--smoke');
/** Runs of each measurement: 1 for a smoke run, else 3 or `--reps N`. */
let REPEATS = SMOKE ? 1 : 3;
/** Scale of the sizes below: 1, or small for a smoke run. */
const SCALE = SMOKE ? 0.01 : 1;
const ALL = [
  'queue-depth',
  'routing',
  'fairness',
  'rate',
  'recovery',
  'throughput',
  'bulk',
  'overload',
  'latency',
  'security',
  'subscribers',
  'delayed',
  'flows',
  'many-attempts',
  'dedup',
  'signals',
  'sharded',
] as const;
type Name = (typeof ALL)[number];

function row(cells: (string | number)[]): string {
  return `| ${cells.join(' | ')} |`;
}

function queueDepth(): string[] {
  const lines = [row(['queued jobs', `assignments/s (median of ${REPEATS})`])];
  lines.push(row(['---', '---']));
  for (const depth of [100, Math.round(100_000 * SCALE)]) {
    const runs = Array.from({ length: REPEATS }, () =>
      assignmentsPerSecond(depth, Math.round(20_000 * SCALE)),
    );
    lines.push(row([depth.toLocaleString('en'), Math.round(median(runs)).toLocaleString('en')]));
  }
  return lines;
}

function routing(): string[] {
  const lines = [row(['workers and task types', `assignments/s (median of ${REPEATS})`])];
  lines.push(row(['---', '---']));
  for (const c of ROUTING_CASES) {
    const runs = Array.from({ length: REPEATS }, () =>
      routingAssignmentsPerSecond(c, Math.round(20_000 * SCALE)),
    );
    lines.push(row([c.label, Math.round(median(runs)).toLocaleString('en')]));
  }
  return lines;
}

function fairness(): string[] {
  const reps = SMOKE ? 1 : 5;
  const cycles = Math.round(20_000 * SCALE);
  const lines = [
    row(['jobs spread over', 'assignments/s (median of 5)', 'ratio to the baseline']),
    row(['---', '---', '---']),
  ];
  // Interleaved repetitions, so that a slow moment of the machine hits every case alike.
  const runs = FAIRNESS_CASES.map(() => [] as number[]);
  for (let r = 0; r < reps; r++) {
    FAIRNESS_CASES.forEach((c, i) => runs[i]?.push(fairnessAssignmentsPerSecond(c, cycles)));
  }
  const medians = runs.map((r) => median(r));
  const base = medians[0] as number;
  FAIRNESS_CASES.forEach((c, i) => {
    const m = medians[i] as number;
    lines.push(row([c.label, Math.round(m).toLocaleString('en'), (m / base).toFixed(2)]));
  });
  const groups = Math.round(10_000 * SCALE);
  const mem = Array.from({ length: REPEATS }, () => groupMemory(groups));
  const m = (f: (g: (typeof mem)[number]) => number): string =>
    Math.round(median(mem.map(f))).toString();
  lines.push(
    '',
    row([
      `core heap, ${groups.toLocaleString('en')} groups`,
      `bytes per group (median of ${REPEATS})`,
    ]),
    row(['---', '---']),
    row(['idle group (its jobs all ran; no settings)', m((g) => g.idleBytesPerGroup)]),
    row(['group with one queued job, beyond the job itself', m((g) => g.backlogBytesPerGroup)]),
    row(['(for scale) one queued job', m((g) => g.bytesPerJob)]),
  );
  return lines;
}

function signalsTable(): string[] {
  const reps = SMOKE ? 1 : 5;
  const waiting = Math.round(10_000 * SCALE);
  const wakes = Array.from({ length: reps }, () => wakeRun(waiting));
  const micros = Array.from({ length: reps }, () => signalMicros(waiting));
  const m = median(micros);
  return [
    row([
      `one event, ${waiting.toLocaleString('en')} jobs waiting for it`,
      `core ms (median of ${reps})`,
    ]),
    row(['---', '---']),
    row([
      'the publish (every job woken, queued and assigned again)',
      median(wakes.map((w) => w.publishMs)).toFixed(1),
    ]),
    row([
      'the commit of its batch (in-memory store)',
      median(wakes.map((w) => w.commitMs)).toFixed(1),
    ]),
    '',
    row([
      `${waiting.toLocaleString('en')} signals, each to its own waiting job`,
      `core µs per signal (median of ${reps})`,
      'signals/s one core takes',
    ]),
    row(['---', '---', '---']),
    row([
      'signal → the job resumed, queued and assigned again',
      m.toFixed(1),
      Math.round(1e6 / m).toLocaleString('en'),
    ]),
  ];
}

function dedupTable(): string[] {
  const reps = SMOKE ? 1 : 5;
  const jobs = Math.round(50_000 * SCALE);
  // Interleaved repetitions, so that a slow moment of the machine hits every case alike.
  const micros = KEY_CASES.map(() => [] as number[]);
  for (let r = 0; r < reps; r++) {
    KEY_CASES.forEach((c, i) => micros[i]?.push(submissionMicros(c, jobs)));
  }
  const base = median(micros[0] ?? []);
  const lines = [
    row([
      `${jobs.toLocaleString('en')} submissions`,
      `core µs per submission (median of ${reps})`,
      'ratio to no key',
    ]),
    row(['---', '---', '---']),
  ];
  KEY_CASES.forEach((c, i) => {
    const m = median(micros[i] ?? []);
    lines.push(row([c, m.toFixed(2), (m / base).toFixed(2)]));
  });
  const groups = Math.round(10_000 * SCALE);
  const cycles = Math.round(20_000 * SCALE);
  const cases = [
    { label: `${groups.toLocaleString('en')} groups`, held: 0 },
    {
      label: `${groups.toLocaleString('en')} groups and ${groups.toLocaleString('en')} held by a handler`,
      held: groups,
    },
  ];
  const rates = cases.map(() => [] as number[]);
  for (let r = 0; r < reps; r++) {
    cases.forEach((c, i) => rates[i]?.push(heldGroupsAssignmentsPerSecond(groups, c.held, cycles)));
  }
  const first = median(rates[0] ?? []);
  lines.push(
    '',
    row(['one queue, jobs in', `assignments/s (median of ${reps})`, 'ratio']),
    row(['---', '---', '---']),
  );
  cases.forEach((c, i) => {
    const m = median(rates[i] ?? []);
    lines.push(row([c.label, Math.round(m).toLocaleString('en'), (m / first).toFixed(2)]));
  });
  return lines;
}

async function rate(dir: string): Promise<string[]> {
  const max = 200;
  const seconds = SMOKE ? 3 : 30;
  const runs: RateRun[] = [];
  for (let i = 0; i < REPEATS; i++) runs.push(await rateRun(dir, max, seconds));
  const lines = [
    row([
      `queue at ${max}/1s, 3 workers × 8 slots, instant tasks, ${seconds} s`,
      ...runs.map((_, i) => `run ${i + 1}`),
      'median',
    ]),
    row(['---', ...runs.map(() => '---'), '---']),
  ];
  const each = (label: string, f: (r: RateRun) => number, digits: number): void => {
    const values = runs.map(f);
    lines.push(
      row([label, ...values.map((v) => v.toFixed(digits)), median(values).toFixed(digits)]),
    );
  };
  each('starts per second over the run', (r) => r.meanPerSec, 1);
  each('most starts in any sliding 1-s window', (r) => r.maxWindow, 0);
  each('starts counted', (r) => r.starts, 0);
  // The scheduler alone (pure core, simulated time): what the processes add is the difference.
  const core = coreRateRun(max, seconds);
  lines.push(
    '',
    row(['the same on the pure core (simulated time, results 1 ms after assignment)', 'value']),
    row(['---', '---']),
    row(['starts per second over the run', core.meanPerSec.toFixed(1)]),
    row(['most starts in any sliding 1-s window', core.maxWindow]),
  );
  return lines;
}

async function recovery(dir: string): Promise<string[]> {
  const lines = [
    row([
      'rows (1 % active)',
      'ready (spawn → port answers), ms',
      'recovery, ms',
      'RSS after start, MiB',
    ]),
  ];
  lines.push(row(['---', '---', '---', '---']));
  for (const rows of [100_000, 1_000_000].map((n) => Math.round(n * SCALE))) {
    const path = join(dir, `history-${rows}.db`);
    await writeHistory(path, rows);
    const runs: RecoveryRun[] = [];
    for (let i = 0; i < REPEATS; i++) runs.push(await measureRecovery(path, rows));
    lines.push(
      row([
        rows.toLocaleString('en'),
        median(runs.map((r) => r.readyMs)),
        median(runs.map((r) => r.recoveryMs)),
        median(runs.map((r) => r.rssMiB)),
      ]),
    );
    rmSync(path, { force: true });
  }
  return lines;
}

async function throughputTable(dir: string): Promise<string[]> {
  const lines = [
    row([
      'durability',
      'connections × in flight',
      'jobs/s',
      'ack p50 / p99 ms',
      'end-to-end p50 / p99 ms',
    ]),
    row(['---', '---', '---', '---', '---']),
  ];
  for (const [durability, concurrency, inFlight] of [
    ['normal', 16, 1],
    ['full', 16, 1],
    ['normal', 8, 16],
  ] as const) {
    const runs: ThroughputRun[] = [];
    for (let i = 0; i < REPEATS; i++)
      runs.push(
        await throughput(dir, durability, concurrency, inFlight, Math.round(5_000 * SCALE)),
      );
    const m = (f: (r: ThroughputRun) => number): string => median(runs.map(f)).toFixed(1);
    lines.push(
      row([
        durability,
        `${concurrency} × ${inFlight}`,
        m((r) => r.jobsPerSec),
        `${m((r) => r.ackP50Ms)} / ${m((r) => r.ackP99Ms)}`,
        `${m((r) => r.e2eP50Ms)} / ${m((r) => r.e2eP99Ms)}`,
      ]),
    );
  }
  return lines;
}

async function overload(dir: string): Promise<string[]> {
  const runs: OverloadRun[][] = [];
  for (let i = 0; i < REPEATS; i++) runs.push(await overloadExperiment(dir, SMOKE ? 50 : 500));
  const lines = [
    row([
      '--max-active-jobs',
      'accepted',
      'rejected',
      'completed',
      'jobs/s',
      'end-to-end p50 ms',
      'end-to-end p99 ms',
    ]),
    row(['---', '---', '---', '---', '---', '---', '---']),
  ];
  for (const index of [0, 1]) {
    const set = runs.map((r) => r[index] as OverloadRun);
    const m = (f: (r: OverloadRun) => number): number => median(set.map(f));
    lines.push(
      row([
        (set[0] as OverloadRun).limit.toLocaleString('en'),
        m((r) => r.accepted),
        m((r) => r.rejected),
        m((r) => r.completed),
        m((r) => r.throughputJobsPerSec).toFixed(1),
        Math.round(m((r) => r.p50Ms)),
        Math.round(m((r) => r.p99Ms)),
      ]),
    );
  }
  return lines;
}

async function latencyTable(dir: string): Promise<string[]> {
  const runs: LatencyRun[] = [];
  for (let i = 0; i < REPEATS; i++) runs.push(await latencies(dir, SMOKE ? 20 : 300));
  const m = (f: (r: LatencyRun) => number): string => Math.round(median(runs.map(f))).toString();
  return [
    row(['what', `ms (median of ${REPEATS})`]),
    row(['---', '---']),
    row(['worker killed (SIGKILL) → its job running elsewhere', m((r) => r.killReassignMs)]),
    row([
      `worker frozen (SIGSTOP) → its job running elsewhere (heartbeat timeout ${HEARTBEAT_TIMEOUT_MS} ms)`,
      m((r) => r.stopReassignMs),
    ]),
    row([
      'cancel of a running SLEEP → the next job running in its slot',
      m((r) => r.cancelToNextMs),
    ]),
    row([
      'cancel of four running PRIME_COUNT 50,000,000 (4-slot worker) → all four stopped',
      m((r) => r.cancelComputingMs),
    ]),
    row([
      "… the worker process's CPU time meanwhile (10 ms ticks)",
      m((r) => r.cancelComputingCpuMs),
    ]),
    row([
      'an attempt through an idle task thread and back (SHA256, median)',
      median(runs.map((r) => r.threadRoundTripMs)).toFixed(2),
    ]),
    row([
      'CPU per attempt through a busy pool (4 slots, default threads, 16 in flight, SHA256), µs',
      median(runs.map((r) => r.poolCpuUs)).toFixed(1),
    ]),
    row([
      'CPU per attempt through one busy shared thread (64 slots, 128 in flight, SHA256), µs',
      median(runs.map((r) => r.sharedCpuUs)).toFixed(1),
    ]),
  ];
}

async function security(dir: string): Promise<string[]> {
  const lines: string[] = [];
  const costs = await connectCosts(dir, Math.max(2, Math.round(200 * SCALE)));
  if (costs === null) {
    lines.push('(openssl is missing: no TLS figures)');
  } else {
    lines.push(row(['client connection (connect, one request, close)', 'median ms']));
    lines.push(row(['---', '---']));
    for (const c of costs) lines.push(row([c.label, c.medianMs.toFixed(2)]));
  }
  const runs: StormMemory[] = [];
  for (let i = 0; i < REPEATS; i++) runs.push(await stormMemory(SMOKE ? 0.02 : 1));
  const m = (f: (r: StormMemory) => number): number => median(runs.map(f));
  lines.push(
    '',
    row([`coordinator RSS, MiB (median of ${REPEATS})`, 'value']),
    row(['---', '---']),
  );
  lines.push(row(['before', m((r) => r.baseMiB)]));
  lines.push(row(['1,500 half-sent 1 MiB frames held', m((r) => r.halfFramesMiB)]));
  lines.push(row(['after they closed and 300 garbage connections', m((r) => r.afterGarbageMiB)]));
  lines.push(row(['after three more rounds of both', m((r) => r.afterThreeMoreMiB)]));
  lines.push('', ...httpAttackTable(await httpAttacks(SMOKE ? 0.05 : 1)));
  lines.push(...(await attackBudgetTables(dir, SMOKE ? 0.01 : 1)));
  lines.push('', ...waitAttackTable(await waitAttack(SMOKE ? 0.01 : 1)));
  return lines;
}

async function bulkTable(dir: string): Promise<string[]> {
  const lines = [
    row(['jobs per request', 'acknowledged jobs/s', `done jobs/s (median of ${REPEATS})`]),
    row(['---', '---', '---']),
  ];
  for (const batch of [1, 500]) {
    const runs: BulkRun[] = [];
    for (let i = 0; i < REPEATS; i++)
      runs.push(await bulkRun(dir, Math.round(20_000 * SCALE), batch));
    const m = (f: (r: BulkRun) => number): string =>
      Math.round(median(runs.map(f))).toLocaleString('en');
    lines.push(row([batch, m((r) => r.submittedPerSec), m((r) => r.donePerSec)]));
  }
  return lines;
}

/**
 * The `default` workload alone, beside 100 subscribers in this process, and
 * beside 100 subscribers in a process of their own at nice 19; interleaved,
 * medians of REPEATS.
 */
async function subscribersTable(dir: string): Promise<string[]> {
  const jobs = Math.max(200, Math.round(20_000 * SCALE));
  const places: [string, number, SubscriberPlace][] = [
    ['0', 0, 'none'],
    ['100', 100, 'here'],
    ['100, own process at nice 19', 100, 'niced'],
  ];
  const runs = places.map(() => [] as SubscriberRun[]);
  for (let i = 0; i < REPEATS; i++) {
    for (const [k, [, count, place]] of places.entries()) {
      runs[k]?.push(await subscriberRun(dir, count, jobs, i, place));
    }
  }
  const lines = [
    row([
      'subscribers',
      'jobs/s',
      'end-to-end p50, ms',
      'coordinator CPU per job, ms',
      'events per subscriber',
      'gaps',
      "subscribers' CPU, cores",
    ]),
    row(['---', '---', '---', '---', '---', '---', '---']),
  ];
  const medianOf = (list: SubscriberRun[], f: (r: SubscriberRun) => number): number =>
    median(list.map(f));
  for (const [k, [label, count]] of places.entries()) {
    const list = runs[k] ?? [];
    lines.push(
      row([
        label,
        Math.round(medianOf(list, (r) => r.jobsPerSec)).toLocaleString('en'),
        medianOf(list, (r) => r.e2eP50Ms).toFixed(1),
        medianOf(list, (r) => r.coordinatorCpuMsPerJob).toFixed(3),
        count === 0
          ? '—'
          : Math.round(medianOf(list, (r) => r.eventsPerSubscriber)).toLocaleString('en'),
        count === 0 ? '—' : medianOf(list, (r) => r.gaps),
        count === 0 ? '—' : medianOf(list, (r) => r.subscriberCores).toFixed(2),
      ]),
    );
  }
  const alone = runs[0] ?? [];
  lines.push('');
  for (const [k, [label, count]] of places.entries()) {
    if (count === 0) continue;
    const list = runs[k] ?? [];
    const ratio = medianOf(list, (r) => r.jobsPerSec) / medianOf(alone, (r) => r.jobsPerSec);
    const each = list.map((r, i) => {
      const base = alone[i]?.jobsPerSec ?? 0;
      return base === 0 ? 'n/a' : (r.jobsPerSec / base).toFixed(2);
    });
    lines.push(
      `Throughput beside ${label} / without: ${ratio.toFixed(2)} (pairs: ${each.join(', ')})`,
    );
  }
  return lines;
}
/** `--delayed-count n`: how many delayed jobs the `delayed` benchmark writes (default 10^6). */
let delayedCount = 1_000_000;

async function delayedTable(dir: string): Promise<string[]> {
  const count = Math.round(delayedCount * SCALE);
  const r = await delayedBench(dir, count, Math.round(20_000 * SCALE), REPEATS);
  const m = (values: number[]): number => Math.round(median(values));
  const without = m(r.without.map((s) => s.donePerSec));
  const withDelayed = m(r.with.map((s) => s.donePerSec));
  const cpu = (runs: { coordinatorCpuMsPerJob: number }[]): number =>
    median(runs.map((s) => s.coordinatorCpuMsPerJob));
  const cpuWithout = cpu(r.without);
  const cpuWith = cpu(r.with);
  return [
    row([
      'SCHEDULED jobs (over 30 days)',
      'restart: spawn → port answers, ms',
      'recovery, ms',
      'in memory after start',
      'RSS after start, MiB',
      'ready jobs/s without / with',
      'ratio',
      'coordinator CPU per ready job without / with, ms',
      'CPU ratio',
      'RSS after the stream, MiB',
    ]),
    row(['---', '---', '---', '---', '---', '---', '---', '---', '---', '---']),
    row([
      count.toLocaleString('en'),
      m(r.restarts.map((x) => x.readyMs)),
      m(r.restarts.map((x) => x.recoveryMs)),
      m(r.restarts.map((x) => x.activeJobs)).toLocaleString('en'),
      median(r.restarts.map((x) => x.rssMiB)),
      `${without.toLocaleString('en')} / ${withDelayed.toLocaleString('en')}`,
      (withDelayed / without).toFixed(2),
      `${cpuWithout.toFixed(3)} / ${cpuWith.toFixed(3)}`,
      (cpuWith / cpuWithout).toFixed(2),
      median(r.with.map((s) => s.rssMiB)),
    ]),
  ];
}
async function flowsTable(dir: string): Promise<string[]> {
  const parents = SMOKE ? 200 : 10_000;
  const [layers, width] = SMOKE ? [10, 10] : [1_000, 10];
  const fanIns: FanInRun[] = [];
  const dags: LayeredRun[] = [];
  for (let i = 0; i < REPEATS; i++) {
    fanIns.push(await fanInRun(dir, parents));
    dags.push(await layeredRun(dir, layers, width));
  }
  const m = (values: number[]): number => Math.round(median(values) * 10) / 10;
  const spread = (list: HandOff[]): string =>
    [m(list.map((h) => h.p50Ms)), m(list.map((h) => h.p99Ms)), m(list.map((h) => h.maxMs))].join(
      ' / ',
    );
  return [
    row([
      'fan-in',
      'submit, ms',
      'last parent → join start, ms, p50 / p99 / max: coordinator; worker',
      'last join → final start, ms: coordinator; worker',
      'first start → last end, ms',
    ]),
    row(['---', '---', '---', '---', '---']),
    row([
      `${parents.toLocaleString('en')} parents → ${Math.ceil(parents / 1000)} joins → 1`,
      m(fanIns.map((r) => r.submitMs)),
      `${spread(fanIns.map((r) => r.joinCore))}; ${spread(fanIns.map((r) => r.joinWire))}`,
      `${m(fanIns.map((r) => r.final.core))}; ${m(fanIns.map((r) => r.final.wire))}`,
      m(fanIns.map((r) => r.runMs)),
    ]),
    '',
    row([
      'layered flow (one SUBMIT_FLOW)',
      'submit, ms',
      'RSS before → after, MiB',
      'heap used before → after, MiB',
      'last parent → dependent start, ms, p50 / p99 / max: coordinator; worker',
      'first start → last end, ms',
    ]),
    row(['---', '---', '---', '---', '---', '---']),
    row([
      `${(layers * width).toLocaleString('en')} jobs, ${layers.toLocaleString('en')} layers of ${width}, 2 parents each`,
      m(dags.map((r) => r.submitMs)),
      `${m(dags.map((r) => r.rssBeforeMiB))} → ${m(dags.map((r) => r.rssAfterMiB))}`,
      `${m(dags.map((r) => r.heapBeforeMiB))} → ${m(dags.map((r) => r.heapAfterMiB))}`,
      `${spread(dags.map((r) => r.handOffCore))}; ${spread(dags.map((r) => r.handOffWire))}`,
      m(dags.map((r) => r.runMs)),
    ]),
  ];
}
/** One worker of capacity 1,000 holding 10,000 attempts that each await a second. */
async function manyAttemptsTable(): Promise<string[]> {
  const [jobs, capacity] = SMOKE ? [200, 100] : [10_000, 1_000];
  const runs: ManyAttemptsRun[] = [];
  for (let i = 0; i < REPEATS; i++) runs.push(await manyAttempts(jobs, capacity, 1_000));
  const m = (f: (r: ManyAttemptsRun) => number): number =>
    Math.round(median(runs.map(f)) * 10) / 10;
  return [
    row([
      'jobs (SLEEP 1 s each), one worker',
      `wall, s (median of ${REPEATS})`,
      "worker's peak RSS, MiB",
      "worker's peak threads",
      'jobs retried / failed (all runs)',
    ]),
    row(['---', '---', '---', '---', '---']),
    row([
      `${jobs.toLocaleString('en')}, --capacity ${capacity.toLocaleString('en')}`,
      (m((r) => r.wallMs) / 1000).toFixed(1),
      m((r) => r.peakRssMiB),
      m((r) => r.peakThreads),
      `${runs.reduce((n, r) => n + r.retried, 0)} / ${runs.reduce((n, r) => n + r.failed, 0)}`,
    ]),
  ];
}

/**
 * One coordinator, then clusters of 2 and 3 with 16 shards, on one private
 * PostgreSQL, with the same workers and load; runs alternate between the
 * three set-ups so that a slow moment of the machine hits each alike.
 */
async function shardedTable(): Promise<string[]> {
  const jobs = SMOKE ? 100 : 10_000;
  // A smoke run starts the fewest processes: one run of two set-ups.
  // 1: one coordinator leading all 16 shards (the shards' cost without the routers' hop).
  const setups = SMOKE ? [0, 2] : [0, 1, 2, 3];
  const repeats = SMOKE ? 1 : REPEATS;
  const timings = SMOKE ? SMOKE_TIMINGS : MEASURED_TIMINGS;
  const runs = new Map<number, ShardedRun[]>(setups.map((n) => [n, []]));
  const postgres = startPostgres();
  try {
    for (let r = 0; r < repeats; r++) {
      for (const n of setups) runs.get(n)?.push(await shardedRun(postgres, n, jobs, timings));
    }
  } finally {
    postgres.stop();
  }
  const m = (rs: ShardedRun[], f: (r: ShardedRun) => number): number =>
    Math.round(median(rs.map(f)));
  const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
  const lines = [
    row([
      `${jobs.toLocaleString('en')} SHA256 jobs over 16 queues, 2 workers × 8`,
      `jobs/s (median of ${repeats})`,
      'coordinators µs/job (each)',
      'coordinators µs/job (sum)',
      'workers µs/job',
      'PostgreSQL µs/job',
      'transactions per job (shards per transaction)',
      'idle CPU ms/s (each)',
      'takeover per shard, ms (min–max)',
    ]),
    row(['---', '---', '---', '---', '---', '---', '---', '---', '---']),
  ];
  for (const n of setups) {
    const rs = runs.get(n) ?? [];
    const each = Array.from({ length: Math.max(n, 1) }, (_, i) =>
      m(rs, (r) => r.coordinatorUs[i] ?? 0),
    );
    const takeovers = rs.flatMap((r) => r.takeoverMs);
    lines.push(
      row([
        n === 0
          ? 'one coordinator, unsharded'
          : `${n} coordinator${n === 1 ? '' : 's'}, ${SHARDS} shards`,
        String(m(rs, (r) => r.jobsPerSec)),
        each.join(' / '),
        String(m(rs, (r) => sum(r.coordinatorUs))),
        String(m(rs, (r) => r.workersUs)),
        String(m(rs, (r) => r.postgresUs)),
        perTransaction(rs),
        Array.from({ length: Math.max(n, 1) }, (_, i) =>
          median(rs.map((r) => r.idleMsPerSec[i] ?? 0)).toFixed(0),
        ).join(' / '),
        takeovers.length === 0 ? '—' : `${Math.min(...takeovers)}–${Math.max(...takeovers)}`,
      ]),
    );
  }
  return lines;
}

/** Median transactions per job, and shards' parts per transaction: `0.31 (1.0)`. */
function perTransaction(rs: ShardedRun[]): string {
  const commits = median(rs.map((r) => r.commitsPerJob));
  const parts = median(rs.map((r) => r.partsPerJob));
  return `${commits.toFixed(2)} (${commits > 0 ? (parts / commits).toFixed(1) : '—'})`;
}

/** A Markdown table as rows of cells (for the JSON report). */
function cellsOf(lines: string[]): string[][] {
  return lines
    .filter((line) => line.startsWith('| ') && !line.startsWith('| ---'))
    .map((line) => line.slice(2, -2).split(' | '));
}

async function run(name: Name, dir: string): Promise<string[]> {
  switch (name) {
    case 'queue-depth':
      return queueDepth();
    case 'routing':
      return routing();
    case 'fairness':
      return fairness();
    case 'rate':
      return rate(dir);
    case 'recovery':
      return recovery(dir);
    case 'throughput':
      return throughputTable(dir);
    case 'bulk':
      return bulkTable(dir);
    case 'overload':
      return overload(dir);
    case 'latency':
      return latencyTable(dir);
    case 'security':
      return security(dir);
    case 'subscribers':
      return subscribersTable(dir);
    case 'delayed':
      return delayedTable(dir);
    case 'flows':
      return flowsTable(dir);
    case 'many-attempts':
      return manyAttemptsTable();
    case 'dedup':
      return dedupTable();
    case 'signals':
      return signalsTable();
    case 'sharded':
      return shardedTable();
  }
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    args: process.argv.slice(2),
    options: {
      smoke: { type: 'boolean' },
      out: { type: 'string' },
      'delayed-count': { type: 'string' },
      reps: { type: 'string' },
    },
    allowPositionals: true,
  });
  for (const name of positionals) {
    if (!(ALL as readonly string[]).includes(name))
      throw new Error(`unknown benchmark ${name}; expected ${ALL.join(', ')}`);
  }
  if (values['delayed-count'] !== undefined) {
    delayedCount = Number(values['delayed-count']);
    if (!Number.isInteger(delayedCount) || delayedCount < 1 || delayedCount > 10_000_000)
      throw new Error('--delayed-count must be an integer in 1..10000000');
  }
  if (values.reps !== undefined) {
    const reps = Number(values.reps);
    if (!Number.isInteger(reps) || reps < 1 || reps > 25)
      throw new Error('--reps must be an integer in 1..25');
    // A smoke run stays at one run of each, whatever --reps says.
    if (!SMOKE) REPEATS = reps;
  }
  const names: readonly Name[] = positionals.length === 0 ? ALL : (positionals as Name[]);
  const dir = mkdtempSync(join(tmpdir(), 'dtp-bench-'));
  const head = [`Machine: ${machine()}`, `Date: ${new Date().toISOString()}`];
  const out: string[] = [...head, ''];
  const report: Record<string, unknown> = { machine: head[0], date: head[1], smoke: SMOKE };
  try {
    for (const name of names) {
      const started = performance.now();
      const lines = await run(name, dir);
      const seconds = Math.round((performance.now() - started) / 1000);
      out.push(`### ${name}`, '', ...lines, '', `(${seconds} s)`, '');
      report[name] = { seconds, table: cellsOf(lines) };
      console.error(`done: ${name}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  writeFileSync(values.out ?? 'bench-results.json', `${JSON.stringify(report, null, 2)}\n`);
  console.log(out.join('\n'));
}

await main();
