/**
 * A seeded, deterministic simulation of the coordinator core.
 *
 * One seed fixes everything: the core's settings, the workers and clients,
 * every clock step, every fault and every interleaving. A run has two phases:
 *
 * - main: for `steps` steps the clock moves (small steps, and jumps past
 *   heartbeat timeouts, task deadlines and retry back-offs), workers and
 *   clients act, a fault may strike, workers read some of their frames, and
 *   the coordinator handles a few batches of inputs;
 * - quiescence: faults and new requests stop, every worker is healed, the
 *   clock moves in heartbeat-safe steps, and the run ends once every job is
 *   terminal and every request answered, or fails if that does not happen
 *   within `quiescenceMaxSteps`.
 *
 * Invariants are checked after every step (see invariants.ts, tracker.ts).
 * Nothing here reads the wall clock or Math.random.
 */
import type { CoreConfig } from '../../src/coordinator/core/types.js';
import type { SubmitJob } from '../../src/protocol/messages.js';
import { REQUEST_WEIGHTS, SimClient } from './clients.js';
import { Invariants } from './invariants.js';
import { SimClock } from './network.js';
import { Random } from './random.js';
import { SimElection, type LeaseTiming } from './election.js';
import { Judge } from './violation.js';
import { FaultCounter, SimWorker, type GhostLease } from './workers.js';
import { World } from './world.js';
import {
  advanceClock,
  coordinatorTurn,
  drainQuietly,
  hangMs,
  planRestart,
  quietDeltaMs,
  redialAfterStall,
  runPhases,
  sendLateResults,
  isWorkerFault,
  workerFault,
  workerTypes,
  type CrashPlan,
} from './sim-parts.js';
import type { ScheduleCounts } from './schedule-checks.js';
import type { SignalCounts } from './signal-checks.js';

export interface SimulationOptions {
  /** Steps of the main phase (default 300). */
  steps?: number;
  /** Longest quiescence phase, in steps (default 20000). */
  quiescenceMaxSteps?: number;
  /** Receives one line per step and per input when set (replay with --verbose). */
  log?: (line: string) => void;
}

export interface SimulationReport {
  seed: number;
  steps: number;
  quiescenceSteps: number;
  simulatedMs: number;
  inputs: number;
  batches: number;
  restarts: number;
  /** Leaders frozen and replaced by the other node. */
  failovers: number;
  /** Commits of deposed leaders refused by the epoch fence. */
  fencedCommits: number;
  /** Steps that ended with a worker holding more leases than its capacity (prefetch). */
  prefetchedSteps: number;
  /** Frames of several attempts (feature `batches`): TASK_ASSIGNS delivered, TASK_RESULTS written. */
  assignBatches: number;
  resultBatches: number;
  /** Attempt starts checked against queue settings, and those of a queue with settings. */
  queueStarts: number;
  limitedStarts: number;
  /** Starts at which another group of the same queue and priority waited with a job that start could have taken. */
  contestedStarts: number;
  /** Attempts kept for a worker after a stall of the core or a restart, and taken back by a new session. */
  keptLeases: number;
  reclaimedLeases: number;
  /** Connections whose end was read before their last frames were handled. */
  endingConnections: number;
  jobsCreated: number;
  jobsAcked: number;
  completed: number;
  failed: number;
  cancelled: number;
  staleResults: number;
  deduplicated: number;
  rejected: number;
  /** Jobs created with parents, and those a failed parent cancelled. */
  dependents: number;
  children: number;
  cascaded: number;
  /** Subscribers dropped for a newcomer, and subscriptions refused for a full budget. */
  subscribersDropped: number;
  subscriptionsRefused: number;
  /** Steps recorded and acknowledged (durable steps). */
  stepsRecorded: number;
  /** Attempts that ended in a sleep or a wait. */
  suspended: number;
  /** Attempts requeued by their worker for free, and requeues past the bound that counted. */
  requeued: number;
  requeuesCounted: number;
  /** Held lists sent in several parts (`moreHeld`) that ended. */
  heldLists: number;
  /** Jobs created with a dedup key; submissions it answered with an existing job, and those that replaced its payload (debounce). */
  dedupKeyed: number;
  dedupMatched: number;
  replaced: number;
  /** Jobs that expired before an attempt started. */
  expired: number;
  /** Attempts their handler ended rate limited, and those that held a group or a whole queue. */
  rateLimited: number;
  rateLimitedGroup: number;
  rateLimitedQueue: number;
  /** Signals acknowledged and taken by a wait, events published, waiting jobs they woke, jobs their triggers made, waits timed out. */
  signals: SignalCounts;
  /** Schedule ticks fired and skipped (by reason), catch-up jobs, triggers, definitions. */
  schedules: ScheduleCounts;
  faults: Record<string, number>;
  faultTotal: number;
}

export const DEFAULT_STEPS = 300;
export const DEFAULT_QUIESCENCE_STEPS = 20_000;
/** Simulated time starts here (any fixed epoch will do). */
export const EPOCH_MS = 1_700_000_000_000;

export const FAULT_WEIGHTS = {
  workerCrash: 4,
  workerHang: 3,
  reregister: 2,
  garbage: 1,
  strayConnection: 1,
  drain: 1,
  lateResult: 5,
  restart: 2,
  clientHangUp: 2,
  failover: 2,
} as const;

/** A run's settings, drawn from its seed. */
export interface Profile {
  config: CoreConfig;
  lease: LeaseTiming;
  sweepIntervalMs: number;
  heartbeatIntervalMs: number;
  faultRate: number;
  /** Small budgets per address and stalled subscribers are part of this run. */
  budgets: boolean;
}

/** Addresses the simulated clients come from: clients 0 and 2 share one. */
export const CLIENT_ADDRESSES = ['10.0.0.1', '10.0.0.2'] as const;

/**
 * The budgets per address and of subscriptions: small in some runs (with
 * stalled subscribers), else as large as never to bite. Drawn from a stream
 * of their own, so a run without them replays as it did before they existed.
 */
function drawBudgets(
  seed: number,
): Pick<
  CoreConfig,
  'maxWaitsPerAddress' | 'maxSubscriptions' | 'maxSubscriptionsPerAddress' | 'subscriberStallMs'
> & { on: boolean } {
  const rng = new Random(seed ^ 0x5eed_b0d9);
  if (!rng.chance(0.3)) {
    return {
      on: false,
      maxWaitsPerAddress: 100_000,
      maxSubscriptions: 1_024,
      maxSubscriptionsPerAddress: 1_024,
      subscriberStallMs: 10_000,
    };
  }
  return {
    on: true,
    maxWaitsPerAddress: rng.int(1, 4),
    maxSubscriptions: rng.int(1, 6),
    maxSubscriptionsPerAddress: rng.int(1, 4),
    subscriberStallMs: rng.int(50, 3_000),
  };
}

export function drawProfile(rng: Random, seed: number): Profile {
  const { on: budgets, ...budgetConfig } = drawBudgets(seed);
  const heartbeatTimeoutMs = rng.int(2_000, 10_000);
  const retryBaseDelayMs = rng.int(10, 1_000);
  const config: CoreConfig = {
    heartbeatTimeoutMs,
    taskTimeoutMs: rng.int(1_000, 20_000),
    defaultMaxAttempts: rng.int(1, 5),
    retryBaseDelayMs,
    retryMaxDelayMs: retryBaseDelayMs * rng.int(1, 30),
    maxActiveJobs: rng.chance(0.3) ? rng.int(1, 8) : 10_000,
    maxScheduledJobs: rng.chance(0.3) ? rng.int(1, 4) : 1_000_000,
    agingStepMs: rng.chance(0.2) ? 0 : rng.int(100, 20_000),
    sweepIntervalMs: rng.int(20, 500),
    retainTerminalMs: null,
    maxWaitsPerConnection: rng.chance(0.2) ? rng.int(1, 3) : 10_000,
    maxWaits: rng.chance(0.2) ? rng.int(1, 6) : 100_000,
    ...budgetConfig,
    // A small near window of delayed jobs (delays here are up to 3 s): far
    // jobs, window reads, full reads and cancels of far jobs all happen.
    scheduledWindow: {
      windowMs: rng.int(300, 2_000),
      limit: rng.int(1, 20),
      marginMs: rng.int(0, 300),
    },
  };
  // Longer than any clock jump of a step: a leader loses its lease only in a failover.
  const ttlMs = rng.int(60_000, 120_000);
  return {
    config,
    lease: { ttlMs, renewIntervalMs: Math.floor(ttlMs / 4) },
    sweepIntervalMs: config.sweepIntervalMs,
    heartbeatIntervalMs: Math.floor(heartbeatTimeoutMs / 4),
    faultRate: 0.03 + rng.float() * 0.15,
    budgets,
  };
}

export class Simulation {
  readonly seed: number;
  readonly #steps: number;
  readonly #quiescenceMaxSteps: number;
  readonly #log: (line: () => string) => void;
  readonly #rng: Random;
  readonly #profile: Profile;
  readonly #clock = new SimClock(EPOCH_MS);
  readonly #judge: Judge;
  readonly #world: World;
  readonly #invariants: Invariants;
  readonly #faults = new FaultCounter();
  readonly #ghosts: GhostLease[] = [];
  readonly #stepStats = { recorded: 0, suspensions: 0 };
  readonly #keyed: SubmitJob[] = [];
  readonly #workers: SimWorker[] = [];
  readonly #clients: SimClient[] = [];
  readonly #crash: CrashPlan = { crashPlan: null };
  #quiet = false;

  constructor(seed: number, options: SimulationOptions = {}) {
    this.seed = seed >>> 0;
    this.#steps = options.steps ?? DEFAULT_STEPS;
    this.#quiescenceMaxSteps = options.quiescenceMaxSteps ?? DEFAULT_QUIESCENCE_STEPS;
    const sink = options.log;
    this.#log = sink === undefined ? () => undefined : (line) => sink(line());
    this.#rng = new Random(this.seed);
    this.#profile = drawProfile(this.#rng, this.seed);
    this.#judge = new Judge(this.seed, this.#steps === DEFAULT_STEPS ? undefined : this.#steps);
    this.#world = new World({
      election: new SimElection(this.#clock, this.#profile.lease, this.#judge),
      clock: this.#clock,
      rng: this.#rng.fork(),
      seed: this.seed,
      config: this.#profile.config,
      sweepIntervalMs: this.#profile.sweepIntervalMs,
      stalls: this.#profile.budgets,
      log: this.#log,
    });
    const invalid = new WeakSet<object>();
    this.#invariants = new Invariants(this.#world, this.#judge, this.#profile.config, invalid);
    this.#createActors(invalid);
  }

  #createActors(invalid: WeakSet<object>): void {
    const rng = this.#rng;
    const { config, heartbeatIntervalMs } = this.#profile;
    const workerEnv = {
      world: this.#world,
      clock: this.#clock,
      judge: this.#judge,
      faults: this.#faults,
      ghosts: this.#ghosts,
      heartbeatIntervalMs,
      heartbeatTimeoutMs: config.heartbeatTimeoutMs,
      taskTimeoutMs: config.taskTimeoutMs,
      quiet: () => this.#quiet,
      log: this.#log,
      leaseCurrent: (jobId: string, attemptId: string) =>
        this.#invariants.tracker.leaseCurrent(jobId, attemptId),
      stepStats: this.#stepStats,
    };
    const workerCount = rng.int(1, 5);
    for (let i = 0; i < workerCount; i++) {
      const types = workerTypes(rng, i);
      this.#workers.push(new SimWorker(`worker-${i}`, workerEnv, rng.fork(), types));
    }
    const clientEnv = {
      world: this.#world,
      clock: this.#clock,
      judge: this.#judge,
      faults: this.#faults,
      invalid,
      ackedIds: this.#invariants.ackedIds,
      keyed: this.#keyed,
      schedules: new Map(),
      onAck: (jobId: string, submission: SubmitJob, deduplicated: boolean) =>
        this.#invariants.onAck(jobId, submission, deduplicated),
      // Small budgets are met only by clients that subscribe often.
      ...(this.#profile.budgets && { weights: { ...REQUEST_WEIGHTS, subscribe: 10 } }),
      waiting: () => this.#invariants.signals.waiting(),
      signalling: { next: 1, poked: new Map<string, number>() },
      quiet: () => this.#quiet,
      log: this.#log,
    };
    const clientCount = rng.int(1, 4);
    for (let i = 0; i < clientCount; i++) {
      const address = CLIENT_ADDRESSES[i % CLIENT_ADDRESSES.length] as string;
      this.#clients.push(new SimClient(`client-${i}`, clientEnv, rng.fork(), address));
    }
  }

  /** Runs both phases; throws {@link SimulationViolation} on the first broken invariant. */
  run(): SimulationReport {
    const { config, sweepIntervalMs } = this.#profile;
    this.#log(
      () =>
        `seed ${this.seed}: ${this.#workers.length} workers, ${this.#clients.length} clients, sweep ${sweepIntervalMs} ms, fault rate ${this.#profile.faultRate.toFixed(3)}, config ${JSON.stringify(config)}`,
    );
    this.#world.start(this.#invariants);
    const quiescenceSteps = runPhases({
      judge: this.#judge,
      steps: this.#steps,
      quiescenceMaxSteps: this.#quiescenceMaxSteps,
      mainStep: () => this.#mainStep(),
      enterQuiet: () => this.#enterQuiet(),
      quietStep: () => this.#quietStep(),
      checkStep: () => this.#invariants.checkStep(),
      quiescenceProblem: () => this.#quiescenceProblem(),
    });
    return this.#report(quiescenceSteps);
  }

  #mainStep(): void {
    const deltaMs = advanceClock(this.#rng, this.#profile, this.#clock, this.#faults);
    redialAfterStall(this.#rng, deltaMs, this.#profile, this.#workers, this.#faults);
    this.#log(() => `step ${this.#judge.step} t=+${this.#clock.nowMs - EPOCH_MS}ms`);
    this.#world.tickLeases();
    if (this.#world.hasFrozen && this.#rng.chance(0.3)) this.#world.wakeFrozen();
    for (const worker of this.#workers) worker.act();
    for (const client of this.#clients) client.act();
    if (this.#rng.chance(this.#profile.faultRate)) this.#injectFault();
    for (const worker of this.#workers) worker.read(this.#rng.int(0, 3));
    coordinatorTurn(this.#rng, this.#world, this.#crash);
  }

  #enterQuiet(): void {
    this.#quiet = true;
    this.#world.stalls = false;
    this.#crash.crashPlan = null;
    this.#world.wakeFrozen();
    for (const worker of this.#workers) worker.heal();
  }

  #quiescenceProblem(): string | null {
    const unanswered = this.#clients.reduce((n, c) => n + c.unanswered, 0);
    return this.#invariants.quiescenceProblem(unanswered);
  }

  /** Everything ready is done now; then the clock jumps to the next due moment. */
  #quietStep(): void {
    const busy =
      this.#world.hasInput() ||
      this.#world.hasCommitPending() ||
      this.#workers.some((w) => w.unread > 0);
    let deltaMs = 0;
    if (!busy) {
      const due = Math.min(
        this.#world.nextTimerAtMs(),
        ...this.#workers.map((w) => w.nextDueAtMs()),
      );
      deltaMs = quietDeltaMs(this.#clock.nowMs, due, this.#profile.heartbeatIntervalMs);
    }
    this.#clock.advance(deltaMs);
    this.#log(() => `step ${this.#judge.step} (quiet) t=+${this.#clock.nowMs - EPOCH_MS}ms`);
    this.#world.tickLeases();
    for (const worker of this.#workers) worker.act();
    for (const client of this.#clients) client.act();
    for (const worker of this.#workers) worker.read(Number.MAX_SAFE_INTEGER);
    drainQuietly(this.#rng, this.#world);
  }

  #injectFault(): void {
    const rng = this.#rng;
    const kind = rng.weighted(FAULT_WEIGHTS);
    this.#faults.count(kind);
    const worker = rng.pick(this.#workers);
    this.#log(
      () =>
        `  fault: ${kind}${kind.startsWith('worker') || kind === 'reregister' || kind === 'drain' || kind === 'garbage' ? ` (${worker.workerId})` : ''}`,
    );
    if (isWorkerFault(kind)) {
      return workerFault(kind, worker, () => hangMs(rng, this.#profile.config.heartbeatTimeoutMs));
    }
    switch (kind) {
      case 'lateResult':
        return sendLateResults(rng, this.#ghosts, this.#workers);
      case 'restart':
        return planRestart(rng, this.#world, this.#crash);
      case 'clientHangUp':
        return rng.pick(this.#clients).hangUp();
      case 'failover':
        return this.#world.failover(rng.int(1, this.#profile.lease.renewIntervalMs));
    }
  }

  #report(quiescenceSteps: number): SimulationReport {
    const counts = this.#invariants.tracker.counts;
    const stats = this.#world.stats;
    return {
      seed: this.seed,
      steps: this.#steps,
      quiescenceSteps,
      simulatedMs: this.#clock.nowMs - EPOCH_MS,
      inputs: stats.inputs,
      batches: stats.batches,
      restarts: stats.restarts,
      failovers: stats.failovers,
      fencedCommits: this.#world.election.fenced,
      prefetchedSteps: this.#invariants.prefetchedChecks,
      assignBatches: this.#world.batchFrames.assigns,
      resultBatches: this.#world.batchFrames.results,
      queueStarts: this.#invariants.queues.starts,
      limitedStarts: this.#invariants.queues.limitedStarts,
      contestedStarts: this.#invariants.fairness.contested,
      keptLeases: counts.keptLeases,
      reclaimedLeases: counts.reclaimedLeases,
      endingConnections: counts.endingConnections,
      jobsCreated: counts.created,
      jobsAcked: this.#invariants.ackedIds.length,
      completed: counts.completed,
      failed: counts.failed,
      cancelled: counts.cancelled,
      staleResults: counts.staleResults,
      deduplicated: counts.deduplicated,
      rejected: counts.rejected,
      dependents: counts.dependents,
      children: counts.children,
      cascaded: counts.cascaded,
      subscribersDropped: this.#invariants.budgets.counts.dropped,
      subscriptionsRefused: this.#invariants.budgets.counts.refused,
      stepsRecorded: this.#stepStats.recorded,
      suspended: counts.suspended,
      requeued: counts.requeued,
      requeuesCounted: counts.requeuesCounted,
      heldLists: counts.heldLists,
      dedupKeyed: this.#invariants.tracker.dedup.counts.created,
      dedupMatched: counts.dedupMatched,
      replaced: counts.replaced,
      expired: counts.expired,
      rateLimited: counts.rateLimited,
      rateLimitedGroup: counts.rateLimitedGroup,
      rateLimitedQueue: counts.rateLimitedQueue,
      signals: { ...this.#invariants.signals.counts },
      schedules: { ...this.#invariants.tracker.schedules.counts },
      faults: this.#faults.toJSON(),
      faultTotal: this.#faults.total,
    };
  }
}
