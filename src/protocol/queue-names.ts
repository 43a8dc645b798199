/**
 * Named queues and group keys: what a valid one is, the bounds of queue
 * limits, and the checks the CLI, the client library and the coordinator
 * share (one place, so that all three refuse the same input with the same
 * words).
 */
import type { RateLimit } from './messages.js';

/** The queue of a job submitted without one. */
export const DEFAULT_QUEUE = 'default';
export const QUEUE_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;
export const MAX_GROUP_KEY_LENGTH = 128;
/** Named queues one worker may restrict itself to. */
export const MAX_QUEUES_PER_WORKER = 1024;
export const MAX_QUEUE_CONCURRENCY = 100_000;
export const MAX_RATE_COUNT = 1_000_000;
export const MIN_RATE_INTERVAL_MS = 1;
export const MAX_RATE_INTERVAL_MS = 86_400_000;

export function isValidQueueName(name: string): boolean {
  return QUEUE_NAME_PATTERN.test(name);
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Why a group key is refused, or null. */
export function groupKeyProblem(key: string): string | null {
  if (key.length < 1 || key.length > MAX_GROUP_KEY_LENGTH) {
    return `must be 1..${MAX_GROUP_KEY_LENGTH} characters, got ${key.length}`;
  }
  if (CONTROL.test(key)) return 'must not contain control characters';
  return null;
}

/** Why a queue name is refused, or null. */
export function queueNameProblem(name: string): string | null {
  if (isValidQueueName(name)) return null;
  return `must match ${String(QUEUE_NAME_PATTERN)}, got ${JSON.stringify(name.slice(0, 80))}`;
}

/** Why a concurrency limit is refused, or null. */
export function concurrencyProblem(n: number): string | null {
  if (Number.isSafeInteger(n) && n >= 1 && n <= MAX_QUEUE_CONCURRENCY) return null;
  return `must be an integer 1..${MAX_QUEUE_CONCURRENCY}, got ${n}`;
}

/** How a rate is written, for messages that refuse one. */
export const RATE_FORMS =
  'n/<duration>: a count, a slash, then a whole number with a unit ms, s, m (minutes), h or d ' +
  '(10/1s, 200/500ms, 1000/1h; a bare number after the slash is ms)';

/** How a rate object is written, for messages that refuse one. */
const RATE_OBJECT = '{max: n, intervalMillis: ms}, e.g. {max: 10, intervalMillis: 1000}';

/** Why a rate limit is refused, or null (also for a value that is not a rate object at all). */
export function rateProblem(rate: RateLimit): string | null {
  const given: unknown = rate;
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    return `must be ${RATE_OBJECT}, got ${describeValue(given)}`;
  }
  const { max, intervalMillis } = given as Record<string, unknown>;
  for (const [field, value] of [
    ['max', max],
    ['intervalMillis', intervalMillis],
  ] as const) {
    if (typeof value !== 'number') {
      return `${field} must be a number, got ${describeValue(value)}; a rate is ${RATE_OBJECT}`;
    }
  }
  return boundsProblem(max as number, intervalMillis as number);
}

/** Why a count and an interval (ms) are out of bounds, or null. */
function boundsProblem(max: number, intervalMs: number): string | null {
  if (!Number.isSafeInteger(max) || max < 1 || max > MAX_RATE_COUNT) {
    return `count must be an integer 1..${MAX_RATE_COUNT}, got ${max}`;
  }
  if (
    !Number.isSafeInteger(intervalMs) ||
    intervalMs < MIN_RATE_INTERVAL_MS ||
    intervalMs > MAX_RATE_INTERVAL_MS
  ) {
    return `interval must be ${MIN_RATE_INTERVAL_MS} ms..1 d, got ${intervalMs} ms`;
  }
  return null;
}

function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  // JSON.stringify gives undefined only for functions and symbols.
  const text = JSON.stringify(value) ?? typeof value;
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

const RATE_UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * `n/<duration>` as people write a rate: `10/1s`, `200/500ms`, `1000/1h`
 * (a bare number after the slash is milliseconds). Returns the rate, or what
 * is wrong with the text (bounds included), naming the accepted forms.
 */
export function parseRate(text: string): { rate: RateLimit } | { error: string } {
  const trimmed = text.trim();
  const quoted = JSON.stringify(trimmed.slice(0, 40));
  const match = /^([0-9]{1,10})\/([0-9]{1,10})([A-Za-z]*)$/.exec(trimmed);
  if (match === null) return { error: `expected ${RATE_FORMS}; got ${quoted}` };
  const unit = match[3] === '' ? 'ms' : match[3];
  if (!Object.hasOwn(RATE_UNIT_MS, unit ?? '')) {
    return {
      error: `unknown unit ${JSON.stringify(unit)} in ${quoted}: expected ${RATE_FORMS}`,
    };
  }
  const rate = {
    max: Number(match[1]),
    intervalMillis: Number(match[2]) * RATE_UNIT_MS[unit as keyof typeof RATE_UNIT_MS],
  };
  const problem = boundsProblem(rate.max, rate.intervalMillis);
  return problem === null ? { rate } : { error: `${problem} (in ${quoted})` };
}
