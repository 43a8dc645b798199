/**
 * Heartbeats: one interval timer, owned here and nowhere else.
 *
 * States: `stopped` -> `beating` (start) -> `stopped` (stop) ... ; any ->
 * `closed` (close; final). The callback runs on the main thread, where no task
 * code ever runs, so a busy task cannot delay it.
 */
export class Heartbeat {
  /** Time between beats, in ms. */
  readonly intervalMs: number;
  readonly #beat: () => void;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;
  readonly #closedPromise = Promise.resolve();

  constructor(intervalMs: number, beat: () => void) {
    if (!Number.isInteger(intervalMs) || intervalMs < 1) {
      throw new RangeError(`heartbeat interval must be a positive integer ms, got ${intervalMs}`);
    }
    this.intervalMs = intervalMs;
    this.#beat = beat;
  }

  get beating(): boolean {
    return this.#timer !== null;
  }

  /** Beats every `intervalMs` from now on (restarts the period if already beating). */
  start(): void {
    if (this.#closed) return;
    this.stop();
    this.#timer = setInterval(this.#beat, this.intervalMs);
  }

  /** No more beats until the next `start()`. Idempotent. */
  stop(): void {
    if (this.#timer === null) return;
    clearInterval(this.#timer);
    this.#timer = null;
  }

  /** Stops for good. Idempotent; always the same promise. */
  close(): Promise<void> {
    this.#closed = true;
    this.stop();
    return this.#closedPromise;
  }
}
