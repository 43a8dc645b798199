// The declarations speak Node.js's own types (AbortSignal, Buffer, TLS
// options); the package depends on @types/node, and this directive, kept in
// the emitted .d.ts, brings it in for users whatever their `types` setting.
/// <reference types="node" preserve="true" />
/**
 * `dtp/worker`: the task SDK (what task modules import) and running a worker
 * from code.
 *
 *     import { defineTask, defineTasks, NonRetryableError } from 'dtp/worker';
 *
 * A task module need not import anything: a default export mapping task
 * names to async functions is enough. The SDK adds types (payloads inferred
 * from a schema, results checked as JSON), `NonRetryableError` and
 * `RateLimitedError`.
 */
export { NonRetryableError, RateLimitedError, defineTask, defineTasks } from '../sdk/task.js';
export type {
  EnqueueOptions,
  ParentJob,
  PayloadOf,
  RateLimitedOptions,
  RateLimitScope,
  ReceivedEvent,
  ReceivedSignal,
  ResultOf,
  TaskContext,
  TaskDefinition,
  TaskFunction,
  TaskHandler,
  TaskLogger,
  TaskMap,
  WaitForEventOptions,
  WaitForSignalOptions,
  WaitOutcome,
} from '../sdk/task.js';
export type { JsonObject, JsonValue } from '../protocol/messages.js';
export { DEFAULT_WORKER_OPTIONS, startWorker } from './start-worker.js';
export type { StartWorkerOptions } from './start-worker.js';
export { Worker } from './worker.js';
export type {
  SessionView,
  ShardPlan,
  ShardRoute,
  WorkerEvents,
  WorkerMode,
  WorkerOptions,
} from './worker.js';
export { TaskModuleError, loadTaskModules } from './task-modules.js';
export type { LoadedTaskModules } from './task-modules.js';
export { DtpError } from '../protocol/errors.js';
