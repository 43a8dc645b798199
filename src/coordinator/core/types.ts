/**
 * What goes into the core and what comes out of it.
 *
 * Inputs are decoded messages, connection ends, clock ticks, and the answers
 * of the store (a read finished, a batch committed). Effects are frames to
 * send, connections to close, timers to arm, reads for the shell to run, and
 * events to log and count. The core performs no I/O: its durable changes
 * leave as a write batch ({@link CoordinatorCore.takeBatch}) and its reads of
 * history as `read` effects whose answers come back as inputs. The shell
 * commits each batch and only then releases the effects produced with it.
 */
import type { ScheduledWindowConfig } from './scheduled-window-state.js';
import type {
  ClientReply,
  DedupMode,
  RateLimitScope,
  ClientRequest,
  CoordinatorToWorker,
  JobEvent,
  JobState,
  JsonObject,
  Priority,
  WorkerInput,
} from '../../protocol/messages.js';
import type { TraceContext } from '../../protocol/trace-context.js';
import type { OutboxMessage, StoreRead, StoreReadResult } from '../../store/store.js';

export type CoreInput =
  /** A decoded frame from a worker connection. */
  | { kind: 'workerMessage'; connId: number; msg: WorkerInput }
  /** A worker connection broke the protocol (already unreadable). */
  | { kind: 'workerViolation'; connId: number; reason: string }
  /**
   * The end of a worker connection has been read, and the frames read before
   * it are about to be delivered: nothing more is assigned there. A
   * `workerClosed` for it follows those frames.
   */
  | { kind: 'workerEnding'; connId: number }
  /** A worker connection ended. */
  | { kind: 'workerClosed'; connId: number; reason: string }
  /**
   * A client request; `requestId` orders replies on its connection.
   * `address`: the peer's address, by which waits and subscriptions are
   * budgeted (`maxWaitsPerAddress`, `maxSubscriptionsPerAddress`); absent for
   * the in-process client.
   */
  | {
      kind: 'clientRequest';
      connId: number;
      requestId: number;
      msg: ClientRequest;
      address?: string;
    }
  /**
   * A subscriber's connection started (`stalled`) or stopped leaving more
   * job events unread than it may (the shell drops its events meanwhile).
   */
  | { kind: 'subscriberStalled'; connId: number; stalled: boolean }
  /** A client connection ended (its waits are dropped). */
  | { kind: 'clientClosed'; connId: number }
  /** The timer armed by an `armWait` effect fired. */
  | { kind: 'waitExpired'; connId: number; requestId: number }
  /**
   * Reading from a client connection stopped behind one of its pending
   * waits: answer all of them now, with their jobs as they are.
   */
  | { kind: 'releaseWaits'; connId: number }
  /** Periodic sweep: heartbeats, deadlines, retries, retention, scheduling. */
  | { kind: 'tick' }
  /** The time asked for by the last `wakeAt` effect came (or the term started serving). */
  | { kind: 'wake' }
  /** The answer to a `read` effect. */
  | { kind: 'readDone'; readId: number; result: StoreReadResult }
  /** A `read` effect failed (that request gets an error; nothing else changes). */
  | { kind: 'readFailed'; readId: number; message: string }
  /** Every batch up to and including `batchId` is durable. */
  | { kind: 'committed'; batchId: number }
  /**
   * Messages of the cluster's outbox to this shard, in id order (a shard of
   * a sharded database; cross-shard.ts). `committedThrough`: every batch up
   * to that id had committed when the read of them began, so none of the
   * messages those batches applied (and deleted) can be among them.
   */
  | { kind: 'outboxMessages'; messages: readonly OutboxMessage[]; committedThrough: number };

export type Effect =
  | { kind: 'send'; connId: number; msg: CoordinatorToWorker }
  /**
   * Close a worker or client connection after what was sent before it;
   * `abrupt`: at once, dropping what it has not taken (a subscriber that
   * stopped reading would otherwise hold it until a timeout).
   */
  | { kind: 'close'; connId: number; reason: string; abrupt?: true }
  | { kind: 'reply'; connId: number; requestId: number; msg: ClientReply }
  /**
   * A job event for subscribers on client connections (not a reply to any
   * request): one effect for every subscription it matches, `connIds` naming
   * each subscription's connection (a connection twice when two of its
   * subscriptions match).
   */
  | { kind: 'push'; connIds: readonly number[]; msg: JobEvent }
  /** Feed `waitExpired` for this request after `timeoutMs`. */
  | { kind: 'armWait'; connId: number; requestId: number; timeoutMs: number }
  /** Run a store read now and feed `readDone`/`readFailed` with `readId`. */
  | {
      kind: 'read';
      readId: number;
      read: StoreRead;
      /**
       * Run it only after every batch produced before it (and with it) has
       * committed, in order with the other effects; absent: at once.
       */
      afterCommit?: true;
    }
  /**
   * Feed one `wake` input at `atMs` (epoch ms; at once if it has passed),
   * replacing any earlier request; null = none is needed. The core states it
   * whenever the earliest instant it needs an input of its own changes: a
   * delayed job falling due, a schedule's tick. Acts at once (not after a
   * commit): an early wake-up is harmless, the core only looks at its clock.
   */
  | { kind: 'wakeAt'; atMs: number | null }
  | { kind: 'event'; event: CoreEvent };

/** Why an attempt did not succeed. */
export const ATTEMPT_FAILURE_CAUSES = [
  'worker_lost',
  /** The worker announced WORKER_DRAINING and left with the attempt unfinished. */
  'released',
  'deadline',
  'task_failure',
  /** The worker reported a failure that retrying cannot fix (`TASK_RESULT.retryable: false`). */
  'non_retryable',
  'restart',
] as const;
export type AttemptFailureCause = (typeof ATTEMPT_FAILURE_CAUSES)[number];

/** Why a worker session ended: a closed set for metrics; the details go to the log. */
export const WORKER_LOSS_CAUSES = [
  'connection_closed',
  'heartbeat_timeout',
  'protocol_violation',
  /** A newer registration with the same id took the session over. */
  'replaced',
  /** A draining worker left (the planned end of a drain). */
  'drained',
] as const;
export type WorkerLossCause = (typeof WORKER_LOSS_CAUSES)[number];

export type CoreEvent =
  | {
      type: 'worker.registered';
      workerId: string;
      capacity: number;
      connId: number;
      /** What it declared; null = the five built-ins (a v1 worker). */
      taskTypes: string[] | null;
      /** It asked for trace context with its assignments (`WORKER_REGISTER.traceContext`). */
      traceContext: boolean;
    }
  | { type: 'worker.rejected'; connId: number; reason: string }
  | { type: 'worker.suspected'; workerId: string; silentMs: number }
  | {
      type: 'worker.lost';
      workerId: string;
      cause: WorkerLossCause;
      reason: string;
      runningJobs: number;
    }
  | { type: 'worker.draining'; workerId: string; runningJobs: number }
  /** Its session ended while we had just stalled: its attempts stay leased to it for a while. */
  | { type: 'worker.leasesKept'; workerId: string; jobs: number; untilMs: number; reason: string }
  /** A new session of the worker took kept or replaced attempts back (`heldAttempts`). */
  | { type: 'worker.leasesReclaimed'; workerId: string; connId: number; jobs: number }
  /**
   * A session's held list (`moreHeld`, HELD_ATTEMPTS) ended: its last part
   * came, or its deadline passed (`timedOut`). `revoked`: leases of the
   * worker that no part listed, revoked now.
   */
  | {
      type: 'worker.heldListEnded';
      workerId: string;
      connId: number;
      listed: number;
      revoked: number;
      timedOut: boolean;
    }
  | {
      type: 'job.submitted';
      jobId: string;
      /** The state it starts in: QUEUED, SCHEDULED (delayed) or WAITING (parents). */
      state: JobState;
      taskType: string;
      priority: Priority;
      maxAttempts: number;
      idempotencyKey: string | null;
      /** Its named queue. */
      queue: string;
      /** The schedule whose tick made it; null for a submission. */
      scheduleName: string | null;
      /** The submitter's trace context it records (for the coordinator's spans). */
      traceContext: TraceContext | null;
    }
  | { type: 'job.deduplicated'; jobId: string; idempotencyKey: string }
  /** A submission with a `dedupKey` created nothing: its key's job answered (debounce: took its payload). */
  | {
      type: 'job.dedupMatched';
      jobId: string;
      dedupKey: string;
      mode: DedupMode;
      replaced: boolean;
    }
  /** A signal reached a job (`resumed`: a wait of the job took it at once). */
  | { type: 'job.signalled'; jobId: string; name: string; resumed: boolean }
  /** A WAITING job's signal or event wait ended (a signal, an event, or its timeout). */
  | { type: 'job.resumed'; jobId: string; by: string }
  /** An event was published: the jobs its triggers made and the waiting jobs it woke. */
  | { type: 'event.published'; eventId: string; name: string; jobs: number; resumed: number }
  /** A debounced job's run time moved (its payload was replaced). */
  | { type: 'job.debounced'; jobId: string; runAtMs: number }
  /** It was not started by its `expiresAtMillis`: it ended CANCELLED (expired). */
  | { type: 'job.expired'; jobId: string; from: JobState; expiresAtMs: number }
  /**
   * Its handler was rate limited: the attempt did not count and the job is
   * SCHEDULED at `untilMs`; for scope `group` or `queue`, that group or
   * queue starts nothing before then.
   */
  | {
      type: 'job.rateLimited';
      jobId: string;
      workerId: string;
      attempt: number;
      scope: RateLimitScope;
      untilMs: number;
      inARow: number;
    }
  /**
   * Its worker requeued the attempt (`TASK_RESULT.requeue`): it ended
   * REQUEUED, not counted, and the job is QUEUED again. `requeues`: the
   * job's attempts that ended so, this one included.
   */
  | {
      type: 'job.attemptRequeued';
      jobId: string;
      workerId: string;
      attemptId: string;
      attempt: number;
      requeues: number;
      error: string;
    }
  /** A delayed job's time came: it is QUEUED now, `lateMs` after its due time. */
  | { type: 'job.due'; jobId: string; lateMs: number }
  | { type: 'job.rejected'; activeCount: number; limit: number }
  | {
      type: 'job.assigned';
      jobId: string;
      workerId: string;
      attempt: number;
      maxAttempts: number;
      attemptId: string;
      queuedMs: number;
    }
  | {
      type: 'job.retryScheduled';
      jobId: string;
      attempt: number;
      maxAttempts: number;
      delayMs: number;
      cause: AttemptFailureCause;
      error: string;
    }
  | { type: 'job.requeued'; jobId: string; attempts: number }
  /**
   * The handler slept (`untilMs`) or waits for another job (`waitingFor`):
   * its attempt ended without failing (durable steps).
   */
  | {
      type: 'job.suspended';
      jobId: string;
      workerId: string;
      attempt: number;
      attemptId: string;
      untilMs: number | null;
      waitingFor: string | null;
    }
  /** Every parent of a WAITING job ended in a way that lets it run: it is QUEUED. */
  | { type: 'job.released'; jobId: string }
  | {
      type: 'job.completed';
      jobId: string;
      workerId: string;
      attempt: number;
      runMs: number;
      endToEndMs: number;
    }
  | {
      type: 'job.failed';
      jobId: string;
      attempts: number;
      cause: AttemptFailureCause;
      error: string;
    }
  | { type: 'job.cancelled'; jobId: string; from: JobState }
  | {
      type: 'job.deadlineExceeded';
      jobId: string;
      workerId: string;
      attemptId: string;
      timeoutMs: number;
    }
  | { type: 'job.recovered'; jobId: string; from: JobState; to: JobState }
  | { type: 'jobs.purged'; deleted: number; reason: 'retention' | 'request' }
  /**
   * A subscriber that had left its events unread for `stalledMs` was
   * disconnected to make room for a new subscription (`budget`: the one of
   * its address, or the total).
   */
  | {
      type: 'subscriber.dropped';
      connId: number;
      address: string | null;
      stalledMs: number;
      budget: 'address' | 'total';
    }
  | { type: 'coordinator.stalled'; stalledMs: number }
  /** A TASK_PROGRESS: taken (`accepted`), or ignored (stale lease, bad value) with the reason. */
  | { type: 'job.progress'; jobId: string; accepted: boolean; reason: string | null }
  /** A schedule's tick made a job (`lagMs` after the tick's time). */
  | { type: 'schedule.fired'; name: string; jobId: string; tickMs: number; lagMs: number }
  /** A due tick made no job: its previous job still runs, ticks missed during an outage, or the active limit. */
  | {
      type: 'schedule.skipped';
      name: string;
      tickMs: number;
      reason: 'overlap' | 'missed' | 'limit';
    }
  | { type: 'result.stale'; jobId: string; attemptId: string; workerId: string; reason: string }
  /** A call of an attempt (ENQUEUE_CHILD, ...) refused STALE_ATTEMPT: its lease is not current. */
  | {
      type: 'call.stale';
      call: string;
      jobId: string;
      attemptId: string;
      workerId: string;
      reason: string;
    };

/** Core settings (a subset of the coordinator's options). */
export interface CoreConfig {
  heartbeatTimeoutMs: number;
  taskTimeoutMs: number;
  defaultMaxAttempts: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
  maxActiveJobs: number;
  /** SCHEDULED jobs allowed at once (they do not count toward maxActiveJobs until due). */
  maxScheduledJobs: number;
  /** The near window of delayed jobs; absent = the defaults (scheduled-window.ts). */
  scheduledWindow?: ScheduledWindowConfig;
  agingStepMs: number;
  /** The sweep's period: a longer gap between ticks means the coordinator itself stalled. */
  sweepIntervalMs: number;
  /** Terminal jobs older than this are deleted in the background; null = kept forever. */
  retainTerminalMs: number | null;
  /** Pending WAIT_JOBs one connection may hold. */
  maxWaitsPerConnection: number;
  /** Pending WAIT_JOBs all connections together may hold. */
  maxWaits: number;
  /** Pending WAIT_JOBs the connections from one address may hold together. */
  maxWaitsPerAddress: number;
  /** SUBSCRIBE_JOBS subscriptions all connections together may hold. */
  maxSubscriptions: number;
  /** SUBSCRIBE_JOBS subscriptions the connections from one address may hold together. */
  maxSubscriptionsPerAddress: number;
  /**
   * A subscriber that has left events unread this long (ms) is dropped when
   * a newcomer would otherwise be refused for a full budget.
   */
  subscriberStallMs: number;
  /**
   * This core's shard of a sharded database; absent = no shards (every job
   * is this core's). With it, jobs of other shards (named by their ids,
   * protocol/shards.ts) are reached through the outbox (cross-shard.ts).
   */
  shard?: ShardPlace;
}

/** Where a core sits among the shards. */
export interface ShardPlace {
  readonly shard: number;
  readonly shards: number;
}

/**
 * Validates a built-in task's payload before a job exists (the coordinator's
 * task catalog). Custom task types are validated where their code lives: by
 * the worker that runs them.
 */
export interface PayloadValidator {
  /** Throws an error whose message is sent back (`Invalid payload: ...`). */
  validate(taskType: string, payload: JsonObject): void;
}

/**
 * Cron evaluation, injected so the core stays pure (the coordinator and the
 * simulation inject the same library-backed one, coordinator/cron.ts).
 */
export interface CronEvaluator {
  /** What is wrong with the expression or time zone; null when both are fine. */
  problem(expr: string, timezone: string): string | null;
  /** The first tick strictly after `afterMs` (epoch ms); null when there is none. */
  next(expr: string, timezone: string, afterMs: number): number | null;
}

/** Everything impure the core needs, injected. */
export interface CoreDeps {
  cron: CronEvaluator;
  /** Epoch milliseconds; read once per input. */
  now(): number;
  /**
   * A fresh unique id (job ids, attempt leases); with `shard`, a job id that
   * names that shard rather than this core's own (a flow's jobs of other
   * shards, made here: cross-shard.ts).
   */
  newId(shard?: number): string;
  validator: PayloadValidator;
}
