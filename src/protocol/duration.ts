/**
 * Durations as people write them: a whole number and a unit, `500ms`, `30s`,
 * `30m`, `12h`, `7d` (the units of `purge --older-than` and the HTTP API's
 * `olderThan`). A bare number is refused: the unit is never guessed.
 */

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** One day, in ms. */
export const DAY_MS = UNIT_MS.d;

/** The longest duration accepted: 100 years, in ms (far inside a safe integer). */
export const MAX_DURATION_MS = 100 * 365 * UNIT_MS.d;

/** The duration in ms, or an explanation of what is wrong with `text`. */
export function parseDuration(text: string): { ms: number } | { error: string } {
  const match = /^([0-9]{1,15})(ms|s|m|h|d)$/.exec(text.trim());
  if (match === null) {
    return {
      error: `expected a whole number and a unit (ms, s, m, h or d), like 30m, 12h or 7d; got ${JSON.stringify(text.slice(0, 40))}`,
    };
  }
  const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  if (ms > MAX_DURATION_MS) return { error: `at most 100 years (36500d); got ${text.trim()}` };
  return { ms };
}

/** A short rendering of a duration in ms for people: `850 ms`, `12.5 s`, `3 min`, `7 h`, `2 d`. */
export function formatDurationMs(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  if (ms < UNIT_MS.h) return `${(ms / UNIT_MS.m).toFixed(1)} min`;
  if (ms < UNIT_MS.d) return `${(ms / UNIT_MS.h).toFixed(1)} h`;
  return `${(ms / UNIT_MS.d).toFixed(1)} d`;
}
