/**
 * Progress of one attempt on its way to the coordinator: at most one
 * message per `intervalMs` (the handler may report as often as it likes),
 * and the latest value always goes: a report inside the interval waits for
 * its end, replacing any report still waiting, and {@link flush} sends what
 * waits at once (before the attempt's result).
 */
export interface Progress {
  fraction: number;
  message: string | null;
}

/** The clock and timers the throttle uses (injected in tests). */
export interface ThrottleTimers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const REAL_TIMERS: ThrottleTimers = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export class ProgressThrottle {
  readonly #intervalMs: number;
  readonly #send: (progress: Progress) => void;
  readonly #timers: ThrottleTimers;
  #lastSentAt = -Infinity;
  #waiting: Progress | null = null;
  #timer: unknown = null;

  constructor(intervalMs: number, send: (progress: Progress) => void, timers = REAL_TIMERS) {
    this.#intervalMs = intervalMs;
    this.#send = send;
    this.#timers = timers;
  }

  report(progress: Progress): void {
    const sinceMs = this.#timers.now() - this.#lastSentAt;
    if (this.#timer === null && sinceMs >= this.#intervalMs) {
      this.#emit(progress);
      return;
    }
    this.#waiting = progress;
    this.#timer ??= this.#timers.setTimeout(() => {
      this.#timer = null;
      this.flush();
    }, this.#intervalMs - sinceMs);
  }

  /** Sends the report still waiting, if any, now. */
  flush(): void {
    if (this.#timer !== null) this.#timers.clearTimeout(this.#timer);
    this.#timer = null;
    const waiting = this.#waiting;
    this.#waiting = null;
    if (waiting !== null) this.#emit(waiting);
  }

  /** Drops what waits (the attempt was stopped). */
  dispose(): void {
    if (this.#timer !== null) this.#timers.clearTimeout(this.#timer);
    this.#timer = null;
    this.#waiting = null;
  }

  #emit(progress: Progress): void {
    this.#lastSentAt = this.#timers.now();
    this.#send(progress);
  }
}
