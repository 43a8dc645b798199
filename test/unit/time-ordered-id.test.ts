/**
 * Time-ordered job ids (UUID version 7): the layout, strict order within a
 * process whatever the clock does, and the time they carry.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TimeOrderedIds } from '../../src/coordinator/term/time-ordered-id.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The milliseconds in the first 48 bits. */
function msOf(id: string): number {
  return parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}

describe('TimeOrderedIds', () => {
  it('makes version 7 UUIDs that carry the clock’s millisecond', () => {
    const ids = new TimeOrderedIds(() => 1_764_547_200_123);
    const id = ids.next();
    assert.match(id, UUID_V7);
    assert.equal(msOf(id), 1_764_547_200_123);
  });

  it('keeps ids in strictly increasing order when many share a millisecond or the clock steps back', () => {
    let now = 1_764_547_200_000;
    const ids = new TimeOrderedIds(() => now);
    const made: string[] = [];
    for (let i = 0; i < 10_000; i++) {
      if (i === 5_000) now -= 60_000; // the clock steps back a minute
      if (i % 3_000 === 0) now += 1;
      made.push(ids.next());
    }
    for (let i = 1; i < made.length; i++) {
      assert.ok((made[i - 1] as string) < (made[i] as string), `id ${i} is not after id ${i - 1}`);
    }
    assert.equal(new Set(made).size, made.length);
    for (const id of made) assert.match(id, UUID_V7);
  });

  it('borrows the next millisecond after 4,096 ids in one', () => {
    const ids = new TimeOrderedIds(() => 1_000);
    const first = ids.next();
    for (let i = 1; i < 4_096; i++) ids.next();
    const borrowed = ids.next();
    assert.equal(msOf(first), 1_000);
    assert.equal(msOf(borrowed), 1_001);
    assert.ok(first < borrowed);
  });

  it('gives two generators on one clock different ids', () => {
    const a = new TimeOrderedIds(() => 5);
    const b = new TimeOrderedIds(() => 5);
    const fromA = new Set(Array.from({ length: 1_000 }, () => a.next()));
    for (let i = 0; i < 1_000; i++) assert.equal(fromA.has(b.next()), false);
  });
});
