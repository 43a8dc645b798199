/**
 * A worker's held list when it registers again: what fits the registration
 * frame is listed there, the rest goes in HELD_ATTEMPTS parts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PENDING_MAX_FRAME_BYTES } from '../../src/net/inbound-budget.js';
import { MAX_HELD_ATTEMPTS_PER_MESSAGE } from '../../src/protocol/limits.js';
import type { HeldAttempt } from '../../src/protocol/messages.js';
import { heldParts, splitHeld } from '../../src/worker/held-list.js';

function held(n: number): HeldAttempt[] {
  const id = (kind: string, i: number): string =>
    `0193a7b2-${kind}-7000-8000-${String(i).padStart(12, '0')}`;
  return Array.from({ length: n }, (_, i) => ({ jobId: id('1111', i), attemptId: id('2222', i) }));
}

const REGISTER = {
  type: 'WORKER_REGISTER' as const,
  workerId: 'w',
  capacity: 1_024,
  slots: 10_000,
  taskTypes: ['SLEEP', 'SHA256'],
};

describe('held lists', () => {
  it('lists all held attempts in the registration when they fit', () => {
    const { listed, rest } = splitHeld(REGISTER, held(100));
    assert.equal(listed.length, 100);
    assert.deepEqual(rest, []);
  });

  it('lists as many as fit the registration frame and leaves the rest for HELD_ATTEMPTS', () => {
    const all = held(14_000);
    const { listed, rest } = splitHeld(REGISTER, all);
    const frame = JSON.stringify({ ...REGISTER, heldAttempts: listed, moreHeld: true });
    assert.ok(frame.length < PENDING_MAX_FRAME_BYTES, `${frame.length} bytes`);
    assert.ok(listed.length > 1_000, `${listed.length} listed`);
    assert.deepEqual([...listed, ...rest], all);
    const parts = heldParts(rest);
    assert.ok(parts.every((part) => part.length <= MAX_HELD_ATTEMPTS_PER_MESSAGE));
    assert.deepEqual(parts.flat(), rest);
  });

  it('sends one empty part when nothing is left', () => {
    assert.deepEqual(heldParts([]), [[]]);
  });
});
