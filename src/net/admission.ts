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
 * States of an {@link Admission}: `pending` -> `established` (`establish()`)
 * -> `released` (`release()`, when the socket closes); or `pending` ->
 * `released`. The deadline runs only while pending.
 */

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

/** One admitted connection's place in the counts. */
export class Admission {
  readonly address: string;
  readonly #gate: AdmissionGate;
  #state: 'pending' | 'established' | 'released' = 'pending';
  #timer: NodeJS.Timeout | null = null;
  #onExpired: () => void = () => undefined;

  /**
   * @internal created by {@link AdmissionGate.admit}. `onDeadline` always runs
   * when the deadline passes while pending (to report it); then the action
   * set with {@link setOnExpired}.
   */
  constructor(gate: AdmissionGate, address: string, timeoutMs: number, onDeadline: () => void) {
    this.#gate = gate;
    this.address = address;
    if (timeoutMs > 0) {
      this.#timer = setTimeout(() => {
        this.#timer = null;
        if (this.#state !== 'pending') return;
        onDeadline();
        this.#onExpired();
      }, timeoutMs);
      this.#timer.unref();
    }
  }

  get pending(): boolean {
    return this.#state === 'pending';
  }

  /** Replaces what happens when the deadline passes while still pending. */
  setOnExpired(onExpired: () => void): void {
    this.#onExpired = onExpired;
  }

  /** The connection got through: it stops counting as pending and its deadline is off. */
  establish(): void {
    if (this.#state !== 'pending') return;
    this.#state = 'established';
    this.#clearTimer();
    this.#gate.established();
  }

  /** The connection closed. Idempotent. */
  release(): void {
    if (this.#state === 'released') return;
    const wasPending = this.#state === 'pending';
    this.#state = 'released';
    this.#clearTimer();
    this.#gate.released(this.address, wasPending);
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
  #open = 0;
  #pending = 0;

  constructor(limits: AdmissionLimits = UNLIMITED) {
    this.limits = limits;
  }

  get openCount(): number {
    return this.#open;
  }

  get pendingCount(): number {
    return this.#pending;
  }

  /**
   * Admits a connection from `remoteAddress`, or says which bound refuses it.
   * `onDeadline` runs if it is still pending when the handshake deadline passes.
   */
  admit(remoteAddress: string, onDeadline: () => void): Admission | AdmissionRefusal {
    const address = normalizeAddress(remoteAddress);
    const fromAddress = this.#perAddress.get(address) ?? 0;
    if (this.#open >= this.limits.maxConnections) return 'max_connections';
    if (fromAddress >= this.limits.maxConnectionsPerAddress) return 'per_address';
    if (this.#pending >= this.limits.maxPending) return 'pending';
    this.#open++;
    this.#pending++;
    this.#perAddress.set(address, fromAddress + 1);
    return new Admission(this, address, this.limits.handshakeTimeoutMs, onDeadline);
  }

  /** @internal */
  established(): void {
    this.#pending--;
  }

  /** @internal */
  released(address: string, wasPending: boolean): void {
    this.#open--;
    if (wasPending) this.#pending--;
    const left = (this.#perAddress.get(address) ?? 1) - 1;
    if (left > 0) this.#perAddress.set(address, left);
    else this.#perAddress.delete(address);
  }
}

/** `::ffff:10.0.0.1` and `10.0.0.1` are one address. */
export function normalizeAddress(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}
