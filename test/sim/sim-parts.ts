/**
 * What the simulation of one coordinator (simulator.ts) and that of several
 * shard leaders (sharded-simulator.ts) do alike: the two phases' loop, a
 * step's move of the clock, workers that judge a silent coordinator gone, a
 * coordinator's turn of batches and commits (where a planned crash
 * strikes), restarts, late results, hangs, and the quiet phase's turns.
 * Each draws from the run's random source in the same order wherever it is
 * used, so a seed replays as it did before these were shared.
 */
import type { CoreConfig } from '../../src/coordinator/core/types.js';
import { BUILTIN_TASK_TYPES } from '../../src/tasks/builtin/index.js';
import type { SimClock } from './network.js';
import type { Random } from './random.js';
import type { Judge } from './violation.js';
import type { FaultCounter, GhostLease, SimWorker } from './workers.js';
import type { CrashPoint, World } from './world.js';

const CLOCK_WEIGHTS = {
  small: 70,
  medium: 20,
  pastHeartbeat: 3,
  pastDeadline: 3,
  backoff: 4,
} as const;

/** The settings of a run these draw from (simulator.ts, `Profile`). */
export interface Pace {
  config: CoreConfig;
  sweepIntervalMs: number;
  heartbeatIntervalMs: number;
}

/** A coordinator's crash planned for its next batch or commit; null = none. */
export interface CrashPlan {
  crashPlan: CrashPoint | null;
}

/** What the two phases run, step by step. */
export interface Phases {
  judge: Judge;
  steps: number;
  quiescenceMaxSteps: number;
  mainStep(): void;
  /** Faults and new requests stop: what the quiet phase starts from. */
  enterQuiet(): void;
  quietStep(): void;
  checkStep(): void;
  /** Null once the run is at rest. */
  quiescenceProblem(): string | null;
}

/**
 * The main phase (`steps` steps), then quiescence until the run is at rest,
 * every invariant checked after every step. Returns the quiet steps taken;
 * throws a violation when the run does not come to rest.
 */
export function runPhases(p: Phases): number {
  p.checkStep();
  for (let step = 1; step <= p.steps; step++) {
    p.judge.step = step;
    p.mainStep();
    p.checkStep();
  }
  p.judge.phase = 'quiescence';
  p.enterQuiet();
  for (let q = 1; q <= p.quiescenceMaxSteps; q++) {
    p.judge.step = p.steps + q;
    p.quietStep();
    p.checkStep();
    if (p.quiescenceProblem() === null) return q;
  }
  throw p.judge.violation(
    `not quiescent after ${p.quiescenceMaxSteps} steps: ${p.quiescenceProblem()}`,
  );
}

/**
 * One step's move of the clock: mostly small, now and then past a
 * heartbeat timeout, a task's deadline or a retry's back-off. Returns how far.
 */
export function advanceClock(
  rng: Random,
  profile: Pace,
  clock: SimClock,
  faults: FaultCounter,
): number {
  const { config, sweepIntervalMs, heartbeatIntervalMs } = profile;
  const kind = rng.weighted(CLOCK_WEIGHTS);
  let deltaMs: number;
  switch (kind) {
    case 'small':
      deltaMs = rng.int(0, sweepIntervalMs);
      break;
    case 'medium':
      deltaMs = rng.int(0, heartbeatIntervalMs);
      break;
    case 'pastHeartbeat':
      deltaMs = config.heartbeatTimeoutMs + rng.int(1, config.heartbeatTimeoutMs);
      break;
    case 'pastDeadline':
      deltaMs = config.taskTimeoutMs + rng.int(1, 1_000);
      break;
    case 'backoff':
      deltaMs = rng.int(config.retryBaseDelayMs, config.retryMaxDelayMs + 1);
      break;
  }
  if (kind !== 'small' && kind !== 'medium') faults.count(`clock:${kind}`);
  clock.advance(deltaMs);
  return deltaMs;
}

/**
 * Time the coordinator did not run: workers that watch it judge it gone
 * and redial (their tasks go on), and it reads their ends when it wakes.
 */
export function redialAfterStall(
  rng: Random,
  deltaMs: number,
  profile: Pace,
  workers: readonly SimWorker[],
  faults: FaultCounter,
): void {
  if (deltaMs <= Math.max(4 * profile.sweepIntervalMs, 1_000)) return;
  for (const worker of workers) {
    if (rng.chance(0.3)) {
      faults.count('redialAfterStall');
      worker.redial();
    }
  }
}

/**
 * A coordinator's turn: a few batches, then the store finishes commits at
 * its own pace (some steps none, some several); a planned crash strikes in
 * the batch or the commit it was planned for.
 */
export function coordinatorTurn(rng: Random, world: World, plan: CrashPlan): void {
  const batches = rng.int(0, 3);
  for (let b = 0; b < batches; b++) {
    const crash = plan.crashPlan?.at === 'beforeCommit' ? plan.crashPlan : null;
    if (crash !== null) plan.crashPlan = null;
    world.runBatch(rng.int(1, 8), crash);
  }
  const commits = rng.int(0, 3);
  for (let c = 0; c < commits && world.hasCommitPending(); c++) {
    const crash = plan.crashPlan?.at === 'afterCommit' ? plan.crashPlan : null;
    if (crash !== null) plan.crashPlan = null;
    world.completeCommit(crash);
  }
}

/** A coordinator restart: now, or planned before a commit, or right after one. */
export function planRestart(rng: Random, world: World, plan: CrashPlan): void {
  const roll = rng.float();
  if (roll < 0.3) {
    world.restart('crash between batches');
  } else if (roll < 0.65) {
    plan.crashPlan = { at: 'beforeCommit', index: rng.int(0, 5) };
  } else {
    plan.crashPlan = { at: 'afterCommit', released: rng.int(0, 8) };
  }
}

/** A few registered workers report on old leases (maybe revoked long ago, maybe another's). */
export function sendLateResults(
  rng: Random,
  ghosts: readonly GhostLease[],
  workers: readonly SimWorker[],
): void {
  if (ghosts.length === 0) return;
  const registered = workers.filter((w) => w.registered);
  if (registered.length === 0) return;
  const count = rng.int(1, 3);
  for (let i = 0; i < count; i++) rng.pick(registered).sendLate(rng.pick(ghosts));
}

/** The task types a worker runs: worker 0 every type (every job can finish when quiet), others now and then a few. */
export function workerTypes(rng: Random, index: number): string[] | null {
  return index > 0 && rng.chance(0.3)
    ? rng.shuffle([...BUILTIN_TASK_TYPES]).slice(0, rng.int(1, 4))
    : null;
}

/** How long a worker hangs: half the time less than a heartbeat timeout, else up to three. */
export function hangMs(rng: Random, heartbeatTimeoutMs: number): number {
  return rng.chance(0.5)
    ? rng.int(1, heartbeatTimeoutMs)
    : rng.int(heartbeatTimeoutMs, 3 * heartbeatTimeoutMs);
}

const WORKER_FAULTS = [
  'workerCrash',
  'workerHang',
  'reregister',
  'garbage',
  'strayConnection',
  'drain',
] as const;

/** The faults that strike one worker (one session, in the sharded simulation). */
export type WorkerFaultKind = (typeof WORKER_FAULTS)[number];

export function isWorkerFault(kind: string): kind is WorkerFaultKind {
  return (WORKER_FAULTS as readonly string[]).includes(kind);
}

/** A fault strikes `worker`; `hang` draws how long it hangs. */
export function workerFault(kind: WorkerFaultKind, worker: SimWorker, hang: () => number): void {
  switch (kind) {
    case 'workerCrash':
      return worker.crash();
    case 'workerHang':
      return worker.hang(hang());
    case 'reregister':
      return worker.reregister();
    case 'garbage':
      return worker.garbage();
    case 'strayConnection':
      return worker.strayConnection();
    case 'drain':
      return worker.drain();
  }
}

/** The clock's move in a quiet step with nothing ready: to the next due moment, heartbeat-safe. */
export function quietDeltaMs(nowMs: number, dueAtMs: number, heartbeatIntervalMs: number): number {
  // Never more than half a heartbeat interval at once.
  return Math.min(Math.max(dueAtMs - nowMs, 1), Math.floor(heartbeatIntervalMs / 2));
}

/** The quiet phase's turn of a coordinator: everything ready is handled and committed. */
export function drainQuietly(rng: Random, world: World): void {
  for (let b = 0; b < 1_000 && (world.hasInput() || world.hasCommitPending()); b++) {
    world.runBatch(rng.int(1, 8));
    while (world.completeCommit());
  }
}
