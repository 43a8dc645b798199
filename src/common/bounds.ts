/**
 * Bounds of numeric options, written once per options object and read by
 * everything that takes that object: the command-line flags (their
 * `<min..max>` and parse errors), the `start…()` functions, the classes
 * themselves. A table names no flag and no option: whoever checks passes the
 * names its user knows (`--capacity` on the command line, `capacity` in
 * code), so a refusal always speaks of what the user gave.
 *
 * A bound is an inclusive integer range. It may also say that the value is at
 * most so many times another option of the same object (a worker's prefetch
 * is at most 4 x its capacity); an options object whose own options share a
 * bound with another (the task pool's queue limit is the worker's prefetch)
 * uses the same bound object, so one cannot accept what the other refuses.
 */

/** The longest delay a Node.js timer takes, in ms (2^31 - 1; a longer one fires at once). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** An inclusive integer range, optionally also relative to another option `K` of the same object. */
export interface IntegerBound<K extends string = string> {
  readonly min: number;
  readonly max: number;
  /** Also at most `times` x the option `of`. */
  readonly perUnitOf?: { readonly of: K; readonly times: number };
  /** null is allowed and means this (e.g. `off`); absent = null is refused. */
  readonly nullMeans?: string;
  /** undefined is allowed: the option falls back to its default. */
  readonly optional?: true;
}

/** The numeric options of `O` (those whose type includes `number`). */
export type NumericKeys<O> = {
  [K in keyof O]-?: number extends NonNullable<O[K]> ? K : never;
}[keyof O] &
  string;

/** One bound for every numeric option of `O`: the compiler keeps the table complete. */
export type BoundsTable<O> = { readonly [K in NumericKeys<O>]: IntegerBound<NumericKeys<O>> };

/**
 * A rule between options of one object, with its refusal given the names the
 * user knows.
 */
export interface Relation<O> {
  readonly holds: (options: O) => boolean;
  readonly refusal: (name: (key: keyof O & string) => string, options: O) => string;
}

/** How a refused value is shown: strings quoted, everything else as is. */
export function describeValue(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/** The range for people: `0..65535`. */
export function describeRange(bound: IntegerBound): string {
  return `${bound.min}..${bound.max}`;
}

function inRange(value: unknown, bound: IntegerBound): boolean {
  return (
    typeof value === 'number' && Number.isInteger(value) && value >= bound.min && value <= bound.max
  );
}

/**
 * How a refusal of a relative bound is phrased: `range` for code
 * (`prefetch must be an integer in 0..4 x capacity (8), got 9`), `atMost`
 * for the command line (`--prefetch must be at most 4 x --capacity (8), got 9`).
 */
export type Phrasing = 'range' | 'atMost';

/**
 * Why `value` breaks `bound`, naming it `name`, or null when it keeps it.
 * `other` reads the option a relative bound refers to.
 */
export function boundProblem<K extends string>(
  name: string,
  value: unknown,
  bound: IntegerBound<K>,
  other: (key: K) => { name: string; value: unknown },
  phrasing: Phrasing = 'range',
): string | null {
  if (value === undefined && bound.optional === true) return null;
  if (value === null && bound.nullMeans !== undefined) return null;
  const relative = relativeProblem(name, value, bound, other, phrasing);
  if (relative !== null) return relative;
  if (inRange(value, bound)) return null;
  const allowed = bound.nullMeans === undefined ? '' : `null (${bound.nullMeans}) or `;
  return `${name} must be ${allowed}an integer in ${describeRange(bound)}, got ${describeValue(value)}`;
}

/** An integer above a relative bound (checked first: it is the tighter one). */
function relativeProblem<K extends string>(
  name: string,
  value: unknown,
  bound: IntegerBound<K>,
  other: (key: K) => { name: string; value: unknown },
  phrasing: Phrasing,
): string | null {
  const relative = bound.perUnitOf;
  if (relative === undefined || typeof value !== 'number' || !Number.isInteger(value)) return null;
  const unit = other(relative.of);
  if (typeof unit.value !== 'number' || value < bound.min) return null;
  const limit = relative.times * unit.value;
  if (value <= limit) return null;
  return phrasing === 'atMost'
    ? `${name} must be at most ${relative.times} x ${unit.name} (${limit}), got ${value}`
    : `${name} must be an integer in ${bound.min}..${relative.times} x ${unit.name} (${limit}), got ${value}`;
}

/** The first option of `options` that breaks its bound in `table`, named by `name`; null if none. */
export function tableProblem<O extends object>(
  options: O,
  table: BoundsTable<O>,
  name: (key: keyof O & string) => string,
  phrasing: Phrasing = 'range',
): string | null {
  const read = (key: NumericKeys<O>): unknown => (options as Record<string, unknown>)[key];
  for (const key of Object.keys(table) as NumericKeys<O>[]) {
    const problem = boundProblem(
      name(key),
      read(key),
      table[key],
      (of) => ({ name: name(of), value: read(of) }),
      phrasing,
    );
    if (problem !== null) return problem;
  }
  return null;
}

/** The refusal of the first relation `options` breaks, named by `name`; null if none. */
export function relationProblem<O>(
  options: O,
  relations: readonly Relation<O>[],
  name: (key: keyof O & string) => string,
): string | null {
  const broken = relations.find((relation) => !relation.holds(options));
  return broken === undefined ? null : broken.refusal(name, options);
}
