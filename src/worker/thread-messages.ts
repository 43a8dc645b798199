/**
 * Messages between the worker's main thread and its task threads.
 *
 * Every message travels in an envelope that pairs it with the request it
 * belongs to: main → thread `{ requestId, input }`, thread → main
 * `{ requestId, output }`. Both payloads are unions tagged by `type`:
 *
 *   input   RUN_TASK        run one task attempt
 *   output  TASK_STARTED    the registry is loaded and the payload is valid;
 *                           the task code is now running
 *           TASK_SUCCEEDED  the task resolved with its result string
 *           TASK_FAILED     the task threw, the payload was invalid, the task
 *                           type is unknown or the task module did not load
 *
 * A thread runs at most one request at a time. Cancellation has no message:
 * the main thread terminates the thread, which is the only way to stop
 * CPU-bound code that never yields.
 */
import type { JsonObject } from '../protocol/messages.js';

export interface RunTaskInput {
  type: 'RUN_TASK';
  taskType: string;
  payload: JsonObject;
  /** 1-based. */
  attemptNumber: number;
}

export type ThreadInput = RunTaskInput;

export type ThreadOutput =
  | { type: 'TASK_STARTED' }
  | { type: 'TASK_SUCCEEDED'; result: string }
  | { type: 'TASK_FAILED'; error: string };

export interface ThreadRequest {
  requestId: number;
  input: ThreadInput;
}

export interface ThreadResponse {
  requestId: number;
  output: ThreadOutput;
}

/** What a task thread receives as `workerData`. */
export interface TaskThreadData {
  /**
   * URL of a module whose `createRegistry()` (or default export) returns the
   * task registry; null = the built-in tasks.
   */
  taskModuleUrl: string | null;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isThreadInput(value: unknown): value is ThreadInput {
  if (!isRecord(value)) return false;
  return (
    value.type === 'RUN_TASK' &&
    typeof value.taskType === 'string' &&
    isRecord(value.payload) &&
    typeof value.attemptNumber === 'number'
  );
}

function isThreadOutput(value: unknown): value is ThreadOutput {
  if (!isRecord(value)) return false;
  switch (value.type) {
    case 'TASK_STARTED':
      return true;
    case 'TASK_SUCCEEDED':
      return typeof value.result === 'string';
    case 'TASK_FAILED':
      return typeof value.error === 'string';
    default:
      return false;
  }
}

/** Checks a structured-clone value that arrived on the thread side. */
export function isThreadRequest(value: unknown): value is ThreadRequest {
  return isRecord(value) && typeof value.requestId === 'number' && isThreadInput(value.input);
}

/** Checks a structured-clone value that arrived on the main side. */
export function isThreadResponse(value: unknown): value is ThreadResponse {
  return isRecord(value) && typeof value.requestId === 'number' && isThreadOutput(value.output);
}

/** Checks the `workerData` a task thread was started with. */
export function isTaskThreadData(value: unknown): value is TaskThreadData {
  return (
    isRecord(value) && (value.taskModuleUrl === null || typeof value.taskModuleUrl === 'string')
  );
}
