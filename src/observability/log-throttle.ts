/**
 * Log lines for things that can happen thousands of times a second (refused
 * connections during a flood, failed handshakes): the first occurrence of a
 * kind is logged at once, later ones within the window are only counted, and
 * the count is reported with the next line of that kind after the window.
 * The counters of the metrics see every occurrence; only the log is thinned.
 */
import type { Logger } from './logger.js';

export interface LogThrottleOptions {
  /** Window per kind, in ms (default 10,000). */
  windowMs?: number;
  /** Clock in ms (default Date.now). */
  now?: () => number;
}

interface KindState {
  lastLoggedAtMs: number;
  suppressed: number;
}

export class LogThrottle {
  readonly #log: Logger;
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #kinds = new Map<string, KindState>();

  constructor(log: Logger, options: LogThrottleOptions = {}) {
    this.#log = log;
    this.#windowMs = options.windowMs ?? 10_000;
    this.#now = options.now ?? Date.now;
  }

  /** Logs at warn unless a line of this `kind` was logged within the window. */
  warn(kind: string, fields: Record<string, unknown>, message: string): void {
    const nowMs = this.#now();
    const state = this.#kinds.get(kind);
    if (state !== undefined && nowMs - state.lastLoggedAtMs < this.#windowMs) {
      state.suppressed++;
      return;
    }
    const suppressed = state?.suppressed ?? 0;
    this.#kinds.set(kind, { lastLoggedAtMs: nowMs, suppressed: 0 });
    this.#log.warn(suppressed > 0 ? { ...fields, similarNotLogged: suppressed } : fields, message);
  }
}
