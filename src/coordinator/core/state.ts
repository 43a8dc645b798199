/**
 * The core's state and the small helpers every handler shares. Only the core
 * (this folder) touches it, and only while handling one input.
 */
import type { ErrorCode } from '../../protocol/error-codes.js';
import type {
  ClientReply,
  CoordinatorToWorker,
  EventPublished,
  JobEvent,
  PublishEvent,
  SetQueue,
} from '../../protocol/messages.js';
import type { StoreRead, TriggerRecord } from '../../store/store.js';
import { BinaryHeap } from './binary-heap.js';
import { ChildIndex } from './child-index.js';
import { DedupIndex } from './dedup-index.js';
import { DependencyGraph } from './dependencies.js';
import type { CoreJob } from './job.js';
import { JobTable } from './job-table.js';
import { KeptLeases } from './kept-leases.js';
import type { PendingRead } from './pending-reads.js';
import { PendingReads } from './pending-reads.js';
import { QueueTable } from './queue-table.js';
import { ReadyQueue } from './ready-queue.js';
import { RetentionCursor } from './retention-cursor.js';
import { ScheduleTable } from './schedule-table.js';
import { ScheduledWindow } from './scheduled-window-state.js';
import { ShardLinks } from './shard-links.js';
import type { CoreConfig, CoreDeps, CoreEvent, Effect } from './types.js';
import { SubscriptionTable } from './subscriptions.js';
import { WaitTable } from './wait-table.js';
import { WorkerRegistry } from './worker-registry.js';

/** A timer entry: the job it concerns and the moment it is due. */
export interface DueEntry {
  atMs: number;
  jobId: string;
  /** For deadlines: the lease the deadline belongs to. */
  attemptId: string | null;
}

const byDueTime = (a: DueEntry, b: DueEntry): boolean => a.atMs < b.atMs;

/** One delayed job in the heap of SCHEDULED jobs (delayed-jobs.ts). */
export interface DueJob {
  readonly atMs: number;
  readonly seq: number;
  readonly jobId: string;
}

/** Due time, then submission order: overdue jobs leave in the order they fell due. */
const byDueThenSeq = (a: DueJob, b: DueJob): boolean =>
  a.atMs !== b.atMs ? a.atMs < b.atMs : a.seq < b.seq;

export class CoreState {
  readonly config: CoreConfig;
  readonly deps: CoreDeps;
  readonly jobs: JobTable;
  readonly ready: ReadyQueue;
  /** Named queues: settings, leased attempts, rate windows. */
  readonly queues = new QueueTable();
  readonly deadlines = new BinaryHeap<DueEntry>(byDueTime);
  readonly retries = new BinaryHeap<DueEntry>(byDueTime);
  /** SCHEDULED jobs by due time (delayed-jobs.ts); lazily cleaned. */
  readonly scheduled = new BinaryHeap<DueJob>(byDueThenSeq);
  /** Non-terminal jobs with an expiry, by expiry time (expiry.ts); lazily cleaned. */
  readonly expiries = new BinaryHeap<DueEntry>(byDueTime);
  /** Jobs whose expiry passed while an attempt ran: they expire if it ends without ending them. */
  readonly expiredWhileRunning = new Set<string>();
  /** WAITING jobs by the event name their `ctx.waitForEvent` waits for (signals.ts); lazily cleaned. */
  readonly eventWaiters = new Map<string, Set<string>>();
  /** Signal and event waits with a timeout, by its time (signals.ts); lazily cleaned. */
  readonly waitTimeouts = new BinaryHeap<DueEntry>(byDueTime);
  /** Triggers by name, and their names by event (signals.ts). */
  readonly triggers = new Map<string, TriggerRecord>();
  readonly triggersByEvent = new Map<string, Set<string>>();
  /** The replies of the latest events, by id: a repeated id is answered without a read. */
  readonly recentEvents = new Map<string, EventPublished>();
  /** Publishes held, by event id, while the store is asked whether the id is known. */
  readonly eventLookups = new Map<
    string,
    { connId: number; requestId: number; msg: PublishEvent; payloadJson: string }[]
  >();
  /** When the ended group holds are next dropped (core.ts). */
  nextHoldCleanupMs = 0;
  /** True while the store may hold group holds that ended (set by every hold written). */
  holdsMayBeStored = false;
  /** The deduplication keys that can still decide a submission (dedup.ts). */
  readonly dedup = new DedupIndex();
  /** Recurring schedules (schedules.ts). */
  readonly schedules = new ScheduleTable();
  /** When this core was built: ticks due before it were missed while no coordinator led. */
  readonly startedAtMs: number;
  /** SCHEDULED jobs in memory right now (the heap may hold stale entries too). */
  scheduledCount = 0;
  /** Which SCHEDULED jobs memory holds; the far ones are counted there. */
  readonly window = new ScheduledWindow();
  /**
   * The wake-up time last asked of the shell (`wakeAt`); null = none is
   * armed; undefined = unknown (a wake-up just fired): the next one is
   * always stated.
   */
  wakeArmedAtMs: number | null | undefined = null;
  readonly workers = new WorkerRegistry();
  /** Worker connections the core has closed; their late frames are ignored. */
  readonly closingConns = new Set<number>();
  /**
   * Worker connections whose end the shell has read (their last frames are
   * still being delivered): nothing is assigned there, and a registration
   * read from one is ignored.
   */
  readonly endingConns = new Set<number>();
  /** Leases kept for workers whose session ended because we ourselves stalled. */
  readonly kept = new KeptLeases();
  /** Pending WAIT_JOB requests. */
  readonly waits = new WaitTable();
  /** Reads of history the shell is running for us. */
  readonly reads = new PendingReads();
  /** SUBSCRIBE_JOBS subscriptions and the job changes they are told about. */
  readonly subscriptions = new SubscriptionTable();
  /** Background deletion of old terminal jobs. */
  readonly retention = new RetentionCursor();
  /** Jobs waiting for other jobs, and what their parents left them. */
  readonly graph = new DependencyGraph();
  /**
   * SET_QUEUE requests waiting, per queue, behind a held pause or resume of
   * that queue (queue-requests.ts): they apply in the order they came.
   */
  readonly queueChangesWaiting = new Map<
    string,
    { connId: number; requestId: number; msg: SetQueue }[]
  >();
  /** WAITING jobs by the job their `ctx.waitFor` waits for (steps.ts); may name ended waiters. */
  readonly stepWaits = new Map<string, Set<string>>();
  /** The children of the parents in memory (child-index.ts). */
  readonly children = new ChildIndex();
  /** This core's shard, the outbox messages it applied, the children in other shards (shard-links.ts). */
  readonly links: ShardLinks;
  /** Jobs that just ended whose dependents are still to settle (a work list: see job-lifecycle.ts). */
  readonly settling: CoreJob[] = [];
  /** True while the work list above is being drained. */
  settlingNow = false;
  /** Time of the input being handled. */
  nowMs = 0;
  /** Time of the previous tick (stall detection). */
  lastTickMs: number;
  /** When a tick last found that our own loop had stalled; null = never. */
  stallSeenAtMs: number | null = null;
  #effects: Effect[] = [];

  constructor(config: CoreConfig, deps: CoreDeps, nextSeq: number) {
    this.config = config;
    this.deps = deps;
    this.jobs = new JobTable(
      nextSeq,
      (job) => this.subscriptions.noteWrite(job),
      (jobId) => this.children.forget(jobId),
    );
    this.ready = new ReadyQueue(config.agingStepMs, this.queues);
    this.links = new ShardLinks(config.shard);
    this.nowMs = deps.now();
    this.lastTickMs = this.nowMs;
    this.startedAtMs = this.nowMs;
  }

  /**
   * A gap between ticks longer than this means the coordinator itself did
   * not run (paused, starved), not that the clock moved on normally.
   */
  get stallThresholdMs(): number {
    return Math.max(4 * this.config.sweepIntervalMs, 1_000);
  }

  /**
   * True while the coordinator is just out of a stall of its own loop: the
   * tick that would notice it has not run yet, or ran less than a threshold
   * ago. What ended then may have ended because of the stall (a worker that
   * judged us gone), not because anything was wrong with the worker.
   */
  get recentlyStalled(): boolean {
    const threshold = this.stallThresholdMs;
    if (this.nowMs - this.lastTickMs > threshold) return true;
    return this.stallSeenAtMs !== null && this.nowMs - this.stallSeenAtMs <= threshold;
  }

  /** Starts handling one input at the current time. */
  begin(): void {
    this.nowMs = this.deps.now();
  }

  /** Hands out the effects of the input and starts a fresh list. */
  takeEffects(): Effect[] {
    const effects = this.#effects;
    this.#effects = [];
    return effects;
  }

  send(connId: number, msg: CoordinatorToWorker): void {
    this.#effects.push({ kind: 'send', connId, msg });
  }

  /** Closes a worker connection (its late frames are ignored from now on). */
  closeWorker(connId: number, reason: string): void {
    this.closingConns.add(connId);
    this.#effects.push({ kind: 'close', connId, reason });
  }

  /** Closes a client connection at once, dropping what it has not read. */
  dropClient(connId: number, reason: string): void {
    this.#effects.push({ kind: 'close', connId, reason, abrupt: true });
  }

  reply(connId: number, requestId: number, msg: ClientReply): void {
    this.#effects.push({ kind: 'reply', connId, requestId, msg });
  }

  replyError(connId: number, requestId: number, code: ErrorCode, message: string): void {
    this.reply(connId, requestId, { type: 'ERROR', message, code });
  }

  /** A pushed event for subscribers (leaves after this input's commit, outside request order). */
  push(connIds: readonly number[], msg: JobEvent): void {
    this.#effects.push({ kind: 'push', connIds, msg });
  }

  /** Asks the shell for a `wake` input at `atMs` (null: none needed); replaces the last one. */
  wakeAt(atMs: number | null): void {
    this.wakeArmedAtMs = atMs;
    this.#effects.push({ kind: 'wakeAt', atMs });
  }

  armWait(connId: number, requestId: number, timeoutMs: number): void {
    this.#effects.push({ kind: 'armWait', connId, requestId, timeoutMs });
  }

  /**
   * Asks the shell to run a read; `then` says what to do with its answer.
   * `afterCommit`: only once every batch produced so far (this input's
   * included) has committed.
   */
  read(read: StoreRead, then: PendingRead, options?: { afterCommit: true }): void {
    const readId = this.reads.add(then);
    this.#effects.push({ kind: 'read', readId, read, ...options });
  }

  emit(event: CoreEvent): void {
    this.#effects.push({ kind: 'event', event });
  }
}
