/**
 * A micro-benchmark of the hop between a worker's main thread and one task
 * thread, with nothing else in it: what one round trip costs in CPU (both
 * threads together) when each side sleeps until the other wakes it, as an
 * idle task thread and a worker between two attempts do.
 *
 * - `message-number`: postMessage of a number each way (Node's MessagePort);
 * - `message-attempt`: the same with an attempt-shaped request and answer
 *   (what the pool and its threads exchange, give or take a field);
 * - `atomics`: no message at all, a shared word and Atomics.wait / notify
 *   (the thread blocks in Atomics.wait, the main thread in Atomics.waitAsync),
 *   to tell the cost of waking a thread from the cost of the message.
 *
 * CPU time of this process (both threads), per round trip, median of `reps`
 * rounds of `count` round trips after 1,000 unmeasured ones; one JSON line
 * per kind.
 *
 *   node dist/bench/thread-hop.js [--count 20000] [--reps 3]
 */
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { median } from './harness.js';

type Kind = 'message-number' | 'message-attempt' | 'atomics';
const KINDS: readonly Kind[] = ['message-number', 'message-attempt', 'atomics'];
const WARM = 1_000;

/** Atomics.waitAsync: in every Node.js we support, not in the TypeScript library this project targets. */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(
      this: void,
      words: Int32Array,
      index: number,
      value: number,
    ): { async: false; value: string } | { async: true; value: Promise<string> };
  }
).waitAsync;

interface ThreadData {
  readonly kind: Kind;
  readonly shared: SharedArrayBuffer;
}

const ATTEMPT_REQUEST = {
  requestId: 1,
  input: {
    type: 'RUN_TASK',
    taskType: 'SHA256',
    payload: { text: 'hello world 12345' },
    jobId: '0192f0a1-7b7c-7cde-8f00-123456789abc',
    attemptId: '0192f0a1-7b7c-7cde-8f00-123456789abd',
    attemptNumber: 1,
  },
};

/** The thread's side: answer each message, or each change of the shared word. */
function threadSide(data: ThreadData, port: NonNullable<typeof parentPort>): void {
  if (data.kind !== 'atomics') {
    port.on('message', (value: unknown) => {
      if (typeof value === 'number') port.postMessage(value);
      else {
        const { requestId } = value as typeof ATTEMPT_REQUEST;
        const output = { type: 'TASK_SUCCEEDED', result: 'abc', resultFormat: 'text' };
        port.postMessage({ requestId, output });
      }
    });
    return;
  }
  const words = new Int32Array(data.shared);
  let seen = 0;
  port.once('message', () => {
    // Blocks this thread's event loop for good: the main thread terminates it.
    for (;;) {
      Atomics.wait(words, 0, seen);
      seen = Atomics.load(words, 0);
      Atomics.store(words, 1, seen);
      Atomics.notify(words, 1);
    }
  });
}

/** CPU µs per round trip of one round of `count` (after WARM unmeasured ones). */
async function round(kind: Kind, count: number): Promise<number> {
  const shared = new SharedArrayBuffer(8);
  const data: ThreadData = { kind, shared };
  const thread = new Worker(new URL(import.meta.url), { workerData: data });
  try {
    let startedCpu = process.cpuUsage();
    if (kind === 'atomics') {
      const words = new Int32Array(shared);
      thread.postMessage('start');
      for (let i = 0; i < WARM + count; i++) {
        if (i === WARM) startedCpu = process.cpuUsage();
        Atomics.store(words, 0, i + 1);
        Atomics.notify(words, 0);
        const waited = waitAsync(words, 1, i);
        if (waited.async) await waited.value;
      }
    } else {
      const request = kind === 'message-number' ? 1 : ATTEMPT_REQUEST;
      await new Promise<void>((resolve) => {
        let answers = 0;
        thread.on('message', () => {
          answers += 1;
          if (answers === WARM) startedCpu = process.cpuUsage();
          if (answers === WARM + count) resolve();
          else thread.postMessage(request);
        });
        thread.postMessage(request);
      });
    }
    const used = process.cpuUsage(startedCpu);
    return (used.user + used.system) / count;
  } finally {
    await thread.terminate();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      count: { type: 'string', default: '20000' },
      reps: { type: 'string', default: '3' },
    },
  });
  const count = Number(values.count);
  const reps = Number(values.reps);
  for (const kind of KINDS) {
    const rounds: number[] = [];
    for (let r = 0; r < reps; r++) rounds.push(await round(kind, count));
    const cpuUsPerRoundTrip = Math.round(median(rounds) * 10) / 10;
    console.log(JSON.stringify({ kind, count, reps, cpuUsPerRoundTrip }));
  }
}

if (!isMainThread && parentPort !== null) threadSide(workerData as ThreadData, parentPort);
else if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
