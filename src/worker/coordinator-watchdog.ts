/**
 * Liveness of the coordinator as a worker sees it: once the coordinator has
 * confirmed `heartbeatAck`, it answers every heartbeat, so hearing nothing at
 * all for `timeoutMs` means it is frozen or cut off (a TCP connection through
 * a partition can stay "open" for many minutes). One timer, owned here.
 *
 * States: `stopped` -> `watching` (start) -> `stopped` (stop, or after
 * reporting silence once). Checking is lazy: `heard()` only records the time;
 * the timer re-arms itself for the rest of the period when something was
 * heard meanwhile.
 *
 * A stall of the worker's own loop (the process frozen, a long pause) is not
 * the coordinator's silence: when the timer fires more than half a period
 * late, what the coordinator sent meanwhile has not been read yet, so the
 * silence is counted afresh from now instead of judged.
 */
export class CoordinatorWatchdog {
  readonly timeoutMs: number;
  readonly #onSilent: (silentMs: number) => void;
  #timer: NodeJS.Timeout | null = null;
  #lastHeardMs = 0;
  /** When the current timer should fire, for noticing a stall of our own. */
  #dueAtMs = 0;

  constructor(timeoutMs: number, onSilent: (silentMs: number) => void) {
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
      throw new RangeError(`coordinator timeout must be a positive integer ms, got ${timeoutMs}`);
    }
    this.timeoutMs = timeoutMs;
    this.#onSilent = onSilent;
  }

  get watching(): boolean {
    return this.#timer !== null;
  }

  /** Starts watching from now (restarts the period if already watching). */
  start(): void {
    this.stop();
    this.#lastHeardMs = performance.now();
    this.#arm(this.timeoutMs);
  }

  /** Something arrived from the coordinator. */
  heard(): void {
    this.#lastHeardMs = performance.now();
  }

  /** No more checks until the next `start()`. Idempotent. */
  stop(): void {
    if (this.#timer === null) return;
    clearTimeout(this.#timer);
    this.#timer = null;
  }

  #arm(delayMs: number): void {
    const ms = Math.max(1, Math.ceil(delayMs));
    this.#dueAtMs = performance.now() + ms;
    this.#timer = setTimeout(() => this.#check(), ms);
  }

  #check(): void {
    this.#timer = null;
    const nowMs = performance.now();
    if (nowMs - this.#dueAtMs > this.timeoutMs / 2) {
      // We were stalled ourselves: read what arrived before judging anyone.
      this.#lastHeardMs = nowMs;
      this.#arm(this.timeoutMs);
      return;
    }
    const silentMs = nowMs - this.#lastHeardMs;
    if (silentMs >= this.timeoutMs) {
      this.#onSilent(Math.round(silentMs));
      return;
    }
    this.#arm(this.timeoutMs - silentMs);
  }
}
