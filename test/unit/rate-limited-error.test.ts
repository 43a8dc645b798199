/**
 * RateLimitedError: its bounds and defaults; its wait and scope crossing
 * from a task thread as data; and the TASK_RESULT it becomes, with the
 * `rateLimited` field only for a coordinator that offers `rateLimits`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Feature } from '../../src/protocol/features.js';
import { MAX_RETRY_AFTER_MS } from '../../src/protocol/limits.js';
import { RateLimitedError } from '../../src/worker/index.js';
import { resultMessage } from '../../src/worker/results.js';
import type { TaskOutcome } from '../../src/worker/task-pool.js';
import { decodeResponse, encodeResponse } from '../../src/worker/thread-messages.js';

describe('RateLimitedError', () => {
  it('holds its wait and scope, scope job and a message naming both by default', () => {
    const err = new RateLimitedError({ retryAfterMs: 1_500 });
    assert.ok(err instanceof Error);
    assert.deepEqual([err.name, err.retryAfterMs, err.scope], ['RateLimitedError', 1_500, 'job']);
    assert.equal(err.message, 'retry after 1500 ms (scope job)');
    assert.equal('cause' in err, false);
  });

  it('keeps a message, a cause and each scope it is given', () => {
    for (const scope of ['job', 'group', 'queue'] as const) {
      const cause = new Error('429 from the API');
      const err = new RateLimitedError({ retryAfterMs: 1, scope, message: 'slow down', cause });
      assert.deepEqual([err.scope, err.message, err.cause], [scope, 'slow down', cause]);
    }
    assert.equal(
      new RateLimitedError({ retryAfterMs: MAX_RETRY_AFTER_MS }).retryAfterMs,
      86_400_000,
    );
  });

  it('refuses a wait that is not an integer of 1 ms..1 d, an unknown scope and a message not text', () => {
    for (const retryAfterMs of [0, -1, MAX_RETRY_AFTER_MS + 1]) {
      assert.throws(() => new RateLimitedError({ retryAfterMs }), RangeError);
    }
    for (const retryAfterMs of [1.5, Number.NaN, Infinity, '100' as unknown as number]) {
      assert.throws(() => new RateLimitedError({ retryAfterMs }), TypeError);
    }
    assert.throws(
      () => new RateLimitedError({ retryAfterMs: 1, scope: 'all' as 'job' }),
      TypeError,
    );
    assert.throws(
      () => new RateLimitedError({ retryAfterMs: 1, message: 42 as unknown as string }),
      TypeError,
    );
    assert.throws(
      () => new RateLimitedError(undefined as unknown as { retryAfterMs: number }),
      TypeError,
    );
  });
});

describe('a rate-limited outcome', () => {
  const limited = { retryAfterMillis: 2_000, scope: 'queue' } as const;

  it('crosses from a task thread as data, and an ordinary failure stays without it', () => {
    const failed = {
      type: 'TASK_FAILED',
      error: 'RATE_LIMITED: slow down',
      retryable: true,
      rateLimited: limited,
    } as const;
    const wire = structuredClone(encodeResponse({ requestId: 7, output: failed }));
    assert.deepEqual(decodeResponse(wire), { requestId: 7, output: failed });
    const plain = { type: 'TASK_FAILED', error: 'boom', retryable: false } as const;
    assert.deepEqual(decodeResponse(encodeResponse({ requestId: 8, output: plain })), {
      requestId: 8,
      output: plain,
    });
    assert.equal(decodeResponse([5, 9, 'x', true, { retryAfterMillis: 1, scope: 'all' }]), null);
  });

  it('carries rateLimited in TASK_RESULT only to a coordinator that offers rateLimits', () => {
    const outcome: TaskOutcome = {
      success: false,
      error: 'RATE_LIMITED: slow down',
      cancelled: false,
      retryable: true,
      rateLimited: limited,
    };
    const ids = { jobId: 'j1', attemptId: 'a1' };
    const offered = resultMessage(
      'w1',
      ids,
      outcome,
      new Set<Feature>(['rateLimits', 'retryable']),
    );
    assert.deepEqual(
      [offered.success, offered.error, offered.rateLimited, offered.retryable],
      [false, 'RATE_LIMITED: slow down', limited, undefined],
    );
    const plain = resultMessage('w1', ids, outcome, new Set<Feature>(['retryable', 'requeue']));
    assert.deepEqual(
      [plain.success, plain.error, 'rateLimited' in plain, plain.retryable],
      [false, 'RATE_LIMITED: slow down', false, undefined],
    );
  });
});
