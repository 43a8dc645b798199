/**
 * A micro-benchmark of what job events cost the coordinator per
 * subscriber: CPU time, not throughput, so a busy machine skews it less.
 *
 * One process: a coordinator (memory store) and its in-process client, a
 * scripted worker that answers every assignment at once, and `subscribers`
 * raw TCP connections subscribed to every job's events that read and
 * discard the bytes (no decoding, so their own cost stays small and the
 * same from one build to the next). `jobs` jobs are submitted in batches
 * and completed; the process's CPU time over the run is measured. The
 * extra CPU of a run beside the subscribers over the median run alone (0
 * subscribers), divided by the frames the subscribers received, is the cost
 * of one event to one subscriber.
 *
 *   node dist/bench/fanout.js [--subscribers 100] [--jobs 2000] [--reps 3]
 */
import { connect, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { encodeMessage } from '../src/protocol/codec.js';
import { FRAME_HEADER_BYTES } from '../src/protocol/framing.js';
import type { SubmitJobsElement } from '../src/protocol/messages.js';
import { ScriptedWorker } from '../test/helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../test/helpers/test-coordinator.js';
import { until } from '../test/helpers/until.js';
import { median } from './harness.js';

export interface FanoutRun {
  subscribers: number;
  jobs: number;
  /** Process CPU time per job, µs. */
  cpuUsPerJob: number;
  /** Process CPU time of the whole run, µs. */
  cpuUs: number;
  /** Frames (job events, and the SUBSCRIBED replies) the subscribers received, all together. */
  framesReceived: number;
  /** Their bytes. */
  bytesReceived: number;
}

const BATCH = 50;

/** What the subscribers received, all together. */
interface Received {
  bytes: number;
  frames: number;
}

/**
 * A connection subscribed to every job's events that counts the frames it
 * reads (from their 4-byte length prefixes) and throws them away.
 */
async function discardingSubscriber(port: number, received: Received): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const header = Buffer.alloc(FRAME_HEADER_BYTES);
  let headerBytes = 0;
  let bodyLeft = 0;
  socket.on('data', (chunk: Buffer) => {
    received.bytes += chunk.length;
    let at = 0;
    while (at < chunk.length) {
      if (bodyLeft > 0) {
        const take = Math.min(bodyLeft, chunk.length - at);
        bodyLeft -= take;
        at += take;
        continue;
      }
      header[headerBytes++] = chunk[at++] as number;
      if (headerBytes < FRAME_HEADER_BYTES) continue;
      headerBytes = 0;
      bodyLeft = header.readInt32BE(0);
      received.frames++;
    }
  });
  socket.write(encodeMessage({ type: 'SUBSCRIBE_JOBS', filter: {} }));
  return socket;
}

function batchOf(n: number): SubmitJobsElement[] {
  return Array.from({ length: n }, () => ({
    taskType: 'SHA256',
    payload: { text: 'x' },
    maxAttempts: null,
    idempotencyKey: null,
    priority: null,
  }));
}

export async function fanoutRun(subscribers: number, jobs: number): Promise<FanoutRun> {
  // Slow sweeps and a long heartbeat timeout: a loaded machine must not lose the worker.
  const tc: TestCoordinator = await startCoordinator({
    maxActiveJobs: 100_000,
    heartbeatTimeoutMs: 60_000,
    sweepIntervalMs: 200,
  });
  const sockets: Socket[] = [];
  const worker = await ScriptedWorker.register(tc.coordinator.workerPort, 'fanout-w', BATCH, {
    heartbeatMs: 100,
  });
  try {
    const received: Received = { bytes: 0, frames: 0 };
    for (let i = 0; i < subscribers; i++) {
      sockets.push(await discardingSubscriber(tc.coordinator.clientPort, received));
    }
    await until(() => tc.coordinator.inspect().subscriptions === subscribers, {
      what: `${subscribers} subscriptions`,
    });
    let completed = 0;
    tc.coordinator.events.on('event', (e) => {
      if (e.type === 'job.completed') completed++;
    });
    const answering = (async () => {
      for (let n = 0; n < jobs; n++) worker.succeed(await worker.assignments.next(30_000), 'ok');
    })();
    received.bytes = 0;
    received.frames = 0;
    const cpu = process.cpuUsage();
    for (let sent = 0; sent < jobs; sent += BATCH) {
      const reply = await tc.coordinator.request({
        type: 'SUBMIT_JOBS',
        jobs: batchOf(Math.min(BATCH, jobs - sent)),
      });
      if (reply.type !== 'JOBS_SUBMITTED') throw new Error(JSON.stringify(reply));
      await until(() => completed >= sent, { timeoutMs: 30_000, intervalMs: 1, what: 'a batch' });
    }
    await answering;
    await until(() => completed >= jobs, { timeoutMs: 30_000, intervalMs: 1, what: 'the jobs' });
    const used = process.cpuUsage(cpu);
    return {
      subscribers,
      jobs,
      cpuUsPerJob: (used.user + used.system) / jobs,
      cpuUs: used.user + used.system,
      framesReceived: received.frames,
      bytesReceived: received.bytes,
    };
  } finally {
    for (const socket of sockets) socket.destroy();
    await worker.close();
    await tc.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      subscribers: { type: 'string', default: '100' },
      jobs: { type: 'string', default: '2000' },
      reps: { type: 'string', default: '3' },
    },
  });
  const subscribers = Number(values.subscribers);
  const jobs = Number(values.jobs);
  const reps = Number(values.reps);
  const alone: FanoutRun[] = [];
  const beside: FanoutRun[] = [];
  for (let rep = 0; rep < reps; rep++) {
    alone.push(await fanoutRun(0, jobs));
    beside.push(await fanoutRun(subscribers, jobs));
  }
  const aloneCpuUs = median(alone.map((r) => r.cpuUs));
  // Each run beside subscribers against the median run alone: the extra CPU per event delivered.
  const perEvent = beside.map((r) => (r.cpuUs - aloneCpuUs) / Math.max(r.framesReceived, 1));
  process.stdout.write(
    `${JSON.stringify({
      subscribers,
      jobs,
      reps,
      cpuUsPerJobAlone: Math.round(median(alone.map((r) => r.cpuUsPerJob))),
      cpuUsPerJobBeside: Math.round(median(beside.map((r) => r.cpuUsPerJob))),
      extraCpuUsPerEventDelivered: Number(median(perEvent).toFixed(3)),
      eventsPerJobAndSubscriber: Number(
        (median(beside.map((r) => r.framesReceived)) / jobs / Math.max(subscribers, 1)).toFixed(2),
      ),
      perEvent: perEvent.map((v) => Number(v.toFixed(3))),
    })}\n`,
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
