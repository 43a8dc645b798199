/**
 * Every timed input of one term, in one place: the sweep tick, the deadline
 * of each pending WAIT_JOB (one timer for all of them, wait-timers.ts), the
 * core's wake-up, and (a shard of a sharded database) the outbox's polling. The core owns no timer; it says what time it needs (an
 * `armWait` effect, a `wakeAt` effect) and this arms it; the firing comes
 * back as an input, handled like any other.
 *
 * The wake-up is one timer for the earliest instant the core needs an input
 * of its own (a delayed job falling due, a schedule's tick, anything timed
 * that a later mechanism adds): each `wakeAt` replaces the previous one, and
 * its firing is one `wake` input. A time further ahead than a Node.js timer
 * can wait is reached in steps: an early `wake` costs the core one look at
 * its clock, after which it states its wake-up again.
 *
 * All timers of a term die with it ({@link TermClock.stop}).
 */
import type { CoreInput } from '../core/types.js';
import { MAX_TIMER_MS } from '../../common/bounds.js';
import { WaitTimers } from './wait-timers.js';

/** What a clock's timers fire. */
export interface ClockInputs {
  /** The sweep's period came (the term hands the tick on after this turn's frames). */
  sweep(): void;
  /** A WAIT_JOB's timeout passed. */
  waitExpired(input: Extract<CoreInput, { kind: 'waitExpired' }>): void;
  /** The instant of the last `wakeAt` came. */
  wake(): void;
  /** Time to read the outbox again (a shard of a sharded database). */
  outboxPoll?(): void;
}

export class TermClock {
  readonly #sweepIntervalMs: number;
  readonly #inputs: ClockInputs;
  readonly #waits: WaitTimers;
  #sweep: NodeJS.Timeout | null = null;
  #wake: NodeJS.Timeout | null = null;
  #outboxPoll: NodeJS.Timeout | null = null;
  #stopped = false;

  constructor(sweepIntervalMs: number, inputs: ClockInputs) {
    this.#sweepIntervalMs = sweepIntervalMs;
    this.#inputs = inputs;
    this.#waits = new WaitTimers((connId, requestId) =>
      this.#inputs.waitExpired({ kind: 'waitExpired', connId, requestId }),
    );
  }

  /** Starts the sweep. */
  startSweep(): void {
    if (this.#stopped || this.#sweep !== null) return;
    this.#sweep = setInterval(() => this.#inputs.sweep(), this.#sweepIntervalMs);
  }

  /** Starts reading the outbox every `intervalMs` (the term skips a turn while a read is out). */
  startOutboxPoll(intervalMs: number): void {
    if (this.#stopped || this.#outboxPoll !== null) return;
    this.#outboxPoll = setInterval(() => this.#inputs.outboxPoll?.(), intervalMs);
  }

  /**
   * One `wake` input at `atMs` (epoch ms, this process's clock; at once if
   * it has passed), replacing the previous request; null = none.
   */
  wakeAt(atMs: number | null, nowMs: number = Date.now()): void {
    if (this.#wake !== null) clearTimeout(this.#wake);
    this.#wake = null;
    if (this.#stopped || atMs === null) return;
    const delayMs = Math.min(MAX_TIMER_MS, Math.max(0, atMs - nowMs));
    this.#wake = setTimeout(() => {
      this.#wake = null;
      this.#inputs.wake();
    }, delayMs);
  }

  /** Feeds `waitExpired` for this request after `timeoutMs`. */
  armWait(connId: number, requestId: number, timeoutMs: number): void {
    if (!this.#stopped) this.#waits.arm(connId, requestId, timeoutMs);
  }

  /** The request was answered: its deadline goes. */
  clearWait(connId: number, requestId: number): void {
    this.#waits.clear(connId, requestId);
  }

  /** A connection closed: its deadlines go, without looking at anyone else's. */
  dropConnection(connId: number): void {
    this.#waits.dropConnection(connId);
  }

  /** Every timer off, for good. Idempotent. */
  stop(): void {
    this.#stopped = true;
    if (this.#sweep !== null) clearInterval(this.#sweep);
    this.#sweep = null;
    if (this.#wake !== null) clearTimeout(this.#wake);
    this.#wake = null;
    if (this.#outboxPoll !== null) clearInterval(this.#outboxPoll);
    this.#outboxPoll = null;
    this.#waits.clearAll();
  }
}
