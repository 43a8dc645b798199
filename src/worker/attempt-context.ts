/**
 * A running attempt's `ctx` (the handler's view of its attempt): ids, the
 * signal, `log`, `progress`, `parents`, durable steps and `enqueue`. Every
 * output goes through the attempt's {@link OutputSink}, whatever thread it
 * runs on.
 */
import { LocalErrorCode } from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';
import { MAX_CHILD_KEY_LENGTH, MAX_PROGRESS_MESSAGE_BYTES } from '../protocol/limits.js';
import type { JsonObject, JsonValue, ParentResult } from '../protocol/messages.js';
import type { EnqueueOptions, ParentJob, TaskContext, TaskLogger } from '../sdk/task.js';
import type { AttemptCalls } from './thread-calls.js';
import { noSignals, type AttemptSteps } from './thread-steps.js';
import type { RunTaskInput, TaskLogLevel, ThreadOutput } from './thread-messages.js';

/** Longest log message a handler can send, in characters (longer ones are cut). */
const MAX_LOG_MESSAGE_CHARS = 4_096;
/** Largest `fields` object of one log line, as JSON characters. */
const MAX_LOG_FIELDS_CHARS = 16_384;

/** Where one attempt's outputs go. */
export type OutputSink = (output: ThreadOutput) => void;

/** What gives an attempt its `ctx.signal`. */
export interface SignalSource {
  readonly signal: AbortSignal;
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

function taskLogger(send: OutputSink): TaskLogger {
  const line =
    (level: TaskLogLevel) =>
    (message: string, fields?: Record<string, unknown>): void => {
      const text = String(message);
      send({
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
function progressReporter(send: OutputSink): TaskContext['progress'] {
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
    send({ type: 'TASK_PROGRESS', fraction, message: message ?? null });
  };
}

/** The handler's step methods: `ctx.step`, `ctx.sleep` and the waits. */
type StepMethods = Pick<
  TaskContext,
  'step' | 'sleep' | 'waitFor' | 'waitForSignal' | 'waitForEvent'
>;

/** The step methods (thread-steps.ts); without steps they refuse. */
function stepMethods(steps: AttemptSteps | null): StepMethods {
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
      waitForSignal: () => Promise.reject(noSignals('ctx.waitForSignal')),
      waitForEvent: () => Promise.reject(noSignals('ctx.waitForEvent')),
    };
  }
  return {
    step: (name, fn) => steps.step(name, fn),
    sleep: (duration) => steps.sleep(duration),
    waitFor: (jobId) => steps.waitFor(jobId),
    waitForSignal: (name, options) => steps.waitForSignal(name, options),
    waitForEvent: (name, options) => steps.waitForEvent(name, options),
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

/** Refusals of the step methods without a coordinator that offers steps. */
const NO_STEPS = stepMethods(null);

/**
 * The handler's `ctx`: the same class, so the same shape, for every attempt.
 * Its members that are functions (`log`, `progress`, `enqueue`, the steps)
 * and `signal` are getters of the class (an accessor in an object literal is
 * defined anew, slowly, for each object), each made when first read: most
 * handlers use few of them, and an attempt's cost is mostly what it
 * allocates. A function read from `ctx` works on its own too (`const {
 * progress } = ctx`).
 */
export class AttemptContext implements TaskContext {
  readonly jobId: string;
  readonly attemptId: string;
  readonly attemptNumber: number;
  readonly maxAttempts: number | null;
  readonly deadlineAtMs: number | null;
  readonly parents: readonly ParentJob[];
  readonly #attempt: SignalSource & { readonly send: OutputSink; readonly calls: AttemptCalls };
  readonly #steps: AttemptSteps | null;
  #log: TaskLogger | null = null;
  #progress: TaskContext['progress'] | null = null;
  #enqueue: TaskContext['enqueue'] | null = null;
  #stepMethods: StepMethods | null = null;

  constructor(
    attempt: SignalSource & { readonly send: OutputSink; readonly calls: AttemptCalls },
    input: RunTaskInput,
    steps: AttemptSteps | null,
  ) {
    this.jobId = input.jobId;
    this.attemptId = input.attemptId;
    this.attemptNumber = input.attemptNumber;
    this.maxAttempts = input.maxAttempts;
    this.deadlineAtMs = input.deadlineAtMs;
    this.parents = input.parents?.length ? Object.freeze(input.parents.map(parentJob)) : NO_PARENTS;
    this.#attempt = attempt;
    this.#steps = steps;
    Object.freeze(this);
  }

  get signal(): AbortSignal {
    return this.#attempt.signal;
  }

  get log(): TaskLogger {
    return (this.#log ??= taskLogger(this.#attempt.send));
  }

  get progress(): TaskContext['progress'] {
    return (this.#progress ??= progressReporter(this.#attempt.send));
  }

  get enqueue(): TaskContext['enqueue'] {
    return (this.#enqueue ??= childEnqueuer(this.#attempt.calls));
  }

  get step(): TaskContext['step'] {
    return this.#stepsOf().step;
  }

  get sleep(): TaskContext['sleep'] {
    return this.#stepsOf().sleep;
  }

  get waitFor(): TaskContext['waitFor'] {
    return this.#stepsOf().waitFor;
  }

  get waitForSignal(): TaskContext['waitForSignal'] {
    return this.#stepsOf().waitForSignal;
  }

  get waitForEvent(): TaskContext['waitForEvent'] {
    return this.#stepsOf().waitForEvent;
  }

  #stepsOf(): StepMethods {
    if (this.#steps === null) return NO_STEPS;
    return (this.#stepMethods ??= stepMethods(this.#steps));
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
