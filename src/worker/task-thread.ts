/**
 * Entry point of one task thread (a `worker_threads` Worker started by the
 * task pool). It runs task code off the worker's main thread, so no handler
 * can delay heartbeats or protocol handling.
 *
 * At start it imports the users' task modules named in its `workerData`
 * (the main thread has checked them already) beside the built-in tasks, and
 * serves attempts on its parent port (attempt-server.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { loadHandlers } from './attempt-runtime.js';
import { serveAttempts } from './attempt-server.js';
import { isTaskThreadData, type TaskThreadData } from './thread-messages.js';

if (parentPort === null) throw new Error('task-thread.js must run inside a worker thread');
if (!isTaskThreadData(workerData)) throw new Error('task thread started without valid workerData');

const data: TaskThreadData = workerData;
serveAttempts(parentPort, loadHandlers(data.modules), {
  shared: data.shared,
  isolated: data.isolated,
  sampleMemory: true,
});
