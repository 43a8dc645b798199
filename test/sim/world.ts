/**
 * The simulated coordinator process: the real {@link CoordinatorCore} on a
 * {@link MemoryStore}, driven as the shell (src/coordinator/coordinator.ts)
 * drives it: inputs are handled one at a time and their effects collected;
 * a flush ends the batch, hands its writes to the store and queues its
 * effects behind every earlier batch (the commit pipeline). The store
 * finishes commits in order, each at a moment of the simulation's choosing;
 * only then are a batch's effects released (frames queued to workers,
 * replies handed to clients, wait timers armed). Reads of history are
 * answered at a moment of its choosing too, from what is committed then.
 *
 * A restart discards the core, every connection, timer, pending read and
 * every batch not yet committed, and builds a new core from the committed
 * rows, committing its recovery before anything else, as `Coordinator.start`
 * does. It can strike with inputs handled but not committed, or right after
 * a commit with only some of its effects released.
 *
 * Two coordinator nodes share the store through a lease (election.ts):
 * every commit is fenced by its term's epoch. A restart takes the next
 * epoch. A failover freezes the leader with everything it holds (its core,
 * its uncommitted batches, the frames it had read); once its lease expired
 * the other node takes over with the next epoch, recovering from the store.
 * When the frozen one wakes up it handles what it had read and a tick, and
 * its store tries to finish its commits: every one must be refused, none of
 * its effects ever leaves, and its lease machine must step down.
 *
 * A shard of several (`sharded`): the core has its shard, its store shares
 * the cluster's outbox with the other shards' stores, job ids name their
 * shard, and the shell reads the outbox as a shard's term does
 * (outbox-reads.ts); a frozen leader keeps the answers it had read.
 */
import { windowConfigOf } from '../../src/coordinator/core/scheduled-window.js';
import { createCronEvaluator } from '../../src/coordinator/cron.js';
import { CoordinatorCore } from '../../src/coordinator/core/core.js';
import type { CoreConfig, CoreInput, Effect } from '../../src/coordinator/core/types.js';
import type {
  ClientRequest,
  TaskAssign,
  WorkerToCoordinator,
} from '../../src/protocol/messages.js';
import type { StoreRead, WriteBatch } from '../../src/store/store.js';
import { MemoryStore, type MemoryOutbox } from '../../src/store/memory-store.js';
import { stampShard } from '../../src/protocol/shards.js';
import { createBuiltinRegistry } from '../../src/tasks/builtin/index.js';
import { LeaseLostError } from '../../src/store/lease.js';
import type { SimElection } from './election.js';
import {
  ClientLink,
  IdSource,
  WorkerLink,
  type ClientPeer,
  type SimClock,
  type WorkerPeer,
} from './network.js';
import { describeEffect, describeInput } from './describe.js';
import { OutboxReads, type OutboxReadStats } from './outbox-reads.js';
import type { Random } from './random.js';

/** The cron evaluator the coordinator uses (the simulation uses the real library). */
const CRON = createCronEvaluator();

/**
 * How long the shell keeps reading a worker connection it closed, waiting for
 * the worker to close its side (FramedConnection.close with drainInbound).
 */
export const DRAIN_INBOUND_MS = 5_000;

/** Restart recovery is reported to the observer as this pseudo-input. */
export type HandledKind = CoreInput | { kind: 'recovery' };

export interface HandledInput {
  input: HandledKind;
  effects: readonly Effect[];
  activeBefore: number;
  activeAfter: number;
  /** SCHEDULED jobs before it. */
  scheduledBefore: number;
  /** SCHEDULED jobs after it (none leave that state in the input that creates one). */
  scheduledAfter: number;
  /** The clock when it was handled. */
  nowMs: number;
  /** For worker frames: the worker id registered on that connection, if any. */
  linkWorkerId: string | null;
  /** For worker frames: the core had already closed that connection. */
  linkClosedByCore: boolean;
  /** For TASK_RESULT: its lease was the job's current one when the worker sent it. */
  currentAtSend: boolean;
}

/** The invariant checker's hooks into the coordinator's life. */
export interface WorldObserver {
  /** Whether this lease is the job's current one now (asked when a worker sends a result). */
  leaseCurrent(jobId: string, attemptId: string): boolean;
  onHandled(handled: HandledInput): void;
  /** The batch being built was handed to the store as `batchId` (null: it had no writes). */
  onFlushed(batchId: number | null): void;
  /** The store has batch `batchId` (and every one before it). */
  onCommitted(batchId: number): void;
  /** The process died: uncommitted state is gone. Called before the new core exists. */
  onCrash(): void;
  onReleased(effect: Effect): void;
  /** The core or the store threw: always a bug worth reporting. Returns the error to throw. */
  fatal(what: string, err: unknown): Error;
}

/** Where a restart strikes. */
export type CrashPoint =
  /** After `index` inputs of a batch were handled, before anything else commits. */
  | { at: 'beforeCommit'; index: number }
  /** Right after the next commit, with only the first `released` of its effects released. */
  | { at: 'afterCommit'; released: number };

export interface WorldOptions {
  election: SimElection;
  clock: SimClock;
  rng: Random;
  seed: number;
  config: CoreConfig;
  sweepIntervalMs: number;
  /** The shell now and then says a client connection's subscriber stalled or reads again. */
  stalls?: boolean;
  /**
   * A shard of several (its place is `config.shard`): the outbox the shards
   * share, the run's one id source (its ids leave the shard digits free),
   * and the counts of outbox reads to add to.
   */
  sharded?: {
    outbox: MemoryOutbox;
    ids: IdSource;
    reads: OutboxReadStats;
    /** A planted bug (tests of the checks): outbox reads say every batch had committed. */
    readsClaimAll?: boolean;
    /** Told of each batch once the store has it (the checks across shards read its steps). */
    onCommitted?: (batch: Readonly<WriteBatch>) => void;
  };
  log: (line: () => string) => void;
}

interface WaitTimer {
  connId: number;
  requestId: number;
  dueAtMs: number;
}

type Source =
  | { kind: 'worker'; link: WorkerLink }
  | { kind: 'client'; link: ClientLink }
  | { kind: 'tick' }
  | { kind: 'wake' }
  | { kind: 'wait'; key: string; timer: WaitTimer }
  | { kind: 'release'; connId: number }
  | { kind: 'stall'; connId: number }
  | { kind: 'read'; readId: number; read: StoreRead }
  | { kind: 'outbox' };

/** A flushed batch waiting for its commit, with the effects produced with it. */
interface InFlight {
  batch: WriteBatch | null;
  effects: Effect[];
}

/** A leader frozen with what it held, until it wakes up deposed. */
interface FrozenTerm {
  core: CoordinatorCore;
  pipeline: InFlight[];
  /** Inputs it had read from its sockets before it froze. */
  inbox: CoreInput[];
  epoch: number;
  term: number;
  node: number;
}

interface PickedInput {
  input: CoreInput;
  link: WorkerLink | null;
  currentAtSend: boolean;
}

export class World {
  readonly clock: SimClock;
  readonly config: CoreConfig;
  readonly sweepIntervalMs: number;
  readonly store: MemoryStore;
  readonly ids: IdSource;
  /** Connections the coordinator process currently has (until it reads their end). */
  /** Frames of several attempts (feature `batches`) that crossed the network. */
  readonly batchFrames = { assigns: 0, results: 0 };
  readonly workerLinks = new Map<number, WorkerLink>();
  readonly clientLinks = new Map<number, ClientLink>();
  readonly stats = {
    batches: 0,
    inputs: 0,
    restarts: 0,
    commits: 0,
    failovers: 0,
    deposedWakes: 0,
  };
  readonly election: SimElection;
  /** The node that leads, the epoch and the term (incarnation of a core) it serves under. */
  #leader = 0;
  #epoch = 0;
  #term = 0;
  #frozen: FrozenTerm | null = null;
  readonly #rng: Random;
  /** The shell reports stalled subscribers (off in the quiet phase). */
  stalls: boolean;
  readonly #log: (line: () => string) => void;
  readonly #validator = createBuiltinRegistry();
  readonly #waitTimers = new Map<string, WaitTimer>();
  /** The wake-up the core asked for (its one timer, term-clock.ts); null = none. */
  #wakeAtMs: number | null = null;
  /** Reads the core asked for, not answered yet. */
  readonly #reads = new Map<number, StoreRead>();
  /** Flushed batches, oldest first; the head commits next. */
  #pipeline: InFlight[] = [];
  #observer: WorldObserver | null = null;
  #core: CoordinatorCore | null = null;
  #nextTickAtMs = 0;
  #nextConnId = 1;
  /** A shard's reads of the outbox; null with one shard. */
  readonly #outbox: OutboxReads | null;
  readonly #onCommitted: ((batch: Readonly<WriteBatch>) => void) | undefined;

  constructor(options: WorldOptions) {
    this.election = options.election;
    this.clock = options.clock;
    this.#rng = options.rng;
    this.config = options.config;
    this.sweepIntervalMs = options.sweepIntervalMs;
    const sharded = options.sharded;
    const shard = options.config.shard;
    if ((sharded === undefined) !== (shard === undefined)) {
      throw new Error('a shard needs both its place (config.shard) and the shared outbox');
    }
    this.store = new MemoryStore(sharded === undefined ? {} : { outbox: sharded.outbox });
    this.ids = sharded?.ids ?? new IdSource(options.seed);
    this.#outbox =
      sharded === undefined || shard === undefined
        ? null
        : new OutboxReads(
            this.store,
            shard.shard,
            options.rng.fork(),
            sharded.reads,
            sharded.readsClaimAll,
          );
    this.stalls = options.stalls ?? false;
    this.#onCommitted = sharded?.onCommitted;
    this.#log = options.log;
  }

  /** Starts the first coordinator process (recovering from the empty store). */
  start(observer: WorldObserver): void {
    this.#observer = observer;
    this.#epoch = this.election.elect(this.#leader);
    this.#boot();
  }

  get core(): CoordinatorCore {
    if (this.#core === null) throw new Error('world not started');
    return this.#core;
  }

  get #obs(): WorldObserver {
    if (this.#observer === null) throw new Error('world not started');
    return this.#observer;
  }

  // ---- connections ---------------------------------------------------------

  openWorkerLink(owner: WorkerPeer): WorkerLink {
    const link = new WorkerLink(this.#nextConnId++, owner);
    this.workerLinks.set(link.connId, link);
    return link;
  }

  openClientLink(owner: ClientPeer, address: string): ClientLink {
    const link = new ClientLink(this.#nextConnId++, owner, address);
    this.clientLinks.set(link.connId, link);
    return link;
  }

  /** A worker writes a frame (lost if the connection is no longer writable). */
  writeWorker(link: WorkerLink, msg: WorkerToCoordinator): void {
    if (!link.writable) return;
    if (msg.type === 'TASK_RESULTS') {
      this.batchFrames.results++;
      // As the shell reads them: each result handed to the core as if it had come alone.
      for (const result of msg.results) this.writeWorker(link, result);
      return;
    }
    const currentAtSend =
      msg.type === 'TASK_RESULT' || msg.type === 'TASK_PROGRESS'
        ? this.#obs.leaseCurrent(msg.jobId, msg.attemptId)
        : false;
    link.toCoordinator.push({ kind: 'frame', msg, currentAtSend, sentAtMs: this.clock.nowMs });
  }

  /** A client writes a request; returns its request id, or null if the link is closed. */
  writeClient(link: ClientLink, msg: ClientRequest): number | null {
    return link.request(msg);
  }

  /**
   * The worker process died or dropped the connection: the coordinator reads
   * the first `keepQueued` frames still in flight, then the end.
   */
  workerHangUp(link: WorkerLink, keepQueued: number, reason: string): void {
    link.owner = null;
    link.toWorker.length = 0;
    if (link.endQueued) return;
    link.toCoordinator.length = Math.min(link.toCoordinator.length, keepQueued);
    link.queueEnd(reason);
  }

  /** The worker sent something undecodable; what it writes after that is never read. */
  workerGarbage(link: WorkerLink, reason: string): void {
    if (!link.writable) return;
    link.toCoordinator.push({ kind: 'violation', reason });
    link.writable = false;
  }

  /** Hands up to `max` queued frames to the worker reading `link`; returns how many. */
  deliverToWorker(link: WorkerLink, max: number): number {
    let delivered = 0;
    while (delivered < max && link.toWorker.length > 0) {
      const msg = link.toWorker.shift() as (typeof link.toWorker)[number];
      delivered++;
      if (msg === null) {
        // The worker sees the close and closes its side: the shell's drain ends.
        link.toWorker.length = 0;
        const owner = link.owner;
        link.owner = null;
        owner?.onClosed(link);
        link.queueEnd('worker closed its side');
        break;
      }
      if (msg.type === 'TASK_ASSIGN' && link.takesBatches) {
        // As the shell frames them: the assignments queued together leave in one frame.
        const attempts: TaskAssign[] = [msg];
        while (link.toWorker[0]?.type === 'TASK_ASSIGN')
          attempts.push(link.toWorker.shift() as TaskAssign);
        if (attempts.length > 1) this.batchFrames.assigns++;
        link.owner?.onFrame(link, attempts.length === 1 ? msg : { type: 'TASK_ASSIGNS', attempts });
        continue;
      }
      link.owner?.onFrame(link, msg);
    }
    return delivered;
  }

  // ---- the coordinator process ---------------------------------------------

  /** True if some input is ready for the coordinator now. */
  hasInput(): boolean {
    return this.#sources().length > 0;
  }

  /** Earliest time a tick, a wait timer or a drain timeout becomes due. */
  nextTimerAtMs(): number {
    let at = this.#nextTickAtMs;
    if (this.#wakeAtMs !== null) at = Math.min(at, this.#wakeAtMs);
    for (const timer of this.#waitTimers.values()) at = Math.min(at, timer.dueAtMs);
    for (const link of this.workerLinks.values()) {
      if (link.halfClosedAtMs !== null && !link.endQueued) {
        at = Math.min(at, link.halfClosedAtMs + DRAIN_INBOUND_MS);
      }
    }
    return at;
  }

  get pendingWaitTimers(): number {
    return this.#waitTimers.size;
  }

  /** Batches handed to the store and not committed yet. */
  get uncommittedBatches(): readonly WriteBatch[] {
    return this.#pipeline.flatMap((entry) => (entry.batch === null ? [] : [entry.batch]));
  }

  /** True when a flushed batch waits for its commit. */
  hasCommitPending(): boolean {
    return this.#pipeline.some((entry) => entry.batch !== null);
  }

  /**
   * One turn of the coordinator's loop: handles up to `size` ready inputs,
   * then flushes (the batch goes to the store, its effects queue behind the
   * earlier ones). With a `beforeCommit` crash, the process dies after that
   * many inputs instead. Returns the number of inputs handled.
   */
  runBatch(size: number, crash: CrashPoint | null = null): number {
    const effects: Effect[] = [];
    let handled = 0;
    for (; handled < size; handled++) {
      if (crash?.at === 'beforeCommit' && crash.index === handled) break;
      const picked = this.#pick();
      if (picked === null) break;
      for (const effect of this.#handle(picked)) effects.push(effect);
      // A batch is one event-loop turn: time barely moves inside it.
      if (this.#rng.chance(0.05)) this.clock.advance(1);
    }
    this.stats.batches++;
    if (crash?.at === 'beforeCommit') {
      this.restart(`crash with ${handled} input(s) of a batch handled, nothing more committed`);
      return handled;
    }
    this.#flush(effects);
    return handled;
  }

  /**
   * The store finishes the oldest commit: its batch becomes durable and the
   * effects queued behind it (and behind nothing older) are released. With an
   * `afterCommit` crash, only some of them are, and the process dies.
   */
  completeCommit(crash: CrashPoint | null = null): boolean {
    const index = this.#pipeline.findIndex((entry) => entry.batch !== null);
    if (index < 0) return false;
    const entry = this.#pipeline[index] as InFlight;
    const batch = entry.batch as WriteBatch;
    try {
      this.election.commit(this.store, batch, this.#epoch, this.#term);
    } catch (err) {
      throw this.#obs.fatal('store commit', err);
    }
    this.stats.commits++;
    this.#outbox?.committed(batch.batchId);
    this.#obs.onCommitted(batch.batchId);
    this.#onCommitted?.(batch);
    entry.batch = null;
    if (crash?.at === 'afterCommit') {
      const released = index === 0 ? entry.effects.slice(0, crash.released) : [];
      for (const effect of released) this.#release(effect);
      this.restart(
        `crash after a commit, ${released.length} of ${entry.effects.length} effect(s) released`,
      );
      return true;
    }
    this.#drain();
    // The shell tells the core once the commit's effects are out; whatever
    // that produces (nothing, today) queues like any other effect.
    const after = this.#handle({
      input: { kind: 'committed', batchId: batch.batchId },
      link: null,
      currentAtSend: false,
    });
    if (after.length > 0) this.#flush(after);
    return true;
  }

  #flush(effects: Effect[]): void {
    let batch: WriteBatch | null;
    try {
      batch = this.core.takeBatch();
    } catch (err) {
      throw this.#obs.fatal('taking a batch', err);
    }
    this.#obs.onFlushed(batch?.batchId ?? null);
    if (batch === null && effects.length === 0) return;
    this.#pipeline.push({ batch, effects });
    this.#drain();
  }

  /** Releases the effects of every leading entry whose batch is durable. */
  #drain(): void {
    while (this.#pipeline.length > 0 && (this.#pipeline[0] as InFlight).batch === null) {
      const entry = this.#pipeline.shift() as InFlight;
      for (const effect of entry.effects) this.#release(effect);
    }
  }

  /** The coordinator process dies and starts again from the committed store. */
  restart(reason: string): void {
    this.stats.restarts++;
    this.#log(() => `  !! coordinator restart: ${reason}`);
    this.#epoch = this.election.restarted(this.#leader);
    this.#replaceCore();
  }

  /** The leader renews its lease; the standby finds it live. */
  tickLeases(): void {
    // A frozen node runs nothing, its lease timer included.
    this.election.tick(this.#leader, this.#frozen === null ? 1 - this.#leader : null);
  }

  /** The shard's outbox poll timer fires: a read begins unless one is under way. */
  pollOutbox(): void {
    this.#outbox?.poll();
  }

  /** The store answers the shard's outbox read, if one is out. */
  answerOutbox(quiet: boolean): void {
    this.#outbox?.answer(quiet);
  }

  /** True while an outbox read is out or its answer waits to be handled. */
  get outboxBusy(): boolean {
    return this.#outbox?.busy ?? false;
  }

  /** True while a deposed leader is frozen. */
  get hasFrozen(): boolean {
    return this.#frozen !== null;
  }

  /**
   * The leader freezes (SIGSTOP, a long pause); after its lease expired the
   * other node takes over under the next epoch and recovers from the store.
   */
  failover(extraMs: number): void {
    this.freeze();
    this.clock.advance(this.election.timing.ttlMs + extraMs);
    this.takeOver();
  }

  /**
   * The first half of a failover: the leader freezes with what it holds.
   * The caller lets its lease expire before {@link takeOver}.
   */
  freeze(): void {
    if (this.#frozen !== null) this.wakeFrozen();
    this.stats.failovers++;
    const inbox: CoreInput[] = [];
    for (const link of this.workerLinks.values()) {
      for (const item of link.toCoordinator) {
        if (item.kind === 'frame')
          inbox.push({ kind: 'workerMessage', connId: link.connId, msg: item.msg });
      }
    }
    inbox.push(...(this.#outbox?.takeAll() ?? []));
    this.#frozen = {
      core: this.core,
      pipeline: this.#pipeline,
      inbox,
      epoch: this.#epoch,
      term: this.#term,
      node: this.#leader,
    };
  }

  /** The second half of a failover: the other node takes the expired lease and recovers. */
  takeOver(): void {
    this.#leader = 1 - this.#leader;
    this.#epoch = this.election.elect(this.#leader);
    this.#log(() => `  !! failover: node ${this.#leader} leads under epoch ${this.#epoch}`);
    this.#replaceCore();
  }

  /**
   * The frozen ex-leader wakes up: what it had read and a tick are handled,
   * its store tries to commit every batch it holds (each must be refused),
   * nothing of it is released, and its lease machine steps down.
   */
  wakeFrozen(): void {
    const frozen = this.#frozen;
    if (frozen === null) return;
    this.#frozen = null;
    this.stats.deposedWakes++;
    const batches = frozen.pipeline.flatMap((entry) => (entry.batch === null ? [] : [entry.batch]));
    try {
      for (const input of [...frozen.inbox, { kind: 'tick' } as const]) frozen.core.handle(input);
      const last = frozen.core.takeBatch();
      if (last !== null) batches.push(last);
    } catch (err) {
      throw this.#obs.fatal('a deposed leader handling its inputs', err);
    }
    for (const batch of batches) {
      try {
        this.election.commit(this.store, batch, frozen.epoch, frozen.term);
      } catch (err) {
        if (err instanceof LeaseLostError) continue;
        throw this.#obs.fatal('a deposed leader committing', err);
      }
      throw this.#obs.fatal(
        'a deposed leader committing',
        new Error(
          `batch ${batch.batchId} of epoch ${frozen.epoch} was applied after the lease moved on`,
        ),
      );
    }
    this.#log(
      () => `  !! deposed leader (epoch ${frozen.epoch}) woke: ${batches.length} batch(es) refused`,
    );
    this.election.wakes(frozen.node, frozen.epoch);
  }

  /** Drops the current core with everything uncommitted and boots a new one from the store. */
  #replaceCore(): void {
    this.#pipeline = [];
    this.#reads.clear();
    this.#obs.onCrash();
    for (const link of this.workerLinks.values()) {
      link.writable = false;
      link.toCoordinator.length = 0;
      link.toWorker.length = 0;
      const owner = link.owner;
      link.owner = null;
      owner?.onClosed(link);
    }
    for (const link of this.clientLinks.values()) {
      link.writable = false;
      link.toCoordinator.length = 0;
      const owner = link.owner;
      link.owner = null;
      owner?.onClosed(link);
    }
    this.workerLinks.clear();
    this.clientLinks.clear();
    this.#waitTimers.clear();
    this.#wakeAtMs = null;
    this.#outbox?.reset();
    this.#core = null;
    this.#boot();
  }

  #boot(): void {
    this.#term++;
    const place = this.config.shard;
    // A job id names its shard, a flow's job of another shard that one (term-factory.ts).
    const newId =
      place === undefined
        ? () => this.ids.next()
        : (shard?: number) => stampShard(this.ids.next(), shard ?? place.shard, place.shards);
    let effects: Effect[];
    try {
      this.#core = new CoordinatorCore(
        this.config,
        {
          now: () => this.clock.nowMs,
          newId,
          validator: this.#validator,
          cron: CRON,
        },
        this.store.recoverNow({
          untilMs: this.clock.nowMs + windowConfigOf(this.config).windowMs,
          limit: windowConfigOf(this.config).limit,
        }),
      );
      effects = this.#core.takeRecoveryEffects();
      for (const effect of effects) this.#log(() => `  recovery: ${describeEffect(effect)}`);
    } catch (err) {
      throw this.#obs.fatal('restart recovery', err);
    }
    this.#obs.onHandled({
      input: { kind: 'recovery' },
      effects,
      activeBefore: 0,
      activeAfter: this.#core.activeCount + this.#core.farScheduledCount,
      scheduledBefore: 0,
      scheduledAfter: this.#core.scheduledCount,
      nowMs: this.clock.nowMs,
      linkWorkerId: null,
      linkClosedByCore: false,
      currentAtSend: false,
    });
    // Start-up commits the recovery before it serves anything.
    this.#flush(effects);
    while (this.completeCommit());
    this.#nextTickAtMs = this.clock.nowMs + this.sweepIntervalMs;
  }

  #sources(): Source[] {
    const now = this.clock.nowMs;
    const sources: Source[] = [];
    for (const link of this.workerLinks.values()) {
      if (link.halfClosedAtMs !== null && now >= link.halfClosedAtMs + DRAIN_INBOUND_MS) {
        link.queueEnd('drain timeout');
      }
      if (link.toCoordinator.length > 0) sources.push({ kind: 'worker', link });
    }
    for (const link of this.clientLinks.values()) {
      if (link.toCoordinator.length > 0) sources.push({ kind: 'client', link });
    }
    if (now >= this.#nextTickAtMs) sources.push({ kind: 'tick' });
    if (this.#wakeAtMs !== null && now >= this.#wakeAtMs) sources.push({ kind: 'wake' });
    for (const [key, timer] of this.#waitTimers) {
      if (now >= timer.dueAtMs) sources.push({ kind: 'wait', key, timer });
    }
    // Now and then the shell finds a client connection stuck behind one of
    // its waits (replies in request order) and has them answered early.
    if (this.#waitTimers.size > 0 && this.#rng.chance(0.01)) {
      const timer = this.#rng.pick([...this.#waitTimers.values()]);
      if (this.clientLinks.has(timer.connId))
        sources.push({ kind: 'release', connId: timer.connId });
    }
    // Now and then the shell finds a subscriber leaving its events unread, or reading again.
    if (this.stalls && this.clientLinks.size > 0 && this.#rng.chance(0.05)) {
      sources.push({ kind: 'stall', connId: this.#rng.pick([...this.clientLinks.keys()]) });
    }
    for (const [readId, read] of this.#reads) sources.push({ kind: 'read', readId, read });
    if (this.#outbox?.ready === true) sources.push({ kind: 'outbox' });
    return sources;
  }

  /** Takes the next input from a random ready source (per-connection order kept). */
  #pick(): PickedInput | null {
    const sources = this.#sources();
    if (sources.length === 0) return null;
    const source = this.#rng.pick(sources);
    switch (source.kind) {
      case 'worker':
        return this.#takeWorker(source.link);
      case 'client':
        return { input: this.#takeClient(source.link), link: null, currentAtSend: false };
      case 'tick':
        this.#nextTickAtMs = this.clock.nowMs + this.sweepIntervalMs;
        return { input: { kind: 'tick' }, link: null, currentAtSend: false };
      case 'wake':
        this.#wakeAtMs = null;
        return { input: { kind: 'wake' }, link: null, currentAtSend: false };
      case 'wait':
        this.#waitTimers.delete(source.key);
        return {
          input: {
            kind: 'waitExpired',
            connId: source.timer.connId,
            requestId: source.timer.requestId,
          },
          link: null,
          currentAtSend: false,
        };
      case 'release':
        return {
          input: { kind: 'releaseWaits', connId: source.connId },
          link: null,
          currentAtSend: false,
        };
      case 'stall':
        return {
          input: {
            kind: 'subscriberStalled',
            connId: source.connId,
            stalled: this.#rng.chance(0.7),
          },
          link: null,
          currentAtSend: false,
        };
      case 'read':
        this.#reads.delete(source.readId);
        return {
          input: this.#answerRead(source.readId, source.read),
          link: null,
          currentAtSend: false,
        };
      case 'outbox':
        return { input: this.#outbox?.take() as CoreInput, link: null, currentAtSend: false };
    }
  }

  /** Runs a read against what is committed now; now and then the read fails. */
  #answerRead(readId: number, read: StoreRead): CoreInput {
    if (read.op !== 'purge' && this.#rng.chance(0.02)) {
      return { kind: 'readFailed', readId, message: 'simulated read failure' };
    }
    try {
      return { kind: 'readDone', readId, result: this.store.readNow(read) };
    } catch (err) {
      throw this.#obs.fatal('store read', err);
    }
  }

  #takeWorker(link: WorkerLink): PickedInput {
    const connId = link.connId;
    // The shell reads a connection's end in the turn it arrives, together with
    // the frames before it, and says so before it delivers them: sometimes
    // the end is read at once, sometimes only after some of those frames.
    if (!link.endTold && link.toCoordinator.length > 1 && this.#rng.chance(0.5)) {
      const ends = link.toCoordinator.some((i) => i.kind === 'end');
      if (ends) {
        link.endTold = true;
        return { input: { kind: 'workerEnding', connId }, link, currentAtSend: false };
      }
    }
    const item = link.toCoordinator.shift() as WorkerLink['toCoordinator'][number];
    switch (item.kind) {
      case 'frame':
        return {
          input: { kind: 'workerMessage', connId, msg: item.msg },
          link,
          currentAtSend: item.currentAtSend,
        };
      case 'violation':
        return {
          input: { kind: 'workerViolation', connId, reason: item.reason },
          link,
          currentAtSend: false,
        };
      case 'end':
        // The shell forgets the connection, then tells the core.
        this.workerLinks.delete(connId);
        return {
          input: { kind: 'workerClosed', connId, reason: item.reason },
          link,
          currentAtSend: false,
        };
    }
  }

  #takeClient(link: ClientLink): CoreInput {
    const item = link.toCoordinator.shift() as ClientLink['toCoordinator'][number];
    if (item.kind === 'request') {
      return {
        kind: 'clientRequest',
        connId: link.connId,
        requestId: item.requestId,
        msg: item.msg,
        address: link.address,
      };
    }
    this.clientLinks.delete(link.connId);
    const prefix = `${link.connId}/`;
    for (const key of [...this.#waitTimers.keys()]) {
      if (key.startsWith(prefix)) this.#waitTimers.delete(key);
    }
    return { kind: 'clientClosed', connId: link.connId };
  }

  #handle(picked: PickedInput): Effect[] {
    const core = this.core;
    const activeBefore = core.activeCount + core.farScheduledCount;
    const scheduledBefore = core.scheduledCount;
    const linkClosedByCore = picked.link?.closedByCore ?? false;
    let effects: Effect[];
    try {
      effects = core.handle(picked.input);
    } catch (err) {
      throw this.#obs.fatal(`handling ${picked.input.kind}`, err);
    }
    this.stats.inputs++;
    this.#log(() => `  in  ${describeInput(picked.input)}`);
    for (const effect of effects) {
      this.#noteLinkEffect(effect);
      // A read after commit (the next window of delayed jobs) waits for its
      // batch like a reply, and may be answered only once released.
      if (effect.kind === 'read' && effect.afterCommit !== true)
        this.#reads.set(effect.readId, effect.read);
      // The wake-up acts at once, as the term's clock does (not after a commit).
      if (effect.kind === 'wakeAt') this.#wakeAtMs = effect.atMs;
      this.#log(() => `        ${describeEffect(effect)}`);
    }
    this.#obs.onHandled({
      input: picked.input,
      effects,
      activeBefore,
      activeAfter: core.activeCount + core.farScheduledCount,
      scheduledBefore,
      scheduledAfter: core.scheduledCount,
      nowMs: this.clock.nowMs,
      linkWorkerId: picked.link?.registeredAs ?? null,
      linkClosedByCore,
      currentAtSend: picked.currentAtSend,
    });
    return effects;
  }

  /** Connection facts the checks need at handle time (the shell keeps none of them). */
  #noteLinkEffect(effect: Effect): void {
    if (effect.kind === 'close') {
      const link = this.workerLinks.get(effect.connId);
      if (link !== undefined) link.closedByCore = true;
    } else if (effect.kind === 'event' && effect.event.type === 'worker.registered') {
      const link = this.workerLinks.get(effect.event.connId);
      if (link !== undefined) link.registeredAs = effect.event.workerId;
    }
  }

  #release(effect: Effect): void {
    switch (effect.kind) {
      case 'send': {
        const link = this.workerLinks.get(effect.connId);
        if (link === undefined) break;
        if (effect.msg.type === 'TASK_ASSIGN') link.leases.add(effect.msg.attemptId);
        link.toWorker.push(effect.msg);
        break;
      }
      case 'close': {
        // A client connection (a subscriber dropped for a newcomer) simply ends.
        const client = this.clientLinks.get(effect.connId);
        if (client !== undefined) {
          client.closeByCoordinator();
          break;
        }
        // Half-close: the worker is told; what it still sends is read until it
        // closes its side, or DRAIN_INBOUND_MS pass. Nobody reads an abandoned link.
        const link = this.workerLinks.get(effect.connId);
        if (link === undefined) break;
        link.toWorker.push(null);
        link.halfClosedAtMs ??= this.clock.nowMs;
        if (link.owner === null) link.queueEnd(effect.reason);
        break;
      }
      case 'reply':
        this.#waitTimers.delete(`${effect.connId}/${effect.requestId}`);
        this.clientLinks
          .get(effect.connId)
          ?.owner?.onReply(
            this.clientLinks.get(effect.connId) as ClientLink,
            effect.requestId,
            effect.msg,
          );
        break;
      case 'armWait':
        this.#waitTimers.set(`${effect.connId}/${effect.requestId}`, {
          connId: effect.connId,
          requestId: effect.requestId,
          dueAtMs: this.clock.nowMs + effect.timeoutMs,
        });
        break;
      case 'read':
        this.#reads.set(effect.readId, effect.read);
        break;
      case 'push':
      case 'event':
      case 'wakeAt':
        break;
    }
    this.#obs.onReleased(effect);
  }
}
