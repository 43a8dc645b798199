/**
 * Cron evaluation for the core (core/types.ts `CronEvaluator`), backed by
 * croner: 5 fields (minute first) or 6 (seconds first), any IANA time zone,
 * daylight-saving changes as the library computes them. The core gets it
 * injected, so it stays free of I/O and the simulation uses the same one.
 *
 * The work of one evaluation is bounded before the library is asked: an
 * expression whose days of the month never occur in its months (`0 0 31 2 *`)
 * is refused by a static check of at most 12 × 31 steps, because the
 * library would search every month up to the year 3000 for it (milliseconds
 * of the core's time per request, and a stack overflow for some). What
 * passes the check has a date within a few decades (the rarest: a fifth
 * weekday of February, every 28 years), which the library finds in a
 * millisecond or two. A library failure is "no next tick", never a throw.
 */
import { Cron, CronPattern } from 'croner';
import type { CronEvaluator } from './core/types.js';

/** Parsed expressions, by zone and text (schedules are few; bounded anyway). */
const MAX_CACHED = 1_000;

/** The longest each month can be (February 29: leap years reach that day). */
const MONTH_DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const;

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
      const quoted = JSON.stringify(expr.slice(0, 80));
      let never: string | null;
      try {
        never = neverFires(new CronPattern(expr, timezone));
        parsed(expr, timezone);
      } catch (err) {
        return `cron ${quoted} is not valid: ${(err as Error).message}`;
      }
      return never === null ? null : `cron ${quoted} never fires: ${never}`;
    },
    next(expr, timezone, afterMs) {
      try {
        return parsed(expr, timezone).nextRun(new Date(afterMs))?.getTime() ?? null;
      } catch {
        // An expression that slipped past problem() (or a library limit):
        // no next tick, rather than a failure of the whole core.
        return null;
      }
    },
  };
}

/**
 * Why a parsed expression can never fire, or null when some date matches.
 * Only the day of the month can rule every date out: croner joins a
 * restricted day of the week to it with OR (legacy cron), and every
 * weekday, every `L` and every day up to 28 occurs in each month.
 */
export function neverFires(pattern: CronPattern): string | null {
  if (pattern.lastDayOfMonth || !pattern.starDOW) return null;
  const days = indexesOf(pattern.day);
  const months = indexesOf(pattern.month);
  for (const month of months) {
    const longest = MONTH_DAYS[month] ?? 31;
    if (days.some((day) => day + 1 <= longest)) return null;
  }
  const oneBased = (list: number[]): string => list.map((i) => i + 1).join(',');
  return `day of month ${oneBased(days)} does not occur in month ${oneBased(months)}`;
}

function indexesOf(flags: readonly number[]): number[] {
  const set: number[] = [];
  for (const [i, flag] of flags.entries()) if (flag !== 0) set.push(i);
  return set;
}

/** Names already looked up (a lookup costs about half a millisecond). */
const knownZones = new Map<string, boolean>();

/** True for a time zone name the runtime knows (IANA names, `UTC`). */
export function isTimeZone(name: string): boolean {
  const known = knownZones.get(name);
  if (known !== undefined) return known;
  let valid: boolean;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    valid = true;
  } catch {
    valid = false;
  }
  if (knownZones.size >= MAX_CACHED) knownZones.clear();
  knownZones.set(name, valid);
  return valid;
}
