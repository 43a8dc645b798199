/**
 * A seeded, deterministic simulation of several shard leaders over one
 * store (a sharded database, docs/PROTOCOL.md "Shards").
 *
 * One seed fixes the settings, the number of shards (2 to 4) and every
 * step. Each shard is a {@link World} of its own: the real core with its
 * shard, on its own store, with its own two nodes, lease, epochs, restarts
 * and failovers; the stores share the cluster's outbox, read by each
 * shard's shell at moments the simulation picks (outbox-reads.ts). Clients
 * reach the shards through the router (sim-router.ts), so that each
 * request goes where the sharded coordinator's client port sends it; a
 * worker process holds one session per shard. Clients also submit flows
 * over the queues of every shard and jobs whose parents are in other
 * shards; handlers wait (`ctx.waitFor`) for jobs of other shards too.
 *
 * Each step is the single-shard simulation's (simulator.ts), with every
 * shard's coordinator running its batches, commits and outbox reads in an
 * order shuffled anew each step. Faults strike per shard (restarts, before
 * or after a commit; a failover freezes the leaders of some shards while
 * the others keep renewing theirs), per session or per worker process.
 *
 * After every step each shard's invariants are checked (invariants.ts,
 * with the parents of other shards judged by their shard's committed
 * ends) and those across shards (cross-shard-checks.ts, observed-outbox.ts).
 */
import type { CoreConfig } from '../../src/coordinator/core/types.js';
import type { SubmitJob } from '../../src/protocol/messages.js';
import { shardOfQueue } from '../../src/protocol/shards.js';
import { QUEUES, REQUEST_WEIGHTS, SimClient } from './clients.js';
import {
  CrossShardChecks,
  type CheckedShard,
  type CrossShardCounts,
} from './cross-shard-checks.js';
import { SimElection } from './election.js';
import { Invariants } from './invariants.js';
import { IdSource, SimClock } from './network.js';
import { ObservedOutbox, type OutboxCounts } from './observed-outbox.js';
import type { OutboxReadStats } from './outbox-reads.js';
import { Random } from './random.js';
import {
  CLIENT_ADDRESSES,
  EPOCH_MS,
  FAULT_WEIGHTS,
  drawProfile,
  type Profile,
  DEFAULT_QUIESCENCE_STEPS,
  type SimulationOptions,
  type SimulationReport,
} from './simulator.js';
import * as parts from './sim-parts.js';
import { SimRouter } from './sim-router.js';
import { Judge } from './violation.js';
import { FaultCounter, SimWorker, type GhostLease } from './workers.js';
import { World } from './world.js';

/**
 * As the single-shard simulation's; the main phase is
 * {@link SHARDED_DEFAULT_STEPS} steps by default, quiescence at most 20000
 * steps per shard.
 */
export interface ShardedSimulationOptions extends SimulationOptions {
  /** A planted bug, for the tests that show the checks catch it. */
  sabotage?: ShardSabotage;
}

/**
 * Planted bugs: outbox reads that say every batch had committed (a message
 * is applied again before the batch that applied it committed), and an
 * outbox that loses the jobs flows send to other shards.
 */
export type ShardSabotage = 'readsClaimAll' | 'losesJobs';

/** The single-shard simulation's counts that add up over shards, and those across them. */
export interface ShardedReport extends Pick<
  SimulationReport,
  | 'seed'
  | 'steps'
  | 'quiescenceSteps'
  | 'simulatedMs'
  | 'inputs'
  | 'restarts'
  | 'failovers'
  | 'fencedCommits'
  | 'jobsCreated'
  | 'jobsAcked'
  | 'completed'
  | 'failed'
  | 'cancelled'
  | 'faults'
  | 'faultTotal'
> {
  shards: number;
  /** Messages written to the outbox, by kind, and those applied. */
  outbox: OutboxCounts;
  /** Outbox reads that found messages, were answered twice, failed; messages handed over. */
  reads: OutboxReadStats;
  cross: CrossShardCounts;
}

export const SHARDED_DEFAULT_STEPS = 120;

/** The faults of the single-shard simulation, and a worker process dying with all its sessions. */
const SHARDED_FAULT_WEIGHTS = { ...FAULT_WEIGHTS, processCrash: 2 } as const;

/** The command that replays one seed of this simulation step by step. */
export function shardedReplay(seed: number, steps?: number): string {
  const stepsFlag = steps === undefined ? '' : ` --steps ${steps}`;
  return `node dist/test/sim/sharded-run.js --seed ${seed}${stepsFlag} --verbose`;
}

/** Queue names that cover every shard: `default`, `q1`, `q2`, ... (at least QUEUES' three). */
export function queuesFor(shards: number): string[] {
  const queues = [...QUEUES];
  const covered = (): boolean =>
    Array.from({ length: shards }, (_, s) => s).every((s) =>
      queues.some((q) => shardOfQueue(q, shards) === s),
    );
  for (let i = queues.length; !covered() && i < 100; i++) queues.push(`q${i}`);
  return queues;
}

/** One shard: its coordinator, its checks, its planned crash, its old leases. */
interface Shard extends CheckedShard, parts.CrashPlan {
  index: number;
  ghosts: GhostLease[];
}

export class ShardedSimulation {
  readonly seed: number;
  readonly #steps: number;
  readonly #quiescenceMaxSteps: number;
  readonly #log: (line: () => string) => void;
  readonly #rng: Random;
  readonly #profile: Profile;
  readonly #clock = new SimClock(EPOCH_MS);
  readonly #judge: Judge;
  readonly #outbox: ObservedOutbox;
  readonly #reads: OutboxReadStats = { delivered: 0, duplicated: 0, failed: 0, messages: 0 };
  readonly #shards: Shard[] = [];
  readonly #cross: CrossShardChecks;
  readonly #router: SimRouter;
  readonly #faults = new FaultCounter();
  /** Worker processes, each with one session per shard. */
  readonly #processes: SimWorker[][] = [];
  readonly #clients: SimClient[] = [];
  readonly #stepStats = { recorded: 0, suspensions: 0 };
  readonly #sabotage: ShardSabotage | undefined;
  #quiet = false;

  constructor(seed: number, options: ShardedSimulationOptions = {}) {
    this.seed = seed >>> 0;
    this.#steps = options.steps ?? SHARDED_DEFAULT_STEPS;
    const sink = options.log;
    this.#log = sink === undefined ? () => undefined : (line) => sink(line());
    this.#rng = new Random(this.seed);
    this.#sabotage = options.sabotage;
    this.#profile = drawProfile(this.#rng, this.seed);
    const replaySteps = this.#steps === SHARDED_DEFAULT_STEPS ? undefined : this.#steps;
    this.#judge = new Judge(this.seed, replaySteps, shardedReplay(this.seed, replaySteps));
    this.#outbox = new ObservedOutbox(this.#judge, this.#sabotage === 'losesJobs');
    const count = this.#rng.int(2, 4);
    // A quiet step moves the clock to the next shard's tick at most: as much
    // simulated time as the single-shard simulation's takes S times the steps.
    this.#quiescenceMaxSteps = options.quiescenceMaxSteps ?? DEFAULT_QUIESCENCE_STEPS * count;
    const ids = new IdSource(this.seed, 3);
    const invalid = new WeakSet<object>();
    for (let index = 0; index < count; index++)
      this.#shards.push(this.#shard(index, count, ids, invalid));
    this.#cross = new CrossShardChecks(this.#judge, this.#shards, this.#outbox);
    const worlds = this.#shards.map((s) => s.world);
    this.#router = new SimRouter(worlds, this.#rng.fork(), invalid);
    this.#createWorkers();
    this.#createClients(invalid, queuesFor(count));
  }

  #shard(index: number, shards: number, ids: IdSource, invalid: WeakSet<object>): Shard {
    const config: CoreConfig = { ...this.#profile.config, shard: { shard: index, shards } };
    const log = (line: () => string): void => this.#log(() => `[s${index}] ${line()}`);
    const world = new World({
      election: new SimElection(this.#clock, this.#profile.lease, this.#judge),
      clock: this.#clock,
      rng: this.#rng.fork(),
      seed: this.seed,
      config,
      sweepIntervalMs: this.#profile.sweepIntervalMs,
      stalls: this.#profile.budgets,
      sharded: {
        outbox: this.#outbox,
        ids,
        reads: this.#reads,
        readsClaimAll: this.#sabotage === 'readsClaimAll',
        onCommitted: (batch) => this.#cross.onCommitted(index, batch),
      },
      log,
    });
    const invariants = new Invariants(world, this.#judge, config, invalid, {
      elsewhere: (jobId) => this.#cross.terminalElsewhere(jobId),
      sentRow: (jobId) => this.#outbox.sentJobs.get(jobId)?.row,
    });
    return { index, world, invariants, crashPlan: null, ghosts: [] };
  }

  #createWorkers(): void {
    const rng = this.#rng;
    const { config, heartbeatIntervalMs } = this.#profile;
    const queues = queuesFor(this.#shards.length);
    const processes = rng.int(1, 4);
    for (let i = 0; i < processes; i++) {
      const types = parts.workerTypes(rng, i);
      const sessions = this.#shards.map((shard) => {
        const env = {
          world: shard.world,
          clock: this.#clock,
          judge: this.#judge,
          faults: this.#faults,
          ghosts: shard.ghosts,
          heartbeatIntervalMs,
          heartbeatTimeoutMs: config.heartbeatTimeoutMs,
          taskTimeoutMs: config.taskTimeoutMs,
          quiet: () => this.#quiet,
          log: (line: () => string) => this.#log(() => `[s${shard.index}] ${line()}`),
          leaseCurrent: (jobId: string, attemptId: string) =>
            shard.invariants.tracker.leaseCurrent(jobId, attemptId),
          stepStats: this.#stepStats,
          childQueues: queues.filter((q) => shardOfQueue(q, this.#shards.length) === shard.index),
          ghostsElsewhere: () =>
            this.#shards.filter((other) => other !== shard).flatMap((other) => other.ghosts),
        };
        return new SimWorker(`worker-${i}`, env, rng.fork(), types);
      });
      this.#processes.push(sessions);
    }
  }

  #createClients(invalid: WeakSet<object>, queues: readonly string[]): void {
    const env = {
      world: this.#router,
      clock: this.#clock,
      judge: this.#judge,
      faults: this.#faults,
      invalid,
      ackedIds: this.#cross.ackedIds,
      keyed: [] as SubmitJob[],
      schedules: new Map(),
      onAck: (jobId: string, submission: SubmitJob, deduplicated: boolean) =>
        this.#cross.onAck(jobId, submission, deduplicated),
      weights: {
        ...REQUEST_WEIGHTS,
        flow: 8,
        ...(this.#profile.budgets && { subscribe: 10 }),
      },
      queues,
      waiting: () => this.#shards.flatMap((s) => s.invariants.signals.waiting()),
      signalling: { next: 1, poked: new Map<string, number>() },
      quiet: () => this.#quiet,
      log: this.#log,
    };
    const count = this.#rng.int(1, 4);
    for (let i = 0; i < count; i++) {
      const address = CLIENT_ADDRESSES[i % CLIENT_ADDRESSES.length] as string;
      this.#clients.push(new SimClient(`client-${i}`, env, this.#rng.fork(), address));
    }
  }

  get #sessions(): SimWorker[] {
    return this.#processes.flat();
  }

  /** Runs both phases; throws a SimulationViolation on the first broken invariant. */
  run(): ShardedReport {
    this.#log(
      () =>
        `seed ${this.seed}: ${this.#shards.length} shards, ${this.#processes.length} worker processes, ${this.#clients.length} clients, fault rate ${this.#profile.faultRate.toFixed(3)}, config ${JSON.stringify(this.#profile.config)}`,
    );
    for (const shard of this.#shards) shard.world.start(shard.invariants);
    const quiescenceSteps = parts.runPhases({
      judge: this.#judge,
      steps: this.#steps,
      quiescenceMaxSteps: this.#quiescenceMaxSteps,
      mainStep: () => this.#mainStep(),
      enterQuiet: () => this.#enterQuiet(),
      quietStep: () => this.#quietStep(),
      checkStep: () => this.#checkStep(),
      quiescenceProblem: () => this.#quiescenceProblem(),
    });
    this.#cross.checkEnd();
    return this.#report(quiescenceSteps);
  }

  #checkStep(): void {
    for (const shard of this.#shards) shard.invariants.checkStep();
    this.#cross.checkStep();
  }

  #mainStep(): void {
    const rng = this.#rng;
    const deltaMs = parts.advanceClock(rng, this.#profile, this.#clock, this.#faults);
    parts.redialAfterStall(rng, deltaMs, this.#profile, this.#sessions, this.#faults);
    this.#log(() => `step ${this.#judge.step} t=+${this.#clock.nowMs - EPOCH_MS}ms`);
    for (const { world } of this.#shards) {
      world.tickLeases();
      if (world.hasFrozen && rng.chance(0.3)) world.wakeFrozen();
    }
    for (const session of this.#sessions) session.act();
    for (const client of this.#clients) client.act();
    if (rng.chance(this.#profile.faultRate)) this.#injectFault();
    for (const session of this.#sessions) session.read(rng.int(0, 3));
    this.#router.forward();
    // Each shard's coordinator at its own pace, in another order every step.
    for (const shard of rng.shuffle([...this.#shards])) this.#runShard(shard);
  }

  /** One shard's turn: its outbox poll and read, some batches, some commits. */
  #runShard(shard: Shard): void {
    const rng = this.#rng;
    const world = shard.world;
    if (rng.chance(0.4)) world.pollOutbox();
    if (rng.chance(0.5)) world.answerOutbox(false);
    parts.coordinatorTurn(rng, world, shard);
  }

  #enterQuiet(): void {
    this.#quiet = true;
    for (const shard of this.#shards) {
      shard.world.stalls = false;
      shard.crashPlan = null;
      shard.world.wakeFrozen();
    }
    for (const session of this.#sessions) session.heal();
  }

  #quiescenceProblem(): string | null {
    const unanswered = this.#clients.reduce((n, c) => n + c.unanswered, 0);
    if (unanswered > 0) return `${unanswered} client requests unanswered`;
    for (const shard of this.#shards) {
      const problem = shard.invariants.quiescenceProblem(0);
      if (problem !== null) return `shard ${shard.index}: ${problem}`;
    }
    return this.#cross.quiescenceProblem();
  }

  #busy(): boolean {
    return (
      this.#router.unread ||
      this.#sessions.some((w) => w.unread > 0) ||
      this.#shards.some(
        ({ world }) => world.hasInput() || world.hasCommitPending() || world.outboxBusy,
      )
    );
  }

  /** Everything ready is done now; then the clock jumps to the next due moment. */
  #quietStep(): void {
    let deltaMs = 0;
    if (!this.#busy()) {
      const due = Math.min(
        ...this.#shards.map(({ world }) => world.nextTimerAtMs()),
        ...this.#sessions.map((w) => w.nextDueAtMs()),
      );
      deltaMs = parts.quietDeltaMs(this.#clock.nowMs, due, this.#profile.heartbeatIntervalMs);
    }
    this.#clock.advance(deltaMs);
    this.#log(() => `step ${this.#judge.step} (quiet) t=+${this.#clock.nowMs - EPOCH_MS}ms`);
    for (const { world } of this.#shards) world.tickLeases();
    for (const session of this.#sessions) session.act();
    for (const client of this.#clients) client.act();
    for (const session of this.#sessions) session.read(Number.MAX_SAFE_INTEGER);
    this.#router.forward();
    for (const { world } of this.#shards) {
      world.pollOutbox();
      world.answerOutbox(true);
      parts.drainQuietly(this.#rng, world);
    }
  }

  #injectFault(): void {
    const rng = this.#rng;
    const kind = rng.weighted(SHARDED_FAULT_WEIGHTS);
    this.#faults.count(kind);
    const process = rng.pick(this.#processes);
    const shard = rng.pick(this.#shards);
    const session = process[shard.index] as SimWorker;
    this.#log(() => `  fault: ${kind} (shard ${shard.index}, ${session.workerId})`);
    if (kind === 'workerHang') {
      // A hung process: none of its sessions beats or reads.
      const ms = parts.hangMs(rng, this.#profile.config.heartbeatTimeoutMs);
      for (const each of process) each.hang(ms);
      return;
    }
    if (parts.isWorkerFault(kind)) return parts.workerFault(kind, session, () => 0);
    const sessions = this.#processes.map((p) => p[shard.index] as SimWorker);
    switch (kind) {
      case 'processCrash':
        for (const each of process) each.crash();
        return;
      case 'lateResult':
        return parts.sendLateResults(rng, shard.ghosts, sessions);
      case 'restart':
        return parts.planRestart(rng, shard.world, shard);
      case 'clientHangUp':
        return rng.pick(this.#clients).hangUp();
      case 'failover':
        return this.#failover();
    }
  }

  /**
   * The coordinator leading some shards freezes: their leaders stop with
   * what they hold, while the leaders of the other shards keep renewing
   * their leases; once the frozen leases expired, the other node of each
   * frozen shard takes over.
   */
  #failover(): void {
    const rng = this.#rng;
    const frozen = this.#shards.filter(() => rng.chance(0.5));
    if (frozen.length === 0) frozen.push(rng.pick(this.#shards));
    const others = this.#shards.filter((s) => !frozen.includes(s));
    for (const shard of frozen) shard.world.freeze();
    const { ttlMs, renewIntervalMs } = this.#profile.lease;
    let leftMs = ttlMs + rng.int(1, renewIntervalMs);
    while (leftMs > 0) {
      const stepMs = Math.min(leftMs, renewIntervalMs);
      this.#clock.advance(stepMs);
      leftMs -= stepMs;
      for (const shard of others) shard.world.tickLeases();
    }
    for (const shard of frozen) shard.world.takeOver();
    this.#log(() => `  !! failover of shard(s) ${frozen.map((s) => s.index).join(', ')}`);
  }

  #report(quiescenceSteps: number): ShardedReport {
    const sum = (f: (shard: Shard) => number): number =>
      this.#shards.reduce((n, shard) => n + f(shard), 0);
    const counts = (shard: Shard) => shard.invariants.tracker.counts;
    return {
      seed: this.seed,
      shards: this.#shards.length,
      steps: this.#steps,
      quiescenceSteps,
      simulatedMs: this.#clock.nowMs - EPOCH_MS,
      inputs: sum((s) => s.world.stats.inputs),
      restarts: sum((s) => s.world.stats.restarts),
      failovers: sum((s) => s.world.stats.failovers),
      fencedCommits: sum((s) => s.world.election.fenced),
      jobsCreated: sum((s) => counts(s).created),
      jobsAcked: this.#cross.ackedIds.length,
      completed: sum((s) => counts(s).completed),
      failed: sum((s) => counts(s).failed),
      cancelled: sum((s) => counts(s).cancelled),
      outbox: { ...this.#outbox.counts },
      reads: { ...this.#reads },
      cross: { ...this.#cross.counts },
      faults: this.#faults.toJSON(),
      faultTotal: this.#faults.total,
    };
  }
}
