/**
 * Tokens on a real coordinator: AUTH first on the client port (right, wrong,
 * missing, rotated, malformed first frame, too slow), `authToken` in
 * WORKER_REGISTER on the worker port, and no token ever in a log line.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { encodeFrame } from '../../src/protocol/framing.js';
import type { Message } from '../../src/protocol/messages.js';
import { createLogger } from '../../src/observability/logger.js';
import type { NetEvent } from '../../src/net/net-events.js';
import { rawConnection } from '../helpers/raw-peers.js';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';

const TOKEN_A = 'token-a-5f1d2c3b4a5968776655443322110';
const TOKEN_B = 'token-b-0a1b2c3d4e5f60718293a4b5c6d7e';
const WORKER_TOKEN = 'worker-token-9e8d7c6b5a4f3e2d1c0b';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (let fn = cleanups.pop(); fn !== undefined; fn = cleanups.pop()) await fn();
});

interface Started {
  tc: TestCoordinator;
  dir: string;
  logText: () => string;
  net: NetEvent[];
}

async function start(
  tokens: { client?: string[]; worker?: string[] },
  handshakeTimeoutMs?: number,
): Promise<Started> {
  const { dir, remove } = tempDir();
  cleanups.push(remove);
  const write = (name: string, lines: string[]): string => {
    const path = join(dir, name);
    writeFileSync(path, `# comment\n${lines.join('\n')}\n\n`, { mode: 0o600 });
    return path;
  };
  let log = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      log += chunk.toString('utf8');
      done();
    },
  });
  const tc = await startCoordinator({
    logger: createLogger({
      name: 'coordinator',
      format: 'json',
      level: 'debug',
      destination: sink,
    }),
    security: {
      clientTokenFile: tokens.client ? write('client-tokens', tokens.client) : null,
      workerTokenFile: tokens.worker ? write('worker-tokens', tokens.worker) : null,
    },
    netLimits: handshakeTimeoutMs === undefined ? {} : { handshakeTimeoutMs },
  });
  cleanups.push(() => tc.close());
  const net: NetEvent[] = [];
  tc.coordinator.events.on('net', (e) => net.push(e));
  return { tc, dir, logText: () => log, net };
}

/** Sends the frames, then reads until the coordinator closes (or `count` replies). */
async function exchange(port: number, frames: (Message | Buffer)[], count = Infinity) {
  const { conn, inbox, closed } = await rawConnection(port);
  cleanups.push(() => conn.destroy());
  for (const f of frames) {
    if (Buffer.isBuffer(f)) conn.sendFrame(f);
    else conn.send(f);
  }
  const replies: Message[] = [];
  let isClosed = false;
  void closed.then(() => (isClosed = true));
  while (replies.length < count) {
    const next = await Promise.race([inbox.next(5_000), closed.then(() => null)]);
    if (next === null) break;
    replies.push(next);
  }
  if (count === Infinity) await closed;
  return { replies, closed: isClosed || count === Infinity, conn, inbox };
}

function errorCode(msg: Message | undefined): string | null {
  return msg?.type === 'ERROR' ? (msg.code ?? null) : null;
}

describe('client tokens', () => {
  it('answers AUTH with AUTH_OK and changes nothing when there are no tokens', async () => {
    const { tc } = await start({});
    const { replies } = await exchange(
      tc.coordinator.clientPort,
      [{ type: 'AUTH', token: 'anything' }, { type: 'LIST_WORKERS' }],
      2,
    );
    assert.deepEqual(
      replies.map((r) => r.type),
      ['AUTH_OK', 'WORKER_LIST'],
    );
  });

  it('refuses a request without AUTH with UNAUTHENTICATED and closes', async () => {
    const { tc, net } = await start({ client: [TOKEN_A, TOKEN_B] });
    const { replies, closed } = await exchange(tc.coordinator.clientPort, [
      { type: 'LIST_WORKERS' },
      { type: 'LIST_WORKERS' },
    ]);
    assert.equal(replies.length, 1);
    assert.equal(errorCode(replies[0]), 'UNAUTHENTICATED');
    assert.match(replies[0]?.type === 'ERROR' ? replies[0].message : '', /Unauthenticated/);
    assert.ok(closed);
    assert.ok(net.some((e) => e.type === 'auth.refused' && e.port === 'client'));
  });

  it('refuses a wrong token, and never echoes or logs it', async () => {
    const { tc, logText } = await start({ client: [TOKEN_A] });
    const wrong = 'wrong-token-0123456789abcdef';
    const { replies } = await exchange(tc.coordinator.clientPort, [{ type: 'AUTH', token: wrong }]);
    assert.equal(errorCode(replies[0]), 'UNAUTHENTICATED');
    assert.ok(!JSON.stringify(replies).includes(wrong));
    assert.match(logText(), /authentication refused/);
    for (const t of [wrong, TOKEN_A]) assert.ok(!logText().includes(t), 'a token in the log');
  });

  it('accepts any listed token, with requests pipelined right behind AUTH', async () => {
    const { tc, logText } = await start({ client: [TOKEN_A, TOKEN_B] });
    const { replies } = await exchange(
      tc.coordinator.clientPort,
      [{ type: 'AUTH', token: TOKEN_B }, { type: 'LIST_WORKERS' }, { type: 'AUTH', token: 'x' }],
      3,
    );
    // A second AUTH on an open connection is harmless.
    assert.deepEqual(
      replies.map((r) => r.type),
      ['AUTH_OK', 'WORKER_LIST', 'AUTH_OK'],
    );
    assert.ok(!logText().includes(TOKEN_B));
  });

  it('refuses a malformed first frame with UNAUTHENTICATED', async () => {
    const { tc } = await start({ client: [TOKEN_A] });
    const { replies, closed } = await exchange(tc.coordinator.clientPort, [
      encodeFrame(Buffer.from('not json')),
    ]);
    assert.equal(errorCode(replies[0]), 'UNAUTHENTICATED');
    assert.ok(closed);
  });

  it('closes a connection that sends no AUTH within the handshake deadline', async () => {
    const { tc, net } = await start({ client: [TOKEN_A] }, 200);
    const { replies, closed } = await exchange(tc.coordinator.clientPort, []);
    assert.equal(errorCode(replies[0]), 'UNAUTHENTICATED');
    assert.ok(closed);
    assert.ok(net.some((e) => e.type === 'connection.limited' && e.limit === 'handshake_timeout'));
  });

  it('takes a rotated token file on reload, and keeps the old tokens when the file is empty', async () => {
    const { tc, dir } = await start({ client: [TOKEN_A] });
    const port = tc.coordinator.clientPort;
    writeFileSync(join(dir, 'client-tokens'), `${TOKEN_B}\n`);
    tc.coordinator.reload();
    assert.equal(
      errorCode((await exchange(port, [{ type: 'AUTH', token: TOKEN_A }])).replies[0]),
      'UNAUTHENTICATED',
    );
    assert.equal(
      (await exchange(port, [{ type: 'AUTH', token: TOKEN_B }], 1)).replies[0]?.type,
      'AUTH_OK',
    );
    writeFileSync(join(dir, 'client-tokens'), '\n# nothing\n');
    tc.coordinator.reload();
    assert.equal(
      (await exchange(port, [{ type: 'AUTH', token: TOKEN_B }], 1)).replies[0]?.type,
      'AUTH_OK',
    );
  });
});

describe('worker tokens', () => {
  const register = (authToken?: string): Message => ({
    type: 'WORKER_REGISTER',
    workerId: 'w-auth',
    capacity: 1,
    taskTypes: null,
    ...(authToken === undefined ? {} : { authToken }),
  });

  it('refuses a registration without a token, or with a wrong one, and registers none', async () => {
    const { tc, net, logText } = await start({ worker: [WORKER_TOKEN] });
    for (const token of [undefined, 'nope-nope-nope-nope']) {
      const { replies, closed } = await exchange(tc.coordinator.workerPort, [register(token)]);
      assert.equal(errorCode(replies[0]), 'UNAUTHENTICATED');
      assert.match(replies[0]?.type === 'ERROR' ? replies[0].message : '', /Unauthenticated/);
      assert.ok(closed);
    }
    assert.deepEqual(tc.coordinator.inspect().workers, []);
    assert.equal(net.filter((e) => e.type === 'auth.refused' && e.port === 'worker').length, 2);
    assert.ok(!logText().includes('nope-nope-nope-nope'));
  });

  it('registers a worker with a listed token and keeps the token out of the log', async () => {
    const { tc, logText } = await start({ worker: [WORKER_TOKEN] });
    const { replies } = await exchange(tc.coordinator.workerPort, [register(WORKER_TOKEN)], 1);
    assert.equal(replies[0]?.type, 'WORKER_REGISTERED');
    assert.deepEqual(
      tc.coordinator.inspect().workers.map((w) => w.workerId),
      ['w-auth'],
    );
    assert.ok(!logText().includes(WORKER_TOKEN));
  });

  it('does not ask workers for a token when only clients have tokens', async () => {
    const { tc } = await start({ client: [TOKEN_A] });
    const { replies } = await exchange(tc.coordinator.workerPort, [register()], 1);
    assert.equal(replies[0]?.type, 'WORKER_REGISTERED');
  });
});
