/**
 * Table-driven command-line flags on top of `node:util` `parseArgs`.
 *
 * Each command declares its flags as a table of {@link FlagSpec}s; the table
 * drives tokenizing, typed validation, defaults, the environment fallback and
 * the `--help` text. Precedence: explicit flag > `DTP_<NAME>` environment
 * variable (`--worker-port` <-> `DTP_WORKER_PORT`; empty = unset) > default.
 * Every problem is a {@link UsageError} (exit 2).
 */
import { parseArgs } from 'node:util';
import { DtpError, describeError } from '../protocol/errors.js';

/** Bad command line: unknown command or flag, missing or malformed value. Exit code 2. */
export class UsageError extends DtpError {
  /** The caller should print the full usage text, not just the message. */
  readonly showUsage: boolean;

  constructor(message: string, options: { showUsage?: boolean } = {}) {
    super('USAGE', message);
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
export type FlagSpec = IntFlag | StringFlag | EnumFlag | BooleanFlag;

type FlagValue = string | number | boolean;

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

export interface ParsedCommandLine {
  values: FlagValues;
  positionals: string[];
  /** `--help` or `-h` was given; values are then defaults only. */
  help: boolean;
}

export interface ParseOptions {
  /** Environment for the `DTP_*` fallback (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** Most positional arguments accepted (default 0). */
  maxPositionals?: number;
}

type ParseArgsOptions = Record<string, { type: 'string' | 'boolean'; short?: string }>;

function parseArgsOptions(specs: readonly FlagSpec[]): ParseArgsOptions {
  const options: ParseArgsOptions = { help: { type: 'boolean', short: 'h' } };
  for (const spec of specs) {
    options[spec.name] = { type: spec.type === 'boolean' ? 'boolean' : 'string' };
  }
  return options;
}

/** A short message from a parseArgs error, whose own text spans several lines. */
function usageFrom(err: unknown): UsageError {
  const message = describeError(err);
  const unknown = /^Unknown option '([^']+)'/.exec(message);
  if (unknown !== null) return new UsageError(`unknown flag ${unknown[1]}`);
  return new UsageError(message.split('\n')[0] ?? 'bad command line');
}

/** Parses argv against a flag table; throws {@link UsageError}. */
export function parseFlags(
  argv: readonly string[],
  specs: readonly FlagSpec[],
  options: ParseOptions = {},
): ParsedCommandLine {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: parseArgsOptions(specs),
      strict: true,
      allowPositionals: true,
    });
  } catch (err) {
    throw usageFrom(err);
  }
  const help = parsed.values.help === true;
  const maxPositionals = options.maxPositionals ?? 0;
  if (!help && parsed.positionals.length > maxPositionals) {
    const extra = parsed.positionals[maxPositionals] ?? '';
    throw new UsageError(`unexpected argument ${JSON.stringify(extra)}`);
  }
  const env = options.env ?? process.env;
  const values = new Map<string, FlagValue>();
  for (const spec of specs) {
    const value = resolveFlag(spec, parsed.values[spec.name], env, help);
    if (value !== undefined) values.set(spec.name, value);
  }
  return { values: new FlagValues(values), positionals: parsed.positionals, help };
}

/**
 * Positional arguments of argv, read leniently (unknown flags are skipped), so
 * a command can be picked before its own flag table is known.
 */
export function scanPositionals(argv: readonly string[], specs: readonly FlagSpec[]): string[] {
  const { positionals } = parseArgs({
    args: [...argv],
    options: parseArgsOptions(specs),
    strict: false,
    allowPositionals: true,
  });
  return positionals;
}

type RawValue = string | boolean | (string | boolean)[] | undefined;

function resolveFlag(
  spec: FlagSpec,
  given: RawValue,
  env: NodeJS.ProcessEnv,
  help: boolean,
): FlagValue | undefined {
  const fromEnv = env[envVarName(spec.name)];
  if (typeof given === 'string' || typeof given === 'boolean') {
    return convert(spec, given, `--${spec.name}`);
  }
  if (fromEnv !== undefined && fromEnv !== '') {
    return convert(spec, fromEnv, envVarName(spec.name));
  }
  if (spec.type !== 'boolean' && spec.default !== undefined) return spec.default;
  if (spec.type !== 'boolean' && spec.required === true && !help) {
    throw new UsageError(`missing --${spec.name}`);
  }
  return undefined;
}

function convert(spec: FlagSpec, raw: string | boolean, source: string): FlagValue {
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

const TRUE_WORDS = new Set(['1', 'true', 'yes', 'on']);
const FALSE_WORDS = new Set(['0', 'false', 'no', 'off']);

function parseBoolean(raw: string, source: string): boolean {
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

function describeDefault(spec: FlagSpec): string | undefined {
  if (spec.type === 'boolean') return undefined;
  if (spec.default !== undefined) return `default ${spec.default}`;
  if (spec.defaultLabel !== undefined) return `default ${spec.defaultLabel}`;
  return spec.required === true ? 'required' : undefined;
}

function flagSignature(spec: FlagSpec): string {
  switch (spec.type) {
    case 'boolean':
      return `--${spec.name}`;
    case 'int':
      return `--${spec.name} <${spec.min}..${spec.max}>`;
    case 'enum':
      return `--${spec.name} <${spec.values.join('|')}>`;
    case 'string':
      return `--${spec.name} <${spec.placeholder ?? 'text'}>`;
  }
}

/** The flag section of `--help`: one aligned line per flag, from the table. */
export function formatFlagHelp(specs: readonly FlagSpec[], indent = 2): string {
  const signatures = specs.map(flagSignature);
  const width = Math.max(0, ...signatures.map((s) => s.length)) + 2;
  return specs
    .map((spec, i) => {
      const notes = [describeDefault(spec), `env ${envVarName(spec.name)}`]
        .filter((n): n is string => n !== undefined)
        .join(', ');
      return `${' '.repeat(indent)}${(signatures[i] ?? '').padEnd(width)}${spec.help} (${notes})`;
    })
    .join('\n');
}
