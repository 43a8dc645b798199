/**
 * `ctx.waitForSignal` and `ctx.waitForEvent` on the task-thread side
 * (thread-steps.ts, signal-waits.ts): past the recorded steps they suspend
 * with the wait the coordinator needs; at a recorded step they return its
 * value; a step recorded under another name is the same NON_DETERMINISTIC
 * failure as for any step; the arguments are checked; a coordinator without
 * `signals` gets them refused. Also the thread messages that carry them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LocalErrorCode } from '../../src/protocol/error-codes.js';
import { DtpError } from '../../src/protocol/errors.js';
import { MAX_DELAY_MS } from '../../src/protocol/limits.js';
import type { RecordedStep } from '../../src/protocol/messages.js';
import {
  decodeRequest,
  decodeResponse,
  encodeRequest,
  encodeResponse,
  type RunTaskInput,
} from '../../src/worker/thread-messages.js';
import { AttemptSteps, type Suspension } from '../../src/worker/thread-steps.js';

const SIGNAL = {
  name: 'approve',
  payload: { by: 'ann', ok: true },
  atMillis: 1_700_000_000_000,
};
const EVENT = {
  name: 'order.paid',
  payload: [1, 2],
  key: 'order-7',
  eventId: 'ev-1',
  atMillis: 1_700_000_000_500,
};

function step(name: string, value: unknown): RecordedStep {
  return { name, result: JSON.stringify(value), atMillis: 1 };
}

/** Steps of one attempt with `recorded` steps; what it suspended with, if it did. */
function stepsWith(
  recorded: RecordedStep[],
  signals = true,
): { steps: AttemptSteps; suspended: Suspension[] } {
  const suspended: Suspension[] = [];
  const steps = new AttemptSteps({
    calls: { call: () => Promise.reject(new Error('no calls expected')) },
    jobId: 'job-1',
    recorded,
    total: recorded.length,
    onSuspend: (s) => suspended.push(s),
    signals,
  });
  return { steps, suspended };
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof Error, `expected an Error, got ${String(err)}`);
    return err;
  }
  assert.fail('expected a rejection');
}

/** Settles on the next turn whether or not `promise` has: true when it is still pending. */
async function pending(promise: Promise<unknown>): Promise<boolean> {
  const marker = Symbol('pending');
  const raced = await Promise.race([promise, new Promise((r) => setImmediate(() => r(marker)))]);
  return raced === marker;
}

describe('ctx.waitForSignal and ctx.waitForEvent: replay', () => {
  it('returns the signal a recorded signal wait took, after the earlier steps', async () => {
    const { steps, suspended } = stepsWith([
      step('fetch', 41),
      step('dtp.waitForSignal', { signal: SIGNAL }),
    ]);
    assert.equal(await steps.step('fetch', () => assert.fail('a recorded step runs again')), 41);
    assert.deepEqual(await steps.waitForSignal('approve'), SIGNAL);
    assert.deepEqual(suspended, []);
  });

  it('returns null for a recorded signal wait that timed out', async () => {
    const { steps } = stepsWith([step('dtp.waitForSignal', { signal: null })]);
    assert.equal(await steps.waitForSignal('approve', { timeout: 1_000 }), null);
  });

  it('returns the event a recorded event wait woke on, or null', async () => {
    const { steps } = stepsWith([
      step('dtp.waitForEvent', { event: EVENT }),
      step('dtp.waitForEvent', { event: null }),
    ]);
    assert.deepEqual(await steps.waitForEvent('order.paid', { key: 'order-7' }), EVENT);
    assert.equal(await steps.waitForEvent('order.shipped', { timeout: '1h' }), null);
  });

  it('suspends past the recorded steps with the wait, its timeout rounded up', async () => {
    const { steps, suspended } = stepsWith([step('dtp.waitForSignal', { signal: SIGNAL })]);
    await steps.waitForSignal('approve');
    const second = steps.waitForSignal('approve', { timeout: 1_500.2 });
    assert.equal(await pending(second), true);
    assert.deepEqual(suspended, [{ waitForSignal: { name: 'approve', timeoutMillis: 1_501 } }]);
  });

  it('suspends an event wait with its key and timeout, leaving out what was not given', async () => {
    const first = stepsWith([]);
    void first.steps.waitForEvent('order.paid', { key: 'k', timeout: '2m' });
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(first.suspended, [
      { waitForEvent: { name: 'order.paid', key: 'k', timeoutMillis: 120_000 } },
    ]);
    const zero = stepsWith([]);
    void zero.steps.waitForSignal('go', { timeout: 0 }); // a signal held already, or null at once
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(zero.suspended, [{ waitForSignal: { name: 'go', timeoutMillis: 0 } }]);
    const second = stepsWith([]);
    void second.steps.waitForSignal('go');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(second.suspended, [{ waitForSignal: { name: 'go' } }]);
  });

  for (const [what, recorded, call] of [
    [
      'a sleep where this run waits for a signal',
      step('dtp.sleep', { untilMillis: 5 }),
      (s: AttemptSteps) => s.waitForSignal('approve'),
    ],
    [
      'a signal wait where this run calls a step',
      step('dtp.waitForSignal', { signal: SIGNAL }),
      (s: AttemptSteps) => s.step('fetch', () => 1),
    ],
    [
      'an event wait where this run waits for a signal',
      step('dtp.waitForEvent', { event: EVENT }),
      (s: AttemptSteps) => s.waitForSignal('approve'),
    ],
    [
      'a signal wait where this run waits for an event',
      step('dtp.waitForSignal', { signal: null }),
      (s: AttemptSteps) => s.waitForEvent('order.paid'),
    ],
  ] as const) {
    it(`fails the attempt for good (NON_DETERMINISTIC) at ${what}`, async () => {
      const { steps } = stepsWith([recorded]);
      const err = await rejection(call(steps));
      assert.ok(err instanceof DtpError);
      assert.equal(err.code, LocalErrorCode.NonDeterministic);
      assert.match(err.message, /^NON_DETERMINISTIC: step 0 was recorded as "dtp\./);
      assert.equal(steps.poison, err.message);
      // Whatever the handler makes of it, every later step is refused the same way.
      const again = await rejection(steps.step('later', () => 1));
      assert.equal(again.message, err.message);
    });
  }

  it('fails for good when the recorded signal or event has another name or key', async () => {
    const signal = stepsWith([step('dtp.waitForSignal', { signal: SIGNAL })]);
    const byName = await rejection(signal.steps.waitForSignal('reject'));
    assert.match(byName.message, /^NON_DETERMINISTIC: position 0 took signal "approve"/);
    const event = stepsWith([step('dtp.waitForEvent', { event: EVENT })]);
    const byKey = await rejection(event.steps.waitForEvent('order.paid', { key: 'order-8' }));
    assert.match(byKey.message, /^NON_DETERMINISTIC: position 0 woke on event "order.paid"/);
    // Without a key, an event of any key is the one.
    const anyKey = stepsWith([step('dtp.waitForEvent', { event: EVENT })]);
    assert.deepEqual(await anyKey.steps.waitForEvent('order.paid'), EVENT);
  });

  it('fails (retryably) on a recorded wait whose value is not an outcome', async () => {
    const { steps } = stepsWith([
      step('dtp.waitForSignal', { waitingFor: { signal: 'approve', untilMillis: null } }),
    ]);
    const err = await rejection(steps.waitForSignal('approve'));
    assert.equal(err.name, 'RecordedWaitError');
    assert.match(err.message, /the wait has not ended/);
    assert.equal(steps.poison, null);
  });
});

describe('ctx.waitForSignal and ctx.waitForEvent: refusals', () => {
  it('refuses both with UNSUPPORTED_FEATURE where the coordinator does not offer signals', async () => {
    const { steps, suspended } = stepsWith([], false);
    for (const call of [steps.waitForSignal('approve'), steps.waitForEvent('order.paid')]) {
      const err = await rejection(call);
      assert.ok(err instanceof DtpError);
      assert.equal(err.code, LocalErrorCode.UnsupportedFeature);
      assert.match(err.message, /does not offer signals and events \(feature "signals"\)/);
    }
    assert.deepEqual(suspended, []);
  });

  for (const [what, call, pattern] of [
    ['an empty name', (s: AttemptSteps) => s.waitForSignal(''), /the name must match/],
    ['a name with a blank', (s: AttemptSteps) => s.waitForEvent('a b'), /the name must match/],
    ['a name not a string', (s: AttemptSteps) => s.waitForSignal(7 as never), /a string/],
    ['a timeout below 0', (s: AttemptSteps) => s.waitForSignal('a', { timeout: -1 }), /must be 0/],
    [
      'a timeout past 366 days',
      (s: AttemptSteps) => s.waitForEvent('a', { timeout: MAX_DELAY_MS + 1 }),
      /at most 31622400000 ms/,
    ],
    [
      'a timeout that is no duration',
      (s: AttemptSteps) => s.waitForSignal('a', { timeout: 'soon' }),
      /options\.timeout/,
    ],
    ['an empty key', (s: AttemptSteps) => s.waitForEvent('a', { key: '' }), /1\.\.256/],
    [
      'a key of 257 characters',
      (s: AttemptSteps) => s.waitForEvent('a', { key: 'k'.repeat(257) }),
      /1\.\.256/,
    ],
  ] as const) {
    it(`refuses ${what}, suspending nothing`, async () => {
      const { steps, suspended } = stepsWith([]);
      const err = await rejection(call(steps));
      assert.match(err.message, pattern);
      assert.deepEqual(suspended, []);
      assert.equal(steps.poison, null);
    });
  }

  it('accepts a timeout of exactly 366 days and a key of 256 characters', async () => {
    const { steps, suspended } = stepsWith([]);
    void steps.waitForEvent('a', { key: 'k'.repeat(256), timeout: MAX_DELAY_MS });
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(suspended, [
      { waitForEvent: { name: 'a', key: 'k'.repeat(256), timeoutMillis: MAX_DELAY_MS } },
    ]);
  });
});

describe('thread messages of signal and event waits', () => {
  it('carry a RUN_TASK with signals offered, and each kind of TASK_SUSPENDED', () => {
    const input: RunTaskInput = {
      type: 'RUN_TASK',
      taskType: 't',
      payload: {},
      jobId: 'j',
      attemptId: 'a',
      attemptNumber: 1,
      maxAttempts: null,
      deadlineAtMs: null,
      parents: null,
      traceContext: null,
      steps: [],
      stepCount: 0,
      signals: true,
    };
    const request = decodeRequest(encodeRequest({ requestId: 3, input, slot: 1 }));
    assert.equal(request?.input.type === 'RUN_TASK' && request.input.signals, true);
    for (const output of [
      { type: 'TASK_SUSPENDED', waitForSignal: { name: 'approve', timeoutMillis: 10 } },
      { type: 'TASK_SUSPENDED', waitForEvent: { name: 'paid', key: 'k' } },
      { type: 'TASK_SUSPENDED', sleepMillis: 0 },
      { type: 'TASK_SUSPENDED', waitForJobId: 'other' },
    ] as const) {
      const wire = structuredClone(encodeResponse({ requestId: 4, output }));
      assert.deepEqual(decodeResponse(wire), { requestId: 4, output });
    }
  });
});
