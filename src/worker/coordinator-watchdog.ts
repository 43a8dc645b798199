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
 */
export class CoordinatorWatchdog {
  readonly timeoutMs: number;
  readonly #onSilent: (silentMs: number) => void;
  #timer: NodeJS.Timeout | null = null;
  #lastHeardMs = 0;

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
    this.#timer = setTimeout(() => this.#check(), Math.max(1, Math.ceil(delayMs)));
  }

  #check(): void {
    this.#timer = null;
    const silentMs = performance.now() - this.#lastHeardMs;
    if (silentMs >= this.timeoutMs) {
      this.#onSilent(Math.round(silentMs));
      return;
    }
    this.#arm(this.timeoutMs - silentMs);
  }
}
