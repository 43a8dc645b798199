/**
 * Users' task modules: finding, importing and checking them.
 *
 * A task module's default export maps task names to handlers: an async
 * function `(payload, ctx) => result`, or an object `{ run, schema? }` whose
 * `schema` is any Standard Schema (see src/sdk/task.ts). The worker imports
 * every module once on its main thread at start ({@link loadTaskModules}),
 * so a module that cannot be loaded, exports nothing usable, or declares a
 * bad or duplicate name stops the worker before it registers, with a
 * {@link TaskModuleError} naming the module and the problem. Task threads
 * import the same modules again ({@link importHandlers}) and run them.
 */
import { LocalErrorCode } from '../protocol/error-codes.js';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { DtpError, describeError } from '../protocol/errors.js';
import { MAX_TASK_TYPES_PER_WORKER } from '../protocol/limits.js';
import { BUILTIN_TASK_TYPES, customNameProblem } from '../protocol/task-types.js';
import type { TaskContext } from '../sdk/task.js';
import { ModuleResolutionError, resolveTaskModule } from './module-resolution.js';
import { validatePayload } from './task-values.js';
import { createBuiltinRegistry } from '../tasks/builtin/index.js';

/** A task module could not be used; the message names the module and the problem. */
export class TaskModuleError extends DtpError {
  /** The module as the user named it. */
  readonly module: string;

  constructor(module: string, problem: string, options?: { cause?: unknown }) {
    super(LocalErrorCode.TaskModuleInvalid, `task module ${module}: ${problem}`, options);
    this.module = module;
  }
}

/** One handler, whichever form the module used (built-ins too). */
export interface Handler {
  /**
   * Checks the payload before `run` and returns what `run` gets (a schema may
   * transform it). Throws an error with `retryable: false` when it is invalid.
   */
  validate(payload: unknown): unknown;
  run(payload: unknown, ctx: TaskContext): unknown;
  /** Declared `isolate: true`: its attempts get a task thread to themselves. */
  isolate: boolean;
}

const unchecked = (payload: unknown): unknown => payload;

/** A module that loaded and checked out. */
export interface LoadedModule {
  /** As the user named it (`--tasks` value). */
  readonly specifier: string;
  /** What threads import. */
  readonly url: string;
  /** Its task names, in the order of its export. */
  readonly taskTypes: readonly string[];
}

/** Every module of a worker, and the task types it will declare. */
export interface LoadedTaskModules {
  readonly modules: readonly LoadedModule[];
  /** The five built-ins, then every custom name in module order. */
  readonly taskTypes: readonly string[];
  /** The task types declared `isolate: true` (built-ins included): a thread per attempt. */
  readonly isolated: ReadonlySet<string>;
  /** Handlers given in code (`startWorker({ handlers })`): they run on the program's own thread. */
  readonly local?: ReadonlyMap<string, Handler>;
}

/** The built-in task types whose attempts get a thread to themselves (PRIME_COUNT). */
export const BUILTIN_ISOLATED: ReadonlySet<string> = (() => {
  const registry = createBuiltinRegistry();
  return new Set(registry.taskTypes.filter((type) => registry.require(type).isolate === true));
})();

/** The built-ins only: what a worker without `--tasks` declares. */
export const NO_TASK_MODULES: LoadedTaskModules = {
  modules: [],
  taskTypes: BUILTIN_TASK_TYPES,
  isolated: BUILTIN_ISOLATED,
};

function isObject(value: unknown): value is Record<string, unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null;
}

/** True for a Standard Schema (v1) of any library. */
export function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  if (!isObject(value)) return false;
  const props = value['~standard'];
  return isObject(props) && props.version === 1 && typeof props.validate === 'function';
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

/** One export entry as a handler, or the reason it is not one. */
function toHandler(value: unknown): Handler | string {
  if (typeof value === 'function') {
    const run = value as (payload: unknown, ctx: TaskContext) => unknown;
    return { validate: unchecked, run, isolate: false };
  }
  if (!isObject(value) || typeof value.run !== 'function') {
    return `expected an async function or an object { run, schema? }, got ${describeValue(value)}`;
  }
  const schema = value.schema;
  if (schema !== undefined && schema !== null && !isStandardSchema(schema)) {
    return 'its schema is not a Standard Schema (an object with ~standard.validate, e.g. a zod 4 schema)';
  }
  const isolate = value.isolate;
  if (isolate !== undefined && typeof isolate !== 'boolean') {
    return `isolate must be true or false, got ${describeValue(isolate)}`;
  }
  const run = value.run as (payload: unknown, ctx: TaskContext) => unknown;
  return {
    isolate: isolate === true,
    validate: isStandardSchema(schema) ? (payload) => validatePayload(schema, payload) : unchecked,
    // Called as a method, so a handler object may use `this`.
    run: (payload, ctx) => run.call(value, payload, ctx),
  };
}

/**
 * Reads an imported module's default export as a map of task names to
 * handlers. Throws {@link TaskModuleError} for anything unusable.
 */
export function readTaskMap(shown: string, mod: unknown): Map<string, Handler> {
  const exported = isObject(mod) ? mod.default : undefined;
  if (exported === undefined) {
    throw new TaskModuleError(
      shown,
      'has no default export (expected a map of task names to handlers)',
    );
  }
  if (!isObject(exported) || Array.isArray(exported) || typeof exported === 'function') {
    throw new TaskModuleError(
      shown,
      `its default export must map task names to handlers, got ${describeValue(exported)}`,
    );
  }
  const handlers = new Map<string, Handler>();
  for (const [name, value] of Object.entries(exported)) {
    const problem = customNameProblem(name);
    if (problem !== null) throw new TaskModuleError(shown, problem);
    const handler = toHandler(value);
    if (typeof handler === 'string') throw new TaskModuleError(shown, `task "${name}": ${handler}`);
    handlers.set(name, handler);
  }
  if (handlers.size === 0)
    throw new TaskModuleError(shown, 'exports no tasks (its default export is empty)');
  return handlers;
}

/** Imports one module; a failure becomes a {@link TaskModuleError}. */
async function importModule(shown: string, url: string): Promise<unknown> {
  try {
    return (await import(url)) as unknown;
  } catch (err) {
    throw new TaskModuleError(shown, `cannot be loaded: ${describeError(err)}`, { cause: err });
  }
}

/**
 * Resolves, imports and checks every module named by `specifiers` (from
 * `cwd`), on the calling thread. Task names must be unique across modules
 * (and a module may not be named twice); built-in names and shortcuts are
 * reserved. Throws {@link TaskModuleError} at the first problem.
 */
export async function loadTaskModules(
  specifiers: readonly string[],
  cwd = process.cwd(),
): Promise<LoadedTaskModules> {
  const modules: LoadedModule[] = [];
  const owner = new Map<string, string>();
  const isolated = new Set(BUILTIN_ISOLATED);
  for (const specifier of specifiers) {
    let url: string;
    try {
      url = resolveTaskModule(specifier, cwd);
    } catch (err) {
      if (!(err instanceof ModuleResolutionError)) throw err;
      throw new TaskModuleError(specifier, `cannot be found: ${err.message}`, { cause: err });
    }
    const twice = modules.find((m) => m.url === url);
    if (twice !== undefined)
      throw new TaskModuleError(specifier, `is listed twice (as ${twice.specifier})`);
    const handlers = readTaskMap(specifier, await importModule(specifier, url));
    for (const [name, handler] of handlers) {
      if (handler.isolate) isolated.add(name);
      const other = owner.get(name);
      if (other !== undefined) {
        throw new TaskModuleError(
          specifier,
          `task "${name}" is already declared by task module ${other}`,
        );
      }
      owner.set(name, specifier);
    }
    modules.push({ specifier, url, taskTypes: [...handlers.keys()] });
  }
  const taskTypes = [...BUILTIN_TASK_TYPES, ...owner.keys()];
  if (taskTypes.length > MAX_TASK_TYPES_PER_WORKER) {
    const last = specifiers[specifiers.length - 1] ?? '';
    throw new TaskModuleError(
      last,
      `the modules declare ${taskTypes.length - BUILTIN_TASK_TYPES.length} tasks; a worker runs at most ${MAX_TASK_TYPES_PER_WORKER - BUILTIN_TASK_TYPES.length} besides the built-ins`,
    );
  }
  return { modules, taskTypes, isolated };
}

/** Imports modules already checked on the main thread (task threads do this). */
export async function importHandlers(
  modules: readonly { specifier: string; url: string }[],
): Promise<Map<string, Handler>> {
  const all = new Map<string, Handler>();
  for (const { specifier, url } of modules) {
    for (const [name, handler] of readTaskMap(specifier, await importModule(specifier, url))) {
      all.set(name, handler);
    }
  }
  return all;
}

/**
 * Adds handlers given in code to what the modules declare: each checked as a
 * module's export entry is, named as a custom task, not declared twice, and
 * not `isolate` (a handler that runs on the program's own thread cannot have
 * a thread of its own: put it in a task module). Throws
 * {@link TaskModuleError} (module `handlers`) at the first problem.
 */
export function withLocalHandlers(
  loaded: LoadedTaskModules,
  handlers: Readonly<Record<string, unknown>>,
): LoadedTaskModules {
  const shown = 'handlers';
  const local = readTaskMap(shown, { default: handlers });
  for (const [name, handler] of local) {
    if (loaded.taskTypes.includes(name)) {
      throw new TaskModuleError(shown, `task "${name}" is already declared by a task module`);
    }
    if (handler.isolate) {
      throw new TaskModuleError(
        shown,
        `task "${name}" is declared isolate: a handler given in code runs on the program's own thread; put it in a task module (--tasks) to isolate it`,
      );
    }
  }
  const taskTypes = [...loaded.taskTypes, ...local.keys()];
  if (taskTypes.length > MAX_TASK_TYPES_PER_WORKER) {
    throw new TaskModuleError(
      shown,
      `the modules and handlers declare ${taskTypes.length - BUILTIN_TASK_TYPES.length} tasks; a worker runs at most ${MAX_TASK_TYPES_PER_WORKER - BUILTIN_TASK_TYPES.length} besides the built-ins`,
    );
  }
  return { ...loaded, taskTypes, local };
}

/**
 * The task types an operator isolates whatever their module declares
 * (`--isolate`, built-ins included): each attempt gets a task thread of its
 * own and is preempted by termination. A name the worker does not run, or a
 * handler given in code (it runs on the program's own thread), is refused.
 */
export function withIsolated(
  loaded: LoadedTaskModules,
  names: readonly string[],
): LoadedTaskModules {
  if (names.length === 0) return loaded;
  const isolated = new Set(loaded.isolated);
  for (const name of names) {
    if (loaded.local?.has(name) === true) {
      throw new IsolateError(
        `task "${name}" is given in code and runs on the program's own thread; put it in a task module (--tasks) to isolate it`,
      );
    }
    if (!loaded.taskTypes.includes(name)) {
      throw new IsolateError(
        `this worker does not run task "${name}" (it runs ${loaded.taskTypes.join(', ')})`,
      );
    }
    isolated.add(name);
  }
  return { ...loaded, isolated };
}

/** A task type the operator asked to isolate that cannot be (`--isolate`, `isolate`). */
export class IsolateError extends DtpError {
  constructor(problem: string) {
    super(LocalErrorCode.InvalidOptions, `isolate: ${problem}`);
  }
}
