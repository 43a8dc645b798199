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

/** Why a rate limit is refused, or null. */
export function rateProblem(rate: RateLimit): string | null {
  if (!Number.isSafeInteger(rate.max) || rate.max < 1 || rate.max > MAX_RATE_COUNT) {
    return `count must be 1..${MAX_RATE_COUNT}, got ${rate.max}`;
  }
  const d = rate.intervalMillis;
  if (!Number.isSafeInteger(d) || d < MIN_RATE_INTERVAL_MS || d > MAX_RATE_INTERVAL_MS) {
    return `interval must be ${MIN_RATE_INTERVAL_MS} ms..1 d, got ${d} ms`;
  }
  return null;
}

const RATE_UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * `n/<duration>` as people write a rate: `10/1s`, `200/500ms`, `1000/1h`
 * (a bare number after the slash is milliseconds). Returns the rate, or what
 * is wrong with the text (bounds included).
 */
export function parseRate(text: string): { rate: RateLimit } | { error: string } {
  const match = /^([0-9]{1,10})\/([0-9]{1,10})(ms|s|m|h|d)?$/.exec(text.trim());
  if (match === null) {
    return {
      error: `expected n/<duration> such as 10/1s or 200/500ms, got ${JSON.stringify(text.slice(0, 40))}`,
    };
  }
  const unit = (match[3] ?? 'ms') as keyof typeof RATE_UNIT_MS;
  const rate = { max: Number(match[1]), intervalMillis: Number(match[2]) * RATE_UNIT_MS[unit] };
  const problem = rateProblem(rate);
  return problem === null ? { rate } : { error: problem };
}
