/**
 * What goes into the core and what comes out of it.
 *
 * Inputs are decoded messages, connection ends and clock ticks. Effects are
 * frames to send, connections to close, timers for the shell to arm, and
 * events to log and count. The core never performs an effect itself: the
 * shell first commits the store, then releases the effects, so nothing that
 * depends on a state change leaves the process before the change is durable.
 */
import type {
  ClientReply,
  ClientRequest,
  CoordinatorToWorker,
  JobState,
  JsonObject,
  Priority,
  WorkerToCoordinator,
} from '../../protocol/messages.js';
import type { Store } from '../../store/store.js';

export type CoreInput =
  /** A decoded frame from a worker connection. */
  | { kind: 'workerMessage'; connId: number; msg: WorkerToCoordinator }
  /** A worker connection broke the protocol (already unreadable). */
  | { kind: 'workerViolation'; connId: number; reason: string }
  /** A worker connection ended. */
  | { kind: 'workerClosed'; connId: number; reason: string }
  /** A client request; `requestId` orders replies on its connection. */
  | { kind: 'clientRequest'; connId: number; requestId: number; msg: ClientRequest }
  /** A client connection ended (its waits are dropped). */
  | { kind: 'clientClosed'; connId: number }
  /** The timer armed by an `armWait` effect fired. */
  | { kind: 'waitExpired'; connId: number; requestId: number }
  /** Periodic sweep: heartbeats, deadlines, retries, scheduling. */
  | { kind: 'tick' };

export type Effect =
  | { kind: 'send'; connId: number; msg: CoordinatorToWorker }
  /** Close a worker connection after what was sent before it. */
  | { kind: 'close'; connId: number; reason: string }
  | { kind: 'reply'; connId: number; requestId: number; msg: ClientReply }
  /** Feed `waitExpired` for this request after `timeoutMs`. */
  | { kind: 'armWait'; connId: number; requestId: number; timeoutMs: number }
  | { kind: 'event'; event: CoreEvent };

/** Why an attempt did not succeed. */
export type AttemptFailureCause =
  | 'worker_lost'
  /** The worker announced WORKER_DRAINING and left with the attempt unfinished. */
  | 'released'
  | 'deadline'
  | 'task_failure'
  /** The worker reported a failure that retrying cannot fix (`TASK_RESULT.retryable: false`). */
  | 'non_retryable'
  | 'restart';

export type CoreEvent =
  | {
      type: 'worker.registered';
      workerId: string;
      capacity: number;
      connId: number;
      /** What it declared; null = the five built-ins (a v1 worker). */
      taskTypes: string[] | null;
    }
  | { type: 'worker.rejected'; connId: number; reason: string }
  | { type: 'worker.suspected'; workerId: string; silentMs: number }
  | { type: 'worker.lost'; workerId: string; reason: string; runningJobs: number }
  | { type: 'worker.draining'; workerId: string; runningJobs: number }
  | {
      type: 'job.submitted';
      jobId: string;
      taskType: string;
      priority: Priority;
      maxAttempts: number;
      idempotencyKey: string | null;
    }
  | { type: 'job.deduplicated'; jobId: string; idempotencyKey: string }
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
  | { type: 'result.stale'; jobId: string; attemptId: string; workerId: string; reason: string };

/** Core settings (a subset of the coordinator's options). */
export interface CoreConfig {
  heartbeatTimeoutMs: number;
  taskTimeoutMs: number;
  defaultMaxAttempts: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
  maxActiveJobs: number;
  agingStepMs: number;
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

/** Everything impure the core needs, injected. */
export interface CoreDeps {
  /** Epoch milliseconds; read once per input. */
  now(): number;
  /** A fresh unique id (job ids, attempt leases). */
  newId(): string;
  store: Store;
  validator: PayloadValidator;
}
