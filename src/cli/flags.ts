/**
 * Declarative command-line flags: each command declares its flags as a table
 * of {@link FlagSpec}s. The table drives tokenizing (through commander, see
 * command-line.ts), typed validation, defaults, the environment fallback and
 * the `--help` text.
 *
 * Precedence: explicit flag > `DTP_<NAME>` environment variable
 * (`--worker-port` <-> `DTP_WORKER_PORT`; empty = unset) > default. Which
 * flags may come from the environment is the caller's choice: a coordinator or
 * worker reads every flag from it, the client only its connection and output
 * settings. A repeatable flag collects every occurrence; from the environment
 * it is a comma-separated list. Every problem is a {@link UsageError} (exit 2).
 */
import { LocalErrorCode } from '../protocol/error-codes.js';
import type { IntegerBound } from '../common/bounds.js';
import { DtpError } from '../protocol/errors.js';

/** Bad command line: unknown command or flag, missing or malformed value. Exit code 2. */
export class UsageError extends DtpError {
  /** The caller should print the full usage text, not just the message. */
  readonly showUsage: boolean;

  constructor(message: string, options: { showUsage?: boolean } = {}) {
    super(LocalErrorCode.Usage, message);
    this.showUsage = options.showUsage ?? false;
  }
}

interface FlagBase {
  /** Long name without dashes, e.g. `worker-port`. */
  readonly name: string;
  /** One line for `--help`. */
  readonly help: string;
  /** Shown as the default in `--help` when there is no `default` (decided elsewhere). */
  readonly defaultLabel?: string;
}
export interface IntFlag extends FlagBase {
  readonly type: 'int';
  readonly min: number;
  readonly max: number;
  readonly default?: number;
  readonly required?: boolean;
}
export interface StringFlag extends FlagBase {
  readonly type: 'string';
  readonly default?: string;
  readonly required?: boolean;
  /** Placeholder in `--help` (default `text`). */
  readonly placeholder?: string;
}
/** A flag that may be given several times; read with {@link FlagValues.strings}. */
export interface ListFlag extends FlagBase {
  readonly type: 'list';
  /** Placeholder in `--help` (default `text`). */
  readonly placeholder?: string;
}
/** One of a closed set, matched case-insensitively and returned as spelled in `values`. */
export interface EnumFlag extends FlagBase {
  readonly type: 'enum';
  readonly values: readonly string[];
  readonly default?: string;
  readonly required?: boolean;
}
/** Present = true; from the environment: 1/true/yes/on or 0/false/no/off. */
export interface BooleanFlag extends FlagBase {
  readonly type: 'boolean';
}
export type FlagSpec = IntFlag | StringFlag | ListFlag | EnumFlag | BooleanFlag;

/** An `int` flag whose range is the bound of an options table (a flag never re-types a bound). */
export function boundedFlag(
  name: string,
  bound: IntegerBound,
  rest: Omit<IntFlag, 'name' | 'type' | 'min' | 'max'>,
): IntFlag {
  return { name, type: 'int', min: bound.min, max: bound.max, ...rest };
}

type FlagValue = string | number | boolean | readonly string[];

/** What the tokenizer found for one flag: a string, `true` for a switch, every occurrence of a list. */
export type GivenValue = string | boolean | readonly string[];

/** `DTP_` + the name upper-cased with `-` -> `_`. */
export function envVarName(flagName: string): string {
  return `DTP_${flagName.toUpperCase().replaceAll('-', '_')}`;
}

/** The validated values of one command line. */
export class FlagValues {
  readonly #values: ReadonlyMap<string, FlagValue>;

  constructor(values: ReadonlyMap<string, FlagValue>) {
    this.#values = values;
  }

  /** One set of values from several (flag names do not repeat across them). */
  static merge(parts: readonly FlagValues[]): FlagValues {
    return new FlagValues(new Map(parts.flatMap((part) => [...part.#values])));
  }

  /** True when the flag has a value (given, from the environment, or defaulted). */
  has(name: string): boolean {
    return this.#values.has(name);
  }

  optionalInt(name: string): number | undefined {
    return this.#typed(name, 'number');
  }
  int(name: string): number {
    return this.#required(name, this.optionalInt(name));
  }
  optionalString(name: string): string | undefined {
    return this.#typed(name, 'string');
  }
  string(name: string): string {
    return this.#required(name, this.optionalString(name));
  }
  /** Every value of a repeatable flag, in order; empty when none was given. */
  strings(name: string): readonly string[] {
    const value = this.#values.get(name);
    if (value === undefined) return [];
    if (!Array.isArray(value)) throw new Error(`flag --${name} is not a list`);
    return value as readonly string[];
  }
  optionalEnum<T extends string>(name: string, values: readonly T[]): T | undefined {
    const value = this.optionalString(name);
    if (value === undefined) return undefined;
    const match = values.find((v) => v === value);
    if (match === undefined) throw new Error(`flag --${name} is not one of ${values.join(', ')}`);
    return match;
  }
  enum<T extends string>(name: string, values: readonly T[]): T {
    return this.#required(name, this.optionalEnum(name, values));
  }
  bool(name: string): boolean {
    return this.#typed(name, 'boolean') ?? false;
  }

  #typed<K extends 'number' | 'string' | 'boolean'>(
    name: string,
    kind: K,
  ): (K extends 'number' ? number : K extends 'string' ? string : boolean) | undefined {
    const value = this.#values.get(name);
    if (value === undefined) return undefined;
    // A mismatch here is a bug in a flag table, not bad input.
    if (typeof value !== kind) throw new Error(`flag --${name} is not a ${kind}`);
    return value as K extends 'number' ? number : K extends 'string' ? string : boolean;
  }

  #required<T>(name: string, value: T | undefined): T {
    if (value === undefined) throw new UsageError(`missing --${name}`);
    return value;
  }
}

export interface ResolveOptions {
  /** Environment for the `DTP_*` fallback; null = these flags never come from it. */
  env: NodeJS.ProcessEnv | null;
  /** `--help` was asked for: defaults only, nothing is required. */
  help?: boolean;
}

/**
 * Validates what the tokenizer found against a flag table, filling in the
 * environment and the defaults; throws {@link UsageError}.
 */
export function resolveFlags(
  specs: readonly FlagSpec[],
  given: ReadonlyMap<string, GivenValue>,
  options: ResolveOptions,
): FlagValues {
  const values = new Map<string, FlagValue>();
  for (const spec of specs) {
    const value = resolveFlag(spec, given.get(spec.name), options);
    if (value !== undefined) values.set(spec.name, value);
  }
  return new FlagValues(values);
}

function resolveFlag(
  spec: FlagSpec,
  given: GivenValue | undefined,
  options: ResolveOptions,
): FlagValue | undefined {
  if (given !== undefined) return convert(spec, given, `--${spec.name}`);
  const fromEnv = options.env?.[envVarName(spec.name)];
  if (fromEnv !== undefined && fromEnv !== '') {
    return convert(spec, fromEnv, envVarName(spec.name), true);
  }
  if (spec.type === 'boolean' || spec.type === 'list') return undefined;
  if (spec.default !== undefined) return spec.default;
  if (spec.required === true && options.help !== true) {
    throw new UsageError(`missing --${spec.name}`);
  }
  return undefined;
}

function convert(spec: FlagSpec, raw: GivenValue, source: string, fromEnv = false): FlagValue {
  if (spec.type === 'list') {
    if (typeof raw === 'boolean') throw new UsageError(`${source} needs a value`);
    if (typeof raw !== 'string') return raw;
    // One occurrence on the command line, a comma-separated list in the environment.
    return fromEnv ? splitList(raw) : [raw];
  }
  if (typeof raw !== 'string' && typeof raw !== 'boolean') {
    throw new UsageError(`${source} may be given only once`);
  }
  switch (spec.type) {
    case 'boolean':
      return typeof raw === 'boolean' ? raw : parseBoolean(raw, source);
    case 'int':
      return parseInteger(String(raw), spec, source);
    case 'enum':
      return parseEnum(String(raw), spec, source);
    case 'string':
      return String(raw);
  }
}

/** `a, b,,c` -> `[a, b, c]`. */
export function splitList(raw: string): string[] {
  return raw
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

const TRUE_WORDS = new Set(['1', 'true', 'yes', 'on']);
const FALSE_WORDS = new Set(['0', 'false', 'no', 'off']);

/** 1/true/yes/on or 0/false/no/off, any case. */
export function parseBoolean(raw: string, source: string): boolean {
  const word = raw.trim().toLowerCase();
  if (TRUE_WORDS.has(word)) return true;
  if (FALSE_WORDS.has(word)) return false;
  throw new UsageError(`${source} must be true or false, got ${JSON.stringify(raw)}`);
}

/** Decimal integers only: no fractions, exponents, hex or surrounding text. */
export function parseInteger(raw: string, spec: IntFlag, source: string): number {
  const text = raw.trim();
  const value = /^[+-]?\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < spec.min || value > spec.max) {
    throw new UsageError(
      `${source} must be an integer in ${spec.min}..${spec.max}, got ${JSON.stringify(raw)}`,
    );
  }
  return value;
}

function parseEnum(raw: string, spec: EnumFlag, source: string): string {
  const wanted = raw.trim().toLowerCase();
  const match = spec.values.find((v) => v.toLowerCase() === wanted);
  if (match === undefined) {
    throw new UsageError(
      `${source} must be one of ${spec.values.join(', ')}, got ${JSON.stringify(raw)}`,
    );
  }
  return match;
}

/** How the flag looks in `--help`, e.g. `--capacity <1..1024>`. */
export function flagSignature(spec: FlagSpec): string {
  switch (spec.type) {
    case 'boolean':
      return `--${spec.name}`;
    case 'int':
      return `--${spec.name} <${spec.min}..${spec.max}>`;
    case 'enum':
      return `--${spec.name} <${spec.values.join('|')}>`;
    case 'string':
      return `--${spec.name} <${spec.placeholder ?? 'text'}>`;
    case 'list':
      return `--${spec.name} <${spec.placeholder ?? 'text'}>`;
  }
}

/** The `--help` line of a flag after its signature: text, default, repetition, environment. */
export function describeFlag(spec: FlagSpec, fromEnv: boolean): string {
  const notes: string[] = [];
  if (spec.type === 'list') notes.push('repeatable');
  else if (spec.type !== 'boolean' && spec.default !== undefined) {
    notes.push(`default ${spec.default}`);
  } else if (spec.type !== 'boolean' && spec.defaultLabel !== undefined) {
    notes.push(`default ${spec.defaultLabel}`);
  } else if (spec.type !== 'boolean' && spec.required === true) notes.push('required');
  if (fromEnv) {
    notes.push(`env ${envVarName(spec.name)}${spec.type === 'list' ? ', comma-separated' : ''}`);
  }
  return notes.length === 0 ? spec.help : `${spec.help} (${notes.join(', ')})`;
}
