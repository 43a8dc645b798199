/** Exponential back-off: doubling from the base, capped, finite for any attempt. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { retryDelayMs } from '../../src/coordinator/core/retry-policy.js';

describe('retryDelayMs', () => {
  it('doubles from the base when attempts 1..4 fail', () => {
    assert.deepEqual(
      [1, 2, 3, 4].map((n) => retryDelayMs(n, 100, 60_000)),
      [100, 200, 400, 800],
    );
  });

  it('caps the delay at the maximum when doubling passes it', () => {
    assert.equal(retryDelayMs(5, 100, 1_000), 1_000, '1600 capped');
    assert.equal(retryDelayMs(4, 100, 800), 800, 'exactly the cap');
    assert.equal(retryDelayMs(4, 100, 799), 799);
    assert.equal(retryDelayMs(1, 5_000, 1_000), 1_000, 'base above the cap');
  });

  it('stays finite and equal to the maximum when the attempt number is huge', () => {
    for (const attempt of [60, 1_000, 1_000_000, Number.MAX_SAFE_INTEGER]) {
      const delay = retryDelayMs(attempt, 100, 30_000);
      assert.ok(Number.isFinite(delay), `attempt ${attempt}`);
      assert.equal(delay, 30_000, `attempt ${attempt}`);
    }
  });

  it('never grows past the maximum and never shrinks when attempts increase', () => {
    let previous = 0;
    for (let attempt = 1; attempt <= 200; attempt++) {
      const delay = retryDelayMs(attempt, 7, 100_000);
      assert.ok(delay >= previous && delay <= 100_000, `attempt ${attempt}: ${delay}`);
      previous = delay;
    }
  });

  it('retries at once when the base is 0', () => {
    for (const attempt of [1, 2, 10, 1_000]) assert.equal(retryDelayMs(attempt, 0, 10_000), 0);
  });

  it('returns the base (capped) when the attempt number is below 1', () => {
    assert.equal(retryDelayMs(0, 100, 10_000), 100);
    assert.equal(retryDelayMs(-3, 100, 50), 50);
  });
});
