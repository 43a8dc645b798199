/**
 * FramedConnection's own bounds over real sockets on 127.0.0.1: the deadline
 * for a started frame, the shared budget for partial frames, and pause() as
 * immediate backpressure (frames of a chunk already read are held).
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import {
  FramedConnection,
  type CloseReason,
  type ConnectionHandlers,
  type ConnectionOptions,
  type LimitBreach,
} from '../../src/net/framed-connection.js';
import { InboundBudget } from '../../src/net/inbound-budget.js';
import { dial } from '../../src/net/tcp.js';
import { encodeMessage } from '../../src/protocol/codec.js';
import type { ProtocolError } from '../../src/protocol/errors.js';
import type { Message } from '../../src/protocol/messages.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (let fn = cleanups.pop(); fn !== undefined; fn = cleanups.pop()) await fn();
});

class Recorder implements ConnectionHandlers {
  readonly messages: Message[] = [];
  readonly breaches: LimitBreach[] = [];
  readonly closes: CloseReason[] = [];
  readonly errors: ProtocolError[] = [];
  onMessage(msg: Message): void {
    this.messages.push(msg);
  }
  onProtocolError(err: ProtocolError): void {
    this.errors.push(err);
  }
  onClose(reason: CloseReason): void {
    this.closes.push(reason);
  }
}

/** A server wrapping each accepted socket in a FramedConnection with these options. */
async function serve(options: ConnectionOptions, withOnLimit = false) {
  const conns: { conn: FramedConnection; rec: Recorder }[] = [];
  const server: Server = createServer((socket) => {
    const rec = new Recorder();
    const handlers: ConnectionHandlers = withOnLimit
      ? {
          onMessage: (m) => rec.onMessage(m),
          onProtocolError: (e) => rec.onProtocolError(e),
          onClose: (r) => rec.onClose(r),
          onLimit: (b) => {
            rec.breaches.push(b);
            void conn.close(b.message);
          },
        }
      : rec;
    const conn = new FramedConnection(socket, handlers, options);
    conns.push({ conn, rec });
  });
  server.listen(0, HOST);
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  cleanups.push(async () => {
    for (const { conn } of conns) await conn.destroy();
    server.close();
  });
  return { port, conns };
}

async function client(port: number): Promise<Socket> {
  const socket = await dial(HOST, port, 2_000);
  socket.on('error', () => undefined);
  cleanups.push(() => socket.destroy());
  return socket;
}

const heartbeat = (workerId: string): Message => ({ type: 'HEARTBEAT', workerId });

/**
 * A server whose connections call `onHeartbeat(conn, workerId)` for each
 * HEARTBEAT; returns the connections and a client socket connected to it.
 */
async function heartbeatServer(
  onHeartbeat: (conn: FramedConnection, workerId: string) => void,
): Promise<{ conns: FramedConnection[]; socket: Socket }> {
  const conns: FramedConnection[] = [];
  const server = createServer((socket) => {
    const conn: FramedConnection = new FramedConnection(socket, {
      onMessage: (m) => {
        if (m.type === 'HEARTBEAT') onHeartbeat(conn, m.workerId);
      },
      onProtocolError: () => undefined,
      onClose: () => undefined,
    });
    conns.push(conn);
  });
  server.listen(0, HOST);
  await once(server, 'listening');
  cleanups.push(() => server.close());
  cleanups.push(() => Promise.all(conns.map((c) => c.destroy())));
  const socket = await client((server.address() as { port: number }).port);
  return { conns, socket };
}

describe('FramedConnection bounds', () => {
  it('closes with frame_timeout when a started frame is not finished in time', async () => {
    const { port, conns } = await serve({ frameTimeoutMs: 150 });
    const socket = await client(port);
    const frame = encodeMessage(heartbeat('slow'));
    socket.write(frame.subarray(0, 6));
    // Trickling more bytes does not extend the deadline: it is absolute.
    const trickle = setInterval(() => socket.write(frame.subarray(6, 7)), 40);
    cleanups.push(() => clearInterval(trickle));
    const { rec } = await until(() => conns[0]);
    await until(() => rec.closes.length === 1, { what: 'the close' });
    assert.equal(rec.closes[0]?.kind, 'limit');
    assert.match(JSON.stringify(rec.closes[0]), /frame_timeout/);
    assert.deepEqual(rec.messages, []);
  });

  it('keeps a connection whose frames each finish in time, however many there are', async () => {
    const { port, conns } = await serve({ frameTimeoutMs: 200 });
    const socket = await client(port);
    const frame = encodeMessage(heartbeat('steady'));
    // Each frame is split across two writes, so one is always in progress
    // at some moment; together they take longer than one deadline.
    for (let i = 0; i < 8; i++) {
      socket.write(frame.subarray(0, 5));
      await new Promise((resolve) => setTimeout(resolve, 30));
      socket.write(frame.subarray(5));
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    const { rec, conn } = await until(() => conns[0]);
    await until(() => rec.messages.length === 8);
    assert.equal(conn.isOpen, true);
    assert.deepEqual(rec.closes, []);
  });

  it('hands a breach to onLimit, which may answer and close', async () => {
    const { port, conns } = await serve({ frameTimeoutMs: 100 }, true);
    const socket = await client(port);
    socket.write(encodeMessage(heartbeat('x')).subarray(0, 3));
    const { rec } = await until(() => conns[0]);
    await until(() => rec.closes.length === 1);
    assert.equal(rec.breaches[0]?.limit, 'frame_timeout');
    assert.equal(rec.closes[0]?.kind, 'local');
  });

  it('makes the connection whose frame does not fit the budget wait, then serves it', async () => {
    // Client class: 3/8 of 8 MB; one address may hold 1 MB, so the second 900 KB frame waits.
    const budget = new InboundBudget(8_000_000);
    const waits: string[] = [];
    const { port, conns } = await serve({
      inbound: { budget, inboundClass: 'client', onWait: (remote) => waits.push(remote) },
    });
    const big = encodeMessage({ type: 'HEARTBEAT', workerId: 'x'.repeat(900_000) });
    const first = await client(port);
    first.write(big.subarray(0, 500_000));
    await until(() => budget.usedBytes >= 900_000, { what: 'the first reservation' });
    const second = await client(port);
    second.write(big);
    await until(() => conns[1]?.conn.waitingForBudget === true, { what: 'the second to wait' });
    assert.equal(waits.length, 1);
    assert.deepEqual(conns[1]?.rec.closes, [], 'waiting, not cut off');
    assert.deepEqual(conns[1]?.rec.messages, []);
    // The first finishes its frame: its room goes to the second, which completes.
    first.write(big.subarray(500_000));
    await until(() => conns[1]?.rec.messages.length === 1, { what: 'the second frame' });
    assert.equal(conns[0]?.rec.messages.length, 1);
    assert.equal(conns[1]?.conn.isOpen, true);
    await until(() => budget.usedBytes === 0, { what: 'every reservation released' });
  });

  it('costs a frame that arrives whole nothing, however full the budget is', async () => {
    const budget = new InboundBudget(8_000_000);
    const { port, conns } = await serve({ inbound: { budget, inboundClass: 'client' } });
    const big = encodeMessage({ type: 'HEARTBEAT', workerId: 'x'.repeat(900_000) });
    const holder = await client(port);
    holder.write(big.subarray(0, 100_000));
    await until(() => budget.usedBytes > 0);
    const small = await client(port);
    for (let i = 0; i < 5; i++) small.write(encodeMessage(heartbeat(`h${i}`)));
    await until(() => conns[1]?.rec.messages.length === 5, { what: 'the small frames' });
    assert.equal(conns[1]?.conn.waitingForBudget, false);
  });

  it('refuses a frame over 128 KiB before the connection is through, and takes it after', async () => {
    const budget = new InboundBudget(64_000_000);
    const { port, conns } = await serve({ inbound: { budget, inboundClass: 'pending' } });
    const big = encodeMessage(heartbeat('y'.repeat(200_000)));
    const early = await client(port);
    early.write(big);
    await until(() => conns[0]?.rec.errors.length === 1, { what: 'the early one to be refused' });
    assert.match(
      conns[0]?.rec.errors[0]?.message ?? '',
      /^declared frame length 200\d{3} is outside 1\.\.131072 \(at most 131072 bytes before authentication or registration\)$/,
    );
    const later = await client(port);
    await until(() => conns[1] !== undefined);
    conns[1]?.conn.setInboundClass('client');
    later.write(big);
    await until(() => conns[1]?.rec.messages.length === 1, { what: 'the frame once through' });
  });

  it('releases the reservation of a partial frame when its connection closes', async () => {
    const budget = new InboundBudget(80_000_000);
    const { port, conns } = await serve({ inbound: { budget, inboundClass: 'client' } });
    const socket = await client(port);
    socket.write(encodeMessage(heartbeat('y'.repeat(500_000))).subarray(0, 100_000));
    await until(() => budget.usedBytes > 0);
    socket.destroy();
    await until(() => conns[0]?.rec.closes.length === 1);
    assert.equal(budget.usedBytes, 0);
  });

  it('holds the rest of a chunk at once when paused, and delivers it on resume', async () => {
    const seen: string[] = [];
    const { conns, socket } = await heartbeatServer((conn, workerId) => {
      seen.push(workerId);
      if (seen.length === 2) conn.pause();
    });
    socket.write(Buffer.concat(['a', 'b', 'c', 'd'].map((id) => encodeMessage(heartbeat(id)))));
    await until(() => seen.length === 2);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(seen, ['a', 'b']);
    assert.equal(conns[0]?.paused, true);
    conns[0]?.resume();
    assert.deepEqual(seen, ['a', 'b', 'c', 'd']);
  });

  it('delivers every frame once when a handler pauses and resumes from inside', async () => {
    const seen: string[] = [];
    const { socket } = await heartbeatServer((conn, workerId) => {
      seen.push(workerId);
      conn.pause();
      conn.resume();
    });
    socket.write(Buffer.concat(['a', 'b', 'c'].map((id) => encodeMessage(heartbeat(id)))));
    await until(() => seen.length >= 3);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(seen, ['a', 'b', 'c']);
  });
});
