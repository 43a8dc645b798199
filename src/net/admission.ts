/**
 * Admission of connections to one listening port: how many at once, how many
 * from one address, and how many may still be "pending" (in the TLS handshake,
 * or not yet authenticated / registered), each pending one under an absolute
 * deadline.
 *
 * Pending connections can hold at most `maxPending` of the port's
 * `maxConnections` slots, so the rest is kept for connections that got
 * through (registered workers, authenticated clients): a flood of peers that
 * connect and never register cannot push out the workers already there, and
 * each of them is gone by its deadline whatever it trickles meanwhile.
 *
 * When the pending slots are all taken, a newcomer is not simply refused: if
 * one address holds more pending slots than the newcomer's address (by at
 * least two), that address's oldest pending connection is dropped to make
 * room. A flood from one address therefore cannot keep a real worker or
 * client from another address out: it gets a pending slot at once and is
 * through in milliseconds. When the newcomer's own address is the one
 * holding the most (a flood from the client's own host), its oldest pending
 * connection is dropped instead, once that one has been pending for
 * {@link MIN_EVICTABLE_PENDING_MS}: peers that authenticate promptly get
 * through, idle ones make room for them, and a flood that churns faster than
 * that gets the newcomer refused (clients retry such a refusal with
 * back-off) rather than pushing out connections still in their handshake.
 *
 * States of an {@link Admission}: `pending` -> `established` (`establish()`)
 * -> `released` (`release()`, when the socket closes); or `pending` ->
 * `released` (closed, expired, or evicted). The deadline runs only while
 * pending.
 */

/**
 * A pending connection younger than this is never dropped for a newcomer from
 * its own address: time for a TLS handshake and an AUTH round trip.
 */
export const MIN_EVICTABLE_PENDING_MS = 100;

/** Bounds of one port. `Infinity` / 0 where noted = no bound. */
export interface AdmissionLimits {
  /** Open connections on this port. */
  maxConnections: number;
  /** Open connections from one remote address. */
  maxConnectionsPerAddress: number;
  /** Connections not yet established. */
  maxPending: number;
  /** Time from accept to established, in ms (0 = none). */
  handshakeTimeoutMs: number;
}

export const UNLIMITED: AdmissionLimits = {
  maxConnections: Infinity,
  maxConnectionsPerAddress: Infinity,
  maxPending: Infinity,
  handshakeTimeoutMs: 0,
};

/** Why a pending admission has to go: its deadline passed, or it made room for a newcomer. */
export type ExpiryCause = 'deadline' | 'evicted';

/** What happens to a pending admission that runs out of time or is evicted. */
export interface AdmissionHooks {
  /** Reports that the deadline passed while pending (then the action runs). */
  onDeadline(): void;
  /** Reports that it was evicted to make room for another address (then the action runs). */
  onEvicted(): void;
}

/** One admitted connection's place in the counts. */
export class Admission {
  readonly address: string;
  /** When it was admitted, on the gate's clock (ms). */
  readonly admittedAtMs: number;
  readonly #gate: AdmissionGate;
  readonly #hooks: AdmissionHooks;
  #state: 'pending' | 'established' | 'released' = 'pending';
  #timer: NodeJS.Timeout | null = null;
  #onExpired: (cause: ExpiryCause) => void = () => undefined;

  /** @internal created by {@link AdmissionGate.admit} */
  constructor(
    gate: AdmissionGate,
    address: string,
    timeoutMs: number,
    hooks: AdmissionHooks,
    admittedAtMs: number,
  ) {
    this.#gate = gate;
    this.address = address;
    this.admittedAtMs = admittedAtMs;
    this.#hooks = hooks;
    if (timeoutMs > 0) {
      this.#timer = setTimeout(() => {
        this.#timer = null;
        if (this.#state !== 'pending') return;
        this.#hooks.onDeadline();
        this.#onExpired('deadline');
      }, timeoutMs);
      this.#timer.unref();
    }
  }

  get pending(): boolean {
    return this.#state === 'pending';
  }

  /**
   * Sets what happens when this pending connection has to go (deadline or
   * eviction): typically a last ERROR and a close, or a destroy.
   */
  setOnExpired(onExpired: (cause: ExpiryCause) => void): void {
    this.#onExpired = onExpired;
  }

  /** The connection got through: it stops counting as pending and its deadline is off. */
  establish(): void {
    if (this.#state !== 'pending') return;
    this.#state = 'established';
    this.#clearTimer();
    this.#gate.established(this);
  }

  /** The connection closed. Idempotent. */
  release(): void {
    if (this.#state === 'released') return;
    const wasPending = this.#state === 'pending';
    this.#state = 'released';
    this.#clearTimer();
    this.#gate.released(this, wasPending);
  }

  /** @internal Dropped for a newcomer: counted out now, then closed by the action. */
  evict(): void {
    if (this.#state !== 'pending') return;
    this.#hooks.onEvicted();
    this.release();
    this.#onExpired('evicted');
  }

  #clearTimer(): void {
    if (this.#timer === null) return;
    clearTimeout(this.#timer);
    this.#timer = null;
  }
}

/** Why a connection was not admitted. */
export type AdmissionRefusal = 'max_connections' | 'per_address' | 'pending';

/** The counts of one port. */
export class AdmissionGate {
  readonly limits: AdmissionLimits;
  readonly #perAddress = new Map<string, number>();
  /** Pending admissions by address, oldest first (a Set keeps insertion order). */
  readonly #pendingByAddress = new Map<string, Set<Admission>>();
  readonly #nowMs: () => number;
  #open = 0;
  #pending = 0;

  /** `nowMs` is the clock of the eviction rule (tests inject one). */
  constructor(limits: AdmissionLimits = UNLIMITED, nowMs: () => number = () => performance.now()) {
    this.limits = limits;
    this.#nowMs = nowMs;
  }

  get openCount(): number {
    return this.#open;
  }

  get pendingCount(): number {
    return this.#pending;
  }

  /** Admits a connection from `remoteAddress`, or says which bound refuses it. */
  admit(remoteAddress: string, hooks: AdmissionHooks): Admission | AdmissionRefusal {
    const address = normalizeAddress(remoteAddress);
    const fromAddress = this.#perAddress.get(address) ?? 0;
    if (fromAddress >= this.limits.maxConnectionsPerAddress) return 'per_address';
    if (this.#pending >= this.limits.maxPending && !this.#evictForNewcomer(address)) {
      return 'pending';
    }
    if (this.#open >= this.limits.maxConnections) return 'max_connections';
    const { handshakeTimeoutMs } = this.limits;
    const admission = new Admission(this, address, handshakeTimeoutMs, hooks, this.#nowMs());
    this.#open++;
    this.#pending++;
    this.#perAddress.set(address, fromAddress + 1);
    let pendingHere = this.#pendingByAddress.get(address);
    if (pendingHere === undefined) this.#pendingByAddress.set(address, (pendingHere = new Set()));
    pendingHere.add(admission);
    return admission;
  }

  /**
   * Frees a pending slot for a newcomer from `address` (see the module
   * comment): the oldest pending connection of the address holding the most,
   * if that address holds at least two more than the newcomer's; else the
   * newcomer's own oldest, if its address holds (about) the most and that one
   * is old enough. Bounded by the number of addresses with pending
   * connections (at most `maxPending`).
   */
  #evictForNewcomer(address: string): boolean {
    const own = this.#pendingByAddress.get(address);
    const mine = own?.size ?? 0;
    let greediest: Set<Admission> | null = null;
    for (const pending of this.#pendingByAddress.values()) {
      if (greediest === null || pending.size > greediest.size) greediest = pending;
    }
    if (greediest === null) return false;
    let victim: Admission | undefined;
    if (greediest.size >= mine + 2) {
      victim = greediest.values().next().value;
    } else if (own !== undefined && mine + 1 >= greediest.size) {
      const oldest = own.values().next().value;
      const ageMs = oldest === undefined ? 0 : this.#nowMs() - oldest.admittedAtMs;
      if (ageMs >= MIN_EVICTABLE_PENDING_MS) victim = oldest;
    }
    if (victim === undefined) return false;
    victim.evict();
    return true;
  }

  /** @internal */
  established(admission: Admission): void {
    this.#pending--;
    this.#forgetPending(admission);
  }

  /** @internal */
  released(admission: Admission, wasPending: boolean): void {
    this.#open--;
    if (wasPending) {
      this.#pending--;
      this.#forgetPending(admission);
    }
    const address = admission.address;
    const left = (this.#perAddress.get(address) ?? 1) - 1;
    if (left > 0) this.#perAddress.set(address, left);
    else this.#perAddress.delete(address);
  }

  #forgetPending(admission: Admission): void {
    const pending = this.#pendingByAddress.get(admission.address);
    if (pending === undefined) return;
    pending.delete(admission);
    if (pending.size === 0) this.#pendingByAddress.delete(admission.address);
  }
}

/** `::ffff:10.0.0.1` and `10.0.0.1` are one address. */
export function normalizeAddress(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}
