/**
 * The leader lease, as the store layer offers it: one record in the shared
 * database that names the coordinator allowed to write, with an epoch (the
 * fencing token: it grows by one at every acquisition) and an expiry on the
 * database's clock. The decisions (when to renew, when to give up, when to
 * try to take over) are the coordinator's (coordinator/leadership.ts); this
 * is only the record and its atomic operations.
 *
 * Implementations: the PostgreSQL lease (postgres/postgres-lease.ts) and
 * {@link MemoryLease} (tests and the simulation).
 */
import { ErrorCode } from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';

/** Who holds (or wants) the lease, and where others reach it. */
export interface LeaseHolder {
  /** Unique per coordinator process. */
  nodeId: string;
  /** `host:port` of its worker port, as others should dial it. */
  workerAddress: string | null;
  /** `host:port` of its client port. */
  clientAddress: string | null;
}

/** The lease record as one read saw it. */
export interface LeaseView {
  epoch: number;
  /** Null when nobody holds it (never held, or released). */
  holder: LeaseHolder | null;
  /** True while the holder's lease has not expired (database clock). */
  live: boolean;
}

export type AcquireResult =
  { acquired: true; epoch: number } | { acquired: false; current: LeaseView };

export interface LeaseBackend {
  /**
   * Takes the lease when it is free or expired: the epoch grows by one and
   * the lease lasts `ttlMs` from now (database clock). Otherwise says who
   * holds it.
   */
  tryAcquire(me: LeaseHolder, ttlMs: number): Promise<AcquireResult>;
  /** Extends the lease of `epoch` by `ttlMs` from now; false when `epoch` is no longer current. */
  renew(nodeId: string, epoch: number, ttlMs: number): Promise<boolean>;
  /** Gives the lease up at once (a clean stop), if `epoch` is still current. */
  release(nodeId: string, epoch: number): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}

/**
 * A write refused because the writer's epoch is no longer the current one:
 * another coordinator took over. Not a storage failure: the writer has lost
 * its leadership and must stop writing.
 */
export class LeaseLostError extends DtpError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.NotLeader, message, options);
  }
}

/**
 * The lease in memory, on a clock the caller gives (tests, simulation).
 * Operations are atomic and instant.
 */
export class MemoryLease implements LeaseBackend {
  #epoch = 0;
  #holder: LeaseHolder | null = null;
  #expiresAtMs = Number.NEGATIVE_INFINITY;
  readonly #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  /** The current epoch. */
  get epoch(): number {
    return this.#epoch;
  }

  tryAcquire(me: LeaseHolder, ttlMs: number): Promise<AcquireResult> {
    return Promise.resolve(this.tryAcquireNow(me, ttlMs));
  }

  renew(nodeId: string, epoch: number, ttlMs: number): Promise<boolean> {
    return Promise.resolve(this.renewNow(nodeId, epoch, ttlMs));
  }

  release(nodeId: string, epoch: number): Promise<void> {
    this.releaseNow(nodeId, epoch);
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  tryAcquireNow(me: LeaseHolder, ttlMs: number): AcquireResult {
    const now = this.#now();
    if (this.#holder !== null && this.#expiresAtMs >= now) {
      return { acquired: false, current: this.view() };
    }
    this.#epoch++;
    this.#holder = { ...me };
    this.#expiresAtMs = now + ttlMs;
    return { acquired: true, epoch: this.#epoch };
  }

  renewNow(nodeId: string, epoch: number, ttlMs: number): boolean {
    if (epoch !== this.#epoch || this.#holder?.nodeId !== nodeId) return false;
    this.#expiresAtMs = this.#now() + ttlMs;
    return true;
  }

  releaseNow(nodeId: string, epoch: number): void {
    if (epoch !== this.#epoch || this.#holder?.nodeId !== nodeId) return;
    this.#holder = null;
    this.#expiresAtMs = Number.NEGATIVE_INFINITY;
  }

  view(): LeaseView {
    const live = this.#holder !== null && this.#expiresAtMs >= this.#now();
    return { epoch: this.#epoch, holder: this.#holder === null ? null : { ...this.#holder }, live };
  }
}
