/**
 * Entry point of one task thread (a `worker_threads` Worker started by
 * {@link TaskPool}). It runs task code off the worker's main thread, so a
 * CPU-bound task can never delay heartbeats or protocol handling.
 *
 * At start it imports the users' task modules named in its `workerData`
 * (the main thread has checked them already) beside the built-in tasks.
 * Protocol (see thread-messages.ts): for each `RUN_TASK` it replies
 * `TASK_STARTED` once the payload is valid and the handler begins, any
 * number of `TASK_LOG`, then exactly one `TASK_SUCCEEDED` or `TASK_FAILED`;
 * an offer it could not claim gets no reply at all. A `RUN_TASK` that comes
 * while an attempt runs waits for it to end.
 * `ABORT_TASK` fires the attempt's `ctx.signal`; the handler decides what to
 * do with it (the main thread terminates this thread if it ignores it).
 * A handler that computes without yielding never sees that message, so the
 * signal also reads the thread's shared stop flag whenever its `aborted` or
 * `throwIfAborted()` is used: a loop that calls `ctx.signal.throwIfAborted()`
 * now and then stops within one step of the cancel (the built-in
 * PRIME_COUNT does). Any
 * failure inside the task, including an invalid payload or a module that did
 * not load here, becomes `TASK_FAILED`; only a real crash (an uncaught error
 * outside a handler's promise, `process.exit`) ends the thread.
 */
import { getHeapStatistics } from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import { runInTraceContext } from '../observability/tracing.js';
import { LocalErrorCode } from '../protocol/error-codes.js';
import { DtpError, describeError } from '../protocol/errors.js';
import { clipError, MAX_CHILD_KEY_LENGTH, MAX_PROGRESS_MESSAGE_BYTES } from '../protocol/limits.js';
import type { JsonObject, JsonValue, ParentResult } from '../protocol/messages.js';
import type { EnqueueOptions, ParentJob, TaskContext, TaskLogger } from '../sdk/task.js';
import { createBuiltinRegistry } from '../tasks/builtin/index.js';
import { UnknownTaskTypeError } from '../tasks/registry.js';
import { SAMPLE_INTERVAL_MS } from './memory-budget.js';
import { importHandlers, type Handler } from './task-modules.js';
import { encodeResult } from './task-values.js';
import { AttemptCalls } from './thread-calls.js';
import { AttemptSteps, type Suspension } from './thread-steps.js';
import {
  SharedWords,
  isTaskThreadData,
  isThreadRequest,
  type AbortReason,
  type ClaimSlot,
  type RunTaskInput,
  type TaskLogLevel,
  type ThreadOutput,
  type ThreadResponse,
} from './thread-messages.js';

if (parentPort === null) throw new Error('task-thread.js must run inside a worker thread');
if (!isTaskThreadData(workerData)) throw new Error('task thread started without valid workerData');

const port = parentPort;
const shared = new SharedWords(workerData.shared);
/** Longest log message a handler can send, in characters (longer ones are cut). */
const MAX_LOG_MESSAGE_CHARS = 4_096;
/** Largest `fields` object of one log line, as JSON characters. */
const MAX_LOG_FIELDS_CHARS = 16_384;

/**
 * An attempt running in this thread: its open calls, and its signal, made
 * only when the handler first reads `ctx.signal` (most never do; an
 * AbortController per attempt is not free). A stop that comes first is
 * kept, and a signal made afterwards starts aborted.
 */
class RunningAttempt {
  readonly requestId: number;
  readonly calls: AttemptCalls;
  #controller: AbortController | null = null;
  #stopped: AbortReason | null = null;

  constructor(requestId: number) {
    this.requestId = requestId;
    this.calls = new AttemptCalls((callId, call) =>
      reply(requestId, { type: 'TASK_CALL', callId, call }),
    );
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

  /** True once stopped, by ABORT_TASK or by the shared stop flag (read now). */
  get stopped(): boolean {
    this.#pollStop();
    return this.#stopped !== null;
  }

  /** The attempt was cancelled or its deadline passed: its signal fires, its open calls fail. */
  stop(reason: AbortReason): void {
    if (this.#stopped !== null) return;
    this.#stopped = reason;
    // A stopped attempt gets no answers any more: its open calls fail now.
    this.calls.close('the attempt was stopped before the coordinator answered');
    this.#controller?.abort(abortError(reason));
  }

  #pollStop(): void {
    if (this.#stopped !== null) return;
    const reason = shared.stopRaised(this.requestId);
    if (reason !== null) this.stop(reason);
  }
}

/** Attempts running in this thread (at most one), by request id. */
const running = new Map<number, RunningAttempt>();

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
    });
  }
  return handlers;
}

/** The built-ins and every module's tasks; a module that fails here fails each task. */
const handlers: Promise<Map<string, Handler>> = importHandlers(workerData.modules).then(
  (custom) => new Map([...builtinHandlers(), ...custom]),
);
handlers.catch(() => undefined); // reported per task, never as an unhandled rejection
/** The table once loaded: later attempts look it up without waiting a turn. */
let loadedHandlers: Map<string, Handler> | null = null;
void handlers.then(
  (table) => (loadedHandlers = table),
  () => undefined,
);

function reply(requestId: number, output: ThreadOutput): void {
  const response: ThreadResponse = { requestId, output };
  port.postMessage(response);
}

/** Log fields as plain data that survives postMessage (Errors as name and message). */
function plainFields(fields: Record<string, unknown> | undefined): Record<string, unknown> {
  if (fields === undefined) return {};
  try {
    const text = JSON.stringify(fields, (_key, value: unknown) =>
      value instanceof Error ? { name: value.name, message: value.message } : value,
    );
    if (text.length > MAX_LOG_FIELDS_CHARS)
      return { fields: `(${text.length} characters, dropped)` };
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : {};
  } catch {
    return { fields: '(not serializable, dropped)' };
  }
}

function taskLogger(requestId: number): TaskLogger {
  const line =
    (level: TaskLogLevel) =>
    (message: string, fields?: Record<string, unknown>): void => {
      const text = String(message);
      reply(requestId, {
        type: 'TASK_LOG',
        level,
        message:
          text.length > MAX_LOG_MESSAGE_CHARS ? `${text.slice(0, MAX_LOG_MESSAGE_CHARS)}…` : text,
        fields: plainFields(fields),
      });
    };
  return { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };
}

/** `ctx.progress`: checks its arguments (a RangeError for bad ones) and tells the main thread. */
function progressReporter(requestId: number): TaskContext['progress'] {
  return (fraction: number, message?: string | null): void => {
    if (typeof fraction !== 'number' || !(fraction >= 0 && fraction <= 1)) {
      throw new RangeError(
        `ctx.progress: fraction must be a number from 0 to 1, got ${String(fraction)}`,
      );
    }
    if (message !== undefined && message !== null && typeof message !== 'string') {
      throw new TypeError('ctx.progress: message must be a string');
    }
    if (typeof message === 'string' && Buffer.byteLength(message) > MAX_PROGRESS_MESSAGE_BYTES) {
      throw new RangeError(
        `ctx.progress: message must be at most ${MAX_PROGRESS_MESSAGE_BYTES} bytes of UTF-8`,
      );
    }
    reply(requestId, { type: 'TASK_PROGRESS', fraction, message: message ?? null });
  };
}

/** `ctx.step`, `ctx.sleep`, `ctx.waitFor` (thread-steps.ts); without steps they refuse. */
function stepMethods(steps: AttemptSteps | null): Pick<TaskContext, 'step' | 'sleep' | 'waitFor'> {
  if (steps === null) {
    const unsupported = (what: string) => (): Promise<never> =>
      Promise.reject(
        new DtpError(
          LocalErrorCode.UnsupportedFeature,
          `${what}: the coordinator does not offer durable steps (feature "steps")`,
        ),
      );
    return {
      step: unsupported('ctx.step'),
      sleep: unsupported('ctx.sleep'),
      waitFor: unsupported('ctx.waitFor'),
    };
  }
  return {
    step: (name, fn) => steps.step(name, fn),
    sleep: (duration) => steps.sleep(duration),
    waitFor: (jobId) => steps.waitFor(jobId),
  };
}

/** The options of `ctx.enqueue` as ENQUEUE_CHILD fields: each checked, the absent ones left out. */
function enqueueFields(options: EnqueueOptions): JsonObject {
  const fields: JsonObject = {};
  const integers = ['maxAttempts', 'timeoutMillis', 'runAtMillis'] as const;
  for (const name of integers) {
    const value = options[name];
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value)) {
      throw new TypeError(`ctx.enqueue: options.${name} must be an integer`);
    }
    fields[name] = value;
  }
  for (const name of ['priority', 'queue', 'groupKey'] as const) {
    const value = options[name];
    if (value === undefined) continue;
    if (typeof value !== 'string') {
      throw new TypeError(`ctx.enqueue: options.${name} must be a string`);
    }
    fields[name] = value;
  }
  return fields;
}

/**
 * `ctx.enqueue`: an ENQUEUE_CHILD call. The key is `k:<options.key>`, or
 * `o:<n>` for the n-th call of this attempt without one (counted when the
 * call is made, so the same code makes the same keys in every attempt).
 */
function childEnqueuer(calls: AttemptCalls): TaskContext['enqueue'] {
  let ordinal = 0;
  return async (type, payload, options = {}) => {
    if (typeof type !== 'string') throw new TypeError('ctx.enqueue: type must be a string');
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
      throw new TypeError('ctx.enqueue: payload must be a JSON object');
    }
    const given = options.key;
    if (
      given !== undefined &&
      (typeof given !== 'string' || given.length === 0 || given.length > MAX_CHILD_KEY_LENGTH)
    ) {
      throw new RangeError(
        `ctx.enqueue: options.key must be a string of 1..${MAX_CHILD_KEY_LENGTH} characters`,
      );
    }
    const fields = enqueueFields(options);
    const key = given === undefined ? `o:${ordinal++}` : `k:${given}`;
    const reply = await calls.call({
      type: 'ENQUEUE_CHILD',
      key,
      taskType: type,
      payload,
      ...fields,
    });
    if (typeof reply.jobId !== 'string') {
      throw new Error(`ctx.enqueue: unexpected answer ${JSON.stringify(reply.type)}`);
    }
    return reply.jobId;
  };
}

/** Refusals of ctx.step, ctx.sleep and ctx.waitFor without a coordinator that offers steps. */
const NO_STEPS = stepMethods(null);

/**
 * The handler's `ctx`: the same class, so the same shape, for every attempt.
 * `signal` is a getter of the class (an accessor in an object literal is
 * defined anew, slowly, for each object) and made when first read.
 */
class AttemptContext implements TaskContext {
  readonly step: TaskContext['step'];
  readonly sleep: TaskContext['sleep'];
  readonly waitFor: TaskContext['waitFor'];
  readonly progress: TaskContext['progress'];
  readonly enqueue: TaskContext['enqueue'];
  readonly jobId: string;
  readonly attemptId: string;
  readonly attemptNumber: number;
  readonly maxAttempts: number | null;
  readonly deadlineAtMs: number | null;
  readonly log: TaskLogger;
  readonly parents: readonly ParentJob[];
  readonly #attempt: RunningAttempt;

  constructor(attempt: RunningAttempt, input: RunTaskInput, steps: AttemptSteps | null) {
    const { requestId, calls } = attempt;
    const methods = steps === null ? NO_STEPS : stepMethods(steps);
    this.step = methods.step;
    this.sleep = methods.sleep;
    this.waitFor = methods.waitFor;
    this.progress = progressReporter(requestId);
    this.enqueue = childEnqueuer(calls);
    this.jobId = input.jobId;
    this.attemptId = input.attemptId;
    this.attemptNumber = input.attemptNumber;
    this.maxAttempts = input.maxAttempts;
    this.deadlineAtMs = input.deadlineAtMs;
    this.log = taskLogger(requestId);
    this.parents = input.parents?.length ? Object.freeze(input.parents.map(parentJob)) : NO_PARENTS;
    this.#attempt = attempt;
    Object.freeze(this);
  }

  get signal(): AbortSignal {
    return this.#attempt.signal;
  }
}

const NO_PARENTS: readonly ParentJob[] = Object.freeze([]);

/** A parent as the handler reads it: its result decoded as `job.result()` would. */
function parentJob(parent: ParentResult): ParentJob {
  let result: JsonValue | null = parent.result;
  if (parent.result !== null && parent.resultFormat === 'json') {
    result = JSON.parse(parent.result) as JsonValue;
  }
  return Object.freeze({
    jobId: parent.jobId,
    taskType: parent.taskType,
    state: parent.state,
    result,
    omitted: parent.omitted === true,
  });
}

/** What an attempt's signal is aborted with: the conventions of AbortSignal.timeout(). */
function abortError(reason: AbortReason): DOMException {
  return reason === 'deadline'
    ? new DOMException("the attempt's deadline passed", 'TimeoutError')
    : new DOMException('the attempt was cancelled', 'AbortError');
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

async function runAttempt(attempt: RunningAttempt, input: RunTaskInput): Promise<ThreadOutput> {
  let steps: AttemptSteps | null = null;
  try {
    const table = loadedHandlers ?? (await handlers);
    const handler = table.get(input.taskType);
    if (handler === undefined) throw new UnknownTaskTypeError(input.taskType, [...table.keys()]);
    const checked = handler.validate(input.payload);
    // A schema may check asynchronously; a plain value costs no turn.
    const payload: unknown = isThenable(checked) ? await checked : checked;
    // Stopped while its modules loaded: the handler never starts.
    if (attempt.stopped)
      return { type: 'TASK_FAILED', error: 'stopped before it started', retryable: true };
    reply(attempt.requestId, { type: 'TASK_STARTED' });
    // A sleep or wait past the recorded steps ends the attempt without the handler
    // (only with a coordinator that offers steps; without, nothing can suspend).
    let suspended: (suspension: Suspension) => void = () => undefined;
    let suspension: Promise<Suspension> | null = null;
    if (input.steps !== undefined && input.steps !== null) {
      suspension = new Promise<Suspension>((resolve) => (suspended = resolve));
      steps = new AttemptSteps({
        calls: attempt.calls,
        jobId: input.jobId,
        recorded: input.steps,
        total: input.stepCount ?? input.steps.length,
        onSuspend: (s) => suspended(s),
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
    return { type: 'TASK_FAILED', error: describeFailure(err), retryable: isRetryable(err) };
  }
}

/** The platform's own `aborted` getter, to read a signal whose `aborted` is replaced below. */
const abortedGetter: unknown = Reflect.getOwnPropertyDescriptor(
  AbortSignal.prototype,
  'aborted',
)?.get;

/**
 * The attempt's signal, with `aborted` and `throwIfAborted()` that first look
 * at the stop flag and abort the controller if the main thread raised it (so
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

/**
 * Heap + external memory (Buffers, ArrayBuffers) of this thread's isolate, in
 * MiB (V8's statistics: a microsecond, no system call).
 */
function sampleMemory(): void {
  const stats = getHeapStatistics();
  shared.recordMemory((stats.used_heap_size + stats.external_memory) / 2 ** 20);
  lastSampleMs = performance.now();
}

/** When the last sample was taken (performance.now()). */
let lastSampleMs = 0;

/** Samples memory every SAMPLE_INTERVAL_MS while attempts run; one interval for a run of them. */
let sampler: NodeJS.Timeout | null = null;

function sampleWhileRunning(): void {
  if (running.size > 0) return sampleMemory();
  if (sampler !== null) clearInterval(sampler);
  sampler = null;
}

async function run(requestId: number, input: RunTaskInput): Promise<void> {
  const attempt = new RunningAttempt(requestId);
  running.set(requestId, attempt);
  // Samples while the task runs and its event loop turns (see memory-budget.ts).
  if (sampler === null) {
    sampleMemory();
    sampler = setInterval(sampleWhileRunning, SAMPLE_INTERVAL_MS);
  }
  try {
    const startedMs = performance.now();
    const output = await runAttempt(attempt, input);
    attempt.calls.close('the attempt ended before the coordinator answered');
    // The last sample tells the pool what the idle thread would keep. An
    // attempt of under a millisecond soon after a sample cannot have moved
    // it by much (a few MiB at most, against a retained limit of 64): the
    // sample it would take costs more than such an attempt's own work.
    const endedMs = performance.now();
    if (endedMs - startedMs >= 1 || endedMs - lastSampleMs >= SAMPLE_INTERVAL_MS) sampleMemory();
    reply(requestId, output);
  } finally {
    running.delete(requestId);
  }
}

/**
 * Requests that came while an attempt ran: offers of the next attempt (and,
 * after a stop, whatever the pool sends once it has heard the end), oldest
 * first. Each starts when the one before it has ended.
 */
const waiting: { requestId: number; input: RunTaskInput; claimSlot: ClaimSlot | undefined }[] = [];

/**
 * Starts an attempt unless it is an offer the main thread has withdrawn
 * (then it is dropped unseen), and the next waiting one after it. The next
 * starts in the same turn as the reply of this one, so both leave together.
 */
function start(requestId: number, input: RunTaskInput, claimSlot: ClaimSlot | undefined): void {
  if (claimSlot !== undefined && !shared.take(claimSlot, requestId)) {
    startWaiting();
    return;
  }
  void run(requestId, input).then(startWaiting);
}

function startWaiting(): void {
  const next = waiting.shift();
  if (next !== undefined) start(next.requestId, next.input, next.claimSlot);
}

port.on('message', (value: unknown) => {
  // Only the pool talks to this thread; a malformed request is a bug there,
  // and crashing makes the pool fail the task loudly.
  if (!isThreadRequest(value)) throw new Error('task thread received a malformed request');
  const { requestId, input, claimSlot } = value;
  switch (input.type) {
    case 'RUN_TASK':
      if (running.size > 0 || waiting.length > 0) waiting.push({ requestId, input, claimSlot });
      else start(requestId, input, claimSlot);
      return;
    case 'ABORT_TASK':
      running.get(requestId)?.stop(input.reason);
      return;
    case 'CALL_SETTLED':
      running.get(requestId)?.calls.settle(input.callId, input.outcome);
      return;
  }
});
