/**
 * Following the leader among several coordinator addresses
 * (`h1[:p1],h2[:p2],…`): one implementation for the worker and the client.
 *
 * {@link LeaderFollower.follow} tries one address after another — the leader
 * a standby named first, else the next in the {@link LeaderRing} — until one
 * serves. After a dial that failed or a NOT_LEADER it moves straight on; it
 * pauses only when no leader was named and either a whole round failed or a
 * connection that served ended ({@link LeaderRing.shouldPause}). Pauses grow
 * from `firstMs` to `longestMs` (the worker keeps them fixed at its
 * reconnect delay; the client grows them from 50 ms to 1 s), never past a
 * deadline, and an abort signal cuts one short.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { formatHostPort, type HostPort } from './address.js';
import { LeaderRing } from './leader-ring.js';

/** What one try at an address came to. */
export type TryOutcome<T> =
  /** It served: stay with it. */
  | { readonly kind: 'served'; readonly value: T }
  /** A standby: on to the leader it named, or to the next address. */
  | { readonly kind: 'notLeader'; readonly leader: string | null; readonly error: unknown }
  /** Unreachable, or it ended before it served. */
  | { readonly kind: 'failed'; readonly error: unknown };

/** A try that did not serve. */
export type Miss = Exclude<TryOutcome<never>, { kind: 'served' }>;

/** How long to wait between rounds: from `firstMs`, doubling, up to `longestMs`. */
export interface PausePolicy {
  readonly firstMs: number;
  readonly longestMs: number;
}

export interface FollowOptions {
  readonly pause: PausePolicy;
  /** After a miss: go on? (Default: always.) */
  readonly retry?: (miss: Miss) => boolean;
  /** Give up once this passes (`performance.now()` ms); default: never. */
  readonly deadlineMs?: number;
  /** Cuts a pause short (and the caller's `retry` then says whether to go on). */
  readonly signal?: AbortSignal;
}

/** A pause that grows after each use (one per call of follow, or per request). */
export class GrowingPause {
  readonly #policy: PausePolicy;
  #nextMs: number;

  constructor(policy: PausePolicy) {
    this.#policy = policy;
    this.#nextMs = policy.firstMs;
  }

  /** Waits the current pause (at most `maxMs`), then grows it. Never rejects. */
  async wait(maxMs = Number.POSITIVE_INFINITY, signal?: AbortSignal): Promise<void> {
    const delayMs = Math.max(0, Math.min(this.#nextMs, maxMs));
    this.#nextMs = Math.min(this.#nextMs * 2, this.#policy.longestMs);
    try {
      await sleep(delayMs, undefined, signal === undefined ? {} : { signal });
    } catch {
      // Aborted: the caller looks at why.
    }
  }
}

export class LeaderFollower {
  /** More than one address: a failure moves on instead of being final. */
  readonly several: boolean;
  readonly #ring: LeaderRing;
  readonly #defaultPort: number;
  #current: HostPort;

  /** `defaultPort`: the port of a leader named without one. */
  constructor(addresses: readonly HostPort[], defaultPort: number) {
    this.#ring = new LeaderRing(addresses);
    this.several = addresses.length > 1;
    this.#defaultPort = defaultPort;
    this.#current = addresses[0] as HostPort;
  }

  /** Every configured address, as `host:port` (for messages). */
  describe(): string {
    return this.#ring.describe();
  }

  /** The address tried last (the leader, once one served). */
  get current(): HostPort {
    return this.#current;
  }

  /** {@link current} as `host:port`. */
  get address(): string {
    return formatHostPort(this.#current);
  }

  /** The address to try now. */
  next(): HostPort {
    this.#current = this.#ring.next();
    return this.#current;
  }

  /** The last address served: stay with it. */
  served(): void {
    this.#ring.succeeded();
  }

  /** The last address is a standby; `leader` is the `host:port` it named, or null. */
  notLeader(leader: string | null): void {
    this.#ring.notLeader(leader, this.#defaultPort);
  }

  /** The last address failed before it served. */
  failed(): void {
    this.#ring.failed();
  }

  /** True when the next try should wait first (see the module comment). */
  shouldPause(): boolean {
    return this.#ring.shouldPause();
  }

  /** Records a miss as what it was. */
  missed(miss: Miss): void {
    if (miss.kind === 'notLeader') this.notLeader(miss.leader);
    else this.failed();
  }

  /**
   * Tries `attempt` on one address after another until one serves (resolves
   * with that outcome), or until `retry` or the deadline says to stop
   * (resolves with the last miss). Misses are recorded here; whether the
   * address really serves is the caller's to confirm with {@link served}
   * (the client waits for a reply that is not NOT_LEADER, the worker for
   * WORKER_REGISTERED). An exception of `attempt` propagates.
   */
  async follow<T>(
    attempt: (address: HostPort) => Promise<TryOutcome<T>>,
    options: FollowOptions,
  ): Promise<TryOutcome<T>> {
    const pause = new GrowingPause(options.pause);
    const deadlineMs = options.deadlineMs ?? Number.POSITIVE_INFINITY;
    for (;;) {
      const outcome = await attempt(this.next());
      if (outcome.kind === 'served') return outcome;
      this.missed(outcome);
      const leftMs = deadlineMs - performance.now();
      if (options.retry?.(outcome) === false || leftMs <= 0) return outcome;
      if (this.shouldPause()) await pause.wait(leftMs, options.signal);
      if (options.retry?.(outcome) === false) return outcome;
    }
  }
}
