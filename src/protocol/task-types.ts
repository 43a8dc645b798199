/**
 * Task type names: the five built-ins, the CLI's lower-case shortcuts for
 * them, and the rule for custom names.
 *
 * A custom name matches {@link CUSTOM_TASK_TYPE_PATTERN}, is case-sensitive
 * and used exactly as given, and may not equal a built-in name or a shortcut
 * compared case-insensitively (so `sha256` can never mean two things).
 */

/** The built-in task types, in the order the protocol lists them. */
export const BUILTIN_TASK_TYPES = ['SLEEP', 'WORD_COUNT', 'SHA256', 'PRIME_COUNT', 'FAIL'] as const;
export type BuiltinTaskType = (typeof BUILTIN_TASK_TYPES)[number];

/** The CLI's shortcuts for the built-ins. */
export const TASK_SHORTCUTS = ['sleep', 'word-count', 'sha256', 'prime-count', 'fail'] as const;

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
