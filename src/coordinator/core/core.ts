/**
 * The coordinator core: the single writer of all scheduling state.
 *
 * `handle(input)` applies one input completely and returns its effects. It
 * reads the clock once per input, draws ids from an injected source, and
 * performs no I/O at all: its durable changes accumulate as a write batch
 * that the shell takes with {@link CoordinatorCore.takeBatch}, and its reads
 * of history go out as `read` effects whose answers come back as inputs. So a
 * test or a seeded simulation can drive it step by step, store included.
 *
 * The shell must commit each batch before releasing the effects produced
 * with it (and report it with a `committed` input): a reply or an assignment
 * never leaves before the state it reports is durable.
 */
import type { JobState, Priority } from '../../protocol/messages.js';
import type { JobRecord, RecoveredState, WriteBatch } from '../../store/store.js';
import { childrenLoaded, childrenLoadFailed } from './children.js';
import {
  clientClosed,
  expireWait,
  handleClientRequest,
  jobRead,
  listDone,
  listKeyDone,
  releaseWaits,
} from './client-requests.js';
import { nextDueAtMs, promoteDue } from './delayed-jobs.js';
import { expireDue, nextExpiryAtMs, settleExpiredWhileRunning } from './expiry.js';
import {
  eventLookedUp,
  eventLookupFailed,
  nextWaitTimeoutAtMs,
  signalJobRead,
  timeOutWaits,
} from './signals.js';
import { subscriberStalled } from './subscriber-requests.js';
import { toRecord } from './job.js';
import { requeueDue, schedule } from './job-lifecycle.js';
import { expireDeadlines } from './interruption.js';
import { recover } from './recovery.js';
import { advanceWindow, nextWindowAtMs, windowRead, windowReadFailed } from './scheduled-window.js';
import { fireDueTicks, scheduleJobsRead } from './schedule-requests.js';
import { purgeDone, purgeFailed, retentionTick } from './retention.js';
import type { KeptLeasesView } from './kept-leases.js';
import { CoreState } from './state.js';
import { keyLookedUp, keyLookupFailed, parentsLookedUp } from './submission.js';
import {
  flowKeyLookedUp,
  flowKeyLookupFailed,
  flowParentsLookedUp,
  flowSettled,
} from './flow-submission.js';
import { heldChangeSettled, queueCountsDone } from './queue-requests.js';
import type { QueueSettings } from './queue-table.js';
import { batchKeyLookedUp, batchKeyLookupFailed } from './batch-submission.js';
import { rerunRead } from './rerun.js';
import type { CoreConfig, CoreDeps, CoreInput, Effect } from './types.js';
import {
  handleWorkerMessage,
  sweepHeartbeats,
  sweepKeptLeases,
  workerEnding,
  workerGone,
} from './worker-sessions.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { stepWaitRead, stepWaitReadFailed } from './steps.js';
import {
  outboxJobsRead,
  outboxMessages,
  outboxReadFailed,
  outboxWatchRead,
} from './cross-shard.js';
import type { StoreReadResult } from '../../store/store.js';

export class CoordinatorCore {
  readonly #s: CoreState;

  /**
   * Builds the core from what the store holds (restart recovery). The
   * recovery's writes are in the first batch; its events are in
   * {@link takeRecoveryEffects}.
   */
  constructor(config: CoreConfig, deps: CoreDeps, stored: RecoveredState) {
    this.#s = new CoreState(config, deps, stored.maxSeq + 1);
    recover(this.#s, stored);
  }

  /** Events of the recovery done by the constructor (call once, before any input). */
  takeRecoveryEffects(): Effect[] {
    return this.#s.takeEffects();
  }

  handle(input: CoreInput): Effect[] {
    const s = this.#s;
    s.begin();
    switch (input.kind) {
      case 'workerMessage':
        handleWorkerMessage(s, input.connId, input.msg);
        break;
      case 'workerViolation':
        workerGone(s, input.connId, 'protocol_violation', `protocol violation: ${input.reason}`);
        break;
      case 'workerEnding':
        workerEnding(s, input.connId);
        break;
      case 'workerClosed':
        workerGone(s, input.connId, 'connection_closed', input.reason);
        break;
      case 'clientRequest':
        handleClientRequest(s, input.connId, input.requestId, input.msg, input.address ?? null);
        break;
      case 'clientClosed':
        clientClosed(s, input.connId);
        break;
      case 'waitExpired':
        expireWait(s, input.connId, input.requestId);
        break;
      case 'releaseWaits':
        releaseWaits(s, input.connId);
        break;
      case 'subscriberStalled':
        subscriberStalled(s, input.connId, input.stalled);
        break;
      case 'tick':
        doDue(s);
        sweep(s);
        break;
      case 'wake':
        // The timer that fired is gone: the next wake-up is stated again.
        if (s.wakeArmedAtMs !== null) s.wakeArmedAtMs = undefined;
        doDue(s);
        schedule(s);
        break;
      case 'readDone':
        readDone(s, input.readId, input.result);
        break;
      case 'readFailed':
        readFailed(s, input.readId, input.message);
        break;
      case 'committed':
        s.reads.noteCommitted(s.jobs.committed(input.batchId));
        break;
      case 'outboxMessages':
        outboxMessages(s, input.messages, input.committedThrough);
        break;
    }
    settleExpiredWhileRunning(s);
    stateWakeUp(s);
    s.subscriptions.publish(s.nowMs, (connIds, msg) => s.push(connIds, msg));
    return s.takeEffects();
  }

  /** The writes accumulated since the last call, as one batch; null when there are none. */
  takeBatch(): WriteBatch | null {
    return this.#s.jobs.takeBatch();
  }

  /** Non-terminal jobs in memory right now, SCHEDULED ones included (not the far ones). */
  get activeCount(): number {
    return this.#s.jobs.activeCount;
  }

  /** SCHEDULED jobs beyond the window: in the store only. */
  get farScheduledCount(): number {
    return this.#s.window.farCount;
  }

  /** SCHEDULED jobs right now, in memory or only in the store. */
  get scheduledCount(): number {
    return this.#s.scheduledCount + this.#s.window.farCount;
  }

  get maxActiveJobs(): number {
    return this.#s.config.maxActiveJobs;
  }

  /** Up to `limit` jobs not yet ended that depend on `jobId` (read only: the dashboard's flow view). */
  dependentsOf(jobId: string, limit: number): string[] {
    return this.#s.graph.activeDependents(jobId, limit);
  }

  /** Read-only views for metrics, tests and the simulation's invariant checks. */
  inspect(): CoreInspection {
    const s = this.#s;
    const byState: Partial<Record<JobState, number>> = {};
    const queuedByTaskType = new Map<string, number>();
    const queuedByPriority: Record<Priority, number> = { HIGH: 0, NORMAL: 0, LOW: 0 };
    for (const job of s.jobs.activeJobs()) {
      byState[job.state] = (byState[job.state] ?? 0) + 1;
      if (job.state === 'QUEUED') {
        queuedByTaskType.set(job.taskType, (queuedByTaskType.get(job.taskType) ?? 0) + 1);
        queuedByPriority[job.priority]++;
      }
    }
    // The far delayed jobs are SCHEDULED too (the `dtp_jobs` gauge counts them).
    if (s.window.farCount > 0) byState.SCHEDULED = (byState.SCHEDULED ?? 0) + s.window.farCount;
    return {
      activeCount: s.jobs.activeCount,
      activeByState: byState,
      queuedByTaskType,
      queuedByPriority,
      workers: [...s.workers.sessions()].map((w) => ({
        workerId: w.workerId,
        connId: w.connId,
        capacity: w.capacity,
        prefetch: w.prefetch,
        prefetching: w.prefetching,
        running: [...w.running],
        draining: w.draining,
        ending: w.ending,
        listingHeld: w.heldList !== null,
        taskTypes: w.taskTypes === null ? null : [...w.taskTypes],
      })),
      servedTaskTypes: s.workers.servedTaskTypes(),
      freeSlots: s.workers.freeSlots,
      keptLeases: s.kept.views(),
      pendingWaits: s.waits.size,
      pendingReads: s.reads.size,
      subscriptions: s.subscriptions.size,
      subscribers: s.subscriptions.connections,
      stalledSubscribers: s.subscriptions.stalled().size,
      scheduledCount: s.scheduledCount,
      farScheduledCount: s.window.farCount,
      scheduledHorizon: { atMs: s.window.horizonMs, seq: s.window.horizonSeq },
      wakeArmedAtMs: s.wakeArmedAtMs ?? null,
      shardLinks: { applied: s.links.appliedCount, watched: s.links.watchedCount },
      queues: [...s.queues.values()].map((q) => ({
        name: q.name,
        settings: { ...q.settings },
        leased: q.leased,
      })),
    };
  }

  /**
   * What each address holds of the budgets kept per address, and the
   * subscribers leaving events unread with since when (copies, for tests and
   * the simulation's invariants).
   */
  budgets(): CoreBudgets {
    const s = this.#s;
    return {
      waitsByAddress: new Map(s.waits.byAddress()),
      subscriptionsByAddress: new Map(s.subscriptions.byAddress()),
      stalledSubscribers: new Map(s.subscriptions.stalled()),
    };
  }

  /** Copies of every active job's row (tests and the simulation; O(active jobs)). */
  activeJobs(): JobRecord[] {
    return [...this.#s.jobs.activeJobs()].map(toRecord);
  }

  /** Where each QUEUED job waits: its queue, group, priority and type (the simulation's fairness check). */
  *queuedJobs(): IterableIterator<QueuedJobView> {
    for (const job of this.#s.jobs.activeJobs()) {
      if (job.state !== 'QUEUED') continue;
      const { jobId, queue, groupKey, priority, taskType } = job;
      yield { jobId, queue, groupKey, priority, taskType };
    }
  }
}

/** A QUEUED job's place in the ready queue (see {@link CoordinatorCore.queuedJobs}). */
export interface QueuedJobView {
  readonly jobId: string;
  readonly queue: string;
  readonly groupKey: string | null;
  readonly priority: Priority;
  readonly taskType: string;
}

/**
 * What fell due by now: delayed jobs become QUEUED (due-time order) and due
 * schedule ticks make their jobs. Only the timed inputs do it (the wake-up
 * and, as a backstop, the sweep), so every other input changes only what it
 * is about.
 */
function doDue(s: CoreState): void {
  s.ready.unparkDue(s.nowMs);
  promoteDue(s);
  expireDue(s);
  timeOutWaits(s);
  s.dedup.prune(s.nowMs);
  fireDueTicks(s);
  advanceWindow(s);
}

/** Tells the shell the earliest instant the core needs an input, when that changed. */
function stateWakeUp(s: CoreState): void {
  let atMs: number | null = null;
  // Due delayed jobs, schedule ticks, and the openings of rate windows: a
  // queue (or group) held by its rate starts again when its window opens,
  // not on the next sweep tick.
  for (const at of [
    nextDueAtMs(s),
    nextExpiryAtMs(s),
    nextWaitTimeoutAtMs(s),
    s.schedules.nextTickAtMs(),
    // The openings the ready queue met (queues and groups held by a rate),
    // cleared by doDue: a value that moves only with picks and timed inputs.
    s.ready.nextUnparkMs(),
    // The next window of delayed jobs is read a margin before the horizon.
    nextWindowAtMs(s),
  ]) {
    if (at !== null && (atMs === null || at < atMs)) atMs = at;
  }
  if (atMs !== s.wakeArmedAtMs) s.wakeAt(atMs);
}

function sweep(s: CoreState): void {
  // A gap between ticks far beyond the sweep period means the coordinator
  // itself was not running (paused, starved): that time is nobody's silence.
  const gapMs = s.nowMs - s.lastTickMs;
  const stalledMs = gapMs > s.stallThresholdMs ? gapMs - s.config.sweepIntervalMs : 0;
  s.lastTickMs = s.nowMs;
  if (stalledMs > 0) {
    s.stallSeenAtMs = s.nowMs;
    s.emit({ type: 'coordinator.stalled', stalledMs });
  }
  sweepHeartbeats(s, stalledMs);
  sweepKeptLeases(s, stalledMs);
  expireDeadlines(s);
  requeueDue(s);
  retentionTick(s);
  dropEndedHolds(s);
  schedule(s);
}

/** How often the store is told to delete the group holds that ended (at most). */
const HOLD_CLEANUP_INTERVAL_MS = 10_000;

/** Forgets the group holds that ended; the store deletes its copies now and then. */
function dropEndedHolds(s: CoreState): void {
  if (s.nowMs < s.nextHoldCleanupMs) return;
  s.nextHoldCleanupMs = s.nowMs + HOLD_CLEANUP_INTERVAL_MS;
  if (s.queues.dropEndedHolds(s.nowMs) > 0 || s.holdsMayBeStored) {
    s.jobs.deleteGroupHoldsEndedBefore(s.nowMs);
    s.holdsMayBeStored = s.queues.groupHolds(s.nowMs).next().done !== true;
  }
}

function readDone(s: CoreState, readId: number, result: StoreReadResult): void {
  const read = s.reads.take(readId);
  if (read === undefined) return;
  switch (read.kind) {
    case 'status':
    case 'cancel':
    case 'wait':
      if (result.op !== 'job') throw new Error(`read ${readId}: expected a job, got ${result.op}`);
      return jobRead(s, read, result.job, result.attempts, result.children);
    case 'list':
      if (result.op !== 'list')
        throw new Error(`read ${readId}: expected a list, got ${result.op}`);
      return listDone(s, read, result.jobs);
    case 'rerun':
      if (result.op !== 'list')
        throw new Error(`read ${readId}: expected a list, got ${result.op}`);
      return rerunRead(s, read, result.jobs, result.attempts ?? []);
    case 'key':
      if (result.op !== 'jobByKey')
        throw new Error(`read ${readId}: expected a key, got ${result.op}`);
      return keyLookedUp(s, read.key, result.job);
    case 'parents':
      if (result.op !== 'jobs') throw new Error(`read ${readId}: expected jobs, got ${result.op}`);
      return parentsLookedUp(s, read.held, read.asked, result.jobs);
    case 'flowParents':
      if (result.op !== 'jobs') throw new Error(`read ${readId}: expected jobs, got ${result.op}`);
      return flowParentsLookedUp(s, read.plan, read.asked, result.jobs);
    case 'flowKey':
      if (result.op !== 'jobByKey')
        throw new Error(`read ${readId}: expected a key, got ${result.op}`);
      return flowKeyLookedUp(s, read.plan, read.key, result.job);
    case 'batchKey':
      if (result.op !== 'jobByKey')
        throw new Error(`read ${readId}: expected a key, got ${result.op}`);
      return batchKeyLookedUp(s, read.batch, read.key, result.job);
    case 'listKey':
      if (result.op !== 'jobByKey')
        throw new Error(`read ${readId}: expected a key, got ${result.op}`);
      return listKeyDone(s, read, result.job);
    case 'purge':
      if (result.op !== 'purge')
        throw new Error(`read ${readId}: expected a purge, got ${result.op}`);
      return purgeDone(s, read, result.deleted);
    case 'scheduleJobs':
      if (result.op !== 'scheduleJobs')
        throw new Error(`read ${readId}: expected a schedule's jobs, got ${result.op}`);
      return scheduleJobsRead(s, read, result.jobs);
    case 'queues':
      if (result.op !== 'queueCounts')
        throw new Error(`read ${readId}: expected queue counts, got ${result.op}`);
      return queueCountsDone(s, read, result.counts);
    case 'stepWait':
      if (result.op !== 'job') throw new Error(`read ${readId}: expected a job, got ${result.op}`);
      return stepWaitRead(s, read, result.job);
    case 'window':
      if (result.op !== 'scheduledWindow')
        throw new Error(`read ${readId}: expected delayed jobs, got ${result.op}`);
      return windowRead(s, read, result.jobs);
    case 'children':
      if (result.op !== 'children')
        throw new Error(`read ${readId}: expected child links, got ${result.op}`);
      return childrenLoaded(s, read.parentJobId, result.links);
    case 'signal':
      if (result.op !== 'job') throw new Error(`read ${readId}: expected a job, got ${result.op}`);
      return signalJobRead(s, read, result.job);
    case 'outboxJobs':
      if (result.op !== 'jobs') throw new Error(`read ${readId}: expected jobs, got ${result.op}`);
      return outboxJobsRead(s, read, result.jobs);
    case 'outboxWatch':
      if (result.op !== 'jobs') throw new Error(`read ${readId}: expected jobs, got ${result.op}`);
      return outboxWatchRead(s, read.messageId, read.watch, result.jobs);
    case 'event': {
      if (result.op !== 'event')
        throw new Error(`read ${readId}: expected an event, got ${result.op}`);
      const e = result.event;
      return eventLookedUp(
        s,
        read.eventId,
        e === null
          ? null
          : { type: 'EVENT_PUBLISHED', eventId: e.eventId, jobIds: e.jobIds, resumed: e.resumed },
      );
    }
  }
}

function readFailed(s: CoreState, readId: number, message: string): void {
  const read = s.reads.take(readId);
  if (read === undefined) return;
  switch (read.kind) {
    case 'status':
    case 'cancel':
    case 'wait':
    case 'list':
    case 'rerun':
    case 'listKey':
    case 'scheduleJobs':
    case 'queues':
      s.replyError(
        read.connId,
        read.requestId,
        ErrorCode.StoreReadFailed,
        `Could not read history: ${message}`,
      );
      if (read.kind === 'queues' && read.held !== undefined) heldChangeSettled(s, read.held.name);
      return;
    case 'key':
      return keyLookupFailed(s, read.key, message);
    case 'parents':
    case 'flowParents':
      if (read.kind === 'flowParents') flowSettled(s, read.plan);
      s.replyError(
        read.kind === 'parents' ? read.held.connId : read.plan.connId,
        read.kind === 'parents' ? read.held.requestId : read.plan.requestId,
        ErrorCode.StoreReadFailed,
        `Could not look up the parent jobs: ${message}`,
      );
      return;
    case 'batchKey':
      return batchKeyLookupFailed(s, read.batch, message);
    case 'flowKey':
      return flowKeyLookupFailed(s, read.plan, message);
    case 'purge':
      return purgeFailed(s, read, message);
    case 'window':
      return windowReadFailed(s);
    case 'stepWait':
      return stepWaitReadFailed(s, read, message);
    case 'children':
      return childrenLoadFailed(s, read.parentJobId, message);
    case 'signal':
      s.replyError(
        read.connId,
        read.requestId,
        ErrorCode.StoreReadFailed,
        `Could not read history: ${message}`,
      );
      return;
    case 'event':
      return eventLookupFailed(s, read.eventId, message);
    case 'outboxJobs':
    case 'outboxWatch':
      return outboxReadFailed(s, read.messageId);
  }
}

export interface CoreInspection {
  activeCount: number;
  /** Non-terminal jobs by state (absent = 0); SCHEDULED includes the far ones. */
  activeByState: Partial<Record<JobState, number>>;
  /** QUEUED jobs per task type. */
  queuedByTaskType: ReadonlyMap<string, number>;
  /** QUEUED jobs per base priority (aging not applied). */
  queuedByPriority: Readonly<Record<Priority, number>>;
  workers: {
    workerId: string;
    connId: number;
    capacity: number;
    /** Attempts it may queue beyond capacity, and whether that part of its window is open. */
    prefetch: number;
    prefetching: boolean;
    running: string[];
    draining: boolean;
    /** Its connection's end has been read: it is assigned nothing more. */
    ending: boolean;
    /** It is still listing the attempts it holds (`moreHeld`): it is assigned nothing yet. */
    listingHeld: boolean;
    /** Declared task types; null = the five built-ins. */
    taskTypes: string[] | null;
  }[];
  /** Task types some live, non-draining worker declared. */
  servedTaskTypes: string[];
  freeSlots: number;
  /** Leases kept for workers without a session (after a stall of our own). */
  keptLeases: KeptLeasesView[];
  pendingWaits: number;
  pendingReads: number;
  /** SUBSCRIBE_JOBS subscriptions open. */
  subscriptions: number;
  /** Client connections holding at least one of them. */
  subscribers: number;
  /** Of those, the ones leaving more events unread than they may (their events are dropped). */
  stalledSubscribers: number;
  /** SCHEDULED jobs held in memory. */
  scheduledCount: number;
  /** SCHEDULED jobs beyond the window, in the store only (scheduled-window.ts). */
  farScheduledCount: number;
  /** Every SCHEDULED job without parents due by (atMs, seq) is in memory; atMs Infinity = all. */
  scheduledHorizon: { atMs: number; seq: number };
  /** The wake-up last asked of the shell; null = none. */
  wakeArmedAtMs: number | null;
  /**
   * Outbox messages applied whose deletion a read may not see yet, and jobs
   * here that children of other shards wait for (shard-links.ts).
   */
  shardLinks: { applied: number; watched: number };
  /** Queues with state in the core (settings, leases): their settings and leased attempts. */
  queues: { name: string; settings: QueueSettings; leased: number }[];
}

/** See {@link CoordinatorCore.budgets}. */
export interface CoreBudgets {
  waitsByAddress: Map<string, number>;
  subscriptionsByAddress: Map<string, number>;
  /** Subscriber connections leaving events unread, and since when (core clock, ms). */
  stalledSubscribers: Map<number, number>;
}
