/**
 * A ClientSession's pause for unsent replies over real sockets, step by step:
 * replies staged (produced, waiting for their commit) and replies in the
 * socket both count, and reading resumes once both are gone, however the
 * socket's drains and the sends interleave.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { ClientSession } from '../../src/coordinator/ports/client-session.js';
import { FramedConnection } from '../../src/net/framed-connection.js';
import { dial } from '../../src/net/tcp.js';
import type { ClientReply } from '../../src/protocol/messages.js';
import { until } from '../helpers/until.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (let fn = cleanups.pop(); fn !== undefined; fn = cleanups.pop()) await fn();
});

/** A session on the server side of a loopback connection, and the client's socket. */
async function session(maxUnsentReplyBytes: number): Promise<{ s: ClientSession; peer: Socket }> {
  let made: ClientSession | null = null;
  const server = createServer((socket) => {
    const conn = new FramedConnection(socket, {
      onMessage: () => undefined,
      onProtocolError: () => undefined,
      onClose: () => undefined,
    });
    made = new ClientSession(conn, { checkToken: null, admission: null, maxUnsentReplyBytes });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  const peer = await dial('127.0.0.1', port, 2_000);
  peer.on('data', () => undefined); // reads (and drops) whatever comes
  cleanups.push(() => {
    peer.destroy();
    server.close();
  });
  const s = await until(() => made);
  cleanups.push(() => s.conn.destroy());
  return { s, peer };
}

const big = (n: number): ClientReply => ({
  type: 'JOB_LIST',
  jobs: [],
  nextCursor: 'c'.repeat(n),
});

describe('ClientSession unsent-reply pause', () => {
  it('resumes once staged replies are sent and the socket has drained', async () => {
    const { s } = await session(10_000);
    const [a, b] = [s.nextRequest(), s.nextRequest()];
    s.staged(a, big(20_000));
    assert.equal(s.conn.paused, true, 'over the bound with replies staged');
    s.deliver(a, big(20_000)); // in the socket now; b still staged below
    s.staged(b, big(8_000));
    // The socket drains while b still waits for its commit: still over half.
    await until(() => s.conn.outboundBytes === 0, { what: 'the first drain' });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(s.conn.paused, true);
    s.deliver(b, big(8_000));
    await until(() => !s.conn.paused, { what: 'reading to resume', timeoutMs: 5_000 });
    assert.equal(s.unsentBytes, 0);
  });
});
