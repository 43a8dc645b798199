/**
 * The client library when a coordinator refuses connections at a bound
 * (`ERROR LIMIT_EXCEEDED` as the first frame, then a close, as a full
 * pending pool does): it dials again with back-off within its connect
 * timeout, with or without a token, and a request refused that way (never
 * read) is sent again even when it is a submission without a key.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import { TransportError } from '../../src/client/errors.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rawConnection } from '../helpers/raw-peers.js';
import { startCoordinator, tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';
import { FramedConnection } from '../../src/net/framed-connection.js';
import { TcpServer } from '../../src/net/tcp.js';
import { encodeMessage } from '../../src/protocol/codec.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { JobSnapshot, Message } from '../../src/protocol/messages.js';

const HOST = '127.0.0.1';
const REFUSAL = 'Too many connections are still registering or authenticating; try again later';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (let fn = cleanups.pop(); fn !== undefined; fn = cleanups.pop()) await fn();
});

const job = (jobId: string): JobSnapshot => ({
  jobId,
  taskType: 'SHA256',
  state: 'QUEUED',
  attempts: 0,
  maxAttempts: 3,
  workerId: null,
  result: null,
  error: null,
  createdAtMillis: 1,
  updatedAtMillis: 1,
  priority: 'NORMAL',
});

/** Refuses the first `refusals` connections the way a full coordinator does, then serves. */
async function refusingServer(refusals: number) {
  const seen: Message[] = [];
  let accepted = 0;
  const server = new TcpServer((socket) => {
    accepted++;
    if (accepted <= refusals) {
      socket.end(encodeMessage({ type: 'ERROR', code: ErrorCode.LimitExceeded, message: REFUSAL }));
      return;
    }
    const conn: FramedConnection = new FramedConnection(socket, {
      onMessage: (msg) => {
        seen.push(msg);
        if (msg.type === 'AUTH') conn.send({ type: 'AUTH_OK' });
        else if (msg.type === 'SUBMIT_JOB') {
          conn.send({ type: 'JOB_SUBMITTED', jobId: 'j1', job: job('j1') });
        } else conn.send({ type: 'WORKER_LIST', workers: [] });
      },
      onProtocolError: () => void conn.destroy(),
      onClose: () => undefined,
    });
  });
  const port = await server.listen(0, HOST);
  cleanups.push(() => server.close());
  return { port, seen, accepted: () => accepted };
}

describe('client retries a refused connection', () => {
  it('gets through after refusals when it authenticates first', async () => {
    const s = await refusingServer(3);
    const client = await DtpClient.connect({ host: HOST, port: s.port, token: 'tok' });
    cleanups.push(() => client.close());
    assert.deepEqual(await client.workers(), []);
    assert.equal(s.accepted(), 4);
  });

  it('sends a submission without a key again after refusals, once', async () => {
    const s = await refusingServer(3);
    const client = await DtpClient.connect({ host: HOST, port: s.port });
    cleanups.push(() => client.close());
    const submitted = await client.submit('SHA256', { text: 'abc' });
    assert.equal(submitted.jobId, 'j1');
    assert.equal(s.seen.filter((m) => m.type === 'SUBMIT_JOB').length, 1);
    assert.ok(s.accepted() >= 4);
  });

  for (const token of ['tok', null]) {
    it(
      `gives up with LIMIT_EXCEEDED after the connect timeout (${token === null ? 'no token' : 'token'})`,
      { timeout: 10_000 },
      async () => {
        const s = await refusingServer(Number.POSITIVE_INFINITY);
        const connectTimeoutMs = 400;
        const attempt = async (): Promise<unknown> => {
          const client = await DtpClient.connect({
            host: HOST,
            port: s.port,
            token,
            connectTimeoutMs,
          });
          cleanups.push(() => client.close());
          return client.workers();
        };
        await assert.rejects(attempt(), (err: unknown) => {
          assert.ok(err instanceof TransportError, String(err));
          assert.equal(err.code, 'LIMIT_EXCEEDED');
          assert.match(err.message, /coordinator refused the connection: Too many connections/);
          assert.match(err.message, /refused \d+ times in a row/);
          return true;
        });
        assert.ok(s.accepted() >= 3, `dialled ${s.accepted()} times`);
      },
    );
  }
});

describe('a coordinator whose pending pool is full of idle connections from one address', () => {
  it(
    'lets a client from that address in, telling the oldest idle one LIMIT_EXCEEDED',
    { timeout: 20_000 },
    async () => {
      const temp = tempDir();
      cleanups.push(temp.remove);
      const tokens = join(temp.dir, 'tokens');
      writeFileSync(tokens, 'pool-token-0123456789\n', { mode: 0o600 });
      const tc = await startCoordinator({
        security: { clientTokenFile: tokens },
        netLimits: { maxPendingConnections: 2, handshakeTimeoutMs: 60_000 },
      });
      cleanups.push(() => tc.close());
      const port = tc.coordinator.clientPort;
      const idle = [await rawConnection(port), await rawConnection(port)];
      for (const { conn } of idle) cleanups.push(() => conn.destroy());
      await until(() => tc.coordinator.connectionCounts().client.pending === 2, {
        what: 'both pending',
      });
      // Refused while the idle ones are young, then in by taking the oldest one's place.
      const client = await DtpClient.connect({ host: HOST, port, token: 'pool-token-0123456789' });
      cleanups.push(() => client.close());
      assert.deepEqual(await client.workers(), []);
      const told = await idle[0]?.inbox.next(5_000);
      assert.equal(told?.type, 'ERROR');
      assert.equal(told?.type === 'ERROR' ? told.code : null, ErrorCode.LimitExceeded);
      assert.match(told?.type === 'ERROR' ? told.message : '', /had waited longest; try again/);
    },
  );
});
