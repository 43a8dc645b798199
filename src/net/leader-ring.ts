/**
 * Finding the leader among several coordinator addresses, for clients and
 * workers configured with `h1[:p1],h2[:p2],…`.
 *
 * The ring holds the configured addresses and a position. The next address
 * to dial is the leader a standby named (once: if it cannot be reached we go
 * back to the list), else the address at the position. A failed dial or a
 * NOT_LEADER without a name moves the position on; a connection that worked
 * keeps it, so a reconnect tries the same coordinator first. The caller
 * pauses before a redial only after a working connection ended or a whole
 * round failed ({@link LeaderRing.shouldPause}).
 */
import { formatHostPort, parseHostPort, type HostPort } from './address.js';

const MAX_HINT_CHARS = 300;
/** A named leader's host: a host name (labels of 1 to 63 characters) or an IP address. */
const HINT_HOST = /^(?:[A-Za-z0-9_-]{1,63}(?:\.[A-Za-z0-9_-]{1,63})*\.?|[0-9A-Fa-f:.]{2,45})$/;

export class LeaderRing {
  readonly #addresses: readonly HostPort[];
  #position = 0;
  /** A leader a standby named, to dial next. */
  #hint: HostPort | null = null;
  /** The last address handed out, and whether it was the hint. */
  #current: HostPort | null = null;
  #usedHint = false;
  /** Failures since the last success (a whole round = the list's length). */
  #failures = 0;

  constructor(addresses: readonly HostPort[]) {
    if (addresses.length === 0) throw new Error('LeaderRing needs at least one address');
    this.#addresses = addresses;
  }

  /** Every configured address, as `host:port` (for logs). */
  describe(): string {
    return this.#addresses.map(formatHostPort).join(',');
  }

  /** The address to dial now. */
  next(): HostPort {
    const hint = this.#hint;
    this.#hint = null;
    this.#usedHint = hint !== null;
    this.#current = hint ?? (this.#addresses[this.#position] as HostPort);
    return this.#current;
  }

  /** The dial or the connection to the last address failed before it served us. */
  failed(): void {
    this.#failures++;
    // A named leader we could not reach does not move us along the list.
    if (!this.#usedHint) this.#advance();
  }

  /**
   * The coordinator dialled is not the leader; `leader` is the `host:port` it
   * named, or null. A name that does not parse, or whose host is not a plain
   * host name or IP address (a space, a NUL, a label over 63 characters:
   * nothing a resolver should be asked about), is ignored.
   */
  notLeader(leader: string | null, defaultPort: number): void {
    this.failed();
    this.#hint = null;
    if (leader === null || leader.length > MAX_HINT_CHARS) return;
    try {
      const hint = parseHostPort(leader, defaultPort);
      if (HINT_HOST.test(hint.host)) this.#hint = hint;
    } catch {
      // Not an address: the list goes on.
    }
  }

  /** The last address served us: stay with it. */
  succeeded(): void {
    this.#failures = 0;
    const current = this.#current;
    if (!this.#usedHint || current === null) return;
    // Remember the leader's position when it is one of ours.
    const index = this.#addresses.findIndex(
      (a) => a.host === current.host && a.port === current.port,
    );
    if (index >= 0) this.#position = index;
  }

  /**
   * True when the next dial should wait first: no leader was named, and
   * either a connection that served us ended or a whole round failed.
   * Otherwise the next address is dialled at once.
   */
  shouldPause(): boolean {
    return this.#hint === null && this.#failures % this.#addresses.length === 0;
  }

  #advance(): void {
    this.#position = (this.#position + 1) % this.#addresses.length;
  }
}
