/** The worker's progress throttle: one report per interval, the latest always sent. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ProgressThrottle,
  type Progress,
  type ThrottleTimers,
} from '../../src/worker/progress-throttle.js';

/** A manual clock with one-shot timers. */
class FakeTimers implements ThrottleTimers {
  nowMs = 0;
  #timers = new Map<number, { at: number; fn: () => void }>();
  #next = 1;
  now = (): number => this.nowMs;
  setTimeout = (fn: () => void, ms: number): unknown => {
    const id = this.#next++;
    this.#timers.set(id, { at: this.nowMs + ms, fn });
    return id;
  };
  clearTimeout = (handle: unknown): void => {
    this.#timers.delete(handle as number);
  };
  advance(ms: number): void {
    this.nowMs += ms;
    for (const [id, timer] of [...this.#timers]) {
      if (timer.at <= this.nowMs) {
        this.#timers.delete(id);
        timer.fn();
      }
    }
  }
  get pending(): number {
    return this.#timers.size;
  }
}

const p = (fraction: number): Progress => ({ fraction, message: null });

describe('progress throttle', () => {
  it('sends the first report at once and the latest of a burst at the end of the interval', () => {
    const timers = new FakeTimers();
    const sent: number[] = [];
    const throttle = new ProgressThrottle(250, (x) => sent.push(x.fraction), timers);
    throttle.report(p(0.1));
    for (let i = 2; i <= 9; i++) throttle.report(p(i / 10));
    assert.deepEqual(sent, [0.1]);
    timers.advance(249);
    assert.deepEqual(sent, [0.1]);
    timers.advance(1);
    assert.deepEqual(sent, [0.1, 0.9]);
    assert.equal(timers.pending, 0);
  });

  it('sends a report at once when the interval has passed since the last', () => {
    const timers = new FakeTimers();
    const sent: number[] = [];
    const throttle = new ProgressThrottle(250, (x) => sent.push(x.fraction), timers);
    throttle.report(p(0.1));
    timers.advance(300);
    throttle.report(p(0.2));
    assert.deepEqual(sent, [0.1, 0.2]);
  });

  it('flushes what waits (before a result) and drops it when disposed', () => {
    const timers = new FakeTimers();
    const sent: number[] = [];
    const throttle = new ProgressThrottle(250, (x) => sent.push(x.fraction), timers);
    throttle.report(p(0.1));
    throttle.report(p(0.5));
    throttle.flush();
    assert.deepEqual(sent, [0.1, 0.5]);
    throttle.report(p(0.7));
    throttle.dispose();
    timers.advance(1_000);
    assert.deepEqual(sent, [0.1, 0.5]);
    assert.equal(timers.pending, 0);
  });
});
