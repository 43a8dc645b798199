/**
 * Waiting in tests: poll a predicate until it holds or a deadline passes.
 * Used instead of fixed sleeps, so a test is as fast as the system allows and
 * fails with a clear message when it never gets there.
 */
import { setTimeout as delay } from 'node:timers/promises';

export interface UntilOptions {
  /** Give up after this long (default 5000 ms). */
  timeoutMs?: number;
  /** Time between polls (default 5 ms). */
  intervalMs?: number;
  /** Described in the failure message. */
  what?: string;
}

/**
 * Resolves with the first truthy value `predicate` returns; rejects after
 * `timeoutMs`. The predicate may be async.
 */
export async function until<T>(
  predicate: () => T | Promise<T>,
  options: UntilOptions = {},
): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? 5_000;
  const intervalMs = options.intervalMs ?? 5;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await predicate();
      if (value) return value;
      last = value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      const seen = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${options.what ?? 'a condition'} (last: ${seen})`,
      );
    }
    await delay(intervalMs);
  }
}

/**
 * Settles like `promise`, or resolves to `fallback` after `timeoutMs` — and
 * clears its timer either way, so a finished test leaves nothing pending.
 */
export async function orTimeout<T, F>(
  promise: Promise<T>,
  timeoutMs: number,
  fallback: F,
): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<F>((resolve) => {
    timer = setTimeout(() => resolve(fallback), timeoutMs);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}
