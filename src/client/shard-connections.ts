/**
 * The client's connections to the shards' own client ports: one pipelined
 * connection per address, dialled in the background the first time a
 * request is for it, with the client's TLS and token. A request never waits
 * for a dial: until the connection is open, {@link ShardConnections.get}
 * says null and the request goes through the coordinator's own port.
 *
 * An address whose dial failed (not reachable from here: in containers the
 * shards' ports are often not published; refused; TLS or AUTH failed) is
 * not dialled again for UNREACHABLE_PAUSE_MS.
 *
 * States per address: none -> dialling -> open -> (broken: none again);
 * dialling -> unreachable (for a while) -> none.
 */
import { parseHostPort } from '../net/address.js';
import { ClientConnection, type ConnectionSecurity } from './connection.js';
import { UnreachableAddresses } from './shard-table.js';

export class ShardConnections {
  readonly #connectTimeoutMs: number;
  readonly #security: ConnectionSecurity;
  readonly #open = new Map<string, ClientConnection>();
  readonly #dialing = new Set<string>();
  readonly #unreachable = new UnreachableAddresses();
  #closed = false;

  constructor(connectTimeoutMs: number, security: ConnectionSecurity) {
    this.#connectTimeoutMs = connectTimeoutMs;
    this.#security = security;
  }

  /**
   * The open connection to `address`; else null, and a dial starts unless
   * one is under way or the address failed less than a pause ago.
   */
  get(address: string, nowMs: number): ClientConnection | null {
    const conn = this.#open.get(address);
    if (conn?.isOpen === true) return conn;
    if (conn !== undefined) this.#open.delete(address);
    if (this.#closed || this.#dialing.has(address)) return null;
    if (this.#unreachable.blocked(address, nowMs)) return null;
    void this.#dial(address);
    return null;
  }

  /** The address answered as no client port would: left alone for a pause. */
  failed(address: string, nowMs: number): void {
    this.#unreachable.mark(address, nowMs);
    const conn = this.#open.get(address);
    this.#open.delete(address);
    void conn?.destroy('not a shard client port');
  }

  /** Closes the idle connections to addresses the map no longer names. */
  keepOnly(addresses: ReadonlySet<string>): void {
    for (const [address, conn] of this.#open) {
      if (addresses.has(address) || conn.pendingCount > 0) continue;
      this.#open.delete(address);
      void conn.close();
    }
  }

  /** Closes every connection; requests on them fail with ClientClosedError. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const open = [...this.#open.values()];
    this.#open.clear();
    await Promise.all(open.map((conn) => conn.close()));
  }

  async #dial(address: string): Promise<void> {
    this.#dialing.add(address);
    try {
      const { host, port } = parseHostPort(address, 0);
      const conn = await ClientConnection.open(host, port, this.#connectTimeoutMs, this.#security);
      if (this.#closed) await conn.close();
      else this.#open.set(address, conn);
    } catch {
      this.#unreachable.mark(address, performance.now());
    } finally {
      this.#dialing.delete(address);
    }
  }
}
