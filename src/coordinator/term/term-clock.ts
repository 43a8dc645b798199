/**
 * Every timed input of one term, in one place: the sweep tick and the
 * deadline of each pending WAIT_JOB (one timer for all of them,
 * wait-timers.ts). The core owns no timer; it says what
 * time it needs (an `armWait` effect) and this arms it; the firing comes back
 * as an input, handled like any other. A timer for a new kind of input (a
 * delayed job falling due, a schedule tick) belongs here: the core states
 * when it next needs waking, this keeps one timer for the earliest such time,
 * and its firing is one more input.
 *
 * All timers of a term die with it ({@link TermClock.stop}).
 */
import type { CoreInput } from '../core/types.js';
import { WaitTimers } from './wait-timers.js';

/** What a clock's timers fire. */
export interface ClockInputs {
  /** The sweep's period came (the term hands the tick on after this turn's frames). */
  sweep(): void;
  /** A WAIT_JOB's timeout passed. */
  waitExpired(input: Extract<CoreInput, { kind: 'waitExpired' }>): void;
}

export class TermClock {
  readonly #sweepIntervalMs: number;
  readonly #inputs: ClockInputs;
  readonly #waits: WaitTimers;
  #sweep: NodeJS.Timeout | null = null;
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
    this.#waits.clearAll();
  }
}
