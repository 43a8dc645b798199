/**
 * How many connections the HTTP port holds, and which one goes when it is
 * full, so that a flood of idle or slow connections cannot keep `/healthz`
 * and the dashboard from answering.
 *
 * Each connection is either *idle* (no request in progress: it has not sent
 * a whole request header yet, or it is a keep-alive connection between
 * requests) or *busy* (a request arrived and its response has not ended: a
 * body being read, an answer being written, a live stream). Idle
 * connections do not last: Node's `headersTimeout` closes one that has not
 * sent a whole header in time and `keepAliveTimeout` one that waits for its
 * next request. Busy ones are bounded by `requestTimeout` until their body
 * is in, and by the handlers after that.
 *
 * Admission of a newcomer from address A:
 * - A holds `maxPerAddress`: A's oldest idle connection is closed to make
 *   room (never-served ones first); when all of A's are busy, the newcomer is
 *   refused (`per_address`).
 * - The port holds `maxConnections`: the oldest idle connection of the
 *   address holding the most (at least two more than A) is closed, or else
 *   A's own oldest idle one; otherwise the newcomer is refused
 *   (`max_connections`).
 *
 * A prober therefore always gets in, from any address, while the flood's
 * connections are idle; an address that floods evicts only its own.
 */
import type { Socket } from 'node:net';
import type { NetEvent } from '../net/net-events.js';

export interface HttpConnectionLimits {
  /** Open connections on the port. */
  maxConnections: number;
  /** Open connections from one remote address. */
  maxPerAddress: number;
}

interface Connection {
  readonly address: string;
  readonly remote: string;
  /** The TCP socket (counted, released on its close). */
  readonly raw: Socket;
  /** The socket requests arrive on: `raw`, or the TLS socket over it once the handshake is done. */
  http: Socket | null;
  /** Requests in progress (their responses have not ended). */
  busy: number;
  /** At least one request arrived. */
  served: boolean;
}

export class HttpConnectionGate {
  readonly #limits: HttpConnectionLimits;
  readonly #report: (event: NetEvent) => void;
  /** By address; each set in order of arrival. */
  readonly #byAddress = new Map<string, Set<Connection>>();
  readonly #byHttpSocket = new WeakMap<Socket, Connection>();
  #open = 0;

  constructor(limits: HttpConnectionLimits, report: (event: NetEvent) => void) {
    this.#limits = limits;
    this.#report = report;
  }

  /** Open connections right now. */
  get openCount(): number {
    return this.#open;
  }

  /**
   * A TCP connection was accepted. Admits it (closing an idle one to make
   * room where needed) or destroys it. `tls`: requests will arrive on a TLS
   * socket, {@link attachTls} links it.
   */
  admit(raw: Socket, tls: boolean): void {
    raw.on('error', () => undefined);
    if (raw.destroyed) return;
    const address = raw.remoteAddress ?? '?';
    const remote = `${address}:${raw.remotePort ?? '?'}`;
    const refused = this.#makeRoom(address);
    if (refused !== null) {
      this.#report({ type: 'connection.refused', port: 'http', limit: refused, remote });
      raw.destroy();
      return;
    }
    const conn: Connection = {
      address,
      remote,
      raw,
      http: tls ? null : raw,
      busy: 0,
      served: false,
    };
    let peers = this.#byAddress.get(address);
    if (peers === undefined) this.#byAddress.set(address, (peers = new Set()));
    peers.add(conn);
    this.#open++;
    if (!tls) this.#byHttpSocket.set(raw, conn);
    raw.once('close', () => this.#release(conn));
  }

  /** The TLS handshake of a connection ended: requests come on `socket` from now on. */
  attachTls(socket: Socket): void {
    const peers = this.#byAddress.get(socket.remoteAddress ?? '?');
    for (const conn of peers ?? []) {
      if (conn.http === null && conn.raw.remotePort === socket.remotePort) {
        conn.http = socket;
        this.#byHttpSocket.set(socket, conn);
        return;
      }
    }
  }

  /** A request arrived on `socket`; `done` must be called once its response has ended. */
  requestStarted(socket: Socket): () => void {
    const conn = this.#byHttpSocket.get(socket);
    if (conn === undefined) return () => undefined;
    conn.busy++;
    conn.served = true;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      conn.busy--;
    };
  }

  /** Frees a slot for a newcomer from `address`, or says why it is refused. */
  #makeRoom(address: string): 'per_address' | 'max_connections' | null {
    const own = this.#byAddress.get(address);
    const ownCount = own?.size ?? 0;
    if (ownCount >= this.#limits.maxPerAddress) {
      return this.#evictFrom(own) ? null : 'per_address';
    }
    if (this.#open < this.#limits.maxConnections) return null;
    const busiest = this.#busiestAddress();
    if (busiest !== undefined && busiest.size >= ownCount + 2 && this.#evictFrom(busiest))
      return null;
    return this.#evictFrom(own) ? null : 'max_connections';
  }

  #busiestAddress(): Set<Connection> | undefined {
    let busiest: Set<Connection> | undefined;
    for (const peers of this.#byAddress.values()) {
      if (busiest === undefined || peers.size > busiest.size) busiest = peers;
    }
    return busiest;
  }

  /** Closes the oldest idle connection of `peers` (never-served first); false when none is idle. */
  #evictFrom(peers: Set<Connection> | undefined): boolean {
    if (peers === undefined) return false;
    let victim: Connection | undefined;
    for (const conn of peers) {
      if (conn.busy > 0) continue;
      if (!conn.served) {
        victim = conn;
        break;
      }
      victim ??= conn;
    }
    if (victim === undefined) return false;
    this.#report({
      type: 'connection.limited',
      port: 'http',
      limit: 'pending_evicted',
      remote: victim.remote,
    });
    this.#release(victim);
    victim.http?.destroy();
    victim.raw.destroy();
    return true;
  }

  #release(conn: Connection): void {
    const peers = this.#byAddress.get(conn.address);
    if (peers === undefined || !peers.delete(conn)) return;
    this.#open--;
    if (peers.size === 0) this.#byAddress.delete(conn.address);
  }
}
