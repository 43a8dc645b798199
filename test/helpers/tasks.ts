/** Looking up the built-in tasks the way the CLI names them. */
import { BUILTIN_TASK_LIST, type BuiltinTaskSpec } from '../../src/protocol/task-types.js';

/** The built-in a CLI shortcut names (exact, lower-case), or undefined. */
export function builtinTaskByShortcut(shortcut: string): BuiltinTaskSpec | undefined {
  return BUILTIN_TASK_LIST.find((task) => task.shortcut === shortcut);
}
