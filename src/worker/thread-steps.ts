/**
 * The task-thread side of durable steps: `ctx.step`, `ctx.sleep`,
 * `ctx.waitFor`, `ctx.waitForSignal` and `ctx.waitForEvent` of one attempt.
 *
 * Steps take positions in the order the handler calls them. At a position
 * the job has recorded already (the assignment carried it, or GET_STEPS
 * fetches it) the recorded value is returned and `fn` does not run; past the
 * recorded ones `fn` runs, its value is checked and sent (RECORD_STEP), and
 * the step returns once the coordinator has it durably. Either way the
 * handler gets the value as JSON gives it back, so a first run and a replay
 * see the same thing.
 *
 * A position recorded under another name (or as another kind of step) means
 * the handler does not call its steps in the same order as before: the
 * attempt fails for good with an error starting `NON_DETERMINISTIC:`,
 * whatever the handler does with the error it is thrown.
 *
 * A sleep or wait past the recorded steps suspends the attempt: the handler
 * is left waiting (its promise never settles and is dropped) and the attempt
 * ends with TASK_SUSPENDED; the coordinator records that step itself. A
 * recorded sleep returns at once; a recorded wait returns the outcome the
 * coordinator filled in (for a signal or event wait, the one it took, or
 * null: see signal-waits.ts). Signal and event waits need a coordinator that
 * offers `signals`; without, they are refused (UNSUPPORTED_FEATURE).
 *
 * Steps run one at a time: a step, sleep or wait called while another step
 * of the attempt is unfinished is refused (INVALID_STEP), as is a name used
 * twice in one attempt.
 */
import { ErrorCode, LocalErrorCode } from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';
import { parseDuration } from '../protocol/duration.js';
import {
  MAX_DELAY_MS,
  MAX_JOB_ID_LENGTH,
  MAX_STEP_NAME_JSON_BYTES,
  MAX_STEP_NAME_LENGTH,
  MAX_STEP_RESULT_BYTES,
} from '../protocol/limits.js';
import type {
  EventWait,
  JsonObject,
  JsonValue,
  RecordedStep,
  SignalWait,
} from '../protocol/messages.js';
import type {
  ReceivedEvent,
  ReceivedSignal,
  WaitForEventOptions,
  WaitForSignalOptions,
  WaitOutcome,
} from '../sdk/task.js';
import {
  EVENT_STEP,
  SIGNAL_STEP,
  eventWaitOf,
  recordedEvent,
  recordedSignal,
  signalWaitOf,
} from './signal-waits.js';
import type { AttemptCalls } from './thread-calls.js';

/** The steps the coordinator records for a sleep and for a wait. */
export const SLEEP_STEP = 'dtp.sleep';
export const WAIT_STEP = 'dtp.waitFor';
const RESERVED_PREFIX = 'dtp.';

/** How a suspended attempt ended: the sleep or the wait it stopped at. */
export type Suspension =
  | { sleepMillis: number }
  | { waitForJobId: string }
  | { waitForSignal: SignalWait }
  | { waitForEvent: EventWait };

/** The refusal of a signal or event wait where the coordinator does not offer signals. */
export function noSignals(method: string): DtpError {
  return new DtpError(
    LocalErrorCode.UnsupportedFeature,
    `${method}: the coordinator does not offer signals and events (feature "signals")`,
  );
}

function invalid(message: string): DtpError {
  return new DtpError(LocalErrorCode.InvalidStep, message);
}

/**
 * A step's value as JSON text, refusing what JSON cannot carry back as it
 * was: undefined (at the top or in an array), functions, symbols, BigInt,
 * numbers that are not finite, cycles, and objects that are not plain
 * (class instances, Map, Set, Date). Object properties that are undefined
 * are left out, as JSON does.
 */
export function stepJson(name: string, value: unknown): string {
  const seen = new Set<object>();
  const check = (v: unknown, path: string, inArray: boolean): void => {
    switch (typeof v) {
      case 'string':
      case 'boolean':
        return;
      case 'number':
        if (!Number.isFinite(v))
          throw invalid(`step "${name}": ${path} is ${v}, not a JSON number`);
        return;
      case 'undefined':
        if (inArray || path === 'the value') {
          throw invalid(`step "${name}": ${path} is undefined; return null for "nothing"`);
        }
        return;
      case 'bigint':
      case 'function':
      case 'symbol':
        throw invalid(`step "${name}": ${path} is a ${typeof v}, which JSON cannot carry`);
      case 'object': {
        if (v === null) return;
        if (seen.has(v)) throw invalid(`step "${name}": ${path} refers back to itself (a cycle)`);
        if (Array.isArray(v)) {
          seen.add(v);
          v.forEach((item, i) => check(item, `${path}[${i}]`, true));
          seen.delete(v);
          return;
        }
        const proto: unknown = Object.getPrototypeOf(v);
        if (proto !== Object.prototype && proto !== null) {
          const kind = (v as { constructor?: { name?: string } }).constructor?.name ?? 'object';
          throw invalid(`step "${name}": ${path} is a ${kind}, not a plain object`);
        }
        seen.add(v);
        for (const [key, item] of Object.entries(v)) check(item, `${path}.${key}`, false);
        seen.delete(v);
        return;
      }
    }
  };
  check(value, 'the value', false);
  const text = JSON.stringify(value);
  const bytes = Buffer.byteLength(JSON.stringify(text)) - 2;
  if (bytes > MAX_STEP_RESULT_BYTES) {
    throw new DtpError(
      ErrorCode.LimitExceeded,
      `step "${name}": its value is ${bytes} bytes as JSON; a step may hold at most ${MAX_STEP_RESULT_BYTES}`,
    );
  }
  return text;
}

/** A handler's step name, checked (INVALID_STEP when it cannot be used). */
function checkedName(name: unknown): string {
  if (typeof name !== 'string') throw invalid('ctx.step: the name must be a string');
  if (name.length === 0 || name.trim() !== name) {
    throw invalid('ctx.step: the name must be non-empty, without leading or trailing blanks');
  }
  if (
    name.length > MAX_STEP_NAME_LENGTH ||
    Buffer.byteLength(JSON.stringify(name)) > MAX_STEP_NAME_JSON_BYTES
  ) {
    throw invalid(
      `ctx.step: the name must be at most ${MAX_STEP_NAME_LENGTH} characters and ${MAX_STEP_NAME_JSON_BYTES} bytes as JSON`,
    );
  }
  if (name.startsWith(RESERVED_PREFIX)) {
    throw invalid(`ctx.step: names starting with "${RESERVED_PREFIX}" are reserved`);
  }
  return name;
}

/** A sleep's length in ms: a number of ms or a duration such as `90s` or `5m`. */
function sleepMillisOf(duration: unknown): number {
  let ms: number;
  if (typeof duration === 'number') ms = duration;
  else if (typeof duration === 'string') {
    const parsed = parseDuration(duration);
    if ('error' in parsed) throw new RangeError(`ctx.sleep: ${parsed.error}`);
    ms = parsed.ms;
  } else throw new TypeError('ctx.sleep: give a number of milliseconds or a duration like "5m"');
  if (!Number.isFinite(ms) || ms < 0 || ms > MAX_DELAY_MS) {
    throw new RangeError(`ctx.sleep: the duration must be 0..${MAX_DELAY_MS} ms`);
  }
  return Math.ceil(ms);
}

export class AttemptSteps {
  readonly #calls: Pick<AttemptCalls, 'call'>;
  readonly #jobId: string;
  /** Recorded steps known here, from the first (the assignment's, then fetched ones). */
  readonly #recorded: RecordedStep[];
  /** How many steps the job had recorded when this attempt began. */
  readonly #total: number;
  readonly #onSuspend: (suspension: Suspension) => void;
  /** The coordinator offers `signals` (signal and event waits). */
  readonly #signals: boolean;
  readonly #names = new Set<string>();
  #position = 0;
  #busy = false;
  /** Set once a replay went another way: the attempt's error (it fails for good). */
  #poison: string | null = null;
  #suspended = false;

  constructor(options: {
    calls: Pick<AttemptCalls, 'call'>;
    jobId: string;
    recorded: readonly RecordedStep[];
    total: number;
    onSuspend: (suspension: Suspension) => void;
    /** The coordinator offers signal and event waits; default false. */
    signals?: boolean;
  }) {
    this.#calls = options.calls;
    this.#jobId = options.jobId;
    this.#recorded = [...options.recorded];
    this.#total = Math.max(options.total, options.recorded.length);
    this.#onSuspend = options.onSuspend;
    this.#signals = options.signals === true;
  }

  /** The error the attempt fails with for good (a replay that went another way); null = none. */
  get poison(): string | null {
    return this.#poison;
  }

  async step<T>(name: string, fn: () => T | Promise<T>): Promise<T> {
    const stepName = checkedName(name);
    if (typeof fn !== 'function') throw invalid(`step "${stepName}": give a function to run`);
    if (this.#names.has(stepName)) {
      throw invalid(`step "${stepName}": the name is used twice in one run of the handler`);
    }
    return this.#exclusive(async () => {
      this.#names.add(stepName);
      const position = this.#position++;
      const recorded = await this.#at(position);
      if (recorded !== undefined) {
        this.#expect(position, recorded, stepName);
        return JSON.parse(recorded.result ?? 'null') as T;
      }
      const text = stepJson(stepName, await fn());
      await this.#calls.call({
        type: 'RECORD_STEP',
        index: position,
        name: stepName,
        result: text,
      });
      return JSON.parse(text) as T;
    });
  }

  async sleep(duration: number | string): Promise<void> {
    const sleepMillis = sleepMillisOf(duration);
    return this.#exclusive(async () => {
      const position = this.#position++;
      const recorded = await this.#at(position);
      if (recorded !== undefined) return this.#expect(position, recorded, SLEEP_STEP);
      return this.#suspend({ sleepMillis });
    });
  }

  async waitFor(jobId: string): Promise<WaitOutcome> {
    if (typeof jobId !== 'string' || jobId.length === 0 || jobId.length > MAX_JOB_ID_LENGTH) {
      throw new TypeError(`ctx.waitFor: the job id must be 1..${MAX_JOB_ID_LENGTH} characters`);
    }
    if (jobId === this.#jobId) throw invalid('ctx.waitFor: a job cannot wait for itself');
    return this.#exclusive(async () => {
      const position = this.#position++;
      const recorded = await this.#at(position);
      if (recorded === undefined) return this.#suspend({ waitForJobId: jobId });
      this.#expect(position, recorded, WAIT_STEP);
      const outcome = JSON.parse(recorded.result ?? '{}') as Record<string, JsonValue>;
      if (outcome.jobId !== jobId) {
        this.#nonDeterministic(
          `position ${position} waited for job ${JSON.stringify(outcome.jobId)}, this run waits for ${jobId}`,
        );
      }
      return waitOutcome(outcome);
    });
  }

  async waitForSignal(
    name: string,
    options?: WaitForSignalOptions,
  ): Promise<ReceivedSignal | null> {
    if (!this.#signals) throw noSignals('ctx.waitForSignal');
    const wait = signalWaitOf(name, options);
    return this.#exclusive(async () => {
      const position = this.#position++;
      const recorded = await this.#at(position);
      if (recorded === undefined) return this.#suspend({ waitForSignal: wait });
      this.#expect(position, recorded, SIGNAL_STEP);
      const signal = recordedSignal(recorded.result);
      if (signal !== null && signal.name !== wait.name) {
        this.#nonDeterministic(
          `position ${position} took signal "${signal.name}", this run waits for "${wait.name}"`,
        );
      }
      return signal;
    });
  }

  async waitForEvent(name: string, options?: WaitForEventOptions): Promise<ReceivedEvent | null> {
    if (!this.#signals) throw noSignals('ctx.waitForEvent');
    const wait = eventWaitOf(name, options);
    return this.#exclusive(async () => {
      const position = this.#position++;
      const recorded = await this.#at(position);
      if (recorded === undefined) return this.#suspend({ waitForEvent: wait });
      this.#expect(position, recorded, EVENT_STEP);
      const event = recordedEvent(recorded.result);
      const keyed = wait.key ?? null;
      if (event !== null && (event.name !== wait.name || (keyed !== null && event.key !== keyed))) {
        this.#nonDeterministic(
          `position ${position} woke on event "${event.name}" (key ${JSON.stringify(event.key)}), this run waits for "${wait.name}" (key ${JSON.stringify(keyed)})`,
        );
      }
      return event;
    });
  }

  /** Runs one step at a time; a second one while the first is unfinished is refused. */
  async #exclusive<T>(body: () => Promise<T>): Promise<T> {
    if (this.#poison !== null) throw new DtpError(LocalErrorCode.NonDeterministic, this.#poison);
    if (this.#suspended) return new Promise<T>(() => undefined);
    if (this.#busy) {
      throw invalid('steps run one at a time: await each step before the next');
    }
    this.#busy = true;
    try {
      return await body();
    } finally {
      this.#busy = false;
    }
  }

  /** The recorded step at a position, fetched if the assignment left it out; undefined = none. */
  async #at(position: number): Promise<RecordedStep | undefined> {
    while (position >= this.#recorded.length && this.#recorded.length < this.#total) {
      const reply: JsonObject = await this.#calls.call({
        type: 'GET_STEPS',
        fromIndex: this.#recorded.length,
      });
      const steps = reply.steps as unknown as RecordedStep[];
      if (!Array.isArray(steps) || steps.length === 0) break;
      this.#recorded.push(...steps);
    }
    return this.#recorded[position];
  }

  #expect(position: number, recorded: RecordedStep, name: string): void {
    if (recorded.name === name) return;
    this.#nonDeterministic(
      `step ${position} was recorded as "${recorded.name}", this run calls "${name}" there`,
    );
  }

  #nonDeterministic(detail: string): never {
    this.#poison = `NON_DETERMINISTIC: ${detail} (the handler must call its steps in the same order every time)`;
    throw new DtpError(LocalErrorCode.NonDeterministic, this.#poison);
  }

  #suspend(suspension: Suspension): Promise<never> {
    this.#suspended = true;
    this.#onSuspend(suspension);
    // The handler waits here for good: the attempt has ended without it.
    return new Promise<never>(() => undefined);
  }
}

/** A recorded wait's outcome as the handler reads it: the result decoded as `job.result()` would. */
function waitOutcome(outcome: Record<string, JsonValue>): WaitOutcome {
  let result: JsonValue | null = typeof outcome.result === 'string' ? outcome.result : null;
  if (typeof result === 'string' && outcome.resultFormat === 'json') {
    result = JSON.parse(result) as JsonValue;
  }
  return Object.freeze({
    jobId: typeof outcome.jobId === 'string' ? outcome.jobId : '',
    state: typeof outcome.state === 'string' ? outcome.state : null,
    result,
    error: typeof outcome.error === 'string' ? outcome.error : null,
    omitted: outcome.omitted === true,
  });
}
