/**
 * The task SDK: how users write their own task types.
 *
 * A task module is an ES module whose default export maps task names to
 * handlers. A handler is an async function `(payload, ctx) => result`, or an
 * object `{ run, schema? }` (what {@link defineTask} returns). The map key is
 * the task's name on the wire, used exactly as given:
 *
 *     import { defineTask, defineTasks, NonRetryableError } from 'dtp/worker';
 *     import { z } from 'zod';
 *
 *     export default defineTasks({
 *       checksum: defineTask({
 *         schema: z.object({ path: z.string() }),
 *         async run({ path }, ctx) { ... return { sha256, bytes }; },
 *       }),
 *       'emails.send': async (payload, ctx) => { ... },
 *     });
 *
 * A module need not import the SDK: a plain object of async functions works.
 * Schemas are any Standard Schema (zod 4, valibot, arktype, ...): the worker
 * validates the payload before running, the typed client before sending.
 *
 * This file holds only types and tiny helpers (and the two error classes),
 * no runtime dependency, so a client may `import type` a task module to type
 * its submissions without loading any handler code.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { MAX_RETRY_AFTER_MS } from '../protocol/limits.js';
import {
  RATE_LIMIT_SCOPES,
  type JsonObject,
  type JsonValue,
  type RateLimitScope,
} from '../protocol/messages.js';

/** Lines a handler logs, tagged with its job and attempt. */
export interface TaskLogger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** What a running attempt may look at. */
export interface TaskContext {
  readonly jobId: string;
  /** The attempt's lease (a fresh id per attempt). */
  readonly attemptId: string;
  /** 1-based. */
  readonly attemptNumber: number;
  /** The job's attempt limit (null when the coordinator did not say). */
  readonly maxAttempts: number | null;
  /**
   * Aborted when the attempt is cancelled or its deadline passes. A handler
   * that ignores it is terminated anyway after the worker's cancel grace.
   * Its `aborted` and `throwIfAborted()` see a cancel at once even while the
   * handler computes without yielding (they read a flag the worker shares
   * with the thread), so a CPU-bound loop that calls `throwIfAborted()` now
   * and then stops within one step and keeps its thread; `abort` listeners
   * fire then, or once the handler yields.
   */
  readonly signal: AbortSignal;
  /** Epoch ms at which the attempt's deadline passes (null when unknown). */
  readonly deadlineAtMs: number | null;
  readonly log: TaskLogger;
  /**
   * Reports how far the attempt is: `fraction` from 0 to 1, and an optional
   * message of at most 1 KiB (anything else throws a RangeError). Call it as
   * often as you like: the worker sends a few reports a second at most, and
   * always the latest; the job's snapshot shows it as `progress`, and keeps
   * the last one once the job ends.
   */
  progress(fraction: number, message?: string | null): void;
  /**
   * The job's parents (`submit --depends-on`, `dependsOn` of a flow), in the
   * order they were named; empty for a job without parents.
   */
  readonly parents: readonly ParentJob[];
  /**
   * Runs `fn` once for the job and records its value: a later attempt of
   * the same job (after a crash, a deadline, a retryable failure) gets the
   * recorded value back without running `fn`. The value must be JSON
   * (plain objects, arrays, strings, finite numbers, booleans, null); the
   * step resolves with it as JSON gives it back. Steps run one at a time,
   * each name once per run, and in the same order on every run: a replay
   * that meets another step where one was recorded fails the job
   * (`NON_DETERMINISTIC`, not retried).
   */
  step<T>(name: string, fn: () => T | Promise<T>): Promise<T>;
  /**
   * Sleeps without holding a slot: the attempt ends (not failed, not counted
   * toward maxAttempts) and the job is SCHEDULED until the time has passed;
   * then the handler runs again and, its steps replayed, this call returns
   * at once. `duration`: milliseconds, or a duration such as `"90s"`.
   */
  sleep(duration: number | string): Promise<void>;
  /**
   * Waits for another job to end, whatever its outcome, without holding a
   * slot: the job is WAITING meanwhile, as with `sleep`. Resolves with that
   * job's outcome.
   */
  waitFor(jobId: string): Promise<WaitOutcome>;
  /**
   * Waits, without holding a slot, for a signal of this name sent to the job
   * (`client.signal`, `POST /api/jobs/:id/signal`): resolves with the oldest
   * one the job holds that no earlier call took, or with null once
   * `options.timeout` has passed first. The job is WAITING meanwhile, as with
   * `waitFor`; the handler runs again when the signal comes, its steps
   * replayed, and this call returns the same signal on every later run.
   * `name`: as a queue name. Rejects with UNSUPPORTED_FEATURE when the
   * coordinator does not offer signals.
   */
  waitForSignal(name: string, options?: WaitForSignalOptions): Promise<ReceivedSignal | null>;
  /**
   * Waits, as {@link waitForSignal} does, for an event of this name (with
   * `options.key` when given) published after the wait began
   * (`client.publish`, `POST /api/events`); every job waiting for it wakes.
   * Resolves with the event, or null once `options.timeout` has passed.
   */
  waitForEvent(name: string, options?: WaitForEventOptions): Promise<ReceivedEvent | null>;
  /**
   * Submits a child job and resolves with its id; the child's snapshot names
   * this job as `parentJobId`, and this job's status lists its children. The
   * child is an ordinary job (it does not wait for this one). The same call
   * in a later attempt of this job resolves with the child made the first
   * time: the call is known by `options.key`, or, without one, by its place
   * among this attempt's calls without a key (the first is 0). Rejects with
   * a DtpError: UNSUPPORTED_FEATURE (the coordinator cannot), STALE_ATTEMPT
   * (this attempt no longer holds the job), CONNECTION_LOST (no answer came:
   * call again with the same key to learn whether it was made), CALL_ABORTED
   * (the attempt was stopped), TOO_MANY_CALLS (more than 64 waiting), or the
   * code a SUBMIT_JOB of it would be refused with.
   */
  enqueue(type: string, payload: JsonObject, options?: EnqueueOptions): Promise<string>;
}

/** Options of `ctx.enqueue`: the child's settings, as a submission's, and its key. */
export interface EnqueueOptions {
  /** The call's key among this job's children, 1..256 characters; absent: its ordinal. */
  key?: string;
  /** Absent: the coordinator's default. */
  maxAttempts?: number;
  /** Absent: NORMAL. */
  priority?: 'HIGH' | 'NORMAL' | 'LOW';
  /** Per-attempt execution deadline, in ms; absent: the coordinator's. */
  timeoutMillis?: number;
  /** The named queue; absent: `default`. */
  queue?: string;
  /** A group key within the queue; absent: none. */
  groupKey?: string;
  /** A delayed child's due time (epoch ms); absent: not delayed. */
  runAtMillis?: number;
}

/** Options of `ctx.waitForSignal`. */
export interface WaitForSignalOptions {
  /**
   * Give up after this long (then the call resolves with null): ms, or a
   * duration such as `"2h"`; more than 0, at most 366 days. Absent: never.
   */
  timeout?: number | string;
}

/** Options of `ctx.waitForEvent`. */
export interface WaitForEventOptions extends WaitForSignalOptions {
  /** Only an event published with this key, 1..256 characters; absent: any key. */
  key?: string;
}

/** A signal `ctx.waitForSignal` took (a type, so a handler can return it as JSON). */
export type ReceivedSignal = {
  readonly name: string;
  readonly payload: JsonValue;
  /** When it was sent, epoch ms. */
  readonly atMillis: number;
};

/** An event `ctx.waitForEvent` woke on. */
export type ReceivedEvent = {
  readonly name: string;
  readonly payload: JsonValue;
  /** The key it was published with; null = none. */
  readonly key: string | null;
  readonly eventId: string;
  /** When it was published, epoch ms. */
  readonly atMillis: number;
};

/**
 * How a job that `ctx.waitFor` waited for ended (a type, not an interface,
 * so a handler can return it as the JSON value it is).
 */
export type WaitOutcome = {
  readonly jobId: string;
  /** COMPLETED, FAILED or CANCELLED; null when no such job is known. */
  readonly state: string | null;
  /** Its result as `job.result()` gives it; null unless COMPLETED, or when `omitted`. */
  readonly result: JsonValue | null;
  readonly error: string | null;
  /** True when the result was too large to keep with the waiting job's steps. */
  readonly omitted: boolean;
};

/** One parent of the running job, as its handler reads it. */
export interface ParentJob {
  readonly jobId: string;
  readonly taskType: string;
  /** COMPLETED; FAILED or CANCELLED only for a job submitted with `onParentFailure: run`. */
  readonly state: string;
  /**
   * The parent's result as `job.result()` gives it (the handler's value);
   * null when it did not complete, or when `omitted`.
   */
  readonly result: JsonValue | null;
  /**
   * True when the result was too large to come with the assignment (all the
   * parents' results together are bounded); read it with a client's
   * `status(jobId)`.
   */
  readonly omitted: boolean;
}

/** A handler as a plain function. */
export type TaskFunction<P = never, R extends JsonValue | void = JsonValue | void> = (
  payload: P,
  ctx: TaskContext,
) => R | Promise<R>;

/** A handler as an object, with an optional payload schema. */
export interface TaskDefinition<P = never, R extends JsonValue | void = JsonValue | void> {
  /** Validates (and may transform) the payload before `run`; any Standard Schema. */
  readonly schema?: StandardSchemaV1<unknown, P>;
  /**
   * True: each attempt gets a task thread to itself while it runs, and a
   * cancel or deadline that the handler ignores ends that thread (for
   * CPU-bound work that never yields). Default: the attempt shares a few
   * task threads with many others, as async calls on their event loops.
   */
  readonly isolate?: boolean;
  run(payload: P, ctx: TaskContext): R | Promise<R>;
}

/**
 * Either form of handler, whatever its payload type: a function's parameter
 * is contravariant (so `never` admits every payload type), a definition's
 * schema output covariant (so `unknown` does).
 */
export type TaskHandler = TaskFunction<never> | TaskDefinition<unknown>;

/** A task module's default export. */
export type TaskMap = Readonly<Record<string, TaskHandler>>;

/** Defines one task; infers the payload type from the schema when there is one. */
export function defineTask<P, R extends JsonValue | void>(definition: {
  schema: StandardSchemaV1<unknown, P>;
  isolate?: boolean;
  run(payload: P, ctx: TaskContext): R | Promise<R>;
}): TaskDefinition<P, R>;
export function defineTask<P, R extends JsonValue | void>(definition: {
  isolate?: boolean;
  run(payload: P, ctx: TaskContext): R | Promise<R>;
}): TaskDefinition<P, R>;
export function defineTask<P, R extends JsonValue | void>(
  definition: TaskDefinition<P, R>,
): TaskDefinition<P, R> {
  return definition;
}

/** Types a task module's map; returns it unchanged. */
export function defineTasks<const T extends TaskMap>(tasks: T): T {
  return tasks;
}

/** The payload type a handler accepts. */
export type PayloadOf<H> =
  H extends TaskDefinition<infer P, JsonValue | void>
    ? P
    : H extends (payload: infer P, ctx: TaskContext) => unknown
      ? P
      : never;

/** The value a handler resolves with (what the typed client's `result()` gives back). */
export type ResultOf<H> = H extends { run(payload: never, ctx: TaskContext): infer R }
  ? Awaited<R>
  : H extends (payload: never, ctx: TaskContext) => infer R
    ? Awaited<R>
    : never;

/**
 * Throw this (or any error with `retryable: false`) to fail the job at once,
 * whatever attempts remain: the failure is one retrying cannot fix.
 */
export class NonRetryableError extends Error {
  readonly retryable = false;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NonRetryableError';
  }
}

/** What a rate-limited handler holds back: its job, its job's group, or its job's queue. */
export type { RateLimitScope };

/** The options of a {@link RateLimitedError}. */
export interface RateLimitedOptions {
  /** How long to wait before the job runs again, in ms: an integer, 1..86,400,000 (one day). */
  retryAfterMs: number;
  /**
   * What waits that long (default `job`): `job` only this job; `group` every
   * job of its group key in its queue; `queue` every job of its queue.
   * Attempts already running go on.
   */
  scope?: RateLimitScope;
  /** What the job's error says after `RATE_LIMITED: ` (default: the wait and the scope). */
  message?: string;
  cause?: unknown;
}

/**
 * Throw this when a service the handler calls says "too many requests": the
 * attempt ends without counting toward the job's attempts, and the job runs
 * again after `retryAfterMs`; with scope `group` or `queue`, nothing else of
 * that group or queue starts before then either. It needs a coordinator
 * that offers rate limits; another one sees an ordinary retryable failure
 * (which counts). The constructor throws a TypeError or RangeError for
 * options out of bounds.
 */
export class RateLimitedError extends Error {
  /** In ms, 1..86,400,000. */
  readonly retryAfterMs: number;
  readonly scope: RateLimitScope;

  constructor(options: RateLimitedOptions) {
    const { retryAfterMs, scope = 'job', message } = options;
    if (typeof retryAfterMs !== 'number' || !Number.isInteger(retryAfterMs)) {
      throw new TypeError(
        `retryAfterMs must be an integer number of ms, not ${String(retryAfterMs)}`,
      );
    }
    if (retryAfterMs < 1 || retryAfterMs > MAX_RETRY_AFTER_MS) {
      throw new RangeError(`retryAfterMs must be 1..${MAX_RETRY_AFTER_MS}, not ${retryAfterMs}`);
    }
    if (!RATE_LIMIT_SCOPES.includes(scope)) {
      throw new TypeError(
        `scope must be one of ${RATE_LIMIT_SCOPES.join(', ')}, not ${String(scope)}`,
      );
    }
    if (message !== undefined && typeof message !== 'string') {
      throw new TypeError('message must be a string');
    }
    const text = message ?? `retry after ${retryAfterMs} ms (scope ${scope})`;
    super(text, 'cause' in options ? { cause: options.cause } : undefined);
    this.name = 'RateLimitedError';
    this.retryAfterMs = retryAfterMs;
    this.scope = scope;
  }
}
