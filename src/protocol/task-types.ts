/**
 * Task type names and the one table of built-in tasks.
 *
 * {@link BUILTIN_TASKS} is the single definition of the five built-in task
 * types: their wire names, the CLI's lower-case shortcuts and the flag each
 * shortcut takes, and the bounds of their payload field. The task registry
 * (payload validation on coordinator and worker), the CLI (`client.sh
 * submit sha256 --text s`) and the load generator all read it.
 *
 * A custom name matches {@link CUSTOM_TASK_TYPE_PATTERN}, is case-sensitive
 * and used exactly as given, and may not equal a built-in name or a shortcut
 * compared case-insensitively (so `sha256` can never mean two things).
 */

/** The built-in task types, in the order the protocol lists them. */
export const BUILTIN_TASK_TYPES = ['SLEEP', 'WORD_COUNT', 'SHA256', 'PRIME_COUNT', 'FAIL'] as const;
export type BuiltinTaskType = (typeof BUILTIN_TASK_TYPES)[number];

/** An integer payload field, bounds inclusive. */
export interface IntegerFieldSpec {
  readonly kind: 'integer';
  /** The payload's field name, e.g. `durationMillis`. */
  readonly name: string;
  readonly min: number;
  readonly max: number;
  /** The CLI flag that sets it (without dashes), e.g. `milliseconds`. */
  readonly flag: string;
  /** One line for `--help`. */
  readonly help: string;
}

/** A string payload field of at most `maxChars` UTF-16 code units (JavaScript `.length`). */
export interface StringFieldSpec {
  readonly kind: 'string';
  readonly name: string;
  readonly maxChars: number;
  readonly flag: string;
  readonly help: string;
}

export type PayloadFieldSpec = IntegerFieldSpec | StringFieldSpec;

/** One built-in task: every built-in payload is an object with exactly one field. */
export interface BuiltinTaskSpec {
  readonly taskType: BuiltinTaskType;
  /** The CLI's name for it: `client.sh submit <shortcut> --<field.flag> <value>`. */
  readonly shortcut: string;
  /** One line for `--help`. */
  readonly summary: string;
  readonly field: PayloadFieldSpec;
}

/** The built-in tasks of the protocol, by wire name. */
export const BUILTIN_TASKS = {
  SLEEP: {
    taskType: 'SLEEP',
    shortcut: 'sleep',
    summary: 'waits, then returns "slept <n> ms"',
    field: {
      kind: 'integer',
      name: 'durationMillis',
      min: 0,
      max: 600_000,
      flag: 'milliseconds',
      help: 'how long to sleep, in ms',
    },
  },
  WORD_COUNT: {
    taskType: 'WORD_COUNT',
    shortcut: 'word-count',
    summary: 'counts whitespace-separated words',
    field: {
      kind: 'string',
      name: 'text',
      maxChars: 200_000,
      flag: 'text',
      help: 'text whose words are counted',
    },
  },
  SHA256: {
    taskType: 'SHA256',
    shortcut: 'sha256',
    summary: 'lowercase hex SHA-256 of the UTF-8 text',
    field: {
      kind: 'string',
      name: 'text',
      maxChars: 200_000,
      flag: 'text',
      help: 'text to hash as UTF-8',
    },
  },
  PRIME_COUNT: {
    taskType: 'PRIME_COUNT',
    shortcut: 'prime-count',
    summary: 'counts the primes below a limit',
    field: {
      kind: 'integer',
      name: 'limit',
      min: 2,
      max: 50_000_000,
      flag: 'limit',
      help: 'count primes below this',
    },
  },
  FAIL: {
    taskType: 'FAIL',
    shortcut: 'fail',
    summary: 'fails on purpose until an attempt number (exercises retries)',
    field: {
      kind: 'integer',
      name: 'failUntilAttempt',
      min: 0,
      max: 1_000,
      flag: 'fail-until-attempt',
      help: 'fail every attempt below this one',
    },
  },
} as const satisfies { readonly [T in BuiltinTaskType]: BuiltinTaskSpec & { taskType: T } };

/** The built-ins in protocol order. */
export const BUILTIN_TASK_LIST: readonly BuiltinTaskSpec[] = BUILTIN_TASK_TYPES.map(
  (taskType) => BUILTIN_TASKS[taskType],
);

/** The CLI's shortcuts for the built-ins, in protocol order. */
export const TASK_SHORTCUTS: readonly string[] = BUILTIN_TASK_LIST.map((task) => task.shortcut);

/** The payload of a built-in task whose one field has `value`. */
export function builtinPayload(
  task: BuiltinTaskSpec,
  value: string | number,
): Record<string, string | number> {
  return { [task.field.name]: value };
}

/** What a custom task type name must look like. */
export const CUSTOM_TASK_TYPE_PATTERN = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;

const BUILTIN: ReadonlySet<string> = new Set(BUILTIN_TASK_TYPES);
const RESERVED_LOWER: ReadonlySet<string> = new Set(
  [...BUILTIN_TASK_TYPES, ...TASK_SHORTCUTS].map((name) => name.toLowerCase()),
);

export function isBuiltinTaskType(name: string): name is BuiltinTaskType {
  return BUILTIN.has(name);
}

/** True when `name` equals a built-in or a shortcut, ignoring case. */
export function isReservedTaskName(name: string): boolean {
  return RESERVED_LOWER.has(name.toLowerCase());
}

/** True for a name a client may submit: a built-in, or a well-formed custom name. */
export function isValidTaskType(name: string): boolean {
  return (
    isBuiltinTaskType(name) || (CUSTOM_TASK_TYPE_PATTERN.test(name) && !isReservedTaskName(name))
  );
}

/**
 * Why a task module may not declare `name`, or null when it may: the name
 * must be well-formed and must not be reserved.
 */
export function customNameProblem(name: string): string | null {
  if (!CUSTOM_TASK_TYPE_PATTERN.test(name)) {
    return `task name ${JSON.stringify(name.slice(0, 80))} does not match ${String(CUSTOM_TASK_TYPE_PATTERN)}`;
  }
  if (isReservedTaskName(name)) {
    return `task name ${JSON.stringify(name)} is reserved (a built-in task type or CLI shortcut)`;
  }
  return null;
}
