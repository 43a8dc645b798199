/**
 * Where terms come from. The coordinator decides when a term starts and
 * ends; this knows how: which store its database names (store selection is
 * in src/store/open-store.ts), how to read what recovery needs, how to build
 * the core from it and commit the recovery, and, on a shared database, how
 * to run for leadership.
 *
 * A term starts in two steps so that the coordinator can bind its ports in
 * between: {@link TermFactory.prepareSole} (or `prepareElected`) opens the
 * store and reads, writing nothing; {@link TermFactory.begin} builds the core
 * and commits the recovery's writes. A coordinator that cannot bind never
 * writes.
 */
import {
  DEFAULT_SCHEDULED_WINDOW,
  type ScheduledWindowConfig,
} from '../core/scheduled-window-state.js';
import { createCronEvaluator } from '../cron.js';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from '../../observability/logger.js';
import {
  handleOf,
  openFencedStore,
  openLease,
  openSoleStore,
  type StoreHandle,
} from '../../store/open-store.js';
import type { RecoveredState, Store } from '../../store/store.js';
import { createBuiltinRegistry } from '../../tasks/builtin/index.js';
import { MAX_SUBSCRIPTIONS } from '../../protocol/limits.js';
import { CoordinatorCore } from '../core/core.js';
import type { CoreConfig, CoreEvent, PayloadValidator } from '../core/types.js';
import { LeaderElection, type ElectionHooks } from '../leadership/leader-election.js';
import {
  DEFAULT_OUTBOX_POLL_MS,
  SHARD_READ_CONNECTIONS,
  type CoordinatorOptions,
} from '../options.js';
import { Term, type TermLease, type TermOutlets } from './term.js';
import { TimeOrderedIds } from './time-ordered-id.js';
import { shardSchema, stampShard } from '../../protocol/shards.js';

/** Cron evaluation for every term's core (parsed expressions are cached). */
const CRON = createCronEvaluator();

/** Extra wiring for tests and embedding (all optional). */
export interface TermDeps {
  /** The store to use instead of the one `databasePath` names (one term, never elected). */
  store?: Store;
  validator?: PayloadValidator;
  /** Epoch milliseconds (default Date.now). */
  now?: () => number;
  /** The near window of delayed jobs (default DEFAULT_SCHEDULED_WINDOW, core/scheduled-window.ts). */
  scheduledWindow?: ScheduledWindowConfig;
}

/** A store opened for a term, and what it recovered; nothing written yet. */
export interface PreparedTerm {
  readonly handle: StoreHandle;
  readonly stored: RecoveredState;
  readonly epoch: number | null;
}

export class TermFactory {
  readonly #options: CoordinatorOptions;
  readonly #deps: TermDeps;
  readonly #outlets: TermOutlets;
  readonly #log: Logger;

  constructor(options: CoordinatorOptions, deps: TermDeps, outlets: TermOutlets) {
    this.#options = options;
    this.#deps = deps;
    this.#outlets = outlets;
    this.#log = options.logger;
  }

  /** Opens the one store of a coordinator that leads alone (locking a SQLite file) and reads it. */
  async prepareSole(): Promise<PreparedTerm> {
    const { databasePath, durability } = this.#options;
    const injected = this.#deps.store;
    const handle =
      injected === undefined ? await openSoleStore(databasePath, durability) : handleOf(injected);
    return this.#read(handle, null);
  }

  /** Opens the shared store fenced by `epoch` and reads it. */
  async prepareElected(epoch: number): Promise<PreparedTerm> {
    const role = this.#options.shardRole;
    const schema = role === undefined ? undefined : shardSchema(role.shard, role.shards);
    const readers = role === undefined ? undefined : SHARD_READ_CONNECTIONS;
    return this.#read(
      await openFencedStore(this.#options.databasePath, epoch, schema, readers, role?.writer),
      epoch,
    );
  }

  async #read(handle: StoreHandle, epoch: number | null): Promise<PreparedTerm> {
    try {
      // Only the delayed jobs due within the window are loaded (scheduled-window.ts).
      const { windowMs, limit } = this.#deps.scheduledWindow ?? DEFAULT_SCHEDULED_WINDOW;
      const now = this.#deps.now ?? Date.now;
      return {
        handle,
        stored: await handle.store.recover({ untilMs: now() + windowMs, limit }, now()),
        epoch,
      };
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  /**
   * Builds the core from what the store recovered, commits the recovery's
   * writes, and makes the term (not serving yet). Resolves with the
   * recovery's events, to be published once the term serves.
   */
  async begin(
    prepared: PreparedTerm,
    election: LeaderElection | null,
  ): Promise<{ term: Term; recovered: CoreEvent[] }> {
    const now = this.#deps.now ?? Date.now;
    const ids = new TimeOrderedIds(now);
    // On a sharded database a job's id names its shard (protocol/shards.ts).
    const role = this.#options.shardRole;
    // A flow's job of another shard gets an id naming that shard (core/cross-shard.ts).
    const newId =
      role === undefined || role.shards === 1
        ? () => ids.next()
        : (shard?: number) => stampShard(ids.next(), shard ?? role.shard, role.shards);
    const sharded = role !== undefined && role.shards > 1;
    const core = new CoordinatorCore(
      {
        ...coreConfig(this.#options),
        scheduledWindow: this.#deps.scheduledWindow ?? DEFAULT_SCHEDULED_WINDOW,
        ...(sharded && { shard: { shard: role.shard, shards: role.shards } }),
      },
      {
        now,
        newId,
        validator: this.#deps.validator ?? createBuiltinRegistry(),
        cron: CRON,
      },
      prepared.stored,
    );
    const recovered: CoreEvent[] = [];
    for (const effect of core.takeRecoveryEffects()) {
      if (effect.kind === 'event') recovered.push(effect.event);
    }
    const batch = core.takeBatch();
    if (batch !== null) {
      await prepared.handle.store.commit(batch);
      core.handle({ kind: 'committed', batchId: batch.batchId });
    }
    const epoch = prepared.epoch;
    const term = new Term({
      handle: prepared.handle,
      core,
      epoch,
      lease: election === null ? null : leaseOf(election),
      leaderFields: election === null || epoch === null ? null : leaderFields(election, epoch),
      sweepIntervalMs: this.#options.sweepIntervalMs,
      outbox:
        sharded && prepared.handle.store.readOutbox !== undefined
          ? { shard: role.shard, pollMs: role.outboxPollMs ?? DEFAULT_OUTBOX_POLL_MS }
          : null,
      outlets: this.#outlets,
      log: this.#log,
    });
    return { term, recovered };
  }

  /**
   * Runs for leadership of the shared database, naming this coordinator by
   * the addresses others should use; `hooks` hear when a term may start and
   * when it must end.
   */
  elect(
    addresses: { workerAddress: string; clientAddress: string },
    hooks: ElectionHooks,
  ): LeaderElection {
    const options = this.#options;
    const me = {
      nodeId:
        options.shardRole?.nodeId ??
        `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`,
      ...addresses,
    };
    const role = options.shardRole;
    const lease = openLease(
      options.databasePath,
      Math.max(options.leaseRenewIntervalMs, 1_000),
      role === undefined ? undefined : shardSchema(role.shard, role.shards),
      role?.leaseConnection,
    );
    return new LeaderElection(
      { ttlMs: options.leaseTtlMs, renewIntervalMs: options.leaseRenewIntervalMs },
      me,
      lease,
      hooks,
      this.#log,
      role?.gate ?? null,
    );
  }
}

/** What WORKER_LIST says of leadership while this coordinator leads under `epoch`. */
function leaderFields(election: LeaderElection, epoch: number): { leader?: string; epoch: number } {
  const leader = election.leadership.self.clientAddress;
  return leader === null ? { epoch } : { leader, epoch };
}

/** What a term needs of the election it serves under. */
function leaseOf(election: LeaderElection): TermLease {
  return {
    leadsNow: () => election.leadsNow(),
    check: () => election.check(),
    fenced: () => election.lost('fenced'),
  };
}

function coreConfig(options: CoordinatorOptions): CoreConfig {
  return {
    heartbeatTimeoutMs: options.heartbeatTimeoutMs,
    taskTimeoutMs: options.taskTimeoutMs,
    defaultMaxAttempts: options.maxAttempts,
    retryBaseDelayMs: options.retryBaseDelayMs,
    retryMaxDelayMs: options.retryMaxDelayMs,
    maxActiveJobs: options.maxActiveJobs,
    maxScheduledJobs: options.maxScheduledJobs,
    agingStepMs: options.agingStepMs,
    sweepIntervalMs: options.sweepIntervalMs,
    retainTerminalMs: options.retainTerminalMs,
    maxWaitsPerConnection: options.maxWaitsPerConnection,
    maxWaits: options.maxWaits,
    maxWaitsPerAddress: options.maxWaitsPerAddress,
    maxSubscriptions: MAX_SUBSCRIPTIONS,
    maxSubscriptionsPerAddress: options.maxSubscriptionsPerAddress,
    subscriberStallMs: options.subscriberStallMs,
  };
}
