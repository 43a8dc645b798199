/**
 * `ctx.waitForSignal` and `ctx.waitForEvent` apart from the step machinery
 * (thread-steps.ts): their arguments checked and turned into the
 * TASK_SUSPEND field, and a recorded wait's value read back.
 *
 * The coordinator records such a wait as a step named `dtp.waitForSignal`
 * (or `dtp.waitForEvent`). Once the wait has ended its value is
 * `{"signal": {name, payload, atMillis}}` (`{"event": {name, payload, key,
 * eventId, atMillis}}`), or `{"signal": null}` when the timeout passed
 * first; the handler gets that member. While the job waits the value is
 * `{"waitingFor": ...}`, which a run never meets: the job does not run then.
 */
import { parseDuration } from '../protocol/duration.js';
import { MAX_DELAY_MS, MAX_EVENT_ID_LENGTH } from '../protocol/limits.js';
import type { EventWait, JsonValue, SignalWait } from '../protocol/messages.js';
import { queueNameProblem } from '../protocol/queue-names.js';
import type {
  ReceivedEvent,
  ReceivedSignal,
  WaitForEventOptions,
  WaitForSignalOptions,
} from '../sdk/task.js';

/** The steps the coordinator records for a signal wait and for an event wait. */
export const SIGNAL_STEP = 'dtp.waitForSignal';
export const EVENT_STEP = 'dtp.waitForEvent';

type Method = 'ctx.waitForSignal' | 'ctx.waitForEvent';

function checkedWaitName(method: Method, name: unknown): string {
  if (typeof name !== 'string') throw new TypeError(`${method}: the name must be a string`);
  const problem = queueNameProblem(name);
  if (problem !== null) throw new RangeError(`${method}: the name ${problem}`);
  return name;
}

/** A timeout in ms (rounded up), or null for none: ms or a duration such as `"2h"`. */
function timeoutMillisOf(method: Method, timeout: unknown): number | null {
  if (timeout === undefined || timeout === null) return null;
  let ms: number;
  if (typeof timeout === 'number') ms = timeout;
  else if (typeof timeout === 'string') {
    const parsed = parseDuration(timeout);
    if ('error' in parsed) throw new RangeError(`${method}: options.timeout: ${parsed.error}`);
    ms = parsed.ms;
  } else {
    throw new TypeError(
      `${method}: options.timeout must be a number of ms or a duration like "2h"`,
    );
  }
  if (!Number.isFinite(ms) || ms < 0 || ms > MAX_DELAY_MS) {
    throw new RangeError(
      `${method}: options.timeout must be 0 to at most ${MAX_DELAY_MS} ms (366 days)`,
    );
  }
  return Math.ceil(ms);
}

function optionsObject(method: Method, options: unknown): Record<string, unknown> {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`${method}: options must be an object`);
  }
  return options as Record<string, unknown>;
}

/** `ctx.waitForSignal(name, options)` as TASK_SUSPEND.waitForSignal (absent fields left out). */
export function signalWaitOf(name: unknown, options: WaitForSignalOptions | undefined): SignalWait {
  const method = 'ctx.waitForSignal';
  const wait: SignalWait = { name: checkedWaitName(method, name) };
  const timeoutMillis = timeoutMillisOf(method, optionsObject(method, options).timeout);
  if (timeoutMillis !== null) wait.timeoutMillis = timeoutMillis;
  return wait;
}

/** `ctx.waitForEvent(name, options)` as TASK_SUSPEND.waitForEvent (absent fields left out). */
export function eventWaitOf(name: unknown, options: WaitForEventOptions | undefined): EventWait {
  const method = 'ctx.waitForEvent';
  const wait: EventWait = { name: checkedWaitName(method, name) };
  const given = optionsObject(method, options);
  const key = given.key;
  if (key !== undefined && key !== null) {
    if (typeof key !== 'string' || key.length === 0 || key.length > MAX_EVENT_ID_LENGTH) {
      throw new RangeError(
        `${method}: options.key must be a string of 1..${MAX_EVENT_ID_LENGTH} characters`,
      );
    }
    wait.key = key;
  }
  const timeoutMillis = timeoutMillisOf(method, given.timeout);
  if (timeoutMillis !== null) wait.timeoutMillis = timeoutMillis;
  return wait;
}

/** Why a recorded wait's value cannot be read back: its job's record is not what a wait leaves. */
export class RecordedWaitError extends Error {
  constructor(step: string, detail: string) {
    super(`step ${step}: ${detail}`);
    this.name = 'RecordedWaitError';
  }
}

function isRecord(value: unknown): value is Record<string, JsonValue> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The member `member` of a recorded wait's value: an object, or null after a timeout. */
function recordedMember(
  step: string,
  result: string | null | undefined,
  member: 'signal' | 'event',
): Record<string, JsonValue> | null {
  const value: unknown = JSON.parse(result ?? 'null');
  if (!isRecord(value) || !(member in value)) {
    const what = isRecord(value) && 'waitingFor' in value ? 'the wait has not ended' : 'no value';
    throw new RecordedWaitError(step, `${what} (${JSON.stringify(value)?.slice(0, 200)})`);
  }
  const taken = value[member];
  if (taken === null) return null;
  if (!isRecord(taken)) throw new RecordedWaitError(step, `"${member}" is not an object`);
  return taken;
}

/** A recorded signal wait's outcome: the signal it took, or null (timed out). */
export function recordedSignal(result: string | null | undefined): ReceivedSignal | null {
  const signal = recordedMember(SIGNAL_STEP, result, 'signal');
  if (signal === null) return null;
  return Object.freeze({
    name: typeof signal.name === 'string' ? signal.name : '',
    payload: signal.payload ?? null,
    atMillis: typeof signal.atMillis === 'number' ? signal.atMillis : 0,
  });
}

/** A recorded event wait's outcome: the event that woke it, or null (timed out). */
export function recordedEvent(result: string | null | undefined): ReceivedEvent | null {
  const event = recordedMember(EVENT_STEP, result, 'event');
  if (event === null) return null;
  return Object.freeze({
    name: typeof event.name === 'string' ? event.name : '',
    payload: event.payload ?? null,
    key: typeof event.key === 'string' ? event.key : null,
    eventId: typeof event.eventId === 'string' ? event.eventId : '',
    atMillis: typeof event.atMillis === 'number' ? event.atMillis : 0,
  });
}
