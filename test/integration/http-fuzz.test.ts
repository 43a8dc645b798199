/**
 * Fuzzing of a real coordinator's HTTP port over raw sockets (fast-check,
 * seeded): each run writes one request with an arbitrary method, request
 * target (paths of ours, absolute and protocol-relative forms, bracketed
 * hosts, ports out of range, bad percent escapes, garbage), version, headers
 * (Host, Origin, cookies, tokens, content types and lengths, garbage names
 * and values) and body, cut at random chunk boundaries, then half-closes.
 * After every run the coordinator has thrown nothing, still works, closed
 * the connection and answers `/healthz`; with client tokens and without.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { healthz, openSocket } from '../helpers/raw-http.js';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';
import { once } from 'node:events';

const SEED_REQUEST_LINE = 0x5eed_4771;
const SEED_HEADERS = 0x5eed_4772;
const TOKEN = 'fuzz-client-token';

const PATHS = [
  '/',
  '/healthz',
  '/metrics',
  '/api',
  '/api/overview',
  '/api/jobs',
  '/api/jobs/j-1',
  '/api/jobs/%E0%A4%A',
  '/api/jobs/%/cancel',
  '/api/jobs/x/rerun',
  '/api/workers',
  '/api/events',
  '/api/session',
  '/api/purge',
  '/assets/index.js',
  '/favicon.svg',
  '*',
  '',
];
const QUERIES = [
  '',
  '?',
  '?limit=5',
  '?limit=-1&limit=2',
  '?state=queued',
  '?search=%FF',
  '?%=%',
  '?cursor=' + 'x'.repeat(40),
];
const HOSTS = [
  '127.0.0.1',
  'localhost',
  '[::1]',
  '[',
  '[::1',
  'a:99999',
  'evil.example',
  '',
  'a b',
  '[v1.x]',
];
const METHODS = [
  'GET',
  'POST',
  'DELETE',
  'PUT',
  'HEAD',
  'OPTIONS',
  'PATCH',
  'TRACE',
  'CONNECT',
  'G ET',
  'get',
  '',
];
const VERSIONS = ['HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/1.1 x', 'HTTP/', ''];

const text = (maxLength: number): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ maxLength }),
    fc.string({ unit: 'binary', maxLength }),
    fc.uint8Array({ maxLength }).map((b) => Buffer.from(b).toString('latin1')),
  );

const target: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.constantFrom(...PATHS), fc.constantFrom(...QUERIES))
      .map(([p, q]) => p + q),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.constantFrom('http://', 'https://', '//', 'ftp://', 'http:', ''),
        fc.constantFrom(...HOSTS),
        fc.constantFrom(...PATHS),
      )
      .map(([scheme, host, path]) => scheme + host + path),
  },
  { weight: 1, arbitrary: text(60) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'http://[/',
      '//[',
      'http://a:99999/',
      '//[/metrics',
      'http://[/api/x',
    ),
  },
);

const requestLine = fc
  .tuple(
    fc.oneof(fc.constantFrom(...METHODS), text(8)),
    target,
    fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom(...VERSIONS) },
      { weight: 1, arbitrary: text(10) },
    ),
  )
  .map(([method, path, version]) => `${method} ${path} ${version}`);

const headerValue = fc.oneof(
  fc.constantFrom(
    ...HOSTS,
    'null',
    'http://[',
    'http://127.0.0.1',
    'http://evil.example',
    'same-origin',
    'cross-site',
    'none',
    'application/json',
    'text/plain',
    'chunked',
    'upgrade',
    'websocket',
    'keep-alive, Upgrade',
    '100-continue',
    '-1',
    '99999999999999999999',
    '5',
    `Bearer ${TOKEN}`,
    'Bearer',
    'dtp_session=abc',
    'dtp_session=; dtp_session==;;=',
  ),
  text(40),
);
const header = fc.tuple(
  fc.oneof(
    {
      weight: 5,
      arbitrary: fc.constantFrom(
        'Host',
        'Origin',
        'Sec-Fetch-Site',
        'Cookie',
        'Authorization',
        'Content-Type',
        'Content-Length',
        'Transfer-Encoding',
        'If-None-Match',
        'Connection',
        'Expect',
        'Upgrade',
      ),
    },
    { weight: 1, arbitrary: text(12) },
  ),
  headerValue,
);

const request = fc.record({
  line: requestLine,
  headers: fc.array(header, { maxLength: 8 }),
  body: fc.oneof(fc.constant(''), fc.constant('{}'), fc.json({ maxDepth: 2 }), text(80)),
  lineEnd: fc.constantFrom('\r\n', '\n', '\r'),
  cuts: fc.array(fc.nat(), { maxLength: 4 }),
});

type FuzzRequest = typeof request extends fc.Arbitrary<infer T> ? T : never;

function bytesOf(r: FuzzRequest): Buffer {
  const lines = [r.line, ...r.headers.map(([n, v]) => `${n}: ${v}`)];
  return Buffer.from(lines.join(r.lineEnd) + r.lineEnd + r.lineEnd + r.body, 'latin1');
}

/** Writes the request in pieces, half-closes, and waits (5 s at most) for the server's close. */
async function play(port: number, bytes: Buffer, cuts: number[]): Promise<boolean> {
  const socket = await openSocket(port);
  socket.on('error', () => undefined);
  socket.resume();
  const closed = once(socket, 'close').then(() => true);
  const offsets = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  for (const to of [...offsets, bytes.length]) {
    if (to > from) socket.write(bytes.subarray(from, to));
    from = to;
  }
  socket.end();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), 5_000)));
  const done = await Promise.race([closed, late]);
  clearTimeout(timer);
  socket.destroy();
  return done;
}

describe('HTTP port fuzzing', () => {
  const temp = tempDir('dtp-http-fuzz-');
  const thrown: unknown[] = [];
  const record = (err: unknown): void => void thrown.push(err);
  let open: TestCoordinator;
  let guarded: TestCoordinator;

  before(async () => {
    process.on('uncaughtException', record);
    process.on('unhandledRejection', record);
    const tokens = join(temp.dir, 'client.tokens');
    writeFileSync(tokens, `${TOKEN}\n`);
    open = await startCoordinator({ metricsPort: 0, heartbeatTimeoutMs: 5_000 });
    guarded = await startCoordinator({
      metricsPort: 0,
      heartbeatTimeoutMs: 5_000,
      security: { clientTokenFile: tokens },
    });
  });
  after(async () => {
    process.off('uncaughtException', record);
    process.off('unhandledRejection', record);
    await open?.close();
    await guarded?.close();
    temp.remove();
  });

  async function assertAlive(tc: TestCoordinator, closed: boolean, what: Buffer): Promise<void> {
    const shown = JSON.stringify(what.toString('latin1'));
    assert.deepEqual(thrown, [], `thrown while handling ${shown}`);
    assert.equal(tc.coordinator.failure, null, 'the coordinator stopped working');
    assert.ok(closed, `the connection was not closed within 5 s after ${shown}`);
    assert.equal(await healthz(tc.coordinator.httpPort as number), 200, `/healthz after ${shown}`);
  }

  for (const [name, seed, arbitrary] of [
    [
      'request lines',
      SEED_REQUEST_LINE,
      request.map((r) => ({ ...r, headers: [['Host', '127.0.0.1']] as [string, string][] })),
    ],
    ['headers and bodies', SEED_HEADERS, request],
  ] as const) {
    it(`survives arbitrary ${name}`, async () => {
      for (const tc of [open, guarded]) {
        const port = tc.coordinator.httpPort as number;
        await fc.assert(
          fc.asyncProperty(arbitrary, async (r) => {
            const bytes = bytesOf(r);
            thrown.length = 0;
            await assertAlive(tc, await play(port, bytes, r.cuts), bytes);
          }),
          { seed, numRuns: 200 },
        );
      }
    });
  }
});
