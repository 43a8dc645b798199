/**
 * The state of the near window of delayed jobs, and its sizes; the
 * mechanism is in scheduled-window.ts.
 */
/** The window's sizes (CoreConfig.scheduledWindow). */
export interface ScheduledWindowConfig {
  /** How far ahead of now a window read reaches, ms. */
  windowMs: number;
  /** At most this many jobs per window read (and at recovery). */
  limit: number;
  /** The next window is read when the clock is this close to the horizon, ms. */
  marginMs: number;
}

/**
 * Defaults: one hour ahead, 10,000 jobs per read, read 5 minutes before the
 * horizon. A million jobs over 30 days is about 1,400 an hour: one read an
 * hour, well under the limit.
 */
export const DEFAULT_SCHEDULED_WINDOW: ScheduledWindowConfig = {
  windowMs: 60 * 60_000,
  limit: 10_000,
  marginMs: 5 * 60_000,
};

/** The largest seq: a horizon set by time covers every job due at that ms. */
export const LAST_SEQ = Number.MAX_SAFE_INTEGER;

export class ScheduledWindow {
  /** Every SCHEDULED job (without parents) due at or before (horizonMs, horizonSeq) is in memory. */
  horizonMs = Infinity;
  horizonSeq = LAST_SEQ;
  /** New delayed jobs due by this stay in memory. */
  keepUntilMs = Infinity;
  /** SCHEDULED jobs in the store only. */
  farCount = 0;
  /** The target of the window read that is out; null = none is. */
  readingUntilMs: number | null = null;
}
