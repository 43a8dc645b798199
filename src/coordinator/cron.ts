/**
 * Cron evaluation for the core (core/types.ts `CronEvaluator`), backed by
 * croner: 5 fields (minute first) or 6 (seconds first), any IANA time zone,
 * daylight-saving changes as the library computes them. The core gets it
 * injected, so it stays free of I/O and the simulation uses the same one.
 */
import { Cron } from 'croner';
import type { CronEvaluator } from './core/types.js';

/** Parsed expressions, by zone and text (schedules are few; bounded anyway). */
const MAX_CACHED = 1_000;

export function createCronEvaluator(): CronEvaluator {
  const cache = new Map<string, Cron>();
  const parsed = (expr: string, timezone: string): Cron => {
    const key = `${timezone}\u0000${expr}`;
    let cron = cache.get(key);
    if (cron === undefined) {
      cron = new Cron(expr, { timezone, paused: true });
      if (cache.size >= MAX_CACHED) cache.clear();
      cache.set(key, cron);
    }
    return cron;
  };
  return {
    problem(expr, timezone) {
      if (!isTimeZone(timezone))
        return `unknown time zone ${JSON.stringify(timezone.slice(0, 80))}`;
      try {
        parsed(expr, timezone);
        return null;
      } catch (err) {
        return `cron ${JSON.stringify(expr.slice(0, 80))} is not valid: ${(err as Error).message}`;
      }
    },
    next(expr, timezone, afterMs) {
      return parsed(expr, timezone).nextRun(new Date(afterMs))?.getTime() ?? null;
    },
  };
}

/** True for a time zone name the runtime knows (IANA names, `UTC`). */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
