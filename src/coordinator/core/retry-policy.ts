/**
 * Exponential back-off between attempts: the delay before the retry that
 * follows attempt n is min(max, base * 2^(n-1)).
 */

/**
 * @param attempt the attempt that just failed, 1-based.
 * @returns delay in ms; never overflows (2^(n-1) is capped before it can).
 */
export function retryDelayMs(attempt: number, baseDelayMs: number, maxDelayMs: number): number {
  if (attempt < 1 || baseDelayMs <= 0) return Math.min(Math.max(baseDelayMs, 0), maxDelayMs);
  // Once base * 2^k passes max, more doubling cannot matter; stop before
  // 2^k leaves the range of exact doubles.
  let delay = baseDelayMs;
  for (let k = 1; k < attempt; k++) {
    delay *= 2;
    if (delay >= maxDelayMs) return maxDelayMs;
  }
  return Math.min(delay, maxDelayMs);
}
