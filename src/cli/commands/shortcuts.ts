/**
 * The built-in tasks' shortcuts of `submit` (`submit sha256 --text abc`):
 * each a subcommand with the one flag that makes its payload.
 */
import type { JsonObject } from '../../protocol/messages.js';
import {
  BUILTIN_TASK_LIST,
  builtinPayload,
  type PayloadFieldSpec,
} from '../../protocol/task-types.js';
import type { FlagSpec, FlagValues } from '../flags.js';

/** A built-in task's CLI shortcut: its name, wire type, flags and payload. */
export interface TaskSpec {
  readonly name: string;
  readonly taskType: string;
  /** One line for `--help`. */
  readonly summary: string;
  readonly flags: readonly FlagSpec[];
  payload(values: FlagValues): JsonObject;
}

/** The flag that sets a built-in task's one payload field. */
function fieldFlag(field: PayloadFieldSpec): FlagSpec {
  return field.kind === 'integer'
    ? {
        name: field.flag,
        type: 'int',
        min: field.min,
        max: field.max,
        required: true,
        help: field.help,
      }
    : { name: field.flag, type: 'string', required: true, help: field.help };
}

/** The built-in tasks' shortcuts, read from the one table of built-ins. */
export const TASKS: readonly TaskSpec[] = BUILTIN_TASK_LIST.map((task) => ({
  name: task.shortcut,
  taskType: task.taskType,
  summary: task.summary,
  flags: [fieldFlag(task.field)],
  payload: (v: FlagValues): JsonObject =>
    builtinPayload(
      task,
      task.field.kind === 'integer' ? v.int(task.field.flag) : v.string(task.field.flag),
    ),
}));

/** Levenshtein distance, for "did you mean" on task shortcuts. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row.push(
        Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost),
      );
    }
    previous = row;
  }
  return previous[b.length] ?? 0;
}

/** ` (did you mean sha256?)` when `name` is a near miss of a shortcut, else ``. */
export function suggestShortcut(name: string): string {
  const near = TASKS.map((t) => t.name).find(
    (shortcut) => shortcut !== name && editDistance(shortcut, name.toLowerCase()) <= 2,
  );
  return near === undefined ? '' : ` (did you mean ${near}?)`;
}
