/**
 * Protocol fuzzing of a real coordinator on both ports (fast-check, seeded):
 * each run opens a connection and sends arbitrary frames (message-shaped
 * objects with random fields, any JSON, random bytes, a byte order mark,
 * lying lengths) and raw garbage, cut at random chunk boundaries. After every
 * run: the coordinator still works (no fail-stop), a bystander client and a
 * bystander worker on connections of their own are undisturbed, and once the
 * fuzzing connections are closed nothing of them is left (connections,
 * partial-frame bytes, pending waits).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { encodeFrame } from '../../src/protocol/framing.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const SEED_CLIENT_PORT = 0x5eed_f022;
const SEED_WORKER_PORT = 0x5eed_f023;

const TYPES = [
  'WORKER_REGISTER',
  'WORKER_REGISTERED',
  'HEARTBEAT',
  'HEARTBEAT_ACK',
  'TASK_ASSIGN',
  'TASK_CANCEL',
  'TASK_RESULT',
  'WORKER_DRAINING',
  'ERROR',
  'SUBMIT_JOB',
  'JOB_SUBMITTED',
  'SUBMIT_REJECTED',
  'GET_JOB_STATUS',
  'JOB_STATUS',
  'LIST_JOBS',
  'JOB_LIST',
  'LIST_WORKERS',
  'WORKER_LIST',
  'CANCEL_JOB',
  'JOB_CANCEL',
  'WAIT_JOB',
  'AUTH',
  'AUTH_OK',
  'PURGE_JOBS',
  'JOBS_PURGED',
  'TOTALLY_UNKNOWN',
];
const FIELDS = [
  'workerId',
  'capacity',
  'taskTypes',
  'authToken',
  'heartbeatAck',
  'jobId',
  'attemptId',
  'attemptNumber',
  'taskType',
  'payload',
  'success',
  'result',
  'error',
  'retryable',
  'resultFormat',
  'maxAttempts',
  'idempotencyKey',
  'priority',
  'timeoutMillis',
  'limit',
  'state',
  'cursor',
  'token',
  'olderThanMillis',
  'attempts',
  'v',
];

const fieldValue = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom('SHA256', 'SLEEP', 'HIGH', 'QUEUED', 'COMPLETED', 'fuzz-w', ''),
  fc.integer({ min: -5, max: 2_000_000 }),
);
const messageShaped = fc
  .tuple(fc.constantFrom(...TYPES), fc.dictionary(fc.constantFrom(...FIELDS), fieldValue))
  .map(([type, fields]) => Buffer.from(JSON.stringify({ ...fields, type })));

/** One piece of a stream: a whole frame of some payload, or raw bytes. */
const piece: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 5, arbitrary: messageShaped.map((p) => encodeFrame(p)) },
  {
    weight: 2,
    arbitrary: fc
      .jsonValue({ maxDepth: 3 })
      .map((v) => encodeFrame(Buffer.from(JSON.stringify(v) ?? 'null'))),
  },
  {
    weight: 1,
    arbitrary: messageShaped.map((p) =>
      encodeFrame(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), p])),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ minLength: 1, maxLength: 300 }).map((b) => encodeFrame(b)),
  },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ minLength: 1, maxLength: 64 }).map((b) => Buffer.from(b)),
  },
  {
    // A length that promises more than follows.
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: -10, max: 2_000_000 }), fc.uint8Array({ maxLength: 200 }))
      .map(([declared, body]) => {
        const head = Buffer.alloc(4);
        head.writeInt32BE(declared);
        return Buffer.concat([head, Buffer.from(body)]);
      }),
  },
);

const stream = fc.record({
  pieces: fc.array(piece, { minLength: 1, maxLength: 8 }),
  cuts: fc.array(fc.nat(), { maxLength: 6 }),
});

/** Writes the stream in pieces cut at the given offsets, ends it, waits for the close. */
async function play(port: number, bytes: Buffer, cuts: number[]): Promise<void> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  socket.resume(); // read and drop whatever comes back
  const closed = once(socket, 'close');
  await once(socket, 'connect');
  const offsets = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  for (const to of [...offsets, bytes.length]) {
    if (to > from) socket.write(bytes.subarray(from, to));
    from = to;
  }
  socket.end();
  await Promise.race([
    closed,
    new Promise((_, reject) =>
      setTimeout(() => reject(new Error('the coordinator did not close within 5 s')), 5_000),
    ),
  ]);
}

describe('protocol fuzzing on both ports', () => {
  let tc: TestCoordinator;
  let bystander: RawClient;
  let steady: ScriptedWorker;
  let knownJob: string;

  before(async () => {
    tc = await startCoordinator({ heartbeatTimeoutMs: 5_000 });
    bystander = await RawClient.connect(tc.coordinator.clientPort);
    steady = await ScriptedWorker.register(tc.coordinator.workerPort, 'steady-bystander', 1);
    knownJob = await bystander.submit('SHA256', { text: 'known' });
    steady.succeed(await steady.assignments.next(), 'known-result');
    assert.equal((await bystander.wait(knownJob)).state, 'COMPLETED');
  });
  after(async () => {
    await Promise.all([bystander.close(), steady.close()]);
    await tc.close();
  });

  async function assertUndisturbed(): Promise<void> {
    assert.equal(tc.coordinator.failure, null, 'the coordinator stopped working');
    const job = await bystander.status(knownJob);
    assert.deepEqual([job.state, job.result], ['COMPLETED', 'known-result']);
    assert.equal(steady.conn.isOpen, true, 'the bystander worker was dropped');
    assert.ok(
      tc.coordinator.inspect().workers.some((w) => w.workerId === 'steady-bystander'),
      'the bystander worker is no longer registered',
    );
  }

  async function assertNothingLeft(): Promise<void> {
    await until(
      () => {
        const counts = tc.coordinator.connectionCounts();
        return counts.client.open === 1 && counts.worker.open === 1;
      },
      { what: 'the fuzzing connections to be gone', timeoutMs: 10_000 },
    );
    assert.equal(tc.coordinator.guard.inboundBudget.usedBytes, 0);
    assert.equal(tc.coordinator.inspect().pendingWaits, 0);
  }

  for (const [name, seed, port] of [
    ['client', SEED_CLIENT_PORT, () => tc.coordinator.clientPort],
    ['worker', SEED_WORKER_PORT, () => tc.coordinator.workerPort],
  ] as const) {
    it(`survives arbitrary frames and garbage on the ${name} port`, async () => {
      await fc.assert(
        fc.asyncProperty(stream, async ({ pieces, cuts }) => {
          await play(port(), Buffer.concat(pieces), cuts);
          await assertUndisturbed();
        }),
        { seed, numRuns: 150 },
      );
      await assertNothingLeft();
    });
  }
});
