/**
 * One attempt the worker holds: from its TASK_ASSIGN to its result, its stop
 * or its abandonment. It owns what belongs to that attempt alone — its run
 * in the task pool, its deadline timer, its progress on the way out, its
 * trace span — and tells its {@link AttemptHost} (the worker) when it ends.
 *
 * States: `running` -> `ended` (the handler settled: its outcome is
 * reported), or -> `stopped` (cancel or deadline: its signal fired, its slot
 * is free, nothing it produces is reported), or -> `abandoned` (its
 * connection ended and no later session took it over). An attempt leaves
 * the worker's map exactly once, on the first of these.
 *
 * It belongs to one session (a worker talking to a sharded coordinator has
 * one per shard leader, see shard-map.ts): its result, progress and calls go
 * back on that session only, and only over the connection that assigned it
 * or took it back.
 */
import type { FramedConnection } from '../net/framed-connection.js';
import type { Logger } from '../observability/logger.js';
import { startAttemptSpan, type AttemptSpan, type loadOtel } from '../observability/tracing.js';
import type { Feature } from '../protocol/features.js';
import { PROGRESS_MESSAGES_PER_SECOND } from '../protocol/limits.js';
import type { JsonObject, TaskAssign } from '../protocol/messages.js';
import { DEFAULT_QUEUE } from '../protocol/queue-names.js';
import { traceContextOf } from '../protocol/trace-context.js';
import { MAX_TIMER_MS } from '../common/bounds.js';
import { ProgressThrottle } from './progress-throttle.js';
import type { StopOutcome, TaskHandle, TaskOutcome, TaskPool } from './task-pool.js';
import type { AbortReason, CallOutcome } from './thread-messages.js';

/** The session an attempt belongs to, as the attempt sees it. */
export interface AttemptSession {
  /** The session's open connection (registered or not yet); null between connections. */
  readonly connection: FramedConnection | null;
  /** What the session's coordinator offers. */
  readonly features: ReadonlySet<Feature>;
}

/** What an attempt needs of the worker, and tells it. */
export interface AttemptHost<S extends AttemptSession = AttemptSession> {
  readonly workerId: string;
  readonly log: Logger;
  /** The handler made a call (the message without its ids). */
  onCall(attempt: Attempt<S>, callId: number, call: JsonObject): void;
  /** The handler's code began. */
  onStarted(attempt: Attempt<S>): void;
  /** The handler settled by itself: its outcome is to be reported. */
  onEnded(attempt: Attempt<S>, outcome: TaskOutcome): void;
  /** A stopped attempt's thread is free of it, and how. */
  onStopped(attempt: Attempt<S>, reason: AbortReason, how: StopOutcome): void;
  /** The attempt's deadline passed here: the host stops it (the coordinator revokes it too). */
  onDeadline(attempt: Attempt<S>): void;
}

export type AttemptState = 'running' | 'ended' | 'stopped' | 'abandoned';

export class Attempt<S extends AttemptSession = AttemptSession> {
  readonly jobId: string;
  readonly attemptId: string;
  readonly attemptNumber: number;
  readonly taskType: string;
  /** The attempt's deadline from its assignment, in ms; null when the coordinator set none. */
  readonly timeoutMs: number | null;
  /** performance.now() at assignment. */
  readonly startedAtMs = performance.now();
  /**
   * The session it belongs to: the one that assigned it, or the one it was
   * handed to when that session closed (shard-map.ts).
   */
  session: S;
  /**
   * The session's connection: the one that assigned it, or the one of a later
   * session that took it back (`reattach`). The result goes back only there.
   */
  connection: FramedConnection;
  readonly #host: AttemptHost<S>;
  readonly #handle: TaskHandle;
  readonly #span: AttemptSpan | null;
  readonly #progress: ProgressThrottle | null;
  #deadlineTimer: NodeJS.Timeout | null = null;
  #state: AttemptState = 'running';
  /** performance.now() when it was stopped (0 before). */
  stoppedAtMs = 0;

  /** Starts the attempt `msg` assigned on `session`'s `connection`, in `pool` (isolated when its task type says so). */
  constructor(
    host: AttemptHost<S>,
    pool: TaskPool,
    session: S,
    connection: FramedConnection,
    msg: TaskAssign,
    context: { otel: Awaited<ReturnType<typeof loadOtel>>; isolated: boolean; local: boolean },
  ) {
    this.#host = host;
    this.session = session;
    this.connection = connection;
    this.jobId = msg.jobId;
    this.attemptId = msg.attemptId;
    this.attemptNumber = msg.attemptNumber;
    this.taskType = msg.taskType;
    const features = session.features;
    // Only a coordinator that offers assignLimits means these fields.
    const limits = features.has('assignLimits');
    this.timeoutMs = limits ? (msg.timeoutMillis ?? null) : null;
    // The job's trace context only from a session that asked for it (the worker always does).
    const jobTrace = traceContextOf(msg);
    this.#span = startAttemptSpan(context.otel, jobTrace, {
      jobId: msg.jobId,
      taskType: msg.taskType,
      attemptNumber: msg.attemptNumber,
      // Sent beside the trace context; absent = the default queue.
      queue: msg.queue ?? DEFAULT_QUEUE,
    });
    this.#progress = features.has('progress') ? this.#progressThrottle() : null;
    this.#handle = pool.run(
      {
        taskType: msg.taskType,
        payload: msg.payload,
        jobId: msg.jobId,
        attemptId: msg.attemptId,
        attemptNumber: msg.attemptNumber,
        maxAttempts: limits ? (msg.maxAttempts ?? null) : null,
        deadlineAtMs: this.timeoutMs === null ? null : Date.now() + this.timeoutMs,
        parents: features.has('parents') ? (msg.parents ?? null) : null,
        traceContext: this.#span?.context ?? jobTrace,
        // Durable steps only with a coordinator that offers them (null: ctx.step refuses).
        steps: features.has('steps') ? (msg.steps ?? []) : null,
        stepCount: features.has('steps') ? (msg.stepCount ?? null) : null,
        // Signal and event waits suspend as a sleep does: they need both.
        signals: features.has('steps') && features.has('signals'),
      },
      {
        isolated: context.isolated,
        local: context.local,
        onLog: this.#logSink(),
        onProgress: (fraction, message) => this.#progress?.report({ fraction, message }),
        onCall: (callId, call) => {
          if (this.#state === 'running') host.onCall(this, callId, call);
        },
      },
    );
    this.#armDeadline();
    void this.#handle.started.then((began) => {
      if (began && this.#state === 'running') host.onStarted(this);
    });
    void this.#handle.outcome.then((outcome) => this.#onOutcome(outcome));
  }

  get state(): AttemptState {
    return this.#state;
  }

  /** Answers one call its handler made (nothing once it left). */
  answerCall(callId: number, outcome: CallOutcome): void {
    if (this.#state === 'running') this.#handle.answerCall(callId, outcome);
  }

  /** Preempts the attempt: its signal fires, its result is never reported, its thread is freed. */
  stop(reason: AbortReason): void {
    if (this.#state !== 'running') return;
    this.stoppedAtMs = performance.now();
    this.#leave('stopped', reason === 'deadline' ? 'DEADLINE' : 'CANCELLED');
    void this.#handle.stop(reason).then((how) => this.#host.onStopped(this, reason, how));
  }

  /** Its connection ended and no session took it over: let it go, unreported. */
  abandon(): void {
    if (this.#state !== 'running') return;
    this.#leave('abandoned', 'CANCELLED', 'the worker let the attempt go');
    void this.#handle.stop('cancel');
  }

  #onOutcome(outcome: TaskOutcome): void {
    if (this.#state !== 'running') return; // stopped or abandoned: never reported
    // The last progress goes before the result.
    this.#progress?.flush();
    const status = outcome.success ? 'SUCCEEDED' : outcome.cancelled ? 'CANCELLED' : 'FAILED';
    this.#leave('ended', status, outcome.success ? undefined : outcome.error);
    this.#host.onEnded(this, outcome);
  }

  #leave(
    state: Exclude<AttemptState, 'running'>,
    status: Parameters<AttemptSpan['end']>[0],
    detail?: string,
  ): void {
    this.#state = state;
    if (this.#deadlineTimer !== null) clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = null;
    this.#progress?.dispose();
    this.#span?.end(status, detail);
  }

  /** The attempt's deadline passed here: stop it; the coordinator revokes it at the same deadline. */
  #armDeadline(): void {
    const timeoutMs = this.timeoutMs;
    if (timeoutMs === null) return;
    // Past the longest timer Node.js keeps, setTimeout would fire at once; a
    // deadline that far off (a coordinator sends at most a day) is as good as none.
    this.#deadlineTimer = setTimeout(
      () => {
        this.#deadlineTimer = null;
        if (this.#state !== 'running') return;
        const { jobId, attemptId } = this;
        this.#host.log.warn({ jobId, attemptId, timeoutMs }, 'deadline passed: stopping the task');
        this.#host.onDeadline(this);
      },
      Math.min(timeoutMs, MAX_TIMER_MS),
    );
  }

  /** Lines the handler logs, tagged with the attempt (a child logger made when first needed). */
  #logSink(): (
    level: 'debug' | 'info' | 'warn' | 'error',
    message: string,
    fields: Record<string, unknown>,
  ) => void {
    let log: Logger | null = null;
    return (level, message, fields) => {
      const { jobId, attemptId, taskType } = this;
      (log ??= this.#host.log.child({ jobId, attemptId, taskType }))[level](fields, message);
    };
  }

  /** Progress on its way out: a few a second at most, always the latest, only on its own connection. */
  #progressThrottle(): ProgressThrottle {
    return new ProgressThrottle(1_000 / PROGRESS_MESSAGES_PER_SECOND, (p) => {
      const connection = this.session.connection;
      if (this.connection !== connection || connection === null || this.#state !== 'running') {
        return;
      }
      connection.send({
        type: 'TASK_PROGRESS',
        workerId: this.#host.workerId,
        jobId: this.jobId,
        attemptId: this.attemptId,
        fraction: p.fraction,
        message: p.message,
      });
    });
  }
}
