/**
 * Running a worker from code: `startWorker(options)` checks the options,
 * imports and checks the task modules (as `worker.sh --tasks` does), and
 * starts a {@link Worker} that connects in the background.
 *
 *     import { startWorker } from 'dtp/worker';
 *     const worker = await startWorker({ coordinatorPort: 7070, tasks: ['./tasks.js'] });
 *     ...
 *     await worker.drain(30_000); // or worker.close()
 */
import { LocalErrorCode } from '../protocol/error-codes.js';
import { randomBytes } from 'node:crypto';
import { createLogger, type Logger } from '../observability/logger.js';
import { DtpError } from '../protocol/errors.js';
import { TASK_MEMORY_MB } from './memory-budget.js';
import {
  DEFAULT_CANCEL_GRACE_MS,
  WORKER_BOUNDS,
  workerOptionsProblem,
  type WorkerOptions,
} from './options.js';
import type { TaskMap } from '../sdk/task.js';
import { loadTaskModules, withIsolated, withLocalHandlers } from './task-modules.js';
import { Worker } from './worker.js';

/** Documented defaults of `worker.sh`, shared by the CLI and {@link startWorker}. */
export const DEFAULT_WORKER_OPTIONS = {
  coordinatorHost: 'localhost',
  coordinatorPort: 7070,
  capacity: 4,
  heartbeatIntervalMs: 2_000,
  reconnectDelayMs: 2_000,
  cancelGraceMs: DEFAULT_CANCEL_GRACE_MS,
  taskMemoryMb: TASK_MEMORY_MB.default,
} as const satisfies Partial<WorkerOptions>;

/** What {@link startWorker} accepts: every worker option, each with a default. */
export type StartWorkerOptions = Partial<Omit<WorkerOptions, 'tasks' | 'logger'>> & {
  /**
   * Task modules to load beside the built-ins: file paths (resolved against
   * `cwd`) or package names (resolved from `cwd` as `import` would). Their
   * handlers run on task threads.
   */
  tasks?: readonly string[];
  /**
   * Handlers written beside the program's own code, by task name (as a task
   * module's default export): they run on this process's event loop, sharing
   * its database pools and clients. A handler here that computes without
   * yielding delays the worker's heartbeats and cannot be preempted (a stop
   * fires its signal; one that ignores it is let go): keep CPU-bound work in
   * task modules.
   */
  handlers?: TaskMap;
  /**
   * Task types whose attempts each get a task thread of their own, whatever
   * their module declares (built-ins included); a name the worker does not
   * run is refused.
   */
  isolate?: readonly string[];
  /** Where `tasks` are resolved from (default: the working directory). */
  cwd?: string;
  /** Default: human-readable lines on stdout at level info, named `worker`. */
  logger?: Logger;
};

/** `worker-` and 8 random hex digits. */
export function randomWorkerId(): string {
  return `worker-${randomBytes(4).toString('hex')}`;
}

function invalid(message: string): DtpError {
  return new DtpError(LocalErrorCode.InvalidOptions, `startWorker: ${message}`);
}

/** Type checks a JavaScript caller could get wrong; ranges are checked with the bounds table. */
function checkTypes(options: StartWorkerOptions): void {
  for (const key of Object.keys(WORKER_BOUNDS) as (keyof typeof WORKER_BOUNDS)[]) {
    const value: unknown = options[key];
    if (value !== undefined && typeof value !== 'number')
      throw invalid(`${key} must be a number, got ${typeof value}`);
  }
  for (const key of ['coordinatorHost', 'workerId', 'cwd'] as const) {
    const value: unknown = options[key];
    if (value !== undefined && typeof value !== 'string')
      throw invalid(`${key} must be a string, got ${typeof value}`);
  }
  const tasks: unknown = options.tasks;
  if (tasks !== undefined && (!Array.isArray(tasks) || !tasks.every((t) => typeof t === 'string')))
    throw invalid('tasks must be an array of module names or paths');
  const isolate: unknown = options.isolate;
  if (
    isolate !== undefined &&
    (!Array.isArray(isolate) || !isolate.every((t) => typeof t === 'string'))
  )
    throw invalid('isolate must be an array of task type names');
  const handlers: unknown = options.handlers;
  if (
    handlers !== undefined &&
    (typeof handlers !== 'object' || handlers === null || Array.isArray(handlers))
  )
    throw invalid('handlers must map task names to handlers');
}

/**
 * Checks the options, loads the task modules and starts a worker. Rejects
 * with a DtpError `INVALID_OPTIONS` naming a bad option, or a
 * `TaskModuleError` naming a module and its problem; nothing is started then.
 */
export async function startWorker(options: StartWorkerOptions = {}): Promise<Worker> {
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  checkTypes(options);
  const { tasks = [], cwd, logger, handlers, isolate = [], ...rest } = options;
  const workerOptions: WorkerOptions = {
    ...DEFAULT_WORKER_OPTIONS,
    ...withoutUndefined(rest),
    workerId: rest.workerId ?? randomWorkerId(),
    logger: logger ?? createLogger({ name: 'worker' }),
  };
  const problem = workerOptionsProblem(workerOptions);
  if (problem !== null) throw invalid(problem);
  const loaded = await loadTaskModules(tasks, cwd);
  const withCode = handlers === undefined ? loaded : withLocalHandlers(loaded, handlers);
  workerOptions.tasks = withIsolated(withCode, isolate);
  return Worker.start(workerOptions);
}

function withoutUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
