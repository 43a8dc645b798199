/**
 * Entry point of one task thread (a `worker_threads` Worker started by
 * {@link TaskPool}). It runs task code off the worker's main thread, so a
 * CPU-bound task can never delay heartbeats or protocol handling.
 *
 * Protocol (see thread-messages.ts): for each `RUN_TASK` request it replies
 * `TASK_STARTED` once the payload is valid and the task code begins, then
 * exactly one `TASK_SUCCEEDED` or `TASK_FAILED`. Any failure inside the task,
 * including an invalid payload or an unloadable task module, becomes
 * `TASK_FAILED` with the error's message; only a real crash (an uncaught
 * error outside the request, `process.exit`) ends the thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { describeError } from '../protocol/errors.js';
import { createBuiltinRegistry } from '../tasks/builtin/index.js';
import { loadTaskSource, requireDefinition, type TaskSource } from './task-module.js';
import {
  isTaskThreadData,
  isThreadRequest,
  type RunTaskInput,
  type ThreadOutput,
  type ThreadRequest,
  type ThreadResponse,
} from './thread-messages.js';

if (parentPort === null) throw new Error('task-thread.js must run inside a worker thread');
if (!isTaskThreadData(workerData)) throw new Error('task thread started without valid workerData');

const port = parentPort;
const taskModuleUrl = workerData.taskModuleUrl;

/**
 * Tasks are stopped by terminating the thread, so this signal is never
 * aborted; tasks still get one because the task interface requires it.
 */
const neverAborted = new AbortController().signal;

let source: Promise<TaskSource> | null = null;

/** Loads the registry once per thread, on the first request. */
function loadSource(): Promise<TaskSource> {
  source ??=
    taskModuleUrl === null
      ? Promise.resolve(createBuiltinRegistry())
      : loadTaskSource(taskModuleUrl);
  return source;
}

function reply(requestId: number, output: ThreadOutput): void {
  const response: ThreadResponse = { requestId, output };
  port.postMessage(response);
}

async function runTask(input: RunTaskInput, onStarted: () => void): Promise<ThreadOutput> {
  try {
    const definition = requireDefinition(await loadSource(), input.taskType);
    definition.validate(input.payload);
    onStarted();
    const result: unknown = await definition.run(input.payload, {
      attemptNumber: input.attemptNumber,
      signal: neverAborted,
    });
    if (typeof result !== 'string') {
      return { type: 'TASK_FAILED', error: `task returned a ${typeof result}, not a string` };
    }
    return { type: 'TASK_SUCCEEDED', result };
  } catch (err) {
    return { type: 'TASK_FAILED', error: describeError(err) };
  }
}

async function handle(request: ThreadRequest): Promise<void> {
  const { requestId, input } = request;
  const output = await runTask(input, () => reply(requestId, { type: 'TASK_STARTED' }));
  reply(requestId, output);
}

port.on('message', (value: unknown) => {
  // Only the pool talks to this thread; a malformed request is a bug there,
  // and crashing makes the pool fail the task loudly.
  if (!isThreadRequest(value)) throw new Error('task thread received a malformed request');
  void handle(value);
});
