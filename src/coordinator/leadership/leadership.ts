/**
 * Leadership of one coordinator among several sharing a database: when to
 * try to take the lease, when to renew it, and when to give up. A pure state
 * machine: time comes in as `nowMs` (a monotonic clock), the lease
 * operations go out as actions, and their outcomes come back as inputs. The
 * shell (leader-election.ts) runs the timer and the database calls; tests
 * and the simulation drive it by hand.
 *
 * Modes:
 *   standby  not leading; tries to take the lease every `renewIntervalMs`
 *            (it succeeds only once the holder's lease expired or was released)
 *   leader   holds the lease of `epoch`; renews it every `renewIntervalMs`.
 *            Leadership is valid until `validUntilMs` = send time of the last
 *            successful renewal (or acquisition) + `ttlMs` - `safetyMs`: the
 *            database set the expiry at its own clock *after* that send, so
 *            a leader gives up before any standby can take over.
 *   stopped  after stop(); does nothing more.
 *
 * A leader steps down at once (action `stepDown`) when its validity passes
 * without a renewal, when a renewal finds the epoch taken, or when the shell
 * says a fenced write was refused or its term failed. After stepping down it
 * is a standby like any other, eligible to lead again under a new epoch.
 * At most one lease operation is in flight at a time.
 */
import type { AcquireResult, LeaseHolder } from '../../store/lease.js';

export interface LeadershipConfig {
  /** How long a lease lasts after each renewal, in ms (database clock). */
  ttlMs: number;
  /** A leader renews, and a standby tries to take over, this often, in ms. */
  renewIntervalMs: number;
}

export type LeadershipAction =
  /** Try to take the lease (free or expired). */
  | { kind: 'acquire' }
  /** Extend the lease of `epoch`. */
  | { kind: 'renew'; epoch: number }
  /** The lease of `epoch` is ours: recover and serve under it. */
  | { kind: 'lead'; epoch: number }
  /** Stop leading at once: commit nothing more under `epoch`, drop connections. */
  | { kind: 'stepDown'; epoch: number; reason: string }
  /** Give the lease of `epoch` up so that a standby can take over now. */
  | { kind: 'release'; epoch: number };

export type LeadershipMode = 'standby' | 'leader' | 'stopped';

/** Why a leader steps down when the shell tells it to. */
export type LossCause = 'fenced' | 'failed';

/**
 * Whether a standby may try to take the lease now (sharded coordinators:
 * one that leads its share of the shards already leaves the rest to others).
 * Without one a standby always tries.
 */
export interface AcquireGate {
  mayAcquire(): boolean;
}

export class Leadership {
  readonly #config: LeadershipConfig;
  /** A leader's lease is trusted for this much less than its ttl, in ms. */
  readonly #safetyMs: number;
  #mode: LeadershipMode = 'standby';
  #epoch: number | null = null;
  #validUntilMs = 0;
  #nextOpAtMs = 0;
  #inFlight: { op: 'acquire' | 'renew'; sentAtMs: number; epoch: number | null } | null = null;
  /** The leader as last seen: ourselves while leading, the lease holder otherwise. */
  #leader: LeaseHolder | null = null;
  #leaderEpoch: number | null = null;
  readonly #me: LeaseHolder;
  readonly #gate: AcquireGate | null;
  /** The gate held this standby back at its last turn (see {@link tryNow}). */
  #heldBack = false;

  constructor(config: LeadershipConfig, me: LeaseHolder, gate: AcquireGate | null = null) {
    if (config.renewIntervalMs * 2 > config.ttlMs) {
      throw new Error(
        `lease renew interval ${config.renewIntervalMs} ms must be at most half the ttl ${config.ttlMs} ms`,
      );
    }
    this.#config = config;
    this.#safetyMs = Math.floor(config.ttlMs / 5);
    this.#me = me;
    this.#gate = gate;
  }

  /** This coordinator, as it names itself in the lease. */
  get self(): LeaseHolder {
    return this.#me;
  }

  get config(): Readonly<LeadershipConfig> {
    return this.#config;
  }

  get mode(): LeadershipMode {
    return this.#mode;
  }

  /** The epoch we lead under; null unless leading. */
  get epoch(): number | null {
    return this.#mode === 'leader' ? this.#epoch : null;
  }

  /** Who leads, as far as we know (ourselves while leading); null when unknown. */
  get leader(): LeaseHolder | null {
    return this.#leader;
  }

  /** The epoch of {@link leader}; null when unknown. */
  get leaderEpoch(): number | null {
    return this.#leaderEpoch;
  }

  /** True while a try to take the lease is in flight. */
  get acquiring(): boolean {
    return this.#inFlight?.op === 'acquire';
  }

  /** Until when a leader trusts its lease (the clock of {@link tick}); null unless leading. */
  get trustedUntilMs(): number | null {
    return this.#mode === 'leader' ? this.#validUntilMs : null;
  }

  /** True while leading and the lease is trusted at `nowMs`. */
  leadsAt(nowMs: number): boolean {
    return this.#mode === 'leader' && nowMs < this.#validUntilMs;
  }

  /**
   * When {@link tick} next has something to do, in ms (monotonic). While an
   * operation is in flight nothing is due before its outcome comes in (the
   * shell asks again then), but a leader's validity running out: a slow
   * answer must not leave the shell's timer firing at once, again and again.
   */
  nextWakeAtMs(): number {
    if (this.#mode === 'stopped') return Number.POSITIVE_INFINITY;
    const nextOpAtMs = this.#inFlight === null ? this.#nextOpAtMs : Number.POSITIVE_INFINITY;
    if (this.#mode === 'leader') return Math.min(nextOpAtMs, this.#validUntilMs);
    return nextOpAtMs;
  }

  /** Time passed: renew, try to take over, or give up an expired leadership. */
  tick(nowMs: number): LeadershipAction[] {
    if (this.#mode === 'leader' && nowMs >= this.#validUntilMs) {
      return this.#stepDown(nowMs, 'lease not renewed in time', false);
    }
    if (this.#mode === 'stopped' || this.#inFlight !== null || nowMs < this.#nextOpAtMs) return [];
    this.#nextOpAtMs = nowMs + this.#config.renewIntervalMs;
    this.#heldBack = this.#mode === 'standby' && this.#gate !== null && !this.#gate.mayAcquire();
    if (this.#heldBack) return [];
    if (this.#mode === 'leader') {
      const epoch = this.#epoch as number;
      this.#inFlight = { op: 'renew', sentAtMs: nowMs, epoch };
      return [{ kind: 'renew', epoch }];
    }
    this.#inFlight = { op: 'acquire', sentAtMs: nowMs, epoch: null };
    return [{ kind: 'acquire' }];
  }

  /**
   * A standby its gate held back at its last turn takes a turn now instead
   * of at its next one, asking the gate again: a sharded coordinator's round
   * just saw its shard free, or its share grow. Without this a shard a
   * coordinator gave up would wait up to a renew interval more for a
   * standby's turn after the round that saw it free. Does nothing otherwise.
   */
  tryNow(nowMs: number): LeadershipAction[] {
    if (this.#mode !== 'standby' || !this.#heldBack || this.#inFlight !== null) return [];
    this.#nextOpAtMs = nowMs;
    return this.tick(nowMs);
  }

  /** The outcome of the `acquire` in flight. */
  acquireDone(result: AcquireResult, nowMs: number): LeadershipAction[] {
    const sent = this.#settle('acquire');
    if (sent === null || this.#mode !== 'standby') return [];
    if (!result.acquired) {
      const { current } = result;
      this.#leader = current.live ? current.holder : null;
      this.#leaderEpoch = current.live ? current.epoch : null;
      return [];
    }
    this.#nextOpAtMs = nowMs + this.#config.renewIntervalMs;
    const validUntilMs = sent.sentAtMs + this.#config.ttlMs - this.#safetyMs;
    if (nowMs >= validUntilMs) {
      // The answer took so long that the lease may be gone already.
      return [{ kind: 'release', epoch: result.epoch }];
    }
    this.#mode = 'leader';
    this.#epoch = result.epoch;
    this.#leader = this.#me;
    this.#leaderEpoch = result.epoch;
    this.#validUntilMs = validUntilMs;
    return [{ kind: 'lead', epoch: result.epoch }];
  }

  /** The outcome of the `renew` in flight: false = the epoch is no longer ours. */
  renewDone(renewed: boolean, nowMs: number): LeadershipAction[] {
    const sent = this.#settle('renew');
    if (sent === null || this.#mode !== 'leader' || sent.epoch !== this.#epoch) return [];
    if (!renewed) return this.#stepDown(nowMs, 'lease taken over', false);
    this.#validUntilMs = Math.max(
      this.#validUntilMs,
      sent.sentAtMs + this.#config.ttlMs - this.#safetyMs,
    );
    return nowMs >= this.#validUntilMs ? this.#stepDown(nowMs, 'renewed too late', false) : [];
  }

  /** The lease operation in flight failed (database unreachable, timeout): try again later. */
  operationFailed(nowMs: number): LeadershipAction[] {
    this.#inFlight = null;
    return this.tick(nowMs);
  }

  /** The shell saw the term end: a fenced write (`fenced`) or a failed one (`failed`). */
  lost(cause: LossCause, nowMs: number): LeadershipAction[] {
    if (this.#mode !== 'leader') return [];
    const reason = cause === 'fenced' ? 'a write was refused: epoch superseded' : 'term failed';
    return this.#stepDown(nowMs, reason, cause === 'failed');
  }

  /**
   * Hands the lease over (a sharded coordinator that leads more than its
   * share): a leader steps down and releases it, so that another takes it
   * at its next try; a standby again like any other.
   */
  handOver(nowMs: number): LeadershipAction[] {
    if (this.#mode !== 'leader') return [];
    return this.#stepDown(nowMs, 'handing the lease over to another coordinator', true);
  }

  /** A clean stop: no more operations; a leader gives its lease up. */
  stop(): LeadershipAction[] {
    const epoch = this.#mode === 'leader' ? this.#epoch : null;
    this.#mode = 'stopped';
    this.#inFlight = null;
    if (epoch === null) return [];
    return [
      { kind: 'stepDown', epoch, reason: 'stopping' },
      { kind: 'release', epoch },
    ];
  }

  #settle(op: 'acquire' | 'renew'): { sentAtMs: number; epoch: number | null } | null {
    const inFlight = this.#inFlight;
    if (inFlight?.op !== op) return null;
    this.#inFlight = null;
    return inFlight;
  }

  #stepDown(nowMs: number, reason: string, release: boolean): LeadershipAction[] {
    const epoch = this.#epoch as number;
    this.#mode = 'standby';
    this.#epoch = null;
    this.#leader = null;
    this.#leaderEpoch = null;
    this.#validUntilMs = 0;
    // Not at once: give the others a turn first.
    this.#nextOpAtMs = nowMs + this.#config.renewIntervalMs;
    const actions: LeadershipAction[] = [{ kind: 'stepDown', epoch, reason }];
    if (release) actions.push({ kind: 'release', epoch });
    return actions;
  }
}
