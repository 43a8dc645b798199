/**
 * Fuzzing of what a coordinator sends a real worker (fast-check, seeded): each
 * run registers the worker on a fake coordinator, offering some of the
 * features, and sends it arbitrary frames (coordinator messages with fields of
 * any type, assignments whose payloads nest past the 1,000 levels a
 * coordinator accepts or hold numbers beyond a double, raw bytes, lying
 * lengths), cut at random chunk boundaries, then ends the connection. After
 * every run the worker is still running and dials again; at the end it still
 * runs attempts, the deepest payload a coordinator accepts among them.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import fc from 'fast-check';
import { createLogger } from '../../src/observability/logger.js';
import { encodeFrame, MAX_FRAME_BYTES } from '../../src/protocol/framing.js';
import { Worker } from '../../src/worker/worker.js';
import { FakeCoordinator, HOST, type FakeSession } from '../helpers/fake-coordinator.js';
import { until } from '../helpers/until.js';

const SEED = 0x5eed_f030;

const TYPES = [
  'WORKER_REGISTERED',
  'TASK_ASSIGN',
  'TASK_CANCEL',
  'HEARTBEAT_ACK',
  'ERROR',
  'CHILD_ENQUEUED',
  'TASK_RESULT',
  'JOB_STATUS',
  'TOTALLY_UNKNOWN',
];
const FIELDS = [
  'workerId',
  'jobId',
  'attemptId',
  'attemptNumber',
  'taskType',
  'payload',
  'timeoutMillis',
  'maxAttempts',
  'features',
  'code',
  'message',
  'leader',
  'requestId',
  'parents',
  'steps',
  'stepCount',
  'traceparent',
  'queue',
  'v',
];
const FEATURES = [
  'drain',
  'heartbeatAck',
  'retryable',
  'assignLimits',
  'prefetch',
  'progress',
  'parents',
  'steps',
  'children',
  'reattach',
  'traceContext',
];
/** Never a refusal code: a refused worker stops by design. */
const CODES = ['NOT_LEADER', 'INTERNAL', 'UNKNOWN_JOB', '', 'x'.repeat(300)];
/** Leaders that send nothing past this machine: refused as an address, or its loopback. */
const LEADERS = ['', '127.0.0.1:0', '127.0.0.1:99999', '127.0.0.1:1', '[::1]:1'];
const TASK_TYPES = ['SHA256', 'WORD_COUNT', 'FAIL', 'nope', ''];
const SCALARS = [
  '1e400',
  '-1e400',
  '1e309',
  '4.9e-324',
  '-0',
  '123456789012345678901234567890',
  '9'.repeat(5000),
  'NaN',
  'Infinity',
  'true',
  'null',
  '"\\ud800"',
  '"\\u0000"',
];

/** JSON text nesting `levels` deep: arrays, objects or both. */
const nested = fc
  .tuple(
    fc.constantFrom(2, 50, 999, 1000, 1001, 1200, 5000, 100_000),
    fc.constantFrom('array', 'object', 'mixed'),
  )
  .map(([levels, kind]) => {
    if (kind === 'array') return '['.repeat(levels) + ']'.repeat(levels);
    if (kind === 'object') return '{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1);
    const half = Math.floor(levels / 2);
    return '{"a":['.repeat(half) + '1' + ']}'.repeat(half);
  });

/** Any JSON text a hostile peer might put in a field (some of it not JSON at all). */
const fieldText: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...SCALARS),
  nested,
  fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
  fc.constantFrom(...CODES, ...TASK_TYPES).map((s) => JSON.stringify(s)),
  fc.array(fc.constantFrom(...SCALARS), { maxLength: 4 }).map((a) => `[${a.join(',')}]`),
);

function objectText(type: string, fields: Record<string, string>): string {
  const body = Object.entries(fields).map(([name, text]) => `${JSON.stringify(name)}:${text}`);
  return `{"type":${JSON.stringify(type)}${body.length > 0 ? ',' : ''}${body.join(',')}}`;
}

const anyMessage = fc
  .tuple(fc.constantFrom(...TYPES), fc.dictionary(fc.constantFrom(...FIELDS), fieldText))
  .map(([type, fields]) => {
    // A named leader is dialled next: only ones that stay on this machine.
    if ('leader' in fields) fields.leader = JSON.stringify(LEADERS[fields.leader.length % 5]);
    return objectText(type, fields);
  });

const assignment = fc
  .record({
    serial: fc.nat(),
    taskType: fc.constantFrom(...TASK_TYPES),
    payload: fc.oneof(
      fieldText.map((text) => `{"value":${text}}`),
      nested.map((text) => `{"value":${text}}`),
    ),
    timeoutMillis: fc.option(fc.constantFrom('1', '5', '1e15', '-1', '2147483648', '0.5')),
  })
  .map(({ serial, taskType, payload, timeoutMillis }) =>
    objectText('TASK_ASSIGN', {
      jobId: `"fuzz-job-${serial}"`,
      attemptId: `"fuzz-attempt-${serial}"`,
      attemptNumber: '1',
      taskType: JSON.stringify(taskType),
      payload,
      ...(timeoutMillis === null ? {} : { timeoutMillis }),
    }),
  );

const notLeader = fc.constantFrom(...LEADERS).map((leader) =>
  objectText('ERROR', {
    code: '"NOT_LEADER"',
    message: '"standby"',
    leader: JSON.stringify(leader),
  }),
);

function frameOf(text: string): Buffer {
  return encodeFrame(Buffer.from(text, 'utf8'));
}

/** One piece of a stream: a whole frame of something, or raw bytes. */
const piece: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 4, arbitrary: anyMessage.map(frameOf) },
  { weight: 4, arbitrary: assignment.map(frameOf) },
  { weight: 1, arbitrary: notLeader.map(frameOf) },
  { weight: 1, arbitrary: fieldText.map(frameOf) },
  {
    weight: 1,
    arbitrary: anyMessage.map((text) =>
      encodeFrame(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)])),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ minLength: 1, maxLength: 300 }).map((b) => encodeFrame(b)),
  },
  {
    // A length that promises something else than follows.
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom(-5, 0, 7, MAX_FRAME_BYTES + 1, 2 ** 31 - 1),
        fc.uint8Array({ maxLength: 40 }),
      )
      .map(([declared, body]) => {
        const head = Buffer.alloc(4);
        head.writeInt32BE(declared);
        return Buffer.concat([head, Buffer.from(body)]);
      }),
  },
);

const run = fc.record({
  features: fc.subarray(FEATURES),
  pieces: fc.array(piece, { minLength: 1, maxLength: 6 }),
  cuts: fc.array(fc.nat(), { maxLength: 6 }),
});

/** Writes the stream in pieces cut at the given offsets, ends it, waits for the close. */
async function play(session: FakeSession, bytes: Buffer, cuts: number[]): Promise<void> {
  const offsets = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  for (const to of [...offsets, bytes.length]) {
    if (to > from && !session.socket.destroyed) session.socket.write(bytes.subarray(from, to));
    from = to;
  }
  session.socket.end();
  await until(() => session.closed, {
    what: 'the worker to close the connection',
    timeoutMs: 10_000,
  });
}

describe('worker fuzzing', () => {
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('survives arbitrary frames from its coordinator and still runs attempts', async () => {
    const fake = await FakeCoordinator.listen();
    cleanups.push(() => fake.close());
    const logs: { msg: string }[] = [];
    const destination = {
      write: (line: string) => void logs.push(JSON.parse(line) as { msg: string }),
    };
    const worker = Worker.start({
      coordinatorHost: HOST,
      coordinatorPort: fake.port,
      workerId: 'fuzz-ts',
      capacity: 2,
      heartbeatIntervalMs: 1_000,
      reconnectDelayMs: 5,
      cancelGraceMs: 50,
      logger: createLogger({ name: 'worker', format: 'json', level: 'info', destination }),
    });
    cleanups.push(() => worker.close());

    const warnings: Error[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning);
    process.on('warning', onWarning);
    cleanups.push(() => Promise.resolve(void process.off('warning', onWarning)));

    await fc.assert(
      fc.asyncProperty(run, async ({ features, pieces, cuts }) => {
        const session = await fake.acceptNext(features);
        await play(session, Buffer.concat(pieces), cuts);
        assert.notEqual(worker.mode, 'closed', 'the worker stopped');
      }),
      { seed: SEED, numRuns: 120 },
    );

    const session = await fake.acceptNext(['prefetch', 'retryable']);
    const sha = session.assign('after-sha', 'SHA256', { text: 'abc' });
    // The deepest payload a coordinator accepts: 1,000 levels, the payload itself the first.
    const deep = 'deep-1';
    session.socket.write(
      frameOf(
        objectText('TASK_ASSIGN', {
          jobId: '"deep"',
          attemptId: `"${deep}"`,
          attemptNumber: '1',
          taskType: '"SHA256"',
          payload: `{"text":"x","extra":${'['.repeat(999)}${']'.repeat(999)}}`,
        }),
      ),
    );
    assert.equal(
      (await session.resultFor(sha)).result,
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
    const deepResult = await session.resultFor(deep);
    assert.equal(deepResult.success, true, deepResult.error ?? '');
    assert.equal(
      deepResult.result,
      '2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881',
    );
    assert.equal(logs.filter((r) => r.msg === 'connection loop failed').length, 0);
    // A deadline past the longest timer once fired at once (TimeoutOverflowWarning).
    assert.deepEqual(
      warnings.map((w) => w.name),
      [],
    );
  });
});
