/**
 * Entry point of one task thread (a `worker_threads` Worker started by the
 * task pool). It runs task code off the worker's main thread, so no handler
 * can delay heartbeats or protocol handling.
 *
 * At start it imports the users' task modules named in its `workerData`
 * (the main thread has checked them already) beside the built-in tasks. It
 * runs every attempt it is sent as soon as it comes, any number at once
 * (attempt-runtime.ts), and answers in batches (thread-messages.ts): what
 * the attempts produce in one turn of this thread's event loop leaves in
 * one message.
 *
 * While it holds attempts it writes, every {@link SAMPLE_INTERVAL_MS}, the
 * time of that turn and a memory sample into its shared words: a thread
 * whose event loop is held (a handler that computes without yielding) stops
 * writing them, which is how the pool tells it is blocked and how its memory
 * budget is watched (memory-budget.ts).
 */
import { getHeapStatistics } from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import { AttemptRuntime, loadHandlers } from './attempt-runtime.js';
import { SAMPLE_INTERVAL_MS } from './memory-budget.js';
import {
  Outbox,
  SharedWords,
  isTaskThreadData,
  isThreadRequest,
  type TaskThreadData,
  type ThreadResponse,
} from './thread-messages.js';

if (parentPort === null) throw new Error('task-thread.js must run inside a worker thread');
if (!isTaskThreadData(workerData)) throw new Error('task thread started without valid workerData');

const port = parentPort;
const data: TaskThreadData = workerData;
const shared = new SharedWords(data.shared);
const outbox = new Outbox<ThreadResponse>(
  (batch) => port.postMessage(batch),
  (flush) => setImmediate(flush),
);
const runtime = new AttemptRuntime(
  {
    reply: (requestId, output) => outbox.push({ requestId, output }),
    stopRaised: (slot, requestId) => shared.stopRaised(slot, requestId),
    // An attempt that starts on an idle thread (or any on an isolated one)
    // says so at once: its handler may hold the thread. Beside others, its
    // start waits for the batch (a handler that holds a shared thread is
    // one that should be isolated).
    beforeHandler: () => {
      if (data.isolated || runtime.runningCount <= 1) outbox.flush();
    },
  },
  loadHandlers(data.modules),
);

/** When the last memory sample was taken (performance.now()). */
let lastSampleMs = 0;

/**
 * Heap + external memory (Buffers, ArrayBuffers) of this thread's isolate, in
 * MiB (V8's statistics: a microsecond, no system call), and the time of this
 * turn.
 */
function sample(): void {
  const stats = getHeapStatistics();
  shared.recordMemory((stats.used_heap_size + stats.external_memory) / 2 ** 20);
  shared.recordTurn(Date.now());
  lastSampleMs = performance.now();
}

/** Samples every SAMPLE_INTERVAL_MS while attempts run; one interval for a run of them. */
let sampler: NodeJS.Timeout | null = null;

function sampleWhileRunning(): void {
  if (runtime.runningCount > 0) return sample();
  if (sampler !== null) clearInterval(sampler);
  sampler = null;
}

async function run(requestId: number, slot: number, input: Parameters<AttemptRuntime['run']>[2]) {
  if (sampler === null) {
    sample();
    sampler = setInterval(sampleWhileRunning, SAMPLE_INTERVAL_MS);
  }
  const startedMs = performance.now();
  await runtime.run(requestId, slot, input);
  // The last sample tells the pool what the thread keeps. An attempt of
  // under a millisecond soon after a sample cannot have moved it by much
  // (a few MiB at most, against a retained limit of 64): the sample it
  // would take costs more than such an attempt's own work.
  const endedMs = performance.now();
  if (endedMs - startedMs >= 1 || endedMs - lastSampleMs >= SAMPLE_INTERVAL_MS) sample();
}

port.on('message', (batch: unknown) => {
  // Only the pool talks to this thread; a malformed request is a bug there,
  // and crashing makes the pool fail the thread's attempts loudly.
  if (!Array.isArray(batch)) throw new Error('task thread received a malformed batch');
  shared.recordTurn(Date.now());
  for (const request of batch) {
    if (!isThreadRequest(request)) throw new Error('task thread received a malformed request');
    const { requestId, input } = request;
    switch (input.type) {
      case 'RUN_TASK':
        void run(requestId, request.slot ?? 0, input);
        break;
      case 'ABORT_TASK':
        runtime.abort(requestId, input.reason);
        break;
      case 'CALL_SETTLED':
        runtime.settleCall(requestId, input.callId, input.outcome);
        break;
    }
  }
});
