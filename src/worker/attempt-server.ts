/**
 * The task side of a task thread, on any message port: runs every attempt
 * it is sent as soon as it comes, any number at once (attempt-runtime.ts),
 * and answers in batches (thread-messages.ts): what the attempts produce in
 * one turn of the event loop leaves in one message.
 *
 * While it holds attempts it writes, every {@link SAMPLE_INTERVAL_MS}, the
 * time of that turn and (where `sampleMemory`) a memory sample into its
 * shared words: a thread whose event loop is held (a handler that computes
 * without yielding) stops writing them, which is how the pool tells it is
 * blocked and how its memory budget is watched (memory-budget.ts).
 *
 * Task threads serve their `parentPort` (task-thread.ts); a worker with
 * handlers given in code serves one end of a channel on its own main thread
 * (local-thread.ts).
 */
import { getHeapStatistics } from 'node:v8';
import type { MessagePort } from 'node:worker_threads';
import { AttemptRuntime } from './attempt-runtime.js';
import { SAMPLE_INTERVAL_MS } from './memory-budget.js';
import type { Handler } from './task-modules.js';
import {
  Outbox,
  SharedWords,
  decodeRequest,
  encodeResponse,
  type WireResponse,
} from './thread-messages.js';

export interface ServeOptions {
  /** The thread's shared words. */
  readonly shared: SharedArrayBuffer;
  /** Every attempt says it started at once (an isolated thread: one at a time). */
  readonly isolated: boolean;
  /** Sample this isolate's memory (a task thread's own; not the main thread's). */
  readonly sampleMemory: boolean;
}

/** Serves attempts on `port` until the port closes (or the thread ends). */
export function serveAttempts(
  port: MessagePort,
  handlers: Promise<Map<string, Handler>>,
  options: ServeOptions,
): void {
  const shared = new SharedWords(options.shared);
  const outbox = new Outbox<WireResponse>(
    (batch) => port.postMessage(batch),
    (flush) => setImmediate(flush),
  );
  const runtime = new AttemptRuntime(
    {
      reply: (requestId, output) => outbox.push(encodeResponse({ requestId, output })),
      stopRaised: (slot, requestId) => shared.stopRaised(slot, requestId),
      // An attempt that starts on an idle thread (or any on an isolated one)
      // says so at once: its handler may hold the thread. Beside others, its
      // start waits for the batch (a handler that holds a shared thread is
      // one that should be isolated).
      beforeHandler: () => {
        if (options.isolated || runtime.runningCount <= 1) outbox.flush();
      },
    },
    handlers,
  );
  const sampler = new Sampler(shared, runtime, options.sampleMemory);
  port.on('message', (batch: unknown) => {
    // Only the pool talks to this port; a malformed request is a bug there,
    // and crashing makes the pool fail the thread's attempts loudly.
    if (!Array.isArray(batch)) throw new Error('task thread received a malformed batch');
    shared.recordTurn(Date.now());
    for (const wire of batch) {
      const request = decodeRequest(wire);
      if (request === null) throw new Error('task thread received a malformed request');
      const { requestId, input } = request;
      switch (input.type) {
        case 'RUN_TASK':
          void sampler.around(() => runtime.run(requestId, request.slot ?? 0, input));
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
}

/** The samples of one thread's turns and memory, taken while it holds attempts. */
class Sampler {
  readonly #shared: SharedWords;
  readonly #runtime: AttemptRuntime;
  readonly #memory: boolean;
  /** When the last sample was taken (performance.now()). */
  #lastSampleMs = 0;
  /** Samples every SAMPLE_INTERVAL_MS while attempts run; one interval for a run of them. */
  #timer: NodeJS.Timeout | null = null;

  constructor(shared: SharedWords, runtime: AttemptRuntime, memory: boolean) {
    this.#shared = shared;
    this.#runtime = runtime;
    this.#memory = memory;
  }

  /** Runs one attempt, sampling while it and the others run. */
  async around(run: () => Promise<void>): Promise<void> {
    if (this.#timer === null) {
      this.#sample();
      this.#timer = setInterval(() => this.#whileRunning(), SAMPLE_INTERVAL_MS);
      this.#timer.unref();
    }
    const startedMs = performance.now();
    await run();
    // The last sample tells the pool what the thread keeps. An attempt of
    // under a millisecond soon after a sample cannot have moved it by much
    // (a few MiB at most, against a retained limit of 64): the sample it
    // would take costs more than such an attempt's own work.
    const endedMs = performance.now();
    if (endedMs - startedMs >= 1 || endedMs - this.#lastSampleMs >= SAMPLE_INTERVAL_MS) {
      this.#sample();
    }
  }

  #whileRunning(): void {
    if (this.#runtime.runningCount > 0) return this.#sample();
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  /**
   * Heap + external memory (Buffers, ArrayBuffers) of this isolate, in MiB
   * (V8's statistics: a microsecond, no system call), and the time of this
   * turn.
   */
  #sample(): void {
    if (this.#memory) {
      const stats = getHeapStatistics();
      this.#shared.recordMemory((stats.used_heap_size + stats.external_memory) / 2 ** 20);
    }
    this.#shared.recordTurn(Date.now());
    this.#lastSampleMs = performance.now();
  }
}
