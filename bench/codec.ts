/**
 * A micro-benchmark of the message codec: what decoding and encoding one
 * frame costs beyond the JSON work that cannot be avoided (JSON.parse of
 * the UTF-8 text, JSON.stringify of the message as built), for the three
 * messages every job passes through most often: the TASK_ASSIGN a worker
 * decodes, the TASK_RESULT it encodes and the coordinator decodes, and the
 * JOB_EVENT each subscriber decodes (a finished job's full snapshot).
 *
 * CPU time of this process, not wall time, so a busy machine skews it less;
 * for each figure the best of `reps` rounds of `count` calls.
 *
 *   node dist/bench/codec.js [--count 100000] [--reps 7]
 */
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { decodeMessage, encodeMessage } from '../src/protocol/codec.js';
import { FRAME_HEADER_BYTES } from '../src/protocol/framing.js';
import type { Message } from '../src/protocol/messages.js';

const AT = 1_764_000_000_000;
const JOB_ID = '0192f0a1-7b7c-7cde-8f00-123456789abc';
const ATTEMPT_ID = '0192f0a1-7b7c-7cde-8f00-123456789abd';
const DIGEST = '"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"';

/** The messages measured, as the coordinator and workers build them under the `bulk` workload. */
export const SAMPLES: readonly Message[] = [
  {
    type: 'TASK_ASSIGN',
    jobId: JOB_ID,
    attemptId: ATTEMPT_ID,
    attemptNumber: 1,
    taskType: 'SHA256',
    payload: { text: 'hello world 12345' },
    timeoutMillis: 30_000,
    maxAttempts: 3,
  },
  {
    type: 'TASK_RESULT',
    workerId: 'w1',
    jobId: JOB_ID,
    attemptId: ATTEMPT_ID,
    success: true,
    result: DIGEST,
    error: null,
    resultFormat: 'json',
  },
  {
    type: 'JOB_EVENT',
    event: 'state',
    atMillis: AT,
    job: {
      jobId: JOB_ID,
      taskType: 'SHA256',
      state: 'COMPLETED',
      attempts: 1,
      maxAttempts: 3,
      workerId: 'w1',
      result: DIGEST,
      error: null,
      createdAtMillis: AT,
      updatedAtMillis: AT,
      priority: 'NORMAL',
      startedAtMillis: AT,
      finishedAtMillis: AT,
      resultFormat: 'json',
      timeoutMillis: 30_000,
      queue: 'default',
    },
  },
];

export interface CodecFigures {
  type: string;
  frameBytes: number;
  /** decodeMessage of the frame's payload, ns. */
  decodeNs: number;
  /** UTF-8 decoding and JSON.parse alone, ns. */
  parseNs: number;
  /** encodeMessage (the whole frame), ns. */
  encodeNs: number;
  /** JSON.stringify of the message alone, ns. */
  stringifyNs: number;
}

function cpuNs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) * 1_000;
}

/** The best per-call CPU time of `reps` rounds of `count` calls of `fn`, ns. */
function best(count: number, reps: number, fn: () => unknown): number {
  let least = Infinity;
  for (let rep = 0; rep < reps; rep++) {
    const start = cpuNs();
    for (let i = 0; i < count; i++) fn();
    least = Math.min(least, (cpuNs() - start) / count);
  }
  return Math.round(least);
}

export function measureCodec(msg: Message, count: number, reps: number): CodecFigures {
  const payload = encodeMessage(msg).subarray(FRAME_HEADER_BYTES);
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  return {
    type: msg.type,
    frameBytes: payload.length,
    decodeNs: best(count, reps, () => decodeMessage(payload)),
    parseNs: best(count, reps, () => JSON.parse(utf8.decode(payload)) as unknown),
    encodeNs: best(count, reps, () => encodeMessage(msg)),
    stringifyNs: best(count, reps, () => JSON.stringify(msg)),
  };
}

function main(): void {
  const { values } = parseArgs({
    options: {
      count: { type: 'string', default: '100000' },
      reps: { type: 'string', default: '7' },
    },
  });
  const count = Number(values.count);
  const reps = Number(values.reps);
  for (const msg of SAMPLES) {
    const f = measureCodec(msg, count, reps);
    process.stdout.write(
      `${JSON.stringify({
        ...f,
        decodeOverParseNs: f.decodeNs - f.parseNs,
        encodeOverStringifyNs: f.encodeNs - f.stringifyNs,
      })}\n`,
    );
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) main();
