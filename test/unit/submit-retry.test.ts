import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  RemoteError,
  SubmitRejectedError,
  TransportError,
  UnexpectedReplyError,
} from '../../src/client/errors.js';
import {
  backoffCeilingMs,
  fullJitterDelayMs,
  submitWithRetry,
} from '../../src/client/submit-retry.js';
import type { SubmitRetryOptions } from '../../src/client/submit-retry.js';

const rejected = (retryable = true): SubmitRejectedError =>
  new SubmitRejectedError({
    reason: 'too many active jobs',
    activeCount: 10,
    limit: 10,
    retryable,
  });

/** A scripted submitOnce: each call takes the next outcome (an Error is thrown). */
function scripted<T>(outcomes: readonly (T | Error)[]): {
  submitOnce: () => Promise<T>;
  calls: () => number;
} {
  let calls = 0;
  return {
    submitOnce: () => {
      const outcome = outcomes[calls++];
      if (outcome === undefined) return Promise.reject(new Error('no more scripted outcomes'));
      return outcome instanceof Error ? Promise.reject(outcome) : Promise.resolve(outcome);
    },
    calls: () => calls,
  };
}

/** Records the delays asked for; never actually waits. */
function fakeSleep(): { sleep: (ms: number) => Promise<void>; delays: number[] } {
  const delays: number[] = [];
  return {
    delays,
    sleep: (ms) => {
      delays.push(ms);
      return Promise.resolve();
    },
  };
}

function options(overrides: Partial<SubmitRetryOptions>): SubmitRetryOptions {
  return { hasIdempotencyKey: false, random: () => 0.5, ...overrides };
}

describe('submitWithRetry', () => {
  it('eventually succeeds when capacity frees up', async () => {
    const { submitOnce, calls } = scripted([rejected(), rejected(), 'job-1']);
    const { sleep, delays } = fakeSleep();
    const result = await submitWithRetry(submitOnce, options({ retries: 5, sleep }));
    assert.equal(result, 'job-1');
    assert.equal(calls(), 3);
    assert.equal(delays.length, 2);
  });

  it('hands the typed rejection to the caller after exactly retries+1 attempts', async () => {
    const { submitOnce, calls } = scripted(Array.from({ length: 10 }, () => rejected()));
    const { sleep, delays } = fakeSleep();
    await assert.rejects(
      submitWithRetry(submitOnce, options({ retries: 3, sleep })),
      (err: unknown) => err instanceof SubmitRejectedError && err.activeCount === 10,
    );
    assert.equal(calls(), 4);
    assert.equal(delays.length, 3);
  });

  it('does not retry by default', async () => {
    const { submitOnce, calls } = scripted([rejected(), 'job-1']);
    const { sleep, delays } = fakeSleep();
    await assert.rejects(submitWithRetry(submitOnce, options({ sleep })), SubmitRejectedError);
    assert.equal(calls(), 1);
    assert.deepEqual(delays, []);
  });

  it('never retries a rejection marked not retryable', async () => {
    const { submitOnce, calls } = scripted([rejected(false), 'job-1']);
    const { sleep } = fakeSleep();
    await assert.rejects(submitWithRetry(submitOnce, options({ retries: 5, sleep })));
    assert.equal(calls(), 1);
  });

  it('never resends after an error reply', async () => {
    for (const hasIdempotencyKey of [false, true]) {
      const remote = new RemoteError({ message: 'Invalid payload: text missing', code: null });
      const { submitOnce, calls } = scripted([remote, 'job-1']);
      const { sleep } = fakeSleep();
      await assert.rejects(
        submitWithRetry(submitOnce, options({ retries: 5, sleep, hasIdempotencyKey })),
        (err: unknown) => err === remote && remote.code === 'INVALID_PAYLOAD',
      );
      assert.equal(calls(), 1);
    }
  });

  it('never retries other failures', async () => {
    const { submitOnce, calls } = scripted([new UnexpectedReplyError('SUBMIT_JOB', 'WORKER_LIST')]);
    const { sleep } = fakeSleep();
    await assert.rejects(
      submitWithRetry(submitOnce, options({ retries: 5, sleep, hasIdempotencyKey: true })),
      UnexpectedReplyError,
    );
    assert.equal(calls(), 1);
  });

  it('retries a transport failure only when the submission has an idempotency key', async () => {
    const lost = (): TransportError => new TransportError('CONNECTION_LOST', 'connection closed');
    const without = scripted([lost(), 'job-1']);
    await assert.rejects(
      submitWithRetry(without.submitOnce, options({ retries: 3, sleep: fakeSleep().sleep })),
      TransportError,
    );
    assert.equal(without.calls(), 1);

    const withKey = scripted([lost(), new TransportError('CONNECT_FAILED', 'refused'), 'job-1']);
    const result = await submitWithRetry(
      withKey.submitOnce,
      options({ retries: 3, sleep: fakeSleep().sleep, hasIdempotencyKey: true }),
    );
    assert.equal(result, 'job-1');
    assert.equal(withKey.calls(), 3);
  });

  it('draws delay k uniformly from [0, min(max, base*2^(k-1))]', async () => {
    const base = 200;
    const max = 5_000;
    for (const r of [0, 0.999_999_999]) {
      const { submitOnce } = scripted(Array.from({ length: 8 }, () => rejected()));
      const { sleep, delays } = fakeSleep();
      const run = submitWithRetry(
        submitOnce,
        options({ retries: 7, baseDelayMs: base, maxDelayMs: max, sleep, random: () => r }),
      );
      await assert.rejects(run, SubmitRejectedError);
      const ceilings = [200, 400, 800, 1600, 3200, 5000, 5000];
      assert.deepEqual(delays, r === 0 ? ceilings.map(() => 0) : ceilings);
    }
  });

  it('reports each retry before sleeping', async () => {
    const events: number[] = [];
    const { submitOnce } = scripted([rejected(), 'ok']);
    await submitWithRetry(
      submitOnce,
      options({ retries: 1, sleep: fakeSleep().sleep, onRetry: (e) => events.push(e.retry) }),
    );
    assert.deepEqual(events, [1]);
  });
});

describe('backoff', () => {
  it('doubles from base up to max', () => {
    assert.equal(backoffCeilingMs(1, 200, 5_000), 200);
    assert.equal(backoffCeilingMs(2, 200, 5_000), 400);
    assert.equal(backoffCeilingMs(5, 200, 5_000), 3_200);
    assert.equal(backoffCeilingMs(6, 200, 5_000), 5_000);
    assert.equal(backoffCeilingMs(3, 0, 5_000), 0);
  });

  it('does not overflow for very large k', () => {
    for (const k of [53, 54, 60, 1_000, 1_000_000]) {
      assert.equal(backoffCeilingMs(k, 200, 5_000), 5_000);
      assert.equal(
        backoffCeilingMs(k, 1, Number.MAX_SAFE_INTEGER),
        k <= 53 ? 2 ** (k - 1) : Number.MAX_SAFE_INTEGER,
      );
      const delay = fullJitterDelayMs(k, 200, 5_000, () => 0.999_999);
      assert.ok(Number.isInteger(delay) && delay >= 0 && delay <= 5_000, `k=${k}: ${delay}`);
    }
  });

  it('keeps every jittered delay within [0, ceiling]', () => {
    let seed = 42;
    const random = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let k = 1; k <= 60; k++) {
      const ceiling = backoffCeilingMs(k, 200, 5_000);
      for (let i = 0; i < 50; i++) {
        const delay = fullJitterDelayMs(k, 200, 5_000, random);
        assert.ok(delay >= 0 && delay <= ceiling, `k=${k}: ${delay} outside [0, ${ceiling}]`);
      }
    }
  });

  it('rejects nonsense parameters', () => {
    assert.throws(() => backoffCeilingMs(0, 200, 5_000), RangeError);
    assert.throws(() => backoffCeilingMs(1, -1, 5_000), RangeError);
    assert.throws(() => fullJitterDelayMs(1, 200, 5_000, () => 1), RangeError);
  });
});
