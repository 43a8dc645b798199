/**
 * Admission on a TcpServer over 127.0.0.1: the per-port cap, the per-address
 * cap, the cap on pending connections (room kept for established ones), and
 * the absolute handshake deadline that trickled bytes do not extend.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import {
  AdmissionGate,
  MIN_EVICTABLE_PENDING_MS,
  normalizeAddress,
  type Admission,
} from '../../src/net/admission.js';
import type { NetEvent } from '../../src/net/net-events.js';
import { TcpServer, dial } from '../../src/net/tcp.js';
import { FrameDecoder } from '../../src/protocol/framing.js';
import { decodeMessage } from '../../src/protocol/codec.js';
import type { Message } from '../../src/protocol/messages.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (let fn = cleanups.pop(); fn !== undefined; fn = cleanups.pop()) await fn();
});

interface Limits {
  maxConnections?: number;
  maxConnectionsPerAddress?: number;
  maxPending?: number;
  handshakeTimeoutMs?: number;
}

async function serve(limits: Limits) {
  const admissions: Admission[] = [];
  const events: NetEvent[] = [];
  const server = new TcpServer((_socket, admission) => admissions.push(admission), {
    name: 'worker',
    limits: {
      maxConnections: limits.maxConnections ?? Infinity,
      maxConnectionsPerAddress: limits.maxConnectionsPerAddress ?? Infinity,
      maxPending: limits.maxPending ?? Infinity,
      handshakeTimeoutMs: limits.handshakeTimeoutMs ?? 0,
    },
    onEvent: (e) => events.push(e),
  });
  const port = await server.listen(0, HOST);
  cleanups.push(() => server.close());
  return { server, port, admissions, events };
}

async function connectTo(port: number): Promise<Socket> {
  const socket = await dial(HOST, port, 2_000);
  socket.on('error', () => undefined);
  cleanups.push(() => socket.destroy());
  return socket;
}

/** Settles when the socket closes, whether by FIN or by reset. */
function closed(socket: Socket): Promise<void> {
  return new Promise((resolve) => socket.once('close', () => resolve()));
}

/** Frames the server sent before closing. */
async function lastWords(socket: Socket): Promise<Message[]> {
  const decoder = new FrameDecoder();
  const out: Message[] = [];
  socket.on('data', (chunk: Buffer) => {
    for (const payload of decoder.push(chunk)) out.push(decodeMessage(payload));
  });
  await closed(socket);
  return out;
}

const NO_HOOKS = { onDeadline: () => undefined, onEvicted: () => undefined };

describe('AdmissionGate', () => {
  it('counts per address with IPv4-mapped IPv6 addresses as their IPv4 form', () => {
    const gate = new AdmissionGate({
      maxConnections: 10,
      maxConnectionsPerAddress: 1,
      maxPending: 10,
      handshakeTimeoutMs: 0,
    });
    const first = gate.admit('::ffff:10.0.0.1', NO_HOOKS);
    assert.notEqual(typeof first, 'string');
    assert.equal(gate.admit('10.0.0.1', NO_HOOKS), 'per_address');
    assert.equal(normalizeAddress('::1'), '::1');
    (first as Admission).release();
    (first as Admission).release();
    assert.equal(gate.openCount, 0);
    assert.equal(gate.pendingCount, 0);
    assert.notEqual(typeof gate.admit('10.0.0.1', NO_HOOKS), 'string');
  });

  it('makes room for a newcomer from another address by dropping the oldest of the greediest', () => {
    const gate = new AdmissionGate({
      maxConnections: 100,
      maxConnectionsPerAddress: 100,
      maxPending: 4,
      handshakeTimeoutMs: 0,
    });
    const dropped: string[] = [];
    const flood = [1, 2, 3, 4].map((i) => {
      const a = gate.admit('10.0.0.66', {
        onDeadline: () => undefined,
        onEvicted: () => dropped.push(`flood-${i}`),
      }) as Admission;
      a.setOnExpired(() => dropped.push(`closed-${i}`));
      return a;
    });
    // Another connection from the flooding address is refused: it is the greediest.
    assert.equal(gate.admit('10.0.0.66', NO_HOOKS), 'pending');
    const worker = gate.admit('10.0.0.7', NO_HOOKS);
    assert.notEqual(typeof worker, 'string');
    assert.deepEqual(dropped, ['flood-1', 'closed-1']);
    assert.equal(gate.pendingCount, 4);
    assert.equal(flood[0]?.pending, false);
    // Two addresses with two and two: nobody holds two more than a third newcomer... except 66.
    (worker as Admission).establish();
    assert.equal(gate.pendingCount, 3);
  });

  it('makes room for a newcomer from the flooding address itself once its oldest has waited', () => {
    let nowMs = 0;
    const gate = new AdmissionGate(
      { maxConnections: 100, maxConnectionsPerAddress: 100, maxPending: 3, handshakeTimeoutMs: 0 },
      () => nowMs,
    );
    const dropped: string[] = [];
    const admit = (address: string, name: string): Admission | string => {
      const a = gate.admit(address, { ...NO_HOOKS, onEvicted: () => dropped.push(name) });
      return a;
    };
    for (const name of ['idle-1', 'idle-2', 'idle-3']) admit('127.0.0.1', name);
    nowMs = MIN_EVICTABLE_PENDING_MS - 1;
    // Still within the handshake allowance: nobody is pushed out.
    assert.equal(admit('127.0.0.1', 'early'), 'pending');
    nowMs = MIN_EVICTABLE_PENDING_MS;
    const client = admit('127.0.0.1', 'client');
    assert.notEqual(typeof client, 'string');
    assert.deepEqual(dropped, ['idle-1']);
    assert.equal(gate.pendingCount, 3);
    // The newest are kept: the next newcomer takes the next oldest, never the client first.
    assert.notEqual(typeof admit('127.0.0.1', 'next'), 'string');
    assert.notEqual(typeof admit('127.0.0.1', 'next-2'), 'string');
    assert.deepEqual(dropped, ['idle-1', 'idle-2', 'idle-3']);
    assert.equal(admit('127.0.0.1', 'too-soon'), 'pending', 'the client is not old enough yet');
    assert.equal((client as Admission).pending, true);
  });

  it("drops the newcomer's own oldest when two addresses hold the same share", () => {
    let nowMs = 0;
    const gate = new AdmissionGate(
      { maxConnections: 100, maxConnectionsPerAddress: 100, maxPending: 4, handshakeTimeoutMs: 0 },
      () => nowMs,
    );
    const dropped: string[] = [];
    for (const [address, name] of [
      ['10.0.0.1', 'a1'],
      ['10.0.0.2', 'b1'],
      ['10.0.0.1', 'a2'],
      ['10.0.0.2', 'b2'],
    ] as const) {
      gate.admit(address, { ...NO_HOOKS, onEvicted: () => dropped.push(name) });
    }
    nowMs = 1_000;
    assert.notEqual(typeof gate.admit('10.0.0.2', NO_HOOKS), 'string');
    assert.deepEqual(dropped, ['b1']);
  });

  it('refuses a newcomer when every address holds its fair share of pending slots', () => {
    const gate = new AdmissionGate({
      maxConnections: 100,
      maxConnectionsPerAddress: 100,
      maxPending: 2,
      handshakeTimeoutMs: 0,
    });
    gate.admit('10.0.0.1', NO_HOOKS);
    gate.admit('10.0.0.2', NO_HOOKS);
    assert.equal(gate.admit('10.0.0.3', NO_HOOKS), 'pending');
  });
});

describe('TcpServer admission', () => {
  it('refuses connections beyond --max-connections with ERROR LIMIT_EXCEEDED', async () => {
    const { port, admissions, events, server } = await serve({ maxConnections: 3 });
    for (let i = 0; i < 3; i++) await connectTo(port);
    await until(() => admissions.length === 3);
    for (const a of admissions) a.establish();
    const refused = await connectTo(port);
    const words = await lastWords(refused);
    assert.equal(words[0]?.type, 'ERROR');
    assert.equal(words[0]?.type === 'ERROR' ? words[0].code : null, 'LIMIT_EXCEEDED');
    assert.match(words[0]?.type === 'ERROR' ? words[0].message : '', /Too many connections/);
    assert.deepEqual(
      events.map((e) => e.type === 'connection.refused' && e.limit),
      ['max_connections'],
    );
    assert.equal(server.connectionCount, 3);
  });

  it('refuses a fourth connection from one address when the per-address cap is 3', async () => {
    const { port, events } = await serve({ maxConnectionsPerAddress: 3 });
    for (let i = 0; i < 3; i++) await connectTo(port);
    await lastWords(await connectTo(port));
    assert.ok(events.some((e) => e.type === 'connection.refused' && e.limit === 'per_address'));
  });

  it('keeps room for established connections: only maxPending may be pending at once', async () => {
    const { port, admissions, events } = await serve({ maxConnections: 10, maxPending: 2 });
    await connectTo(port);
    await connectTo(port);
    await until(() => admissions.length === 2);
    const words = await lastWords(await connectTo(port));
    assert.match(words[0]?.type === 'ERROR' ? words[0].message : '', /still registering/);
    assert.ok(events.some((e) => e.type === 'connection.refused' && e.limit === 'pending'));
    // Once one gets through, a new one may start.
    admissions[0]?.establish();
    await connectTo(port);
    await until(() => admissions.length === 3);
  });

  it('frees the slot of a connection when it closes', async () => {
    const { port, admissions, server } = await serve({ maxConnections: 1 });
    const first = await connectTo(port);
    await until(() => admissions.length === 1);
    first.destroy();
    await until(() => server.connectionCount === 0);
    await connectTo(port);
    await until(() => admissions.length === 2);
  });

  it('closes a pending connection at its deadline even while it trickles bytes', async () => {
    const { port, admissions, events } = await serve({ handshakeTimeoutMs: 200 });
    const socket = await connectTo(port);
    const trickle = setInterval(() => socket.write(Buffer.from([0])), 50);
    cleanups.push(() => clearInterval(trickle));
    await closed(socket);
    assert.equal(admissions.length, 1);
    assert.ok(
      events.some((e) => e.type === 'connection.limited' && e.limit === 'handshake_timeout'),
    );
  });

  it('leaves an established connection alone after the deadline', async () => {
    const { port, admissions, events } = await serve({ handshakeTimeoutMs: 100 });
    const socket = await connectTo(port);
    await until(() => admissions.length === 1);
    admissions[0]?.establish();
    // A second connection, left pending, is closed at its own deadline: by
    // then the first one's deadline has passed as well.
    const witness = await connectTo(port);
    await closed(witness);
    assert.equal(socket.destroyed, false);
    assert.deepEqual(
      events.map((e) => e.type === 'connection.limited' && e.limit),
      ['handshake_timeout'],
      'only the pending witness hit the deadline',
    );
  });
});
