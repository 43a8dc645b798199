/**
 * A seeded, deterministic simulation of sharded leadership: which
 * coordinator process leads which shard.
 *
 * One seed fixes everything: P processes (2..5) and S shards (1..64), the
 * lease timing, every operation's delay and fate, every fault. Each shard
 * has its own lease (a {@link MemoryLease} on the simulated clock, standing
 * for the database's); each process runs one {@link Leadership} per shard,
 * gated by the process's {@link OwnershipRound} (the code the real process
 * glue runs), and every `renewIntervalMs` a round: heartbeat the membership
 * and read every lease (one database call), then hand over what the round
 * says. Every lease operation and round reaches the database after a seeded
 * delay and is answered after another; some are slower than the leases
 * tolerate, some longer than the ttl, some fail (lost before the database,
 * or applied there with the answer lost).
 *
 * Faults: kill a process (it stops everything; its leases expire), freeze
 * one for a while (its timers and answers wait; when it thaws its
 * Leaderships see the time passed, as `performance.now()` does), restart
 * one (killed, and a new process with a new node id starts), add a process,
 * stop one cleanly (its Leaderships stop and release, and it leaves the
 * membership).
 *
 * A run has two phases: `main` (faults, noisy operations) and
 * `quiescence` (no more faults, every operation sent answered in time),
 * which lasts until the shards have been checked settled for a while, with
 * one more clean stop in it on most seeds.
 *
 * Invariants, checked at every step (one step = one event):
 *
 *   1. fencing: per shard at most one process `leadsAt(now)`, and one that
 *      does holds the lease's current epoch (only the shards an event
 *      touched are checked: time alone can only end a leadership);
 *   2. epochs per shard only grow: the lease's never falls and every
 *      `lead` is under a higher epoch than the shard's last one;
 *   3. liveness: once nothing disturbed the run for `3 × ttl + 2 × renew`
 *      (no fault, no failed operation, none answered slower than the
 *      leases tolerate, see {@link OwnershipTiming.fastMs}), every shard is
 *      led by a running process and each leads floor(S/N) or ceil(S/N);
 *   4. a clean stop from a settled state, with nothing else disturbing the
 *      run for a ttl, has every shard it led led by another process
 *      within `ttl` (release, no waiting for expiry);
 *
 * and no Leadership asks to be woken at once after a wake-up that did
 * nothing (a timer that would spin).
 *
 * Nothing here reads the wall clock or Math.random.
 */
import { BinaryHeap } from '../../src/coordinator/core/binary-heap.js';
import { Leadership, type LeadershipAction } from '../../src/coordinator/leadership/leadership.js';
import { ShardShare } from '../../src/coordinator/leadership/shard-share.js';
import { OwnershipRound } from '../../src/coordinator/sharding/ownership-round.js';
import {
  MemoryLease,
  type AcquireResult,
  type LeaseHolder,
  type LeaseView,
} from '../../src/store/lease.js';
import { SimClock } from './network.js';
import { Random } from './random.js';
import { SimMembership } from './sim-membership.js';
import { Judge } from './violation.js';

/** The command that replays one seed of this simulation. */
export function ownershipReplay(seed: number): string {
  return `node dist/test/sim/ownership-run.js --seed ${seed} --verbose`;
}

export interface OwnershipTiming {
  ttlMs: number;
  renewIntervalMs: number;
  /** ShardShare's orphanAfterMs: a shard free this long is anyone's. */
  orphanAfterMs: number;
  /** How long a membership heartbeat keeps a process live. */
  membershipTtlMs: number;
  /**
   * The longest round trip the leases tolerate: a Leadership trusts a lease
   * for `ttl - ttl/5` from the acquisition's send and first renews it
   * `renew` after the answer, so the acquisition's and the first renewal's
   * round trips must add up to less than `ttl - ttl/5 - renew`. Slower
   * operations may cost a leadership (never safety), so they disturb the
   * run as a fault does.
   */
  fastMs: number;
}

export interface OwnershipOptions {
  /** Receives one line per event (replay with --verbose). */
  log?: (line: string) => void;
  /** A bug planted on purpose, for the tests that show the checks can fail. */
  sabotage?: Sabotage;
}

/**
 * Bugs the tests plant to see the invariants catch them: the database sets
 * leases for half the ttl the Leaderships trust (fencing), a clean stop
 * releases nothing (invariant 4), a round hands over one shard at most
 * (liveness, once many must move).
 */
export type Sabotage = 'shortLeases' | 'stopWithoutRelease' | 'oneHandOverPerRound';

export interface OwnershipReport {
  seed: number;
  shards: number;
  processes: number;
  timing: OwnershipTiming;
  simulatedMs: number;
  steps: number;
  /** Faults by kind. */
  faults: Record<FaultKind, number>;
  leads: number;
  handOvers: number;
  stepDowns: number;
  operations: number;
  slowOperations: number;
  failedOperations: number;
  /** Steps at which the shards were checked settled (invariant 3). */
  settledSteps: number;
  /** Clean stops whose shards were checked moved within the ttl (invariant 4). */
  stopsChecked: number;
  /** The highest epoch of any shard at the end. */
  maxEpoch: number;
}

export type FaultKind = 'kill' | 'freeze' | 'restart' | 'add' | 'stop';

const MAX_RUNNING = 6;

type Op =
  | { kind: 'acquire'; shard: number }
  | { kind: 'renew'; shard: number; epoch: number }
  | { kind: 'release'; shard: number; epoch: number }
  | { kind: 'round' }
  | { kind: 'leave' };

interface RoundRead {
  members: string[];
  leases: LeaseView[];
}

type OpResult =
  | { op: 'acquire'; result: AcquireResult }
  | { op: 'renew'; renewed: boolean }
  | { op: 'round'; read: RoundRead }
  | { op: 'done' };

/** How an operation fares: answered, lost on its way (never applied), or applied with the answer lost. */
type Fate = 'answered' | 'lostBefore' | 'lostAfter';

type Event =
  | { kind: 'start'; proc: SimProcess }
  | { kind: 'wake'; proc: SimProcess; shard: number; token: number }
  | { kind: 'roundTimer'; proc: SimProcess }
  | { kind: 'db'; proc: SimProcess; op: Op; fate: Fate; answerAtMs: number; slow: boolean }
  | { kind: 'answer'; proc: SimProcess; op: Op; result: OpResult | null; slow: boolean }
  | { kind: 'fault' }
  | { kind: 'thaw'; proc: SimProcess }
  | { kind: 'stopDeadline'; watch: StopWatch };

interface Scheduled {
  atMs: number;
  seq: number;
  event: Event;
}

/** A clean stop being checked: the shards it led must be led elsewhere by `deadlineMs`. */
interface StopWatch {
  proc: SimProcess;
  atMs: number;
  deadlineMs: number;
  /** The run's count of disturbances after the stop's own: another one voids the check. */
  disturbances: number;
  /** Shards it led when it stopped, not yet led by another process. */
  pending: Set<number>;
}

type ProcessState = 'running' | 'frozen' | 'dead' | 'stopped';

/** One coordinator process: its elections, its round, and what it does with their actions. */
class SimProcess {
  readonly id: string;
  readonly holder: LeaseHolder;
  readonly round: OwnershipRound;
  readonly elections: Leadership[];
  /** Per shard: the token of its current wake-up event (older ones are cancelled timers). */
  readonly wakeTokens: number[];
  readonly wakeAtMs: number[];
  state: ProcessState = 'running';
  roundInFlight = false;
  /**
   * When its last membership call (a round's heartbeat) reaches the
   * database: its leave may not overtake it (one connection, in order), or
   * a heartbeat sent before the stop would bring it back for a membership
   * ttl.
   */
  membershipAtMs = Number.NEGATIVE_INFINITY;
  /** Shards it leads (counted by the settled check). */
  ledCount = 0;
  /** Events that came while frozen: they run when it thaws. */
  deferred: Event[] = [];

  constructor(id: string, shards: number, timing: OwnershipTiming, now: () => number) {
    this.id = id;
    this.holder = { nodeId: id, workerAddress: `${id}:7070`, clientAddress: `${id}:7071` };
    this.round = new OwnershipRound(new ShardShare(shards, id, timing.orphanAfterMs));
    const config = { ttlMs: timing.ttlMs, renewIntervalMs: timing.renewIntervalMs };
    this.elections = Array.from(
      { length: shards },
      (_, shard) =>
        new Leadership(
          config,
          this.holder,
          this.round.gate(shard, () => this.elections, now),
        ),
    );
    this.wakeTokens = Array.from({ length: shards }, () => 0);
    this.wakeAtMs = Array.from({ length: shards }, () => Number.POSITIVE_INFINITY);
  }
}

export class OwnershipSimulation {
  readonly seed: number;
  readonly shards: number;
  readonly timing: OwnershipTiming;
  readonly #rng: Random;
  /** Network fates and delays: a stream of its own, so faults do not shift them. */
  readonly #net: Random;
  readonly #clock: SimClock;
  readonly #judge: Judge;
  readonly #log: ((line: string) => void) | undefined;
  readonly #sabotage: Sabotage | undefined;
  readonly #leases: MemoryLease[];
  readonly #membership: SimMembership;
  readonly #events = new BinaryHeap<Scheduled>((a, b) =>
    a.atMs === b.atMs ? a.seq < b.seq : a.atMs < b.atMs,
  );
  #seq = 0;
  /** Every process ever started, in start order (dead and stopped ones too: fencing spans them). */
  readonly #all: SimProcess[] = [];
  readonly #byId = new Map<string, SimProcess>();
  #started = 0;
  readonly #initialProcesses: number;
  readonly #mainEndMs: number;
  readonly #startMs: number;
  /** Chances per operation sent in the main phase. */
  readonly #noise: { late: number; veryLate: number; failed: number };
  /** When the run was last disturbed: a fault, a failed or slow operation. */
  #disturbedAtMs: number;
  #disturbances = 0;
  /** The highest epoch each shard's lease had, and the last epoch led per shard. */
  readonly #epochs: number[];
  readonly #ledEpochs: number[];
  /** The process that last took each shard (its leader, if it has one). */
  readonly #lastLeader: (SimProcess | null)[];
  readonly #touched = new Set<number>();
  readonly #watches: StopWatch[] = [];
  #finalStopDone = false;
  readonly #report: Omit<OwnershipReport, 'simulatedMs' | 'steps' | 'maxEpoch'>;

  constructor(seed: number, options: OwnershipOptions = {}) {
    this.seed = seed;
    this.#rng = new Random(seed);
    this.#net = this.#rng.fork();
    const rng = this.#rng;
    this.#judge = new Judge(seed, undefined, ownershipReplay(seed));
    this.#log = options.log;
    this.#sabotage = options.sabotage;
    this.shards = rng.int(1, 64);
    this.#initialProcesses = rng.int(2, 5);
    const ttlMs = rng.int(5, 50) * 100;
    const renewIntervalMs = rng.int(Math.ceil(ttlMs / 8), Math.floor(ttlMs / 2));
    this.timing = {
      ttlMs,
      renewIntervalMs,
      orphanAfterMs: rng.int(renewIntervalMs, 2 * ttlMs),
      membershipTtlMs: ttlMs,
      fastMs: Math.floor((ttlMs - Math.floor(ttlMs / 5) - renewIntervalMs) / 3),
    };
    const noisy = rng.pick([0, 0.01, 0.05]);
    this.#noise = { late: noisy, veryLate: noisy, failed: noisy };
    this.#startMs = 1_000_000;
    this.#clock = new SimClock(this.#startMs);
    this.#disturbedAtMs = this.#startMs;
    this.#mainEndMs = this.#startMs + rng.int(6, 20) * ttlMs;
    const now = (): number => this.#clock.nowMs;
    this.#leases = Array.from({ length: this.shards }, () => new MemoryLease(now));
    this.#membership = new SimMembership(now);
    this.#epochs = Array.from({ length: this.shards }, () => 0);
    this.#ledEpochs = Array.from({ length: this.shards }, () => 0);
    this.#lastLeader = Array.from({ length: this.shards }, () => null);
    this.#report = {
      seed,
      shards: this.shards,
      processes: this.#initialProcesses,
      timing: this.timing,
      faults: { kill: 0, freeze: 0, restart: 0, add: 0, stop: 0 },
      leads: 0,
      handOvers: 0,
      stepDowns: 0,
      operations: 0,
      slowOperations: 0,
      failedOperations: 0,
      settledSteps: 0,
      stopsChecked: 0,
    };
  }

  /** 3 × ttl + 2 × renew: how long after a disturbance the shards must be settled. */
  get settleMs(): number {
    return 3 * this.timing.ttlMs + 2 * this.timing.renewIntervalMs;
  }

  run(): OwnershipReport {
    this.#say(
      `seed ${this.seed}: ${this.#initialProcesses} processes, ${this.shards} shards, ${JSON.stringify(this.timing)}`,
    );
    for (let i = 0; i < this.#initialProcesses; i++) {
      this.#startProcess(this.#rng.int(0, this.timing.renewIntervalMs - 1));
    }
    this.#at(this.#startMs + this.#faultGap(), { kind: 'fault' });
    // How long the shards stay checked settled before the run ends.
    const settledSpanMs = 2 * this.timing.ttlMs;
    for (;;) {
      const next = this.#events.pop();
      if (next === undefined) throw this.#judge.violation('no events left: every process gone');
      this.#clock.advance(next.atMs - this.#clock.nowMs);
      const judge = this.#judge;
      judge.step++;
      if (judge.phase === 'main' && this.#clock.nowMs >= this.#mainEndMs) {
        judge.phase = 'quiescence';
        this.#say('quiescence: no more faults, every operation answered in time');
      }
      this.#touched.clear();
      this.#handle(next.event);
      this.#check();
      if (judge.phase === 'quiescence' && this.#settled()) {
        const settledForMs = this.#clock.nowMs - (this.#disturbedAtMs + this.settleMs);
        if (settledForMs >= settledSpanMs) {
          if (this.#finalStopDone || !this.#finalStop()) break;
        }
      }
    }
    return {
      ...this.#report,
      simulatedMs: this.#clock.nowMs - this.#startMs,
      steps: this.#judge.step,
      maxEpoch: Math.max(...this.#leases.map((l) => l.epoch)),
    };
  }

  // --- events ----------------------------------------------------------------

  #at(atMs: number, event: Event): void {
    this.#events.push({ atMs: Math.max(atMs, this.#clock.nowMs), seq: this.#seq++, event });
  }

  #handle(event: Event): void {
    switch (event.kind) {
      case 'start':
        return this.#onProcessEvent(event.proc, event, () => this.#onStart(event.proc));
      case 'wake':
        return this.#onProcessEvent(event.proc, event, () => this.#onWake(event));
      case 'roundTimer':
        return this.#onProcessEvent(event.proc, event, () => this.#onRoundTimer(event.proc));
      case 'db':
        return this.#onDatabase(event);
      case 'answer':
        if (event.slow) this.#disturbed('an operation answered slower than the leases tolerate');
        if (event.result === null) this.#disturbed('an operation failed');
        return this.#onProcessEvent(event.proc, event, () => this.#onAnswer(event));
      case 'fault':
        return this.#onFault();
      case 'thaw':
        return this.#onThaw(event.proc);
      case 'stopDeadline':
        return this.#onStopDeadline(event.watch);
    }
  }

  /** Runs `handle` for a running process; a frozen one keeps the event for its thaw; a gone one drops it. */
  #onProcessEvent(proc: SimProcess, event: Event, handle: () => void): void {
    if (proc.state === 'frozen') proc.deferred.push(event);
    else if (proc.state === 'running') handle();
  }

  #onStart(proc: SimProcess): void {
    this.#say(`${proc.id} starts`);
    this.#onRoundTimer(proc);
    proc.elections.forEach((election, shard) => {
      this.#apply(proc, shard, election.tick(this.#clock.nowMs));
    });
  }

  #onWake(event: Extract<Event, { kind: 'wake' }>): void {
    const { proc, shard } = event;
    if (event.token !== proc.wakeTokens[shard]) return;
    proc.wakeAtMs[shard] = Number.POSITIVE_INFINITY;
    const election = proc.elections[shard] as Leadership;
    const actions = election.tick(this.#clock.nowMs);
    const wake = election.nextWakeAtMs();
    this.#judge.check(
      actions.length > 0 || wake > this.#clock.nowMs,
      () =>
        `${proc.id} shard ${shard}: a wake-up that did nothing asks to be woken again at once (${wake}; mode ${election.mode}, acquiring ${election.acquiring}): its timer would spin`,
    );
    this.#apply(proc, shard, actions);
  }

  #onRoundTimer(proc: SimProcess): void {
    this.#at(this.#clock.nowMs + this.timing.renewIntervalMs, { kind: 'roundTimer', proc });
    if (proc.roundInFlight) return;
    proc.roundInFlight = true;
    this.#send(proc, { kind: 'round' });
  }

  #onAnswer(event: Extract<Event, { kind: 'answer' }>): void {
    const { proc, op, result } = event;
    const now = this.#clock.nowMs;
    if (op.kind === 'round') {
      proc.roundInFlight = false;
      if (result?.op === 'round') this.#onRoundRead(proc, result.read);
      return;
    }
    if (op.kind !== 'acquire' && op.kind !== 'renew') return;
    const election = proc.elections[op.shard] as Leadership;
    if (result === null) {
      this.#apply(proc, op.shard, election.operationFailed(now));
    } else if (result.op === 'acquire') {
      this.#apply(proc, op.shard, election.acquireDone(result.result, now));
      if (!result.result.acquired) {
        // As the glue does: the answer says who holds it, and the try it freed goes elsewhere now.
        const { current } = result.result;
        this.#say(`${proc.id} could not take shard ${op.shard}: held by ${current.holder?.nodeId}`);
        proc.round.leaseSeen(op.shard, current, now);
        this.#tryNow(proc, proc.round.admitted(proc.elections, now));
      }
    } else if (result.op === 'renew') {
      this.#apply(proc, op.shard, election.renewDone(result.renewed, now));
    }
  }

  /** The process glue's round, after its database read came back. */
  #onRoundRead(proc: SimProcess, read: RoundRead): void {
    const now = this.#clock.nowMs;
    const before = proc.round.share.members.join(',');
    proc.round.observe(read.members, read.leases, now);
    const after = proc.round.share.members.join(',');
    if (after !== before) this.#say(`${proc.id} sees members ${after}`);
    const decision = proc.round.decide(proc.elections, now);
    const handOver =
      this.#sabotage === 'oneHandOverPerRound' ? decision.handOver.slice(0, 1) : decision.handOver;
    for (const shard of handOver) {
      this.#report.handOvers++;
      this.#say(
        `${proc.id} hands shard ${shard} over (led ${decision.led}, share ${proc.round.share.shareOf()})`,
      );
      this.#apply(proc, shard, (proc.elections[shard] as Leadership).handOver(now));
    }
    this.#tryNow(proc, decision.tryNow);
  }

  /** Lets the standbys of `shards` try now (`Leadership.tryNow`). */
  #tryNow(proc: SimProcess, shards: readonly number[]): void {
    const now = this.#clock.nowMs;
    for (const shard of shards) {
      this.#apply(proc, shard, (proc.elections[shard] as Leadership).tryNow(now));
    }
  }

  /** Carries out a Leadership's actions, as leader-election.ts does, and sets its timer again. */
  #apply(proc: SimProcess, shard: number, actions: LeadershipAction[]): void {
    for (const action of actions) {
      switch (action.kind) {
        case 'acquire':
          this.#send(proc, { kind: 'acquire', shard });
          break;
        case 'renew':
          this.#send(proc, { kind: 'renew', shard, epoch: action.epoch });
          break;
        case 'release':
          this.#send(proc, { kind: 'release', shard, epoch: action.epoch });
          break;
        case 'lead':
          this.#onLead(proc, shard, action.epoch);
          break;
        case 'stepDown':
          this.#report.stepDowns++;
          this.#say(
            `${proc.id} steps down from shard ${shard} epoch ${action.epoch}: ${action.reason}`,
          );
          break;
      }
    }
    this.#touched.add(shard);
    this.#setTimer(proc, shard);
  }

  #setTimer(proc: SimProcess, shard: number): void {
    const wake = (proc.elections[shard] as Leadership).nextWakeAtMs();
    if (wake === proc.wakeAtMs[shard]) return;
    const token = (proc.wakeTokens[shard] as number) + 1;
    proc.wakeTokens[shard] = token;
    proc.wakeAtMs[shard] = wake;
    if (Number.isFinite(wake)) this.#at(Math.ceil(wake), { kind: 'wake', proc, shard, token });
  }

  #onLead(proc: SimProcess, shard: number, epoch: number): void {
    this.#report.leads++;
    this.#say(`${proc.id} leads shard ${shard} epoch ${epoch}`);
    const last = this.#ledEpochs[shard] as number;
    this.#judge.check(
      epoch > last,
      () => `${proc.id} leads shard ${shard} under epoch ${epoch}, not above the last led ${last}`,
    );
    this.#ledEpochs[shard] = epoch;
    this.#lastLeader[shard] = proc;
    for (const watch of this.#watches) if (watch.proc !== proc) watch.pending.delete(shard);
  }

  // --- the network and the database ------------------------------------------

  /** Sends `op` to the database: its delay and fate are the network's. */
  #send(proc: SimProcess, op: Op): void {
    this.#report.operations++;
    const net = this.#net;
    const { fastMs, ttlMs } = this.timing;
    const noise = this.#judge.phase === 'main' ? this.#noise : { late: 0, veryLate: 0, failed: 0 };
    const speed = net.weighted({
      fast: 1 - noise.late - noise.veryLate,
      late: noise.late,
      veryLate: noise.veryLate,
    });
    let roundTripMs =
      speed === 'fast'
        ? net.int(0, fastMs)
        : speed === 'late'
          ? net.int(fastMs + 1, ttlMs)
          : net.int(ttlMs + 1, Math.floor(2.5 * ttlMs));
    const fate: Fate = net.chance(noise.failed)
      ? net.pick(['lostBefore', 'lostAfter'])
      : 'answered';
    let toDatabaseMs = net.int(0, roundTripMs);
    const now = this.#clock.nowMs;
    const slow = roundTripMs > fastMs;
    if (op.kind === 'round' || op.kind === 'leave') {
      // Queued behind the process's previous membership call (not the network's slowness).
      const queuedMs = proc.membershipAtMs - now;
      if (toDatabaseMs < queuedMs) {
        roundTripMs += queuedMs - toDatabaseMs;
        toDatabaseMs = queuedMs;
      }
      if (fate !== 'lostBefore') proc.membershipAtMs = now + toDatabaseMs;
    }
    if (slow) {
      // It disturbs from its send (a leadership may lapse while it is out) to its answer.
      this.#report.slowOperations++;
      this.#disturbed('a slow operation goes out');
    }
    if (fate !== 'answered') this.#report.failedOperations++;
    const answerAtMs = now + roundTripMs;
    if (fate === 'lostBefore') {
      this.#at(answerAtMs, { kind: 'answer', proc, op, result: null, slow });
    } else {
      this.#at(now + toDatabaseMs, { kind: 'db', proc, op, fate, answerAtMs, slow });
    }
  }

  /** The database carries `op` out now, and the answer sets off back. */
  #onDatabase(event: Extract<Event, { kind: 'db' }>): void {
    const { proc, op } = event;
    const result = this.#carryOut(proc, op);
    this.#at(event.answerAtMs, {
      kind: 'answer',
      proc,
      op,
      result: event.fate === 'answered' ? result : null,
      slow: event.slow,
    });
  }

  #carryOut(proc: SimProcess, op: Op): OpResult {
    const { membershipTtlMs } = this.timing;
    const ttlMs =
      this.#sabotage === 'shortLeases' ? Math.floor(this.timing.ttlMs / 2) : this.timing.ttlMs;
    switch (op.kind) {
      case 'acquire': {
        const result = this.#leases[op.shard]!.tryAcquireNow(proc.holder, ttlMs);
        this.#leaseChanged(op.shard);
        return { op: 'acquire', result };
      }
      case 'renew':
        return { op: 'renew', renewed: this.#leases[op.shard]!.renewNow(proc.id, op.epoch, ttlMs) };
      case 'release':
        this.#leases[op.shard]!.releaseNow(proc.id, op.epoch);
        this.#leaseChanged(op.shard);
        return { op: 'done' };
      case 'round':
        return {
          op: 'round',
          read: {
            members: this.#membership.heartbeat(proc.id, membershipTtlMs),
            leases: this.#leases.map((lease) => lease.view()),
          },
        };
      case 'leave':
        this.#membership.leave(proc.id);
        return { op: 'done' };
    }
  }

  /** Invariant 2, on the lease side: its epoch never falls. */
  #leaseChanged(shard: number): void {
    this.#touched.add(shard);
    const epoch = this.#leases[shard]!.epoch;
    const before = this.#epochs[shard] as number;
    this.#judge.check(
      epoch >= before,
      () => `shard ${shard}'s lease went from epoch ${before} back to ${epoch}`,
    );
    this.#epochs[shard] = epoch;
  }

  // --- faults ----------------------------------------------------------------

  #faultGap(): number {
    const ttl = this.timing.ttlMs;
    // Now and then a long quiet stretch, so the main phase settles too.
    return this.#rng.chance(0.2)
      ? this.#rng.int(4 * ttl, 8 * ttl)
      : this.#rng.int(ttl / 4, 3 * ttl);
  }

  #onFault(): void {
    if (this.#clock.nowMs >= this.#mainEndMs) return;
    this.#at(this.#clock.nowMs + this.#faultGap(), { kind: 'fault' });
    const running = this.#all.filter((p) => p.state === 'running');
    const alive = this.#all.filter((p) => p.state === 'running' || p.state === 'frozen');
    const kind = this.#rng.weighted<FaultKind>({
      kill: alive.length > 1 ? 2 : 0,
      freeze: running.length > 0 ? 3 : 0,
      restart: alive.length > 0 ? 2 : 0,
      add: alive.length < MAX_RUNNING ? 2 : 0,
      stop: running.length > 1 ? 2 : 0,
    });
    this.#report.faults[kind]++;
    // A stop from a settled state is checked (invariant 4): judge that before this fault counts.
    const settled = this.#settled();
    this.#disturbed(`fault: ${kind}`);
    switch (kind) {
      case 'kill':
        return this.#kill(this.#rng.pick(alive));
      case 'freeze':
        return this.#freeze(this.#rng.pick(running));
      case 'restart': {
        this.#kill(this.#rng.pick(alive));
        this.#startProcess(this.#rng.int(0, this.timing.renewIntervalMs));
        return;
      }
      case 'add':
        this.#startProcess(0);
        return;
      case 'stop':
        return this.#stop(this.#rng.pick(running), settled);
    }
  }

  #startProcess(afterMs: number): void {
    this.#started++;
    const tag = this.#rng.int(0, 0xffff).toString(16).padStart(4, '0');
    const proc = new SimProcess(
      `${tag}-p${this.#started}`,
      this.shards,
      this.timing,
      () => this.#clock.nowMs,
    );
    this.#all.push(proc);
    this.#byId.set(proc.id, proc);
    this.#at(this.#clock.nowMs + afterMs, { kind: 'start', proc });
  }

  #kill(proc: SimProcess): void {
    this.#say(`${proc.id} is killed`);
    proc.state = 'dead';
    proc.deferred = [];
  }

  #freeze(proc: SimProcess): void {
    const forMs = this.#rng.int(1, 3 * this.timing.ttlMs);
    this.#say(`${proc.id} freezes for ${forMs} ms`);
    proc.state = 'frozen';
    this.#at(this.#clock.nowMs + forMs, { kind: 'thaw', proc });
  }

  /** A frozen process runs again: what came meanwhile runs now, in an order the seed picks. */
  #onThaw(proc: SimProcess): void {
    if (proc.state !== 'frozen') return;
    this.#say(`${proc.id} thaws`);
    this.#disturbed('a process thawed');
    proc.state = 'running';
    const deferred = this.#rng.shuffle(proc.deferred);
    proc.deferred = [];
    for (const event of deferred) this.#at(this.#clock.nowMs, event);
  }

  /** A clean stop: every election stops (a leader releases) and the process leaves the membership. */
  #stop(proc: SimProcess, settled: boolean): void {
    this.#say(`${proc.id} stops cleanly`);
    const now = this.#clock.nowMs;
    // The stop's own disturbance is counted already; a slow release sent now counts as another.
    const disturbances = this.#disturbances;
    const led = proc.elections.flatMap((e, shard) => (e.leadsAt(now) ? [shard] : []));
    proc.state = 'stopped';
    proc.elections.forEach((election, shard) => {
      const actions = election.stop();
      const kept =
        this.#sabotage === 'stopWithoutRelease'
          ? actions.filter((a) => a.kind !== 'release')
          : actions;
      this.#apply(proc, shard, kept);
    });
    this.#send(proc, { kind: 'leave' });
    if (settled && led.length > 0) {
      const watch: StopWatch = {
        proc,
        atMs: now,
        deadlineMs: now + this.timing.ttlMs,
        disturbances,
        pending: new Set(led),
      };
      this.#watches.push(watch);
      this.#at(watch.deadlineMs, { kind: 'stopDeadline', watch });
    }
  }

  /** The end of the quiescence: one more clean stop, when two processes run. */
  #finalStop(): boolean {
    this.#finalStopDone = true;
    const running = this.#all.filter((p) => p.state === 'running');
    if (running.length < 2 || !this.#rng.chance(0.7)) return false;
    this.#report.faults.stop++;
    const proc = this.#rng.pick(running);
    const settled = this.#settled();
    this.#disturbed('fault: stop (final)');
    this.#stop(proc, settled);
    return true;
  }

  /** Invariant 4. */
  #onStopDeadline(watch: StopWatch): void {
    this.#watches.splice(this.#watches.indexOf(watch), 1);
    // Another disturbance since the stop: not a clean experiment.
    if (this.#disturbances !== watch.disturbances) return;
    this.#report.stopsChecked++;
    this.#judge.check(
      watch.pending.size === 0,
      () =>
        `${watch.proc.id} stopped cleanly at ${watch.atMs}, but shards ${[...watch.pending].join(', ')} were not led elsewhere within the ttl (${this.timing.ttlMs} ms)`,
    );
  }

  #disturbed(why: string): void {
    this.#disturbances++;
    if (this.#disturbedAtMs < this.#clock.nowMs) this.#say(`disturbed: ${why}`);
    this.#disturbedAtMs = this.#clock.nowMs;
  }

  // --- invariants ------------------------------------------------------------

  #check(): void {
    const now = this.#clock.nowMs;
    for (const shard of this.#touched) this.#checkFencing(shard, now);
    if (this.#settled()) this.#checkSettled(now);
  }

  /** Invariant 1 for one shard. */
  #checkFencing(shard: number, now: number): void {
    const lease = this.#leases[shard]!;
    let leader: SimProcess | null = null;
    for (const proc of this.#all) {
      const election = proc.elections[shard] as Leadership;
      if (!election.leadsAt(now)) continue;
      const other = leader;
      this.#judge.check(
        other === null,
        () => `shard ${shard}: ${other?.id} and ${proc.id} both lead at ${now}`,
      );
      leader = proc;
      this.#judge.check(
        election.epoch === lease.epoch && lease.view().holder?.nodeId === proc.id,
        () =>
          `shard ${shard}: ${proc.id} leads under epoch ${election.epoch}, but the lease is at epoch ${lease.epoch} held by ${lease.view().holder?.nodeId}`,
      );
    }
  }

  #settled(): boolean {
    return this.#clock.nowMs >= this.#disturbedAtMs + this.settleMs;
  }

  /**
   * Invariant 3: every shard led by a running process, each running process
   * leading its part. A shard's leader, if any, is the process that last
   * took it (fencing, checked at every step the shard changes, allows no
   * other), so that one is all there is to look at.
   */
  #checkSettled(now: number): void {
    this.#report.settledSteps++;
    let running = 0;
    for (const proc of this.#all) {
      proc.ledCount = 0;
      if (proc.state === 'running') running++;
    }
    for (let shard = 0; shard < this.shards; shard++) {
      const proc = this.#lastLeader[shard] ?? null;
      const leads =
        proc !== null &&
        proc.state === 'running' &&
        (proc.elections[shard] as Leadership).leadsAt(now);
      if (!leads) {
        throw this.#judge.violation(
          `undisturbed for ${now - this.#disturbedAtMs} ms (settled after ${this.settleMs}), yet shard ${shard} is led by no running process (lease: ${JSON.stringify(this.#leases[shard]!.view())}; ${this.#describe(shard, now)})`,
        );
      }
      proc.ledCount++;
    }
    const low = Math.floor(this.shards / running);
    const high = Math.ceil(this.shards / running);
    for (const proc of this.#all) {
      if (proc.state !== 'running' || (proc.ledCount >= low && proc.ledCount <= high)) continue;
      const counts = this.#all.filter((p) => p.state === 'running').map((p) => p.ledCount);
      throw this.#judge.violation(
        `undisturbed for ${now - this.#disturbedAtMs} ms (settled after ${this.settleMs}), yet ${proc.id} leads ${proc.ledCount} of ${this.shards} shards among ${running} processes (${counts.join('/')})`,
      );
    }
  }

  #describe(shard: number, now: number): string {
    return this.#all
      .filter((p) => p.state === 'running')
      .map((p) => {
        const e = p.elections[shard] as Leadership;
        return `${p.id}: ${e.mode}${e.acquiring ? ' acquiring' : ''} wake ${e.nextWakeAtMs() - now} free ${p.round.freeForMs(shard, now)} share ${p.round.share.shareOf()}`;
      })
      .join('; ');
  }

  #say(line: string): void {
    if (this.#log === undefined) return;
    this.#log(`[${this.#judge.step} ${this.#clock.nowMs - this.#startMs}ms] ${line}`);
  }
}
