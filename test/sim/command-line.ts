/** What the simulation's command lines (run.ts, ownership-run.ts) share. */

/** `value` of `--name` as a non-negative integer, `fallback` when absent; exit 2 otherwise. */
export function parseCount(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) {
    console.error(`--${name} needs a non-negative integer, got ${value}`);
    process.exit(2);
  }
  return n;
}
