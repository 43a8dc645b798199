/**
 * A test harness around the pure coordinator core: a manual clock, a counting
 * id source, a MemoryStore, and short verbs for the messages workers and
 * clients send. After every input the harness does what the shell does, at
 * once: it runs the reads the core asked for (feeding their answers back),
 * commits the batch and reports it committed. Every effect is kept in `log`.
 */
import { createCronEvaluator } from '../../src/coordinator/cron.js';
import assert from 'node:assert/strict';
import { CoordinatorCore } from '../../src/coordinator/core/core.js';
import type {
  CoreConfig,
  CoreEvent,
  CoreInput,
  CronEvaluator,
  Effect,
} from '../../src/coordinator/core/types.js';
import type {
  ClientReply,
  ClientRequest,
  CoordinatorToWorker,
  DedupMode,
  EventWait,
  HeldAttempt,
  JobSnapshot,
  JsonObject,
  ParentFailurePolicy,
  Priority,
  RateLimitedResult,
  ResultFormat,
  SignalWait,
  TaskAssign,
} from '../../src/protocol/messages.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { JobRecord } from '../../src/store/store.js';
import { createBuiltinRegistry } from '../../src/tasks/builtin/index.js';

/** Settings most tests use; each test overrides what it is about. */
export const TEST_CONFIG: CoreConfig = {
  // Long enough that tests advancing the clock do not lose silent workers.
  heartbeatTimeoutMs: 3_600_000,
  taskTimeoutMs: 60_000,
  defaultMaxAttempts: 3,
  retryBaseDelayMs: 100,
  retryMaxDelayMs: 10_000,
  maxActiveJobs: 10_000,
  maxScheduledJobs: 1_000_000,
  agingStepMs: 3_600_000,
  // Tests jump the clock freely; a sweep period this long keeps those jumps
  // from looking like stalls of the coordinator (tests of stalls set it).
  sweepIntervalMs: 3_600_000,
  retainTerminalMs: null,
  maxWaitsPerConnection: 10_000,
  maxWaits: 100_000,
  maxWaitsPerAddress: 100_000,
  maxSubscriptions: 1_024,
  maxSubscriptionsPerAddress: 1_024,
  subscriberStallMs: 10_000,
};

/** The clock's value when a harness starts, in epoch ms. */
export const START_MS = 1_000_000;
/** The connection id client requests use unless told otherwise. */
export const CLIENT_CONN = 9_000;

export type EventOf<T extends CoreEvent['type']> = Extract<CoreEvent, { type: T }>;
export type EffectOf<K extends Effect['kind']> = Extract<Effect, { kind: K }>;
export type WorkerMessageOf<T extends CoordinatorToWorker['type']> = Extract<
  CoordinatorToWorker,
  { type: T }
>;
export type ReplyOf<T extends ClientReply['type']> = Extract<ClientReply, { type: T }>;

export function effectsOf<K extends Effect['kind']>(
  effects: readonly Effect[],
  kind: K,
): EffectOf<K>[] {
  return effects.filter((e): e is EffectOf<K> => e.kind === kind);
}

export function eventsOf<T extends CoreEvent['type']>(
  effects: readonly Effect[],
  type: T,
): EventOf<T>[] {
  return effectsOf(effects, 'event')
    .map((e) => e.event)
    .filter((e): e is EventOf<T> => e.type === type);
}

/** Messages sent to worker connections, optionally only of one type or to one connection. */
export function messagesOf<T extends CoordinatorToWorker['type']>(
  effects: readonly Effect[],
  type: T,
  connId?: number,
): WorkerMessageOf<T>[] {
  return effectsOf(effects, 'send')
    .filter((e) => connId === undefined || e.connId === connId)
    .map((e) => e.msg)
    .filter((m): m is WorkerMessageOf<T> => m.type === type);
}

/** Every message sent to one connection, in order. */
export function sentTo(effects: readonly Effect[], connId: number): CoordinatorToWorker[] {
  return effectsOf(effects, 'send')
    .filter((e) => e.connId === connId)
    .map((e) => e.msg);
}

export function repliesOf(effects: readonly Effect[]): ClientReply[] {
  return effectsOf(effects, 'reply').map((e) => e.msg);
}

/** Narrows a reply to the expected type, failing the test with the reply otherwise. */
export function expectReply<T extends ClientReply['type']>(
  reply: ClientReply | undefined,
  type: T,
): ReplyOf<T> {
  assert.ok(reply !== undefined, `expected a ${type} reply, got none`);
  assert.equal(reply.type, type, `expected ${type}, got ${JSON.stringify(reply).slice(0, 300)}`);
  return reply as ReplyOf<T>;
}

/**
 * Re-runs the FAILED jobs of `default` with a budget of one attempt, and
 * checks that `jobId` (one counted attempt used, whatever else it went
 * through) gets two in all: the re-run's attempt, failed, is its last.
 */
export function rerunWithOneMore(h: CoreHarness, jobId: string): void {
  const reply = h.request({
    type: 'RERUN_JOBS',
    queue: 'default',
    state: 'FAILED',
    maxAttempts: 1,
  });
  assert.equal(expectReply(reply, 'JOBS_RERUN').rerun, 1);
  assert.equal(h.record(jobId).maxAttempts, 2, '1 counted + a budget of 1');
  h.result(jobId, { success: false, error: 'boom again' });
  assert.equal(h.status(jobId).error, 'boom again (all 2 attempts used)');
}

export interface SubmitOptions {
  taskType?: string;
  payload?: JsonObject;
  maxAttempts?: number | null;
  idempotencyKey?: string | null;
  priority?: Priority | null;
  timeoutMillis?: number;
  dependsOn?: string[];
  onParentFailure?: ParentFailurePolicy;
  /** A delayed job's due time. */
  runAtMillis?: number;
  queue?: string;
  groupKey?: string;
  dedupKey?: string;
  dedupMode?: DedupMode;
  dedupWindowMillis?: number;
  expiresAtMillis?: number;
}

export interface ResultOptions {
  success?: boolean;
  result?: string | null;
  error?: string | null;
  retryable?: boolean;
  resultFormat?: ResultFormat;
  /** Defaults to the job's latest assignment. */
  attemptId?: string;
  /** Defaults to the worker of the job's latest assignment. */
  workerId?: string;
  /** Extension `requeue`: cut off through no doing of its own. */
  requeue?: boolean;
  /** Extension `rateLimits`: the handler was rate limited. */
  rateLimited?: RateLimitedResult;
}

export interface HarnessOptions {
  config?: Partial<CoreConfig>;
  store?: MemoryStore;
  startMs?: number;
  /** The cron evaluator (default: the coordinator's, croner). */
  cron?: CronEvaluator;
}

export class CoreHarness {
  readonly config: CoreConfig;
  readonly store: MemoryStore;
  core: CoordinatorCore;
  clock: number;
  readonly #cron: CronEvaluator;
  /** Every effect of every input (recovery events included), in order. */
  readonly log: Effect[] = [];
  /** Effects of the latest input. */
  last: Effect[] = [];
  #nextId = 1;
  /** The latest batch committed by the current core (what an outbox read has seen). */
  #lastCommitted = 0;
  #nextConn = 1;
  #nextRequest = 1;
  readonly #connByWorker = new Map<string, number>();
  readonly #workerByConn = new Map<number, string>();

  constructor(options: HarnessOptions = {}) {
    this.config = { ...TEST_CONFIG, ...options.config };
    this.store = options.store ?? new MemoryStore();
    this.clock = options.startMs ?? START_MS;
    this.#cron = options.cron ?? createCronEvaluator();
    this.core = this.#build();
  }

  #build(epoch?: number): CoordinatorCore {
    // With a near window configured, recovery reads it as the term does.
    const window = this.config.scheduledWindow;
    const stored = this.store.recoverNow(
      window && { untilMs: this.clock + window.windowMs, limit: window.limit },
    );
    this.#lastCommitted = 0;
    const place = this.config.shard;
    const core = new CoordinatorCore(
      this.config,
      {
        now: () => this.clock,
        // With shards, an id names its shard in its last three hex digits
        // (protocol/shards.ts), and the shard that made it (another
        // shard's harness counts from 1 too): `id-<maker>.<n>-s<shard>`.
        newId: (shard?: number) =>
          place === undefined
            ? `id-${this.#nextId++}`
            : `id-${place.shard}.${this.#nextId++}-s${(shard ?? place.shard).toString(16).padStart(3, '0')}`,
        validator: createBuiltinRegistry(),
        cron: this.#cron,
      },
      epoch === undefined ? stored : { ...stored, epoch },
    );
    this.core = core;
    this.last = this.#settle(core.takeRecoveryEffects());
    this.log.push(...this.last);
    return core;
  }

  /**
   * Simulates a coordinator restart: a new core recovers from what the store
   * has committed (the harness commits after every input, so that is
   * everything). Returns the recovery's effects. With `epoch`, the new core
   * recovers as a leadership term of a shared store would (a failover).
   */
  restart(epoch?: number): Effect[] {
    this.#connByWorker.clear();
    this.core = this.#build(epoch);
    return this.last;
  }

  handle(input: CoreInput): Effect[] {
    const effects = this.#settle(this.core.handle(input));
    this.last = effects;
    this.log.push(...effects);
    return effects;
  }

  /**
   * Does what the shell does with a batch of effects, synchronously: answers
   * reads (their answers' effects join the list), commits the writes and
   * reports them committed.
   */
  #settle(first: Effect[]): Effect[] {
    const effects: Effect[] = [];
    const todo = [...first];
    // Reads marked afterCommit run once this input's batch is committed.
    const afterCommit: EffectOf<'read'>[] = [];
    for (let effect = todo.shift(); effect !== undefined; effect = todo.shift()) {
      effects.push(effect);
      if (effect.kind !== 'read') continue;
      if (this.holdReads) {
        this.#heldReads.push(effect);
        continue;
      }
      if (effect.afterCommit === true) afterCommit.push(effect);
      else todo.push(...this.core.handle(this.#answer(effect)));
    }
    const batch = this.core.takeBatch();
    if (batch !== null) {
      this.store.commitNow(batch);
      this.#lastCommitted = batch.batchId;
      effects.push(...this.core.handle({ kind: 'committed', batchId: batch.batchId }));
    }
    for (const read of afterCommit)
      effects.push(...this.#settle(this.core.handle(this.#answer(read))));
    return effects;
  }

  /**
   * While true, reads the core asks for wait (in order) until
   * {@link answerHeldReads}: a test can then act while a read is out.
   */
  holdReads = false;
  readonly #heldReads: EffectOf<'read'>[] = [];

  /** Reads held so far. */
  get heldReads(): readonly EffectOf<'read'>[] {
    return this.#heldReads;
  }

  /** Answers the held reads (from the store as it is now), one input each; returns all effects. */
  answerHeldReads(fail = false): Effect[] {
    const effects: Effect[] = [];
    for (let read = this.#heldReads.shift(); read !== undefined; read = this.#heldReads.shift()) {
      const input: CoreInput = fail
        ? { kind: 'readFailed', readId: read.readId, message: 'disk I/O error' }
        : this.#answer(read);
      effects.push(...this.handle(input));
    }
    return effects;
  }

  #answer(read: EffectOf<'read'>): CoreInput {
    try {
      return { kind: 'readDone', readId: read.readId, result: this.store.readNow(read.read) };
    } catch (err) {
      return { kind: 'readFailed', readId: read.readId, message: String(err) };
    }
  }

  /**
   * What a shard's term does on its outbox poll: reads the messages to this
   * shard from the store's shared outbox (MemoryOutbox) and hands them to
   * the core as one input, saying which batches had committed before the
   * read. Returns its effects (none when there was no message).
   */
  deliverOutbox(limit = 100): Effect[] {
    const place = this.config.shard;
    assert.ok(place !== undefined, 'deliverOutbox needs a harness with a shard');
    const messages = this.store.readOutboxNow(place.shard, 0, limit);
    if (messages.length === 0) return [];
    return this.handle({
      kind: 'outboxMessages',
      messages,
      committedThrough: this.#lastCommitted,
    });
  }

  /** Connection id of a worker's latest registration. */
  connOf(workerId: string): number {
    const connId = this.#connByWorker.get(workerId);
    assert.ok(connId !== undefined, `worker ${workerId} never registered`);
    return connId;
  }

  newConn(): number {
    return this.#nextConn++;
  }

  /** Registers a worker on a fresh connection; returns the connection id. */
  register(
    workerId: string,
    capacity = 1,
    taskTypes: string[] | null = null,
    extensions: {
      heartbeatAck?: boolean;
      prefetch?: number;
      heldAttempts?: HeldAttempt[];
      queues?: string[];
      parents?: boolean;
      traceContext?: boolean;
      steps?: boolean;
      slots?: number;
      moreHeld?: boolean;
    } = {},
  ): number {
    const connId = this.newConn();
    this.#connByWorker.set(workerId, connId);
    this.#workerByConn.set(connId, workerId);
    this.handle({
      kind: 'workerMessage',
      connId,
      msg: { type: 'WORKER_REGISTER', workerId, capacity, taskTypes, ...extensions },
    });
    return connId;
  }

  heartbeat(workerId: string): Effect[] {
    return this.handle({
      kind: 'workerMessage',
      connId: this.connOf(workerId),
      msg: { type: 'HEARTBEAT', workerId },
    });
  }

  closeWorker(workerId: string, reason = 'connection reset'): Effect[] {
    return this.handle({ kind: 'workerClosed', connId: this.connOf(workerId), reason });
  }

  /** Sends a client request; returns its single reply (undefined for a pending wait). */
  request(
    msg: ClientRequest,
    connId = CLIENT_CONN,
    requestId = this.#nextRequest++,
  ): ClientReply | undefined {
    const effects = this.handle({ kind: 'clientRequest', connId, requestId, msg });
    const replies = effectsOf(effects, 'reply').filter(
      (e) => e.connId === connId && e.requestId === requestId,
    );
    assert.ok(replies.length <= 1, 'a request got more than one reply');
    return replies[0]?.msg;
  }

  /**
   * A request that asks the store about key "k" loses the race for it: the
   * store says "k" is free, then a single submission of "k" (sent first)
   * makes its job, which expires at once, ends, commits and leaves memory;
   * only then is the request's other read answered. `other` sends the
   * request, given the single submission's fields, and must hold two reads
   * ("k" first). Returns the job made, the request's id and the effects of
   * its last read's answer (where its reply is).
   */
  loseKeyToExpiringJob(
    other: (spec: { idempotencyKey: string; payload: JsonObject; expiresAtMillis: number }) => void,
  ): {
    made: string;
    requestId: number;
    effects: Effect[];
  } {
    const spec = {
      idempotencyKey: 'k',
      payload: { durationMillis: 5 },
      expiresAtMillis: START_MS + 100,
    };
    this.holdReads = true;
    this.submitRequest(spec); // held: the store is asked about "k"
    const requestId = this.peekRequestId();
    other(spec);
    const [single, keyRead, otherRead] = this.heldReads;
    assert.ok(single !== undefined && keyRead !== undefined && otherRead !== undefined);
    this.holdReads = false;
    const answer = (read: EffectOf<'read'>): Effect[] =>
      this.handle({ kind: 'readDone', readId: read.readId, result: this.store.readNow(read.read) });
    answer(keyRead); // "k" is free in the store
    this.clock += 100;
    const made = eventsOf(answer(single), 'job.submitted')[0]?.jobId;
    assert.ok(made !== undefined);
    assert.equal(this.status(made).expired, true);
    return { made, requestId, effects: answer(otherRead) };
  }

  /** The next request id the harness would use. */
  peekRequestId(): number {
    return this.#nextRequest;
  }

  submitRequest(options: SubmitOptions = {}): ClientReply | undefined {
    return this.request({
      type: 'SUBMIT_JOB',
      taskType: options.taskType ?? 'SLEEP',
      payload: options.payload ?? { durationMillis: 10 },
      maxAttempts: options.maxAttempts ?? null,
      idempotencyKey: options.idempotencyKey ?? null,
      priority: options.priority ?? null,
      timeoutMillis: options.timeoutMillis ?? null,
      ...(options.dependsOn === undefined ? {} : { dependsOn: options.dependsOn }),
      ...(options.onParentFailure === undefined
        ? {}
        : { onParentFailure: options.onParentFailure }),
      ...(options.runAtMillis !== undefined && { runAtMillis: options.runAtMillis }),
      ...(options.queue !== undefined && { queue: options.queue }),
      ...(options.groupKey !== undefined && { groupKey: options.groupKey }),
      ...(options.dedupKey !== undefined && { dedupKey: options.dedupKey }),
      ...(options.dedupMode !== undefined && { dedupMode: options.dedupMode }),
      ...(options.dedupWindowMillis !== undefined && {
        dedupWindowMillis: options.dedupWindowMillis,
      }),
      ...(options.expiresAtMillis !== undefined && { expiresAtMillis: options.expiresAtMillis }),
    });
  }

  /** Submits a job (SLEEP 10 ms by default) and returns its id from the reply. */
  submit(options: SubmitOptions = {}): string {
    return expectReply(this.submitRequest(options), 'JOB_SUBMITTED').jobId;
  }

  status(jobId: string): JobSnapshot {
    return expectReply(this.request({ type: 'GET_JOB_STATUS', jobId }), 'JOB_STATUS').job;
  }

  /** The job's record: from the core's memory while active, else from the store. */
  record(jobId: string): Readonly<JobRecord> {
    const active = this.core.activeJobs().find((j) => j.jobId === jobId);
    const job = active ?? this.store.committedJob(jobId);
    assert.ok(job !== undefined, `job ${jobId} is unknown`);
    return job;
  }

  /** Every TASK_ASSIGN of a job so far, with the connection it went to. */
  assignmentsOf(jobId: string): (TaskAssign & { connId: number })[] {
    return effectsOf(this.log, 'send')
      .filter((e) => e.msg.type === 'TASK_ASSIGN' && e.msg.jobId === jobId)
      .map((e) => ({ ...(e.msg as TaskAssign), connId: e.connId }));
  }

  /** The latest TASK_ASSIGN of a job (fails if it was never assigned). */
  assignmentOf(jobId: string): TaskAssign & { connId: number; workerId: string } {
    const all = this.assignmentsOf(jobId);
    const latest = all[all.length - 1];
    assert.ok(latest !== undefined, `job ${jobId} was never assigned`);
    const workerId = this.#workerByConn.get(latest.connId);
    assert.ok(workerId !== undefined, `no worker for connection ${latest.connId}`);
    return { ...latest, workerId };
  }

  /** Sends a TASK_RESULT for the job's latest assignment (success by default). */
  result(jobId: string, options: ResultOptions = {}): Effect[] {
    const assigned = this.assignmentOf(jobId);
    const workerId = options.workerId ?? assigned.workerId;
    const success = options.success ?? true;
    return this.handle({
      kind: 'workerMessage',
      connId: this.connOf(workerId),
      msg: {
        type: 'TASK_RESULT',
        workerId,
        jobId,
        attemptId: options.attemptId ?? assigned.attemptId,
        success,
        result: options.result !== undefined ? options.result : success ? 'ok' : null,
        error: options.error !== undefined ? options.error : success ? null : 'boom',
        retryable: options.retryable ?? null,
        resultFormat: options.resultFormat ?? null,
        ...(options.requeue !== undefined && { requeue: options.requeue }),
        ...(options.rateLimited !== undefined && { rateLimited: options.rateLimited }),
      },
    });
  }

  /**
   * Sends a TASK_SUSPEND for the job's latest assignment, from its worker:
   * a sleep, or a wait for a job, a signal or an event.
   */
  suspend(
    jobId: string,
    how:
      | { sleepMillis: number }
      | { waitForJobId: string }
      | { waitForSignal: SignalWait }
      | { waitForEvent: EventWait },
  ): Effect[] {
    const { attemptId, workerId } = this.assignmentOf(jobId);
    return this.handle({
      kind: 'workerMessage',
      connId: this.connOf(workerId),
      msg: { type: 'TASK_SUSPEND', workerId, jobId, attemptId, ...how },
    });
  }

  /** Sends a HELD_ATTEMPTS on the worker's latest connection. */
  held(workerId: string, heldAttempts: HeldAttempt[], more: boolean): Effect[] {
    return this.handle({
      kind: 'workerMessage',
      connId: this.connOf(workerId),
      msg: { type: 'HELD_ATTEMPTS', workerId, heldAttempts, more },
    });
  }

  /** Advances the clock by `advanceMs` and delivers a tick. */
  tick(advanceMs = 0): Effect[] {
    this.clock += advanceMs;
    return this.handle({ kind: 'tick' });
  }

  /** Events of one type emitted so far (or in `effects`). */
  events<T extends CoreEvent['type']>(
    type: T,
    effects: readonly Effect[] = this.log,
  ): EventOf<T>[] {
    return eventsOf(effects, type);
  }

  /** Running job ids per worker id, from the core's view. */
  running(): Map<string, string[]> {
    return new Map(this.core.inspect().workers.map((w) => [w.workerId, [...w.running].sort()]));
  }
}
