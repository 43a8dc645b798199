/**
 * TLS on a TcpServer and in dial(), over 127.0.0.1, with certificates made by
 * openssl at test time: the on/off matrix (a plain peer on a TLS port and a
 * TLS peer on a plain port both fail cleanly), a wrong CA, a wrong name,
 * client certificates required, and a certificate reload.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { FramedConnection, type CloseReason } from '../../src/net/framed-connection.js';
import type { NetEvent } from '../../src/net/net-events.js';
import { DialError, TcpServer, dial } from '../../src/net/tcp.js';
import { ServerTls, TlsConfigError, readClientTls, type ClientTls } from '../../src/net/tls.js';
import type { Message } from '../../src/protocol/messages.js';
import { testCerts, type CertFiles } from '../helpers/certs.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';
const certs = testCerts();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (let fn = cleanups.pop(); fn !== undefined; fn = cleanups.pop()) await fn();
});

/** A TLS (or plain) echo server: each frame comes back as it is. */
async function echoServer(tls: ServerTls | null): Promise<{ port: number; events: NetEvent[] }> {
  const events: NetEvent[] = [];
  const conns: FramedConnection[] = [];
  const server = new TcpServer(
    (socket, admission) => {
      admission.establish();
      const conn: FramedConnection = new FramedConnection(socket, {
        onMessage: (msg) => conn.send(msg),
        // Like the coordinator: a last ERROR in plain text, then a graceful close.
        onProtocolError: () => {
          conn.send({ type: 'ERROR', code: 'MALFORMED_REQUEST', message: 'Malformed request' });
          void conn.close('bad frame');
        },
        onClose: () => undefined,
      });
      conns.push(conn);
    },
    { name: 'client', tls, onEvent: (e) => events.push(e) },
  );
  const port = await server.listen(0, HOST);
  cleanups.push(() => server.close());
  return { port, events };
}

/** Connects, sends one frame, and returns what came back or how it closed. */
async function roundTrip(socket: Socket): Promise<{ messages: Message[]; close: CloseReason }> {
  const messages: Message[] = [];
  let resolveClose!: (reason: CloseReason) => void;
  const closed = new Promise<CloseReason>((resolve) => (resolveClose = resolve));
  const conn: FramedConnection = new FramedConnection(socket, {
    onMessage: (msg) => {
      messages.push(msg);
      if (msg.type === 'HEARTBEAT') void conn.close('done');
    },
    onProtocolError: () => void conn.destroy('bad frame'),
    onClose: resolveClose,
  });
  cleanups.push(() => conn.destroy());
  conn.send({ type: 'HEARTBEAT', workerId: 'echo' });
  return { messages, close: await closed };
}

function serverTls(c: CertFiles, clientCa = false): ServerTls {
  return ServerTls.load({
    certFile: c.serverPem,
    keyFile: c.serverKey,
    clientCaFile: clientCa ? c.caPem : null,
  });
}

async function dialFails(port: number, tls: ClientTls | null): Promise<DialError> {
  try {
    const socket = await dial(HOST, port, 3_000, undefined, tls);
    socket.destroy();
  } catch (err) {
    assert.ok(err instanceof DialError, String(err));
    return err;
  }
  assert.fail('dial succeeded');
}

describe('TLS', { skip: certs === null ? 'openssl is not installed' : false }, () => {
  const c = certs as CertFiles;

  it('carries frames both ways when both ends speak TLS and the CA is trusted', async () => {
    const { port, events } = await echoServer(serverTls(c));
    const socket = await dial(HOST, port, 3_000, undefined, readClientTls({ caFile: c.caPem }));
    const { messages } = await roundTrip(socket);
    assert.deepEqual(messages, [{ type: 'HEARTBEAT', workerId: 'echo' }]);
    assert.ok(events.some((e) => e.type === 'tls.handshake' && e.ok));
  });

  it('verifies the name "localhost" as well as the address', async () => {
    const { port } = await echoServer(serverTls(c));
    const socket = await dial(
      'localhost',
      port,
      3_000,
      undefined,
      readClientTls({ caFile: c.caPem }),
    );
    assert.equal((await roundTrip(socket)).messages.length, 1);
  });

  it('tells a plain peer on a TLS port, in plain text, with TLS_REQUIRED', async () => {
    const { port, events } = await echoServer(serverTls(c));
    const { messages, close } = await roundTrip(await dial(HOST, port, 3_000));
    assert.equal(messages.length, 1);
    assert.equal(messages[0]?.type, 'ERROR');
    assert.equal(messages[0]?.type === 'ERROR' ? messages[0].code : null, 'TLS_REQUIRED');
    assert.notEqual(close.kind, 'truncated');
    assert.ok(events.some((e) => e.type === 'tls.handshake' && !e.ok));
  });

  it('fails a TLS dial to a plain port at once, as a refusal that says so', async () => {
    const { port } = await echoServer(null);
    const err = await dialFails(port, readClientTls({ caFile: c.caPem }));
    assert.equal(err.refused, true);
    assert.equal(err.code, 'TLS_FAILED');
    assert.match(err.message, /does not seem to speak TLS/);
  });

  it('refuses a server whose certificate another CA signed, and the server counts it', async () => {
    const { port, events } = await echoServer(serverTls(c));
    const err = await dialFails(port, readClientTls({ caFile: c.otherCaPem }));
    assert.equal(err.refused, true);
    assert.match(err.message, /TLS handshake failed/);
    await until(() => events.some((e) => e.type === 'tls.handshake' && !e.ok));
  });

  it('refuses a server certificate for another name', async () => {
    const { port } = await echoServer(serverTls(c));
    const tls = { ...readClientTls({ caFile: c.caPem }), servername: 'dtp.example' };
    const err = await dialFails(port, tls);
    assert.equal(err.refused, true);
    assert.match(err.message, /ERR_TLS_CERT_ALTNAME_INVALID/);
  });

  it('tells a client without a certificate UNAUTHENTICATED when client certificates are required', async () => {
    const { port, events } = await echoServer(serverTls(c, true));
    const socket = await dial(HOST, port, 3_000, undefined, readClientTls({ caFile: c.caPem }));
    const { messages } = await roundTrip(socket);
    assert.equal(messages[0]?.type, 'ERROR');
    assert.equal(messages[0]?.type === 'ERROR' ? messages[0].code : null, 'UNAUTHENTICATED');
    assert.ok(events.some((e) => e.type === 'auth.refused'));
  });

  it('refuses a client certificate that another CA signed', async () => {
    const { port } = await echoServer(serverTls(c, true));
    const tls = readClientTls({
      caFile: c.caPem,
      certFile: c.otherClientPem,
      keyFile: c.otherClientKey,
    });
    const socket = await dial(HOST, port, 3_000, undefined, tls);
    const { messages } = await roundTrip(socket);
    assert.equal(messages[0]?.type === 'ERROR' ? messages[0].code : null, 'UNAUTHENTICATED');
  });

  it('accepts a client certificate that its CA signed', async () => {
    const { port } = await echoServer(serverTls(c, true));
    const tls = readClientTls({ caFile: c.caPem, certFile: c.clientPem, keyFile: c.clientKey });
    const { messages } = await roundTrip(await dial(HOST, port, 3_000, undefined, tls));
    assert.deepEqual(messages, [{ type: 'HEARTBEAT', workerId: 'echo' }]);
  });

  it('serves the new certificate to new connections after a reload', async () => {
    const dir = c.dir;
    const certFile = join(dir, 'reload.pem');
    const keyFile = join(dir, 'reload.key');
    copyFileSync(c.serverPem, certFile);
    copyFileSync(c.serverKey, keyFile);
    const material = ServerTls.load({ certFile, keyFile });
    const { port } = await echoServer(material);
    const trustOther = readClientTls({ caFile: c.otherCaPem });
    assert.equal((await dialFails(port, trustOther)).refused, true);
    copyFileSync(c.otherServerPem, certFile);
    copyFileSync(c.otherServerKey, keyFile);
    material.reload();
    const { messages } = await roundTrip(await dial(HOST, port, 3_000, undefined, trustOther));
    assert.equal(messages.length, 1);
  });

  it('keeps the old certificate when a reload finds a broken file', async () => {
    const certFile = join(c.dir, 'broken.pem');
    copyFileSync(c.serverPem, certFile);
    const material = ServerTls.load({ certFile, keyFile: c.serverKey });
    const { port } = await echoServer(material);
    copyFileSync(c.serverKey, certFile); // a key where the certificate should be
    assert.throws(() => material.reload(), TlsConfigError);
    const socket = await dial(HOST, port, 3_000, undefined, readClientTls({ caFile: c.caPem }));
    assert.equal((await roundTrip(socket)).messages.length, 1);
  });

  it('fails to load a key that does not belong to the certificate', () => {
    assert.throws(
      () => ServerTls.load({ certFile: c.serverPem, keyFile: c.otherServerKey }),
      (err: unknown) => err instanceof TlsConfigError && /unusable/.test(err.message),
    );
    assert.throws(
      () => ServerTls.load({ certFile: join(c.dir, 'missing.pem'), keyFile: c.serverKey }),
      (err: unknown) =>
        err instanceof TlsConfigError && /cannot read TLS certificate/.test(err.message),
    );
  });
});
