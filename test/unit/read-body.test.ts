/**
 * readBody: a body within its bound is read whole; one past it gets a 413
 * that reaches the client, however much of the body it still sends (the
 * rest is read and dropped, up to a bound of its own); past that too, the
 * connection is cut.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { DISCARD_AFTER_BOUND_BYTES, readBody } from '../../src/http/params.js';
import { HttpError } from '../../src/http/responses.js';
import { until } from '../helpers/until.js';

const BOUND = 64 * 1024;

/**
 * POSTs `bytes` bytes on a connection of its own; resolves, once that is
 * closed, with the status, or the error that ended the request first.
 */
function post(port: number, bytes: number): Promise<number | Error> {
  return new Promise((resolve) => {
    let outcome: number | Error | undefined;
    const req = request(
      { host: '127.0.0.1', port, method: 'POST', path: '/', agent: false },
      (res) => {
        res.resume();
        res.once('end', () => (outcome ??= res.statusCode ?? 0));
      },
    );
    req.on('error', (err) => (outcome ??= err)); // a reset may follow the answer
    req.once('close', () => resolve(outcome ?? new Error('closed without an answer')));
    req.end(Buffer.alloc(bytes, 0x79));
  });
}

describe('readBody', () => {
  let server: Server;
  let port: number;
  /** The requests the server took, in order. */
  const taken: IncomingMessage[] = [];
  before(async () => {
    server = createServer((req, res) => {
      taken.push(req);
      readBody(req, BOUND).then(
        (body) => res.writeHead(200).end(String(body.length)),
        (err: unknown) => res.writeHead(err instanceof HttpError ? err.status : 500).end(),
      );
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  after(() => server.close());

  it('reads a body within its bound', async () => {
    assert.equal(await post(port, BOUND), 200);
  });

  it('answers 413 to a body past its bound, every time, while the client is still sending', async () => {
    for (let i = 0; i < 30; i++)
      assert.equal(await post(port, BOUND + 512 * 1024), 413, `try ${i}`);
  });

  it('lets a client that reads only once the server is done with its body see the 413', async () => {
    const body = BOUND + 256 * 1024;
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.pause(); // reads nothing until the server has dealt with the whole body
    const head = `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${body}\r\n\r\n`;
    socket.write(Buffer.concat([Buffer.from(head), Buffer.alloc(body, 0x79)]));
    const before = taken.length;
    const req = await until(() => taken[before]);
    // Done: the body read to its end, or the connection cut (with the client's bytes unread).
    await until(() => req.complete || req.socket.destroyed, { what: 'the server done with it' });
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    const ended = await new Promise<Error | null>((resolve) => {
      socket.once('error', resolve);
      socket.resume();
      void until(() => text.includes('\r\n\r\n'), { timeoutMs: 5_000 }).then(
        () => resolve(null),
        () => resolve(new Error(`no answer: ${JSON.stringify(text)}`)),
      );
    });
    socket.destroy();
    assert.equal(ended, null);
    assert.match(text, /^HTTP\/1\.1 413 /);
  });

  it('cuts the connection once the body goes on past what it drops', async () => {
    const before = taken.length;
    const outcome = await post(port, BOUND + DISCARD_AFTER_BOUND_BYTES + 4 * 1024 * 1024);
    assert.ok(outcome === 413 || outcome instanceof Error, String(outcome));
    const req = taken[before];
    assert.ok(req !== undefined);
    assert.equal(req.complete, false, 'the server did not read it to its end');
    await until(() => req.socket.destroyed, { what: 'the connection cut' });
  });
});
