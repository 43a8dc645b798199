/**
 * FramedConnection, TcpServer and dial over real sockets on 127.0.0.1.
 *
 * Every wait is on an event, a promise or `until()`; nothing sleeps to
 * synchronise. The "raw" peer is a plain socket so tests control every byte.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import {
  FramedConnection,
  type CloseReason,
  type ConnectionHandlers,
} from '../../src/net/framed-connection.js';
import { DialError, TcpServer, dial } from '../../src/net/tcp.js';
import { encodeMessage } from '../../src/protocol/codec.js';
import { DtpError, ProtocolErrorCode, type ProtocolError } from '../../src/protocol/errors.js';
import { FrameDecoder, encodeFrame } from '../../src/protocol/framing.js';
import type { Message } from '../../src/protocol/messages.js';
import { batchTexts, resultBatch } from '../../src/net/frame-batch.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';

/** Records everything a connection reports; `closed` settles on the first close. */
class Recorder implements ConnectionHandlers {
  readonly messages: Message[] = [];
  readonly protocolErrors: ProtocolError[] = [];
  readonly closes: CloseReason[] = [];
  readonly closed: Promise<CloseReason>;
  #resolveClosed: (reason: CloseReason) => void = () => undefined;

  constructor() {
    this.closed = new Promise((resolve) => (this.#resolveClosed = resolve));
  }

  onMessage(msg: Message): void {
    this.messages.push(msg);
  }

  onProtocolError(err: ProtocolError): void {
    this.protocolErrors.push(err);
  }

  onClose(reason: CloseReason): void {
    this.closes.push(reason);
    this.#resolveClosed(reason);
  }
}

/** Things to tear down after each test, newest first. */
const cleanups: (() => Promise<unknown> | void)[] = [];

afterEach(async () => {
  for (let fn = cleanups.pop(); fn !== undefined; fn = cleanups.pop()) await fn();
});

interface Served {
  server: TcpServer;
  port: number;
  /** Sockets the server accepted, in order. */
  accepted: Socket[];
}

async function serve(): Promise<Served> {
  const accepted: Socket[] = [];
  const server = new TcpServer((socket) => accepted.push(socket));
  const port = await server.listen(0, HOST);
  cleanups.push(() => server.close());
  return { server, port, accepted };
}

/** A plain client socket, destroyed after the test. */
async function rawClient(port: number): Promise<Socket> {
  const socket = await dial(HOST, port, 2_000);
  socket.on('error', () => undefined); // resets are expected in several tests
  cleanups.push(() => void socket.destroy());
  return socket;
}

/** The server side of the `index`th connection, wrapped in a FramedConnection. */
async function acceptFramed(
  served: Served,
  index = 0,
  maxOutboundBytes?: number,
): Promise<{ conn: FramedConnection; rec: Recorder; socket: Socket }> {
  const socket = await until(() => served.accepted[index], { what: `connection ${index}` });
  const rec = new Recorder();
  const conn = new FramedConnection(socket, rec, { maxOutboundBytes });
  cleanups.push(() => conn.destroy());
  return { conn, rec, socket };
}

function write(socket: Socket, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) =>
    socket.write(bytes, (err) => (err ? reject(err) : resolve())),
  );
}

/** Everything a raw socket receives until the peer's FIN, split into frames. */
async function readFramesUntilEnd(socket: Socket): Promise<{ frames: Buffer[]; end: string }> {
  const decoder = new FrameDecoder();
  const frames: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => {
    for (const f of decoder.push(chunk)) frames.push(Buffer.from(f));
  });
  await once(socket, 'end');
  return { frames, end: decoder.end() };
}

const heartbeat = (workerId: string): Message => ({ type: 'HEARTBEAT', workerId });

describe('FramedConnection', () => {
  it('delivers messages both ways in order when both ends are framed', async () => {
    const served = await serve();
    const clientRec = new Recorder();
    const client = new FramedConnection(await dial(HOST, served.port, 2_000), clientRec);
    cleanups.push(() => client.destroy());
    const { conn, rec } = await acceptFramed(served);

    const big: Message = {
      type: 'SUBMIT_JOB',
      taskType: 'WORD_COUNT',
      payload: { text: 'word '.repeat(180_000) },
      maxAttempts: null,
      idempotencyKey: null,
      priority: 'LOW',
    };
    const up: Message[] = [
      { type: 'WORKER_REGISTER', workerId: 'w-1', capacity: 2, taskTypes: null },
      heartbeat('w-1'),
      big,
      heartbeat('w-1'),
    ];
    const down: Message[] = [
      { type: 'WORKER_REGISTERED', workerId: 'w-1' },
      { type: 'TASK_CANCEL', jobId: 'j', attemptId: 'a' },
    ];
    for (const m of up) assert.equal(client.send(m), true);
    for (const m of down) assert.equal(conn.send(m), true);

    await until(() => rec.messages.length === up.length && clientRec.messages.length === 2);
    assert.deepEqual(rec.messages, up);
    assert.deepEqual(clientRec.messages, down);
    assert.deepEqual(rec.protocolErrors, []);
    assert.equal(conn.isOpen, true);
  });

  it('delivers a frame once when it is written one byte per write', async () => {
    const served = await serve();
    const client = await rawClient(served.port);
    const { rec, socket } = await acceptFramed(served);
    const frame = encodeMessage(heartbeat('w-byte'));
    for (let i = 0; i < frame.length; i++) {
      // Wait until the server has read this byte, so each byte is its own chunk.
      const arrived = once(socket, 'data');
      await write(client, frame.subarray(i, i + 1));
      await arrived;
      if (i < frame.length - 1) assert.equal(rec.messages.length, 0);
    }
    assert.deepEqual(rec.messages, [heartbeat('w-byte')]);
    // A later frame shows the first was not held back or delivered twice.
    await write(client, encodeMessage(heartbeat('w-next')));
    await until(() => rec.messages.length === 2);
    assert.deepEqual(rec.messages, [heartbeat('w-byte'), heartbeat('w-next')]);
  });

  it('reports a garbage prefix once and delivers nothing after it', async () => {
    const served = await serve();
    const client = await rawClient(served.port);
    const { conn, rec } = await acceptFramed(served);
    const garbage = Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n', 'latin1');
    await write(client, Buffer.concat([garbage, encodeMessage(heartbeat('w'))]));
    await until(() => rec.protocolErrors.length === 1, { what: 'the protocol error' });
    await write(client, encodeMessage(heartbeat('w')));
    assert.equal(rec.protocolErrors[0]?.code, ProtocolErrorCode.FrameLength);

    // The owner answers a violation by closing; that must not wait for the peer to read.
    const closing = conn.close('protocol violation');
    const peerSawEnd = once(client, 'end');
    let closed = false;
    void closing.then(() => (closed = true));
    await until(() => closed, { timeoutMs: 2_000, what: 'close() to resolve' });
    await peerSawEnd;
    await closing;
    assert.equal(rec.protocolErrors.length, 1);
    assert.deepEqual(rec.messages, []);
    assert.deepEqual(rec.closes, [{ kind: 'local', message: 'protocol violation' }]);
  });

  it('delivers the messages before a malformed frame and none after it', async () => {
    const served = await serve();
    const client = await rawClient(served.port);
    const { conn, rec } = await acceptFramed(served);
    const bad = encodeFrame(Buffer.from('{"type":"HEARTBEAT",', 'utf8'));
    const chunk = Buffer.concat([
      encodeMessage(heartbeat('before')),
      bad,
      encodeMessage(heartbeat('after')),
    ]);
    await write(client, chunk);
    await until(() => rec.protocolErrors.length === 1);
    assert.equal(rec.protocolErrors[0]?.code, ProtocolErrorCode.MalformedJson);
    assert.deepEqual(rec.messages, [heartbeat('before')]);

    const peerGone = once(client, 'close');
    await conn.destroy();
    await peerGone;
    assert.deepEqual(rec.messages, [heartbeat('before')]);
    assert.equal(rec.protocolErrors.length, 1);
  });

  it('closes with reason eof when the peer closes between frames', async () => {
    const served = await serve();
    const client = await rawClient(served.port);
    const { rec } = await acceptFramed(served);
    await write(client, encodeMessage(heartbeat('w')));
    client.end();
    assert.deepEqual(await rec.closed, { kind: 'eof' });
    assert.deepEqual(rec.messages, [heartbeat('w')]);
  });

  it('closes with reason eof when the peer closes inside the 4-byte prefix', async () => {
    const served = await serve();
    const client = await rawClient(served.port);
    const { rec } = await acceptFramed(served);
    const frame = encodeMessage(heartbeat('w'));
    await write(client, Buffer.concat([frame, frame.subarray(0, 3)]));
    client.end();
    assert.deepEqual(await rec.closed, { kind: 'eof' });
    assert.equal(rec.messages.length, 1);
  });

  it('closes with reason truncated when the peer closes in the middle of a payload', async () => {
    const served = await serve();
    const client = await rawClient(served.port);
    const { rec } = await acceptFramed(served);
    const frame = encodeMessage(heartbeat('w'));
    await write(client, Buffer.concat([frame, frame.subarray(0, frame.length - 3)]));
    client.end();
    assert.deepEqual(await rec.closed, { kind: 'truncated' });
    assert.deepEqual(rec.messages, [heartbeat('w')]);
    assert.equal(rec.closes.length, 1);
  });

  it('flushes every queued frame before its FIN when closed gracefully', async () => {
    const served = await serve();
    const client = await rawClient(served.port);
    const { conn, rec } = await acceptFramed(served);
    const received = readFramesUntilEnd(client);
    const count = 300;
    const filler = 'x'.repeat(8_000);
    for (let i = 0; i < count; i++) {
      assert.equal(conn.send({ type: 'ERROR', message: `${i} ${filler}`, code: null }), true);
    }
    const first = conn.close('done');
    const second = conn.close('again');
    assert.equal(second, first, 'close() hands out one shared promise');
    assert.equal(conn.isOpen, false);
    assert.equal(conn.send(heartbeat('late')), false, 'nothing is queued after close()');

    const { frames, end } = await received;
    await first;
    assert.equal(frames.length, count);
    assert.equal(end, 'clean');
    assert.ok(
      frames
        .at(-1)
        ?.toString('utf8')
        .includes(`"${count - 1} x`),
    );
    assert.equal(conn.destroy(), first, 'destroy() after close() hands out the same promise');
    assert.deepEqual(rec.closes, [{ kind: 'local', message: 'done' }]);
  });

  it('closes at once and reports once when destroyed twice', async () => {
    const served = await serve();
    const client = await rawClient(served.port);
    const { conn, rec } = await acceptFramed(served);
    const peerGone = once(client, 'close');
    const first = conn.destroy('bye');
    assert.equal(conn.destroy('bye again'), first);
    assert.equal(conn.close(), first);
    await first;
    await peerGone;
    assert.deepEqual(rec.closes, [{ kind: 'local', message: 'bye' }]);
    assert.equal(conn.send(heartbeat('late')), false);
  });

  it('reports the peer closing first with one onClose when the owner then closes', async () => {
    const served = await serve();
    const client = await rawClient(served.port);
    const { conn, rec } = await acceptFramed(served);
    client.end();
    assert.deepEqual(await rec.closed, { kind: 'eof' });
    await conn.close();
    await conn.destroy();
    assert.equal(rec.closes.length, 1);
  });

  it('cuts off a peer that never reads with reason overflow and drops what was queued', async () => {
    const served = await serve();
    const client = await rawClient(served.port);
    client.pause();
    const limit = 1024 * 1024;
    const { conn, rec } = await acceptFramed(served, 0, limit);
    const frame = encodeFrame(Buffer.alloc(64 * 1024, 0x61));
    let sent = 0;
    // Bounded: loopback buffers hold a few MiB, far less than 4096 * 64 KiB.
    for (let i = 0; i < 4096 && conn.sendFrame(frame); i++) {
      sent++;
      await nextTurn(); // let the socket flush to the kernel between writes
    }
    assert.ok(sent < 4096, 'the slow reader was cut off');
    const reason = await rec.closed;
    assert.equal(reason.kind, 'overflow');
    assert.ok(reason.kind === 'overflow' && reason.bytes > limit);
    await conn.closed();
    assert.equal(conn.outboundBytes, 0, 'queued bytes are released');
    assert.equal(rec.closes.length, 1);
    await until(() => served.server.connectionCount === 0);
  });
});

describe('FramedConnection batching (feature batches)', () => {
  const result = (i: number): Message => ({
    type: 'TASK_RESULT',
    workerId: 'w-1',
    jobId: `job-${i}`,
    attemptId: `a-${i}`,
    success: true,
    result: String(i),
    error: null,
  });

  /** A framed pair: `conn` batches TASK_RESULT for worker w-1, `rec` records what arrives. */
  async function batchingPair(): Promise<{ conn: FramedConnection; rec: Recorder }> {
    const served = await serve();
    const clientRec = new Recorder();
    const client = new FramedConnection(await dial(HOST, served.port, 2_000), clientRec);
    cleanups.push(() => client.destroy());
    const { conn } = await acceptFramed(served);
    conn.batchMessages(resultBatch('w-1'));
    return { conn, rec: clientRec };
  }

  it('sends the results of one callback in one TASK_RESULTS, and one alone as it is', async () => {
    const { conn, rec } = await batchingPair();
    for (let i = 0; i < 3; i++) assert.equal(conn.send(result(i)), true);
    await until(() => rec.messages.length === 1);
    conn.send(result(3));
    await until(() => rec.messages.length === 2);
    const [batch, alone] = rec.messages;
    assert.ok(batch?.type === 'TASK_RESULTS');
    assert.equal(batch.workerId, 'w-1');
    assert.deepEqual(batch.results, [result(0), result(1), result(2)]);
    assert.deepEqual(alone, result(3));
  });

  it('keeps the order with other messages: results queued before one leave before it', async () => {
    const { conn, rec } = await batchingPair();
    conn.send(result(0));
    conn.send(result(1));
    conn.send(heartbeat('w-1'));
    conn.send(result(2));
    await until(() => rec.messages.length === 3);
    assert.deepEqual(
      rec.messages.map((m) => m.type),
      ['TASK_RESULTS', 'HEARTBEAT', 'TASK_RESULT'],
    );
  });

  it('flushes held results before its FIN when closed gracefully, and waits for them when drained', async () => {
    const { conn, rec } = await batchingPair();
    conn.send(result(0));
    conn.send(result(1));
    let drained = false;
    conn.onceDrained(() => (drained = true));
    assert.equal(drained, false, 'held results are not drained yet');
    await conn.close('done');
    await until(() => rec.messages.length === 1);
    assert.equal(drained, true);
    assert.ok(rec.messages[0]?.type === 'TASK_RESULTS');
    assert.equal(rec.messages[0].results.length, 2);
  });

  it('refuses at once a message too large for any frame, as an unbatched send does', async () => {
    const { conn } = await batchingPair();
    const huge = { ...result(0), result: 'x'.repeat(1_100_000) } as Message;
    assert.throws(() => conn.send(huge), /refusing to write a frame/);
  });
});

describe('batchTexts', () => {
  const wrapper = { type: 'T', head: '{"b":[', tail: ']}' };
  const texts = ['{"a":1}', '{"a":22}', '{"a":333}', '{"a":4444}'];
  const bytes = texts.map((t) => t.length);

  it('puts everything in one frame when it fits and a single text in a frame of its own', () => {
    assert.deepEqual(batchTexts(texts, bytes, wrapper), [`{"b":[${texts.join(',')}]}`]);
    assert.deepEqual(batchTexts(texts.slice(0, 1), bytes.slice(0, 1), wrapper), [texts[0]]);
  });

  it('splits at the frame limit, the head, tail and commas counted', () => {
    // head 6 + tail 2 + 7 + 1 + 8 = 24 bytes for the first two.
    assert.deepEqual(batchTexts(texts, bytes, wrapper, 24), [
      '{"b":[{"a":1},{"a":22}]}',
      texts[2],
      texts[3],
    ]);
    assert.deepEqual(batchTexts(texts, bytes, wrapper, 23), texts);
    for (const frame of batchTexts(texts, bytes, wrapper, 30)) assert.ok(frame.length <= 30);
  });
});

describe('TcpServer', () => {
  it('resolves with the bound port when listening on port 0', async () => {
    const { port } = await serve();
    assert.ok(Number.isInteger(port) && port > 0);
  });

  it('rejects with DtpError LISTEN_FAILED when the port is taken', async () => {
    const { port } = await serve();
    const second = new TcpServer(() => undefined);
    cleanups.push(() => second.close());
    await assert.rejects(second.listen(port, HOST), (err: unknown) => {
      assert.ok(err instanceof DtpError, `expected a DtpError, got ${String(err)}`);
      assert.equal(err.code, 'LISTEN_FAILED');
      assert.ok(err.message.includes(String(port)));
      return true;
    });
  });

  it('destroys open sockets and refuses new ones when closed', async () => {
    const served = await serve();
    const clients = [await rawClient(served.port), await rawClient(served.port)];
    const sides = [await acceptFramed(served, 0), await acceptFramed(served, 1)];
    assert.equal(served.server.connectionCount, 2);
    const clientsGone = clients.map((c) => once(c, 'close'));

    const closing = served.server.close();
    assert.equal(served.server.close(), closing, 'close() hands out one shared promise');
    await closing;
    await Promise.all(clientsGone);
    for (const side of sides) {
      await side.conn.closed();
      assert.equal(side.rec.closes.length, 1);
    }
    assert.equal(served.server.connectionCount, 0);
    await assert.rejects(
      dial(HOST, served.port, 2_000),
      (err: unknown) => err instanceof DialError && err.code === 'CONNECT_FAILED',
    );
  });
});

/**
 * A listener that completes at most two handshakes and never accepts: its
 * thread blocks right after listening, so further connects hang in SYN_SENT.
 */
async function startBlackHole(): Promise<number> {
  const wake = new Int32Array(new SharedArrayBuffer(4));
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    const net = require('node:net');
    const server = net.createServer((socket) => socket.destroy());
    server.on('error', () => undefined);
    server.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {
      parentPort.postMessage(server.address().port);
      Atomics.wait(workerData, 0, 0);
      server.close();
      parentPort.close();
    });`;
  const worker = new Worker(code, { eval: true, workerData: wake });
  worker.on('error', () => undefined);
  cleanups.push(async () => {
    Atomics.store(wake, 0, 1);
    Atomics.notify(wake, 0);
    await worker.terminate();
  });
  const [port] = (await once(worker, 'message')) as [number];
  // Fill the accept queue (backlog 1 holds two completed handshakes).
  let connected = 0;
  for (let i = 0; i < 4; i++) {
    const filler = connect({ host: HOST, port }, () => connected++);
    filler.on('error', () => undefined);
    cleanups.push(() => void filler.destroy());
  }
  await until(() => connected >= 2, { what: 'the accept queue to fill' });
  return port;
}

function isDialError(pattern: RegExp) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof DialError, `expected a DialError, got ${String(err)}`);
    assert.equal(err.code, 'CONNECT_FAILED');
    assert.match(err.message, pattern);
    return true;
  };
}

describe('dial', () => {
  it('fails with DialError CONNECT_FAILED when nothing listens on the port', async () => {
    const probe = new TcpServer(() => undefined);
    const port = await probe.listen(0, HOST);
    await probe.close();
    await assert.rejects(dial(HOST, port, 2_000), isDialError(new RegExp(`${HOST}:${port}`)));
  });

  it('fails with DialError after its timeout when the handshake never completes', async () => {
    const port = await startBlackHole();
    const started = performance.now();
    await assert.rejects(dial(HOST, port, 150), isDialError(/timed out after 150 ms/));
    const elapsedMs = performance.now() - started;
    assert.ok(elapsedMs >= 140 && elapsedMs < 2_000, `took ${elapsedMs} ms`);
  });

  it('fails with DialError at once when aborted during the handshake', async () => {
    const port = await startBlackHole();
    const controller = new AbortController();
    const started = performance.now();
    const dialing = dial(HOST, port, 10_000, controller.signal);
    controller.abort();
    await assert.rejects(dialing, isDialError(/aborted/));
    assert.ok(performance.now() - started < 2_000);
  });

  it('fails with DialError at once when the signal is already aborted', async () => {
    const port = await startBlackHole();
    const started = performance.now();
    await assert.rejects(dial(HOST, port, 10_000, AbortSignal.abort()), isDialError(/aborted/));
    assert.ok(performance.now() - started < 2_000);
  });

  it('returns a connected socket and leaves no timer behind when the port listens', async () => {
    const served = await serve();
    const socket = await rawClient(served.port);
    assert.equal(socket.remotePort, served.port);
    assert.equal(socket.listenerCount('error'), 1, 'only the test handler remains');
  });
});
