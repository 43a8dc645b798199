/**
 * Submission retry with full-jitter exponential back-off.
 *
 * What is resent, and why:
 * - a retryable {@link SubmitRejectedError}: admission control created nothing,
 *   so resending cannot duplicate a job;
 * - a {@link TransportError}, only when the submission carries an idempotency
 *   key: the first copy may have been accepted, and only the key makes the
 *   coordinator answer a resend with the original job instead of a second one;
 * - nothing else. A {@link RemoteError} means "do not resend as is".
 *
 * Before retry k (1-based) the delay is uniform in [0, min(max, base·2^(k-1))]
 * milliseconds. Time and randomness are injected so tests run without clocks.
 */
import { setTimeout as sleepMs } from 'node:timers/promises';
import { SubmitRejectedError, TransportError } from './errors.js';

/** Client-side defaults of `--submit-retry-base-millis` / `--submit-retry-max-millis`. */
export const DEFAULT_SUBMIT_RETRY_BASE_DELAY_MS = 200;
export const DEFAULT_SUBMIT_RETRY_MAX_DELAY_MS = 5_000;

/** How hard to retry; the defaults are those of the CLI. */
export interface SubmitRetryPolicy {
  /** Retries after the first attempt (default 0: no retry). */
  retries?: number;
  /** Ceiling of the first delay, in ms (default 200). */
  baseDelayMs?: number;
  /** Ceiling of every delay, in ms (default 5000). */
  maxDelayMs?: number;
}

export interface SubmitRetryOptions extends SubmitRetryPolicy {
  /** Whether the submission carries an idempotency key (enables transport retries). */
  hasIdempotencyKey: boolean;
  /** Waits this many ms (default: node:timers/promises setTimeout). */
  sleep?: (delayMs: number) => Promise<void>;
  /** Uniform in [0, 1) (default Math.random). */
  random?: () => number;
  /** Told about each retry before its delay (logging, tests). */
  onRetry?: (event: RetryEvent) => void;
}

export interface RetryEvent {
  /** 1-based number of the retry about to happen. */
  retry: number;
  delayMs: number;
  /** What the previous attempt failed with. */
  error: Error;
}

/**
 * The ceiling of the delay before retry k: min(maxDelayMs, baseDelayMs·2^(k-1)).
 * Exact for every k >= 1: the doubling stops as soon as it reaches the ceiling,
 * so a huge k neither overflows nor loops.
 */
export function backoffCeilingMs(retry: number, baseDelayMs: number, maxDelayMs: number): number {
  assertNonNegativeInt('retry', retry);
  assertNonNegativeInt('baseDelayMs', baseDelayMs);
  assertNonNegativeInt('maxDelayMs', maxDelayMs);
  if (retry < 1) throw new RangeError(`retry must be >= 1, got ${retry}`);
  if (baseDelayMs === 0) return 0;
  // With base >= 1, base·2^53 exceeds every safe-integer max: stop doubling there.
  const exponent = retry - 1;
  if (exponent >= 53) return maxDelayMs;
  return Math.min(maxDelayMs, baseDelayMs * 2 ** exponent);
}

/** A full-jitter delay before retry k: an integer uniform in [0, ceiling]. */
export function fullJitterDelayMs(
  retry: number,
  baseDelayMs: number,
  maxDelayMs: number,
  random: () => number,
): number {
  const ceilingMs = backoffCeilingMs(retry, baseDelayMs, maxDelayMs);
  const r = random();
  if (!(r >= 0 && r < 1)) throw new RangeError(`random() must be in [0, 1), got ${r}`);
  return Math.min(ceilingMs, Math.floor(r * (ceilingMs + 1)));
}

/** True when a failed attempt may be resent under the rules above. */
export function isRetryableSubmitError(err: unknown, hasIdempotencyKey: boolean): boolean {
  if (err instanceof SubmitRejectedError) return err.retryable;
  if (err instanceof TransportError) return hasIdempotencyKey;
  return false;
}

/**
 * Runs `submitOnce` and retries it as described in the module comment. The
 * last error reaches the caller unchanged when the budget runs out or the
 * error is not retryable. `submitOnce` must dial a fresh connection when the
 * previous one broke.
 */
export async function submitWithRetry<T>(
  submitOnce: (attempt: number) => Promise<T>,
  options: SubmitRetryOptions,
): Promise<T> {
  const retries = options.retries ?? 0;
  const baseDelayMs = options.baseDelayMs ?? DEFAULT_SUBMIT_RETRY_BASE_DELAY_MS;
  const maxDelayMs = options.maxDelayMs ?? DEFAULT_SUBMIT_RETRY_MAX_DELAY_MS;
  assertNonNegativeInt('retries', retries);
  const sleep = options.sleep ?? ((delayMs: number) => sleepMs(delayMs));
  const random = options.random ?? Math.random;
  for (let attempt = 1; ; attempt++) {
    try {
      return await submitOnce(attempt);
    } catch (err) {
      const retry = attempt;
      if (retry > retries || !isRetryableSubmitError(err, options.hasIdempotencyKey)) throw err;
      const delayMs = fullJitterDelayMs(retry, baseDelayMs, maxDelayMs, random);
      options.onRetry?.({ retry, delayMs, error: err as Error });
      await sleep(delayMs);
    }
  }
}

function assertNonNegativeInt(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
  }
}
