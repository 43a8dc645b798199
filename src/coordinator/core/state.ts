/**
 * The core's state and the small helpers every handler shares. Only the core
 * (this folder) touches it, and only while handling one input.
 *
 * Memory holds the non-terminal jobs (`jobs`) and nothing of history: a job
 * that reaches a terminal state is written to the store and dropped here, so
 * memory grows with the active-job limit, not with the number of jobs ever run.
 */
import type { ClientReply, CoordinatorToWorker, JobSnapshot } from '../../protocol/messages.js';
import type { JobRecord } from '../../store/store.js';
import { BinaryHeap } from './binary-heap.js';
import { ReadyQueue } from './ready-queue.js';
import type { CoreConfig, CoreDeps, CoreEvent, Effect } from './types.js';
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

export function jobSnapshot(job: Readonly<JobRecord>): JobSnapshot {
  return {
    jobId: job.jobId,
    taskType: job.taskType,
    state: job.state,
    attempts: job.attempts,
    maxAttempts: job.maxAttempts,
    workerId: job.state === 'RUNNING' ? job.workerId : null,
    result: job.state === 'COMPLETED' ? job.result : null,
    error: job.error,
    createdAtMillis: job.createdAtMs,
    updatedAtMillis: job.updatedAtMs,
    priority: job.priority,
    resultFormat: job.state === 'COMPLETED' ? job.resultFormat : null,
    timeoutMillis: job.timeoutMs,
  };
}

export class CoreState {
  readonly config: CoreConfig;
  readonly deps: CoreDeps;
  /** Non-terminal jobs by id. */
  readonly jobs = new Map<string, JobRecord>();
  /** Idempotency keys of non-terminal jobs (terminal ones are found in the store). */
  readonly keys = new Map<string, JobRecord>();
  readonly ready: ReadyQueue;
  readonly deadlines = new BinaryHeap<DueEntry>(byDueTime);
  readonly retries = new BinaryHeap<DueEntry>(byDueTime);
  readonly workers = new WorkerRegistry();
  /** Worker connections the core has closed; their late frames are ignored. */
  readonly closingConns = new Set<number>();
  /** Pending WAIT_JOB requests. */
  readonly waits = new WaitTable();
  /** Non-terminal job count, for admission control; O(1) to read. */
  activeCount = 0;
  nextSeq = 1;
  /** Time of the input being handled. */
  nowMs = 0;
  #effects: Effect[] = [];

  constructor(config: CoreConfig, deps: CoreDeps) {
    this.config = config;
    this.deps = deps;
    this.ready = new ReadyQueue(config.agingStepMs);
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

  close(connId: number, reason: string): void {
    this.closingConns.add(connId);
    this.#effects.push({ kind: 'close', connId, reason });
  }

  reply(connId: number, requestId: number, msg: ClientReply): void {
    this.#effects.push({ kind: 'reply', connId, requestId, msg });
  }

  replyError(connId: number, requestId: number, code: string, message: string): void {
    this.reply(connId, requestId, { type: 'ERROR', message, code });
  }

  armWait(connId: number, requestId: number, timeoutMs: number): void {
    this.#effects.push({ kind: 'armWait', connId, requestId, timeoutMs });
  }

  emit(event: CoreEvent): void {
    this.#effects.push({ kind: 'event', event });
  }

  /** Stages the job's current version in the store. */
  save(job: JobRecord): void {
    this.deps.store.updateJob(job);
  }

  /** An active job from memory, or any job from the store. */
  findJob(jobId: string): Readonly<JobRecord> | undefined {
    return this.jobs.get(jobId) ?? this.deps.store.getJob(jobId);
  }
}
