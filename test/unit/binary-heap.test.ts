/** The binary min-heap: order, stability of size, and a model-based property test. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { BinaryHeap } from '../../src/coordinator/core/binary-heap.js';

const ascending = (a: number, b: number): boolean => a < b;

function drain<T>(heap: BinaryHeap<T>): T[] {
  const out: T[] = [];
  for (let item = heap.pop(); item !== undefined; item = heap.pop()) out.push(item);
  return out;
}

describe('BinaryHeap', () => {
  it('returns undefined from peek and pop when empty', () => {
    const heap = new BinaryHeap(ascending);
    assert.equal(heap.size, 0);
    assert.equal(heap.peek(), undefined);
    assert.equal(heap.pop(), undefined);
    assert.equal(heap.size, 0);
  });

  it('pops items in comparator order when pushed in any order', () => {
    const heap = new BinaryHeap(ascending);
    for (const n of [5, 3, 9, 1, 1, 7, 2]) heap.push(n);
    assert.equal(heap.size, 7);
    assert.equal(heap.peek(), 1);
    assert.deepEqual(drain(heap), [1, 1, 2, 3, 5, 7, 9]);
  });

  it('orders by the comparator when it is a max-heap comparator', () => {
    const heap = new BinaryHeap((a: number, b: number) => a > b);
    for (const n of [2, 8, 4]) heap.push(n);
    assert.deepEqual(drain(heap), [8, 4, 2]);
  });

  it('matches a sorted-array model when pushes and pops interleave', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('push' as const), value: fc.integer({ min: -50, max: 50 }) }),
      fc.record({ kind: fc.constant('pop' as const) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const heap = new BinaryHeap(ascending);
        const model: number[] = [];
        for (const o of ops) {
          if (o.kind === 'push') {
            heap.push(o.value);
            model.push(o.value);
            model.sort((a, b) => a - b);
          } else {
            assert.equal(heap.pop(), model.shift());
          }
          assert.equal(heap.size, model.length);
          assert.equal(heap.peek(), model[0]);
        }
        assert.deepEqual(drain(heap), model);
      }),
      { numRuns: 300, seed: 42 },
    );
  });

  it('breaks ties by a second key when the comparator has one', () => {
    type Entry = { at: number; id: number };
    const heap = new BinaryHeap<Entry>((a, b) => a.at < b.at || (a.at === b.at && a.id < b.id));
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 100 }), (ats) => {
        const entries = ats.map((at, id) => ({ at, id }));
        for (const e of entries) heap.push(e);
        const expected = [...entries].sort((a, b) => a.at - b.at || a.id - b.id);
        assert.deepEqual(drain(heap), expected);
      }),
      { numRuns: 200, seed: 7 },
    );
  });
});
