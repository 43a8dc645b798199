/**
 * The decisions of a sharded coordinator's ownership protocol: which
 * standby elections may try to take their shard's lease, and which led
 * shards to hand over. Pure (no clock, no database): the process glue
 * (sharded-coordinator.ts) and the simulation (test/sim/shard-ownership.ts)
 * run the very same code, so what the simulation checks is what runs.
 *
 * A round, every `renewIntervalMs`:
 *
 *   1. the glue heartbeats the membership and reads every shard's lease,
 *      and hands both to {@link OwnershipRound.observe} (a lease it could
 *      not read is `null`: what was seen of it before stays);
 *   2. it asks {@link OwnershipRound.decide}, hands over the shards
 *      `handOver` names (`Leadership.handOver`), then lets the standbys
 *      `tryNow` names try at once (`Leadership.tryNow`): a shard seen free
 *      is tried now, not up to a renew interval later at its standby's turn.
 *
 * When a try fails, its answer names the lease's holder (LeaderElection's
 * `acquireFailed` hook): the glue hands that view to
 * {@link OwnershipRound.leaseSeen} and lets the standbys
 * {@link OwnershipRound.admitted} names try now (`tryNow`), so the try it
 * freed goes to another free shard at once.
 *
 * Between rounds each shard's `Leadership` ticks on its own timer and asks
 * its gate ({@link OwnershipRound.gate}) whether to try: the gate answers
 * from the elections as they are at that moment (leading, acquiring), so
 * the tries in flight at once never exceed what this process is short of
 * its share, however many standbys tick together.
 *
 * Which standbys may try ({@link OwnershipRound.mayAcquire}): only those of
 * shards last seen free, and of those the first ones in this process's
 * order of preference, as many as it is short of its share (or any shard
 * free for `orphanAfterMs`, see {@link ShardShare}).
 */
import type { LeaseView } from '../../store/lease.js';
import type { AcquireGate, LeadershipMode } from '../leadership/leadership.js';
import type { ShardShare } from '../leadership/shard-share.js';

/** What the round needs of one shard's election (a `Leadership` is one). */
export interface ShardElection {
  readonly mode: LeadershipMode;
  /** True while a try to take the lease is in flight. */
  readonly acquiring: boolean;
}

/** What a round decided. */
export interface RoundDecision {
  /** Shards to hand over now, highest-numbered first (as many as the share says). */
  readonly handOver: readonly number[];
  /** Standbys (by shard) the gate lets try now: `tryNow` them after the hand-overs. */
  readonly tryNow: readonly number[];
  /** Shards led here (elections in mode `leader`). */
  readonly led: number;
  /** Tries to take a lease in flight here. */
  readonly acquiring: number;
}

/** What was seen of one shard's lease. */
interface SeenLease {
  /** A live holder (anyone, this process included) at the last read. */
  live: boolean;
  /** Since when (ms, the glue's clock) it has been seen without a live holder; null while held. */
  freeSinceMs: number | null;
}

export class OwnershipRound {
  readonly share: ShardShare;
  readonly #seen: (SeenLease | null)[];

  constructor(share: ShardShare) {
    this.share = share;
    this.#seen = Array.from({ length: share.shards }, () => null);
  }

  /**
   * A round's reads at `nowMs`: the live members (sorted or not) and each
   * shard's lease by shard number (`null`: not read this time).
   */
  observe(members: readonly string[], leases: readonly (LeaseView | null)[], nowMs: number): void {
    if (leases.length !== this.share.shards) {
      throw new RangeError(`${leases.length} leases read for ${this.share.shards} shards`);
    }
    this.share.membersSeen(members);
    leases.forEach((view, shard) => {
      if (view !== null) this.leaseSeen(shard, view, nowMs);
    });
  }

  /** One lease as read at `nowMs`, by a round or in the answer to a failed try. */
  leaseSeen(shard: number, view: LeaseView, nowMs: number): void {
    const before = this.#seen[shard];
    if (before === undefined) throw new RangeError(`no shard ${shard} of ${this.share.shards}`);
    this.#seen[shard] = view.live
      ? { live: true, freeSinceMs: null }
      : { live: false, freeSinceMs: before?.freeSinceMs ?? nowMs };
  }

  /** How long `shard` has been seen without a live leader at `nowMs` (0: led, or not known). */
  freeForMs(shard: number, nowMs: number): number {
    const since = this.#seen[shard]?.freeSinceMs ?? null;
    return since === null ? 0 : Math.max(0, nowMs - since);
  }

  /**
   * May the standby election of `shard` try to take its lease now, given
   * every shard's election here (indexed by shard)?
   */
  mayAcquire(shard: number, elections: readonly ShardElection[], nowMs: number): boolean {
    const election = elections[shard];
    if (election?.mode !== 'standby' || election.acquiring || !this.#seenFree(shard)) return false;
    return this.admitted(elections, nowMs).includes(shard);
  }

  /**
   * The standbys (by shard, in this process's order of preference) that may
   * try to take their lease now. Only shards the last read saw free: before
   * the first round the share is not known (a coordinator that starts
   * would take every free shard as if alone), and a try at a live lease is
   * bound to fail while, in flight, it holds back the tries at free ones.
   * Of those, a shard free for `orphanAfterMs`, and the first ones in order
   * of preference, as many as this process is short of its share
   * ({@link ShardShare.mayAcquire}).
   */
  admitted(elections: readonly ShardElection[], nowMs: number): number[] {
    const { led, acquiring } = count(elections);
    const candidates: number[] = [];
    elections.forEach((election, shard) => {
      if (election.mode === 'standby' && !election.acquiring && this.#seenFree(shard)) {
        candidates.push(shard);
      }
    });
    const order = this.#preference(elections.length);
    candidates.sort((a, b) => order(a) - order(b));
    let tries = acquiring;
    return candidates.filter((shard) => {
      if (!this.share.mayAcquire(led, tries, this.freeForMs(shard, nowMs))) return false;
      if (this.freeForMs(shard, nowMs) < this.share.orphanAfterMs) tries++;
      return true;
    });
  }

  /** The shards to hand over now: the highest-numbered led ones, as many as the share says. */
  toHandOver(elections: readonly ShardElection[]): number[] {
    const { led } = count(elections);
    let left = this.share.toHandOver(led);
    const out: number[] = [];
    for (let shard = elections.length - 1; shard >= 0 && left > 0; shard--) {
      if (elections[shard]?.mode !== 'leader') continue;
      out.push(shard);
      left--;
    }
    return out;
  }

  /**
   * The round's decisions at `nowMs` (after {@link observe}). The standbys
   * to try are those admitted once the hand-overs are done: a process that
   * hands over is at its share after them, so it tries only orphans.
   */
  decide(elections: readonly ShardElection[], nowMs: number): RoundDecision {
    const { led, acquiring } = count(elections);
    const handOver = this.toHandOver(elections);
    const after: ShardElection[] = elections.map((election, shard) =>
      handOver.includes(shard) ? { mode: 'standby', acquiring: false } : election,
    );
    // A shard handed over is free but for others: not tried here before it is seen free.
    return {
      handOver,
      tryNow: this.admitted(after, nowMs).filter((shard) => !handOver.includes(shard)),
      led,
      acquiring,
    };
  }

  /**
   * The gate of `shard`'s election: answers {@link mayAcquire} when asked,
   * from the elections and the clock as they are then. `elections` is a
   * function because the gates are made before the elections that use them.
   */
  gate(shard: number, elections: () => readonly ShardElection[], now: () => number): AcquireGate {
    return { mayAcquire: () => this.mayAcquire(shard, elections(), now()) };
  }

  #seenFree(shard: number): boolean {
    const seen = this.#seen[shard] ?? null;
    return seen !== null && !seen.live;
  }

  /**
   * This process's order of preference among free shards, as a sort key:
   * first its own class, the shards `k` with `k mod members` equal to its
   * rank among the members, lowest first; then the next ranks' classes,
   * each highest first. The members know the same list, so when several are
   * short of their share at once (a coordinator stopped), each first tries
   * shards no other tries first, and one that needs more than its class
   * has free takes what the class's owner would take last: they do not all
   * race for the lowest free shards, most of them losing a round.
   */
  #preference(shards: number): (shard: number) => number {
    const members = this.share.members.length;
    const rank = this.share.members.indexOf(this.share.self);
    return (shard) => {
      const distance = (((shard - rank) % members) + members) % members;
      return distance * shards + (distance === 0 ? shard : shards - 1 - shard);
    };
  }
}

function count(elections: readonly ShardElection[]): { led: number; acquiring: number } {
  let led = 0;
  let acquiring = 0;
  for (const election of elections) {
    if (election.mode === 'leader') led++;
    else if (election.acquiring) acquiring++;
  }
  return { led, acquiring };
}
