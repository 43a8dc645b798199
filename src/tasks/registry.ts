/**
 * The task registry: which task types exist, how their payloads are
 * validated, and how they run.
 *
 * The coordinator uses a registry only to validate payloads before a job
 * exists; workers use it to run tasks (inside worker threads). Both start from
 * `createBuiltinRegistry()` (builtin/index.ts); more task types can be registered, which is
 * how user-defined tasks plug in.
 */
import { ErrorCode, LocalErrorCode } from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';
import type { JsonObject } from '../protocol/messages.js';

/** What a running task may look at. */
export interface TaskContext {
  /** 1-based attempt number of this execution. */
  readonly attemptNumber: number;
  /** Aborted when the attempt is cancelled; long tasks should stop promptly. */
  readonly signal: AbortSignal;
}

export interface TaskDefinition {
  /** Upper-case name on the wire, e.g. `SHA256`. */
  readonly taskType: string;
  /**
   * Throws {@link InvalidPayloadError} (message starting `Invalid payload:` and
   * naming the offending field) when the payload is not acceptable.
   */
  validate(payload: JsonObject): void;
  /**
   * Runs one attempt. Resolves with the result string; rejects with
   * {@link TaskFailedError} (or any error) when the attempt fails.
   */
  run(payload: JsonObject, context: TaskContext): Promise<string>;
  /**
   * True for a task whose attempt gets a task thread to itself (CPU-bound
   * work a cancel must be able to preempt); absent: it shares threads.
   */
  readonly isolate?: boolean;
}

/**
 * The payload does not fit the task type. Message starts `Invalid payload:`.
 * Not retryable: the same payload would fail the same way on every attempt.
 */
export class InvalidPayloadError extends DtpError {
  readonly retryable = false;

  constructor(detail: string) {
    super(ErrorCode.InvalidPayload, `Invalid payload: ${detail}`);
  }
}

/** No task of that type is registered. */
export class UnknownTaskTypeError extends DtpError {
  constructor(taskType: string, known: readonly string[]) {
    super(
      ErrorCode.UnknownTaskType,
      `Unknown task type: ${JSON.stringify(taskType).slice(0, 80)} (known: ${known.join(', ')})`,
    );
  }
}

/** A task reported failure on purpose (its message becomes the attempt's error). */
export class TaskFailedError extends DtpError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(LocalErrorCode.TaskFailed, message, options);
  }
}

export class TaskRegistry {
  readonly #tasks = new Map<string, TaskDefinition>();

  /** Adds a task type; registering a type twice is a programming error. */
  register(definition: TaskDefinition): this {
    if (this.#tasks.has(definition.taskType)) {
      throw new Error(`task type ${definition.taskType} is already registered`);
    }
    this.#tasks.set(definition.taskType, definition);
    return this;
  }

  get(taskType: string): TaskDefinition | undefined {
    return this.#tasks.get(taskType);
  }

  /** The definition, or {@link UnknownTaskTypeError}. */
  require(taskType: string): TaskDefinition {
    const definition = this.#tasks.get(taskType);
    if (definition === undefined) throw new UnknownTaskTypeError(taskType, this.taskTypes);
    return definition;
  }

  /** Throws {@link UnknownTaskTypeError} or {@link InvalidPayloadError}. */
  validate(taskType: string, payload: JsonObject): void {
    this.require(taskType).validate(payload);
  }

  /** Registered task types, in registration order. */
  get taskTypes(): string[] {
    return [...this.#tasks.keys()];
  }
}
