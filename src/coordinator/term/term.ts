/**
 * One term: the span in which this coordinator serves from one store. With
 * SQLite (or memory) there is one term for the coordinator's whole life;
 * with PostgreSQL each leadership epoch is a term of its own. A term owns its
 * store, its core, its commit pipeline and its clock, and every input of the
 * core goes through {@link Term.dispatch}, one at a time, in arrival order.
 *
 * At the end of each event-loop turn (and right after the inbox handed a
 * turn's inputs over) the core's writes are handed to the store as one
 * batch and the turn's effects queue behind it in the
 * {@link CommitPipeline}: they leave only once that batch (and every earlier
 * one) is durable, while the next batch is already being built. Reads of
 * history the core asks for run at once; their answers come back as inputs.
 *
 * States (one field, changed only through `#setState`, which asserts the move):
 *   live      inputs reach the core; batches commit; effects leave after their commit
 *   stopping  the coordinator is shutting down: inputs are ignored, what was
 *             produced still commits and leaves
 *   failed    a commit failed or the core threw: nothing more is handled or
 *             released; the failure is kept for everyone who asks
 *   ended     leadership ended: nothing of this term leaves any more; its
 *             store closes in the background
 */
import assert from 'node:assert/strict';
import { ErrorCode } from '../../protocol/error-codes.js';
import { describeError } from '../../protocol/errors.js';
import type { ClientReply, CoordinatorToWorker, JobEvent } from '../../protocol/messages.js';
import type { Logger } from '../../observability/logger.js';
import { LeaseLostError } from '../../store/lease.js';
import type { StoreHandle } from '../../store/open-store.js';
import type { StoreRead } from '../../store/store.js';
import type { CoordinatorCore, CoreInspection } from '../core/core.js';
import type { CoreEvent, CoreInput, Effect } from '../core/types.js';
import { CommitPipeline } from './commit-pipeline.js';
import { TermClock } from './term-clock.js';
import { WorkerInbox, type ClientInput, type WorkerInput } from './worker-inbox.js';

/** Why the coordinator stopped working: what every request is answered with. */
export interface Failure {
  readonly code: ErrorCode;
  readonly message: string;
}

/** What a term needs of the leadership it serves under (PostgreSQL only). */
export interface TermLease {
  /** True while the lease is trusted right now. */
  leadsNow(): boolean;
  /** Looks at the clock now: steps down if the lease went stale. */
  check(): void;
  /** A write was refused as fenced: another coordinator leads. */
  fenced(): void;
}

/** Where a term's effects go (the ports and the coordinator's events). */
export interface TermOutlets {
  /** A frame to a worker connection. */
  send(connId: number, msg: CoordinatorToWorker): void;
  /** A reply to a client request (a socket's or an in-process one). */
  reply(connId: number, requestId: number, msg: ClientReply): void;
  /** A reply the core produced that leaves after its commit: the session counts it now. */
  staged(connId: number, requestId: number, msg: ClientReply): void;
  /** A WAIT_JOB the core holds (it is answered later): the session counts it now. */
  held(connId: number, requestId: number): void;
  /** A job event for a subscriber (dropped when the connection is gone). */
  push(connIds: readonly number[], msg: JobEvent): void;
  /** Close a connection after what was sent before (`abrupt`: at once, dropping what is unsent). */
  close(connId: number, reason: string, abrupt: boolean): void;
  /** True while something can still receive replies on `connId`. */
  hasClient(connId: number): boolean;
  /** A core event, after its batch was committed. */
  publish(event: CoreEvent): void;
  /** A batch is durable, `durationMs` after it was handed to the store. */
  committed(durationMs: number): void;
  /** The term cannot go on: a commit failed or the core threw. */
  fail(code: ErrorCode, what: string, err: unknown): void;
}

export interface TermParts {
  readonly handle: StoreHandle;
  readonly core: CoordinatorCore;
  /** The lease's epoch; null without leadership (SQLite, memory). */
  readonly epoch: number | null;
  readonly lease: TermLease | null;
  /** What a WORKER_LIST says of leadership; null without leadership. */
  readonly leaderFields: { readonly leader?: string; readonly epoch: number } | null;
  readonly sweepIntervalMs: number;
  /**
   * A shard of a sharded database: its shard, read from the cluster's
   * outbox every `pollMs` while the term serves; null = no shards.
   */
  readonly outbox?: { readonly shard: number; readonly pollMs: number } | null;
  readonly outlets: TermOutlets;
  readonly log: Logger;
}

/** Most outbox messages one read takes (the next read takes the rest). */
const OUTBOX_READ_LIMIT = 100;

/** The effects that wait for a commit ('read' and 'wakeAt' act at once, never queue). */
/** Effects that wait for their batch's commit (a read does only when it asks to). */
type QueuedEffect =
  | Exclude<Effect, { kind: 'read' | 'wakeAt' }>
  | Extract<Effect, { kind: 'read'; afterCommit?: true }>;

type TermState =
  | { readonly kind: 'live' }
  | { readonly kind: 'stopping' }
  | { readonly kind: 'failed'; readonly failure: Failure }
  | { readonly kind: 'ended' };

const MOVES: { readonly [S in TermState['kind']]: readonly TermState['kind'][] } = {
  live: ['stopping', 'failed', 'ended'],
  stopping: ['failed'],
  failed: ['ended'],
  ended: [],
};

export class Term {
  readonly epoch: number | null;
  readonly #store: StoreHandle;
  readonly #core: CoordinatorCore;
  readonly #lease: TermLease | null;
  readonly #leaderFields: TermParts['leaderFields'];
  readonly #outlets: TermOutlets;
  readonly #log: Logger;
  readonly #pipeline: CommitPipeline<QueuedEffect>;
  readonly #clock: TermClock;
  /** Worker inputs of this turn, handed over after its reads (ends first). */
  readonly #inbox: WorkerInbox;
  #state: TermState = { kind: 'live' };
  #pending: QueuedEffect[] = [];
  #flushScheduled = false;
  readonly #outbox: { readonly shard: number; readonly pollMs: number } | null;
  /** The highest batch id known committed (what an outbox read may say it has seen). */
  #lastCommitted = 0;
  /** True while a read of the outbox is out (one at a time). */
  #outboxReading = false;
  /** A message came while a read was out: read again once it is back. */
  #outboxAgain = false;

  constructor(parts: TermParts) {
    this.epoch = parts.epoch;
    this.#store = parts.handle;
    this.#core = parts.core;
    this.#lease = parts.lease;
    this.#leaderFields = parts.leaderFields;
    this.#outlets = parts.outlets;
    this.#log = parts.log;
    this.#outbox = parts.outbox ?? null;
    // The inputs of one check phase make one batch, closed right after they
    // were handed over: their commit and replies do not wait a turn more.
    this.#inbox = new WorkerInbox(
      (input) => this.dispatch(input),
      () => {
        if (this.#flushScheduled) this.#flush();
      },
    );
    // The tick goes through the worker inbox, after the frames read in its
    // turn: after a stall of our own, the heartbeats and results that queued
    // up meanwhile are seen before anyone is judged.
    this.#clock = new TermClock(parts.sweepIntervalMs, {
      sweep: () => this.#inbox.tick(),
      waitExpired: (input) => this.dispatch(input),
      wake: () => this.dispatch({ kind: 'wake' }),
      outboxPoll: () => this.#readOutbox(),
    });
    const store = parts.handle.store;
    this.#pipeline = new CommitPipeline<QueuedEffect>({
      commit: (batch) => store.commit(batch),
      release: (effects) => {
        if (this.#releases()) for (const effect of effects) this.#release(effect);
      },
      committed: (batchId, durationMs) => {
        this.#lastCommitted = batchId;
        if (!this.#releases()) return;
        this.#outlets.committed(durationMs);
        this.dispatch({ kind: 'committed', batchId });
      },
      failed: (err) => {
        if (!this.#releases()) return;
        // A refused fenced write is not a storage failure: another coordinator leads.
        if (err instanceof LeaseLostError && this.#lease !== null) this.#lease.fenced();
        else this.#outlets.fail(ErrorCode.StoreFailed, 'storage failure', err);
      },
    });
  }

  /** How the store is named in logs. */
  get description(): string {
    return this.#store.store.description;
  }

  /** Non-terminal jobs in memory. */
  get activeCount(): number {
    return this.#core.activeCount;
  }

  /** Set once the term failed: what every request is answered with. */
  get failure(): Failure | null {
    return this.#state.kind === 'failed' ? this.#state.failure : null;
  }

  /** The core's current state (tests, metrics). */
  inspect(): CoreInspection {
    return this.#core.inspect();
  }

  /** Up to `limit` jobs not yet ended that depend on `jobId`. */
  dependentsOf(jobId: string, limit: number): string[] {
    return this.#core.dependentsOf(jobId, limit);
  }

  /**
   * Starts the timed inputs: the term serves from now on. The first `wake`
   * lets the core state its wake-up (and start what fell due while no
   * coordinator ran).
   */
  serve(): void {
    this.#clock.startSweep();
    if (this.#outbox !== null) this.#clock.startOutboxPoll(this.#outbox.pollMs);
    this.dispatch({ kind: 'wake' });
  }

  /** Hands one input to the core and queues its effects behind the current batch. */
  dispatch(input: CoreInput): void {
    if (this.#state.kind !== 'live') return;
    try {
      for (const effect of this.#core.handle(input)) {
        // What acts now runs here (a read; the wake-up time for the clock);
        // everything else waits for the commit of its batch.
        // A read that must see every batch produced so far (the next
        // window of delayed jobs) waits in the pipeline like a reply.
        if (effect.kind === 'read' && effect.afterCommit !== true) {
          this.#read(effect.readId, effect.read);
          continue;
        }
        if (effect.kind === 'wakeAt') {
          this.#clock.wakeAt(effect.atMs);
          continue;
        }
        // Known now, sent after the commit: the session counts what it owes.
        if (effect.kind === 'reply') {
          this.#outlets.staged(effect.connId, effect.requestId, effect.msg);
        } else if (effect.kind === 'armWait') {
          this.#outlets.held(effect.connId, effect.requestId);
        }
        this.#pending.push(effect);
      }
    } catch (err) {
      this.#outlets.fail(ErrorCode.InternalError, 'internal error', err);
      return;
    }
    this.#scheduleFlush();
  }

  /** A worker connection's input: handed to the core one poll later, ends first (worker-inbox.ts). */
  workerInput(input: WorkerInput): void {
    this.#inbox.push(input);
  }

  /** A client's input: one poll later too, in order of arrival with the workers' (worker-inbox.ts). */
  clientInput(input: ClientInput): void {
    this.#inbox.push(input);
  }

  /** Queues a reply the shell produced itself, in order with the core's replies. */
  replyLater(connId: number, requestId: number, msg: ClientReply): void {
    this.#queue({ kind: 'reply', connId, requestId, msg });
  }

  /** Queues a close the shell decided, after everything produced before it. */
  closeLater(connId: number, reason: string): void {
    this.#queue({ kind: 'close', connId, reason });
  }

  /** A client connection ended: its waits' timers go, and the core drops its waits. */
  clientClosed(connId: number): void {
    this.#clock.dropConnection(connId);
    this.#inbox.push({ kind: 'clientClosed', connId });
  }

  /**
   * Shutdown begins: what was produced is flushed now and still commits and
   * leaves; inputs are ignored from here on (RUNNING jobs stay RUNNING in the
   * store and are recovered at the next start, exactly as after a crash).
   */
  stop(): void {
    if (this.#state.kind !== 'live') return;
    this.#inbox.flushAll(); // nothing more will be read
    this.#flush();
    this.#setState({ kind: 'stopping' });
    this.#clock.stop();
  }

  /** Resolves once every batch handed to the store is durable (or the pipeline failed). */
  settled(): Promise<void> {
    return this.#pipeline.settled();
  }

  /** The term cannot go on: nothing more is handled or released. */
  fail(failure: Failure): void {
    this.#setState({ kind: 'failed', failure });
    this.#clock.stop();
    this.#pending = [];
  }

  /**
   * Leadership ended: nothing more is committed or released under this
   * term, and its store closes in the background; resolves once it has
   * (a failure to close is logged, never thrown).
   */
  end(): Promise<void> {
    if (this.#state.kind === 'ended') return Promise.resolve();
    this.#setState({ kind: 'ended' });
    this.#clock.stop();
    this.#inbox.clear();
    this.#pending = [];
    return this.#store.close().catch((err: unknown) => {
      this.#log.warn({ err: describeError(err) }, 'closing the store of an ended term failed');
    });
  }

  /** Closes the store (at shutdown, after {@link settled}). */
  close(): Promise<void> {
    return this.#store.close();
  }

  /**
   * Looks for damage in the database in the background, when the store can;
   * resolves with the problems found (empty = sound), which are logged. A
   * damaged page is not a reason to stop: requests that read it get an
   * error, everything else carries on, and the operator is told (log,
   * metric, health).
   */
  checkIntegrity(): Promise<readonly string[]> | null {
    const store = this.#store.store;
    const check = store.checkIntegrity?.();
    if (check === undefined) return null;
    return check.then((problems) => {
      const database = store.description;
      if (problems.length === 0) {
        this.#log.info({ database }, 'database integrity check passed');
      } else {
        this.#log.error(
          { database, problems: problems.slice(0, 3).join('; ') },
          'database is damaged: requests that read damaged pages will fail; restore from a backup',
        );
      }
      return problems;
    });
  }

  /** Live or stopping: what was produced may still leave. */
  #releases(): boolean {
    return this.#state.kind === 'live' || this.#state.kind === 'stopping';
  }

  #setState(next: TermState): void {
    const from = this.#state.kind;
    assert(MOVES[from].includes(next.kind), `term state ${from} -> ${next.kind} is not allowed`);
    this.#state = next;
  }

  #queue(effect: QueuedEffect): void {
    if (!this.#releases()) return;
    this.#pending.push(effect);
    this.#scheduleFlush();
  }

  /**
   * Reads the messages of the cluster's outbox to this shard and hands them
   * to the core, one read at a time. It reads from the lowest id (not after
   * the last one seen): ids are given at insert, so a message with a lower
   * id can commit after one with a higher id was read; those applied are
   * deleted, so the lowest ones are the ones not applied yet. The core
   * skips the ones it applied already (core/shard-links.ts): the read says
   * which batches had committed when it began. A failed read is tried again
   * at the next poll.
   */
  #readOutbox(): void {
    const outbox = this.#outbox;
    const store = this.#store.store;
    if (outbox === null || store.readOutbox === undefined) return;
    if (this.#state.kind !== 'live') return;
    if (this.#outboxReading) {
      this.#outboxAgain = true;
      return;
    }
    this.#outboxReading = true;
    this.#outboxAgain = false;
    const committedThrough = this.#lastCommitted;
    const done = (): void => {
      this.#outboxReading = false;
      if (this.#outboxAgain) this.#readOutbox();
    };
    store.readOutbox(outbox.shard, 0, OUTBOX_READ_LIMIT).then(
      (messages) => {
        if (messages.length > 0) {
          this.dispatch({ kind: 'outboxMessages', messages, committedThrough });
        }
        done();
      },
      (err: unknown) => {
        this.#outboxAgain = false;
        done();
        if (this.#state.kind !== 'live') return;
        this.#log.warn({ err: describeError(err) }, 'reading the outbox failed; trying again');
      },
    );
  }

  /**
   * Messages to this shard were committed (the outbox's notification): the
   * outbox is read now rather than at the next poll.
   */
  outboxArrived(): void {
    this.#readOutbox();
  }

  /** Runs a read of history now; its answer is the next input for that read. */
  #read(readId: number, read: StoreRead): void {
    this.#store.store.read(read).then(
      (result) => this.dispatch({ kind: 'readDone', readId, result }),
      (err: unknown) => {
        if (this.#state.kind === 'ended') return;
        if (err instanceof LeaseLostError && this.#lease !== null) this.#lease.fenced();
        else this.dispatch({ kind: 'readFailed', readId, message: describeError(err) });
      },
    );
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => this.#flush());
  }

  /** Closes the current batch: its writes go to the store, its effects wait behind it. */
  #flush(): void {
    this.#flushScheduled = false;
    if (!this.#releases()) return;
    if (this.#lease !== null && !this.#lease.leadsNow()) {
      // The lease went stale (e.g. this process was frozen): nothing of this turn leaves.
      this.#lease.check();
      return;
    }
    const effects = this.#pending;
    this.#pending = [];
    const batch = this.#core.takeBatch();
    if (batch === null && effects.length === 0) return;
    this.#pipeline.push(batch, effects);
  }

  #release(effect: QueuedEffect): void {
    switch (effect.kind) {
      case 'read':
        this.#read(effect.readId, effect.read);
        return;
      case 'send':
        this.#outlets.send(effect.connId, effect.msg);
        return;
      case 'close':
        this.#outlets.close(effect.connId, effect.reason, effect.abrupt === true);
        return;
      case 'reply': {
        this.#clock.clearWait(effect.connId, effect.requestId);
        const fields = this.#leaderFields;
        const msg =
          effect.msg.type === 'WORKER_LIST' && fields !== null
            ? { ...effect.msg, ...fields }
            : effect.msg;
        this.#outlets.reply(effect.connId, effect.requestId, msg);
        return;
      }
      case 'push':
        this.#outlets.push(effect.connIds, effect.msg);
        return;
      case 'armWait':
        if (this.#outlets.hasClient(effect.connId)) {
          this.#clock.armWait(effect.connId, effect.requestId, effect.timeoutMs);
        }
        return;
      case 'event':
        this.#outlets.publish(effect.event);
        return;
    }
  }
}
