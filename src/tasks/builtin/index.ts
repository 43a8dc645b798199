/**
 * The five built-in task types of the protocol (docs/PROTOCOL.md) and a registry holding them.
 * Deliberately none runs commands or touches files.
 */
import { TaskRegistry, type TaskDefinition } from '../registry.js';
import { failTask } from './fail.js';
import { primeCountTask } from './prime-count.js';
import { sha256Task } from './sha256.js';
import { sleepTask } from './sleep.js';
import { wordCountTask } from './word-count.js';

export { failTask } from './fail.js';
export { primeCountTask } from './prime-count.js';
export { sha256Task } from './sha256.js';
export { sleepTask } from './sleep.js';
export { wordCountTask } from './word-count.js';

export { BUILTIN_TASK_TYPES, type BuiltinTaskType } from '../../protocol/task-types.js';

const BUILTIN_TASKS: readonly TaskDefinition[] = [
  sleepTask,
  wordCountTask,
  sha256Task,
  primeCountTask,
  failTask,
];

/** A fresh registry with every built-in task type; callers may add their own. */
export function createBuiltinRegistry(): TaskRegistry {
  const registry = new TaskRegistry();
  for (const task of BUILTIN_TASKS) registry.register(task);
  return registry;
}
