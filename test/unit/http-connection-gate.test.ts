import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { describe, it } from 'node:test';
import { HttpConnectionGate } from '../../src/http/connection-gate.js';
import type { NetEvent } from '../../src/net/net-events.js';

let nextPort = 40_000;

/** What the gate uses of a socket: its peer, `close`, `destroy()`. */
class FakeSocket extends EventEmitter {
  readonly remoteAddress: string;
  readonly remotePort = nextPort++;
  destroyed = false;

  constructor(address: string) {
    super();
    this.remoteAddress = address;
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit('close');
  }

  get socket(): Socket {
    return this as unknown as Socket;
  }
}

function setup(maxConnections: number, maxPerAddress: number) {
  const events: NetEvent[] = [];
  const gate = new HttpConnectionGate({ maxConnections, maxPerAddress }, (e) => events.push(e));
  const connect = (address: string, tls = false): FakeSocket => {
    const s = new FakeSocket(address);
    gate.admit(s.socket, tls);
    return s;
  };
  return { gate, events, connect };
}

describe('HttpConnectionGate', () => {
  it('makes room at the per-address cap by closing that address’s oldest idle connection', () => {
    const { gate, events, connect } = setup(100, 3);
    const [a, b, c] = [connect('10.0.0.1'), connect('10.0.0.1'), connect('10.0.0.1')];
    const d = connect('10.0.0.1');
    assert.deepEqual(
      [a.destroyed, b.destroyed, c.destroyed, d.destroyed],
      [true, false, false, false],
    );
    assert.equal(gate.openCount, 3);
    assert.deepEqual(
      events.map((e) => [e.type, 'limit' in e ? e.limit : '']),
      [['connection.limited', 'pending_evicted']],
    );
  });

  it('closes never-served connections before keep-alive ones, and never a busy one', () => {
    const { gate, connect } = setup(100, 3);
    const served = connect('10.0.0.1');
    gate.requestStarted(served.socket)(); // one request, answered: idle again
    const busy = connect('10.0.0.1');
    const done = gate.requestStarted(busy.socket);
    const fresh = connect('10.0.0.1');
    const later = connect('10.0.0.1');
    assert.deepEqual([served.destroyed, busy.destroyed, fresh.destroyed], [false, false, true]);
    gate.requestStarted(later.socket)();
    connect('10.0.0.1');
    assert.equal(served.destroyed, true, 'then the oldest keep-alive one');
    assert.deepEqual([busy.destroyed, later.destroyed], [false, false]);
    done();
    assert.equal(gate.openCount, 3);
  });

  it('refuses a newcomer when every connection of its address is busy', () => {
    const { gate, events, connect } = setup(100, 2);
    for (const s of [connect('10.0.0.1'), connect('10.0.0.1')]) gate.requestStarted(s.socket);
    const late = connect('10.0.0.1');
    assert.equal(late.destroyed, true);
    assert.equal(events.at(-1)?.type, 'connection.refused');
    assert.equal(connect('10.0.0.2').destroyed, false, 'another address still gets in');
  });

  it('at the port total, closes an idle connection of the busiest address for a newcomer', () => {
    const { gate, connect } = setup(4, 10);
    const flood = [connect('10.0.0.1'), connect('10.0.0.1'), connect('10.0.0.1')];
    const other = connect('10.0.0.2');
    const probe = connect('10.0.0.3');
    assert.equal(probe.destroyed, false);
    assert.deepEqual(
      flood.map((s) => s.destroyed),
      [true, false, false],
    );
    assert.equal(other.destroyed, false);
    assert.equal(gate.openCount, 4);
  });

  it('at the port total with addresses evenly loaded, a newcomer replaces its own oldest idle one', () => {
    const { gate, connect } = setup(2, 10);
    const a = connect('10.0.0.1');
    const b = connect('10.0.0.2');
    const a2 = connect('10.0.0.1');
    assert.deepEqual([a.destroyed, b.destroyed, a2.destroyed], [true, false, false]);
    assert.equal(gate.openCount, 2);
    gate.requestStarted(a2.socket);
    gate.requestStarted(b.socket);
    assert.equal(connect('10.0.0.3').destroyed, true, 'refused: everyone is busy');
  });

  it('tracks requests on the TLS socket of a connection once attached', () => {
    const { gate, connect } = setup(100, 2);
    const raw = connect('10.0.0.1', true);
    const tls = Object.assign(new FakeSocket('10.0.0.1'), { remotePort: raw.remotePort });
    gate.attachTls(tls.socket);
    gate.requestStarted(tls.socket);
    connect('10.0.0.1', true);
    connect('10.0.0.1', true);
    assert.equal(raw.destroyed, false, 'busy over TLS: kept');
    assert.equal(gate.openCount, 2);
  });
});
