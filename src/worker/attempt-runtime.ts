/**
 * Runs task attempts on the thread it lives on, any number at once: each
 * attempt is one async call of its handler with its own `ctx` and signal
 * ({@link RunningAttempt}). The host (a task thread, see task-thread.ts)
 * hands it RUN_TASK, ABORT_TASK and CALL_SETTLED and sends the outputs on.
 *
 * For each attempt the runtime sends TASK_STARTED once the payload is valid
 * and the handler begins, any number of TASK_LOG, TASK_PROGRESS and
 * TASK_CALL, then exactly one final output: TASK_SUCCEEDED, TASK_FAILED or
 * TASK_SUSPENDED. Any failure inside the task, an invalid payload or a
 * module that did not load included, is TASK_FAILED; only a real crash (an
 * uncaught error outside a handler's promise, `process.exit`) ends the thread.
 * A RateLimitedError leaves as TASK_FAILED with its wait and scope as data:
 * the main thread never sees the error object.
 *
 * A stopped attempt's signal fires (ABORT_TASK), and a handler that computes
 * without yielding sees the stop anyway through the attempt's stop slot in
 * shared memory, read whenever it looks at `ctx.signal.aborted` or calls
 * `throwIfAborted()`.
 */
import { runInTraceContext } from '../observability/tracing.js';
import { describeError } from '../protocol/errors.js';
import { MAX_RETRY_AFTER_MS, clipError } from '../protocol/limits.js';
import { RATE_LIMIT_SCOPES, type JsonObject, type RateLimitScope } from '../protocol/messages.js';
import { createBuiltinRegistry } from '../tasks/builtin/index.js';
import { UnknownTaskTypeError } from '../tasks/registry.js';
import { AttemptContext, type OutputSink } from './attempt-context.js';
import { importHandlers, type Handler } from './task-modules.js';
import { encodeResult } from './task-values.js';
import { AttemptCalls } from './thread-calls.js';
import { AttemptSteps, type Suspension } from './thread-steps.js';
import type {
  AbortReason,
  CallOutcome,
  FinalOutput,
  RunTaskInput,
  ThreadOutput,
} from './thread-messages.js';

/** Where the runtime's outputs go, and how a stop raised in shared memory is read. */
export interface RuntimeHost {
  reply(requestId: number, output: ThreadOutput): void;
  /**
   * Called between an attempt's TASK_STARTED and its handler's first line:
   * the host may send what is waiting now (a handler that never yields
   * would hold it back for good).
   */
  beforeHandler(): void;
  /** Why the attempt `requestId` in `slot` was asked to stop, or null. */
  stopRaised(slot: number, requestId: number): AbortReason | null;
}

/**
 * One attempt running here: its open calls, and its signal, made only when
 * the handler first reads `ctx.signal` (most never do; an AbortController
 * per attempt is not free). A stop that comes first is kept, and a signal
 * made afterwards starts aborted.
 */
class RunningAttempt {
  readonly requestId: number;
  readonly send: OutputSink;
  readonly #slot: number;
  readonly #host: RuntimeHost;
  #controller: AbortController | null = null;
  #stopped: AbortReason | null = null;
  /** Made when the handler first calls out (most never do); closed with the attempt. */
  #calls: AttemptCalls | null = null;
  #callsClosed: string | null = null;

  constructor(requestId: number, slot: number, host: RuntimeHost) {
    this.requestId = requestId;
    this.#slot = slot;
    this.#host = host;
    this.send = (output) => host.reply(requestId, output);
  }

  /** The attempt's calls to the coordinator (thread-calls.ts). */
  get calls(): AttemptCalls {
    if (this.#calls === null) {
      this.#calls = new AttemptCalls((callId, call) =>
        this.send({ type: 'TASK_CALL', callId, call }),
      );
      if (this.#callsClosed !== null) this.#calls.close(this.#callsClosed);
    }
    return this.#calls;
  }

  /** Every open call of the attempt fails with `reason`, and every later one. */
  closeCalls(reason: string): void {
    this.#callsClosed ??= reason;
    this.#calls?.close(reason);
  }

  /** The attempt's `ctx.signal` (see {@link watchedSignal}). */
  get signal(): AbortSignal {
    if (this.#controller === null) {
      const controller = new AbortController();
      if (this.#stopped !== null) controller.abort(abortError(this.#stopped));
      watchedSignal(controller, () => this.#pollStop());
      this.#controller = controller;
    }
    return this.#controller.signal;
  }

  /** True once stopped, by ABORT_TASK or by the stop slot (read now). */
  get stopped(): boolean {
    this.#pollStop();
    return this.#stopped !== null;
  }

  /** The attempt was cancelled or its deadline passed: its signal fires, its open calls fail. */
  stop(reason: AbortReason): void {
    if (this.#stopped !== null) return;
    this.#stopped = reason;
    // A stopped attempt gets no answers any more: its open calls fail now.
    this.closeCalls('the attempt was stopped before the coordinator answered');
    this.#controller?.abort(abortError(reason));
  }

  #pollStop(): void {
    if (this.#stopped !== null) return;
    const reason = this.#host.stopRaised(this.#slot, this.requestId);
    if (reason !== null) this.stop(reason);
  }
}

function builtinHandlers(): Map<string, Handler> {
  const registry = createBuiltinRegistry();
  const handlers = new Map<string, Handler>();
  for (const taskType of registry.taskTypes) {
    const definition = registry.require(taskType);
    handlers.set(taskType, {
      validate: (payload) => {
        definition.validate(payload as JsonObject);
        return payload;
      },
      run: (payload, ctx) => definition.run(payload as JsonObject, ctx),
      isolate: definition.isolate === true,
    });
  }
  return handlers;
}

/** The built-ins and every module's tasks; a module that fails to load fails each task. */
export function loadHandlers(
  modules: readonly { specifier: string; url: string }[],
): Promise<Map<string, Handler>> {
  const loaded = importHandlers(modules).then(
    (custom) => new Map([...builtinHandlers(), ...custom]),
  );
  loaded.catch(() => undefined); // reported per task, never as an unhandled rejection
  return loaded;
}

export class AttemptRuntime {
  readonly #host: RuntimeHost;
  readonly #handlers: Promise<Map<string, Handler>>;
  /** The table once loaded: later attempts look it up without waiting a turn. */
  #loaded: Map<string, Handler> | null = null;
  readonly #running = new Map<number, RunningAttempt>();

  constructor(host: RuntimeHost, handlers: Promise<Map<string, Handler>>) {
    this.#host = host;
    this.#handlers = handlers;
    handlers.then(
      (table) => (this.#loaded = table),
      () => undefined,
    );
  }

  /** Attempts running here now. */
  get runningCount(): number {
    return this.#running.size;
  }

  /** Runs one attempt to its end; its final output is sent before this resolves. */
  async run(requestId: number, slot: number, input: RunTaskInput): Promise<void> {
    const attempt = new RunningAttempt(requestId, slot, this.#host);
    this.#running.set(requestId, attempt);
    try {
      const output = await this.#runAttempt(attempt, input);
      attempt.closeCalls('the attempt ended before the coordinator answered');
      attempt.send(output);
    } finally {
      this.#running.delete(requestId);
    }
  }

  abort(requestId: number, reason: AbortReason): void {
    this.#running.get(requestId)?.stop(reason);
  }

  settleCall(requestId: number, callId: number, outcome: CallOutcome): void {
    this.#running.get(requestId)?.calls.settle(callId, outcome);
  }

  async #runAttempt(attempt: RunningAttempt, input: RunTaskInput): Promise<FinalOutput> {
    let steps: AttemptSteps | null = null;
    try {
      const table = this.#loaded ?? (await this.#handlers);
      const handler = table.get(input.taskType);
      if (handler === undefined) throw new UnknownTaskTypeError(input.taskType, [...table.keys()]);
      const checked = handler.validate(input.payload);
      // A schema may check asynchronously; a plain value costs no turn.
      const payload: unknown = isThenable(checked) ? await checked : checked;
      // Stopped while its modules loaded: the handler never starts.
      if (attempt.stopped)
        return { type: 'TASK_FAILED', error: 'stopped before it started', retryable: true };
      attempt.send({ type: 'TASK_STARTED' });
      this.#host.beforeHandler();
      // A sleep or wait past the recorded steps ends the attempt without the handler
      // (only with a coordinator that offers steps; without, nothing can suspend).
      let suspended: (suspension: Suspension) => void = () => undefined;
      let suspension: Promise<Suspension> | null = null;
      if (input.steps !== undefined && input.steps !== null) {
        suspension = new Promise<Suspension>((resolve) => (suspended = resolve));
        steps = new AttemptSteps({
          // The attempt's calls are made only if a step needs one.
          calls: { call: (call) => attempt.calls.call(call) },
          jobId: input.jobId,
          recorded: input.steps,
          total: input.stepCount ?? input.steps.length,
          onSuspend: (s) => suspended(s),
          signals: input.signals === true,
        });
      }
      // The handler's own spans (if the task module set up OpenTelemetry) nest in the attempt's.
      const handling = runInTraceContext(input.traceContext ?? null, () =>
        handler.run(payload, new AttemptContext(attempt, input, steps)),
      );
      const ended =
        suspension === null
          ? { value: await handling }
          : await Promise.race([
              Promise.resolve(handling).then((value: unknown) => ({ value })),
              suspension.then((how) => ({ suspend: how })),
            ]);
      if (steps?.poison != null)
        return { type: 'TASK_FAILED', error: steps.poison, retryable: false };
      if ('suspend' in ended) return { type: 'TASK_SUSPENDED', ...ended.suspend };
      return { type: 'TASK_SUCCEEDED', ...encodeResult(ended.value) };
    } catch (err) {
      // A replay that went another way fails for good, whatever the handler made of it.
      if (steps?.poison != null)
        return { type: 'TASK_FAILED', error: steps.poison, retryable: false };
      return failureOf(err);
    }
  }
}

/** What an attempt's signal is aborted with: the conventions of AbortSignal.timeout(). */
function abortError(reason: AbortReason): DOMException {
  return reason === 'deadline'
    ? new DOMException("the attempt's deadline passed", 'TimeoutError')
    : new DOMException('the attempt was cancelled', 'AbortError');
}

/** What a handler's error ends its attempt with. */
function failureOf(err: unknown): FinalOutput {
  if (isRateLimitedError(err)) {
    return {
      type: 'TASK_FAILED',
      error: clipError(`RATE_LIMITED: ${err.message}`),
      retryable: true,
      rateLimited: { retryAfterMillis: err.retryAfterMs, scope: err.scope },
    };
  }
  return { type: 'TASK_FAILED', error: describeFailure(err), retryable: isRetryable(err) };
}

/**
 * A RateLimitedError, known by its name and fields rather than its class: a
 * task module may have imported another copy of the SDK than the worker's.
 * Fields out of bounds make it an ordinary failure.
 */
function isRateLimitedError(
  err: unknown,
): err is Error & { retryAfterMs: number; scope: RateLimitScope } {
  if (!(err instanceof Error) || err.name !== 'RateLimitedError') return false;
  const { retryAfterMs, scope } = err as Error & { retryAfterMs?: unknown; scope?: unknown };
  return (
    typeof retryAfterMs === 'number' &&
    Number.isInteger(retryAfterMs) &&
    retryAfterMs >= 1 &&
    retryAfterMs <= MAX_RETRY_AFTER_MS &&
    RATE_LIMIT_SCOPES.includes(scope as RateLimitScope)
  );
}

/** An error that says so with `retryable: false` (NonRetryableError, invalid payloads). */
function isRetryable(err: unknown): boolean {
  return !(
    typeof err === 'object' &&
    err !== null &&
    'retryable' in err &&
    err.retryable === false
  );
}

function describeFailure(err: unknown): string {
  const text = describeError(err);
  if (text !== '') return clipError(text);
  return err instanceof Error ? `${err.name} without a message` : 'task failed without a message';
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** The platform's own `aborted` getter, to read a signal whose `aborted` is replaced below. */
const abortedGetter: unknown = Reflect.getOwnPropertyDescriptor(
  AbortSignal.prototype,
  'aborted',
)?.get;

/**
 * The attempt's signal, with `aborted` and `throwIfAborted()` that first look
 * at the stop slot and abort the controller if the main thread raised it (so
 * its listeners fire then, inside the handler's own call).
 */
function watchedSignal(controller: AbortController, pollStop: () => void): AbortSignal {
  const signal = controller.signal;
  if (typeof abortedGetter !== 'function') return signal;
  const aborted = (): boolean => Reflect.apply(abortedGetter, signal, []) === true;
  const poll = (): boolean => {
    if (!aborted()) pollStop();
    return aborted();
  };
  Object.defineProperties(signal, {
    aborted: { get: poll },
    throwIfAborted: {
      value: (): void => {
        if (poll()) throw signal.reason;
      },
    },
  });
  return signal;
}
