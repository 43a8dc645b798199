/**
 * One of the worker's sessions and what belongs to it alone: the attempts it
 * assigned (or was handed), the results it owes, its share of the worker's
 * capacity, and the registration in force. An unsharded worker has exactly
 * one; a worker of a sharded coordinator has one per shard leader's worker
 * address (shard-map.ts), all of them running their attempts in the
 * worker's one task pool.
 */
import type { HeldAttempt } from '../protocol/messages.js';
import type { Feature } from '../protocol/features.js';
import type { FramedConnection } from '../net/framed-connection.js';
import type { Attempt, AttemptSession } from './attempt.js';
import type { ResultIds } from './results.js';
import type { Share } from './shard-map.js';
import type { TaskOutcome } from './task-pool.js';
import type { WorkerMode, WorkerSession } from './worker-session.js';

/** An orphan's outcome that no connection of its session could take when it ended. */
export interface LateResult extends ResultIds {
  readonly outcome: TaskOutcome;
}

/** A session as `Worker.sessions` shows it. */
export interface SessionView {
  /** The coordinator it talks to (or dials next), as `host:port`. */
  readonly coordinator: string;
  /** The shards it serves (a sharded coordinator's); empty for an unsharded one. */
  readonly shards: readonly number[];
  /** Its share of the worker's capacity and prefetch. */
  readonly capacity: number;
  readonly prefetch: number;
  readonly mode: WorkerMode;
  /** Attempts it holds: running, waiting for a slot, or orphaned. */
  readonly attempts: number;
  /** Its address leads none of the worker's shards now: it takes nothing new and closes once its attempts reported. */
  readonly closing: boolean;
}

export class SessionLink implements AttemptSession {
  /** The session in force: its connection is where its attempts report. */
  session: WorkerSession;
  /**
   * A session registering in its place, with a new share, while it still
   * serves (the coordinator then hands the attempts the registration lists
   * over from the one it replaces); null when none.
   */
  successor: WorkerSession | null = null;
  /** The session made last for it: a refusal from an earlier one is the replacement it asked for. */
  latest: WorkerSession;
  /** Its worker address in the shard map; null for the worker's own addresses (`coordinatorHost`). */
  readonly address: string | null;
  /** The shards it serves (empty unsharded). */
  shards: readonly number[] = [];
  /** Its share of the worker's capacity and prefetch, as the next registration says it. */
  share: Share;
  /** What the registration sent last said (the coordinator holds it to that); null before one. */
  registeredShare: Share | null = null;
  /** The queues the registration sent last named (null: every queue). */
  registeredQueues: readonly string[] | null = null;
  /** Its attempts (running, waiting, orphaned), a subset of the worker's. */
  readonly attempts = new Set<Attempt<SessionLink>>();
  /** Outcomes of its orphans that finished while it was not registered. */
  lateResults: LateResult[] = [];
  /** Held attempts its registration had no room for: sent in HELD_ATTEMPTS once registered. */
  heldToSend: HeldAttempt[] | null = null;
  /** Leads none of the worker's shards now: takes nothing new, closes once its attempts reported. */
  retiring = false;

  /** `newSession` makes its sessions (this one's first, and any successor). */
  constructor(
    address: string | null,
    share: Share,
    newSession: (link: SessionLink) => WorkerSession,
  ) {
    this.address = address;
    this.share = share;
    this.session = newSession(this);
    this.latest = this.session;
  }

  get connection(): FramedConnection | null {
    return this.session.connection;
  }

  get features(): ReadonlySet<Feature> {
    return this.session.features;
  }

  get registered(): boolean {
    return this.session.registered;
  }

  /** Attempts it may hold under its registration: its slots, and its prefetch where offered. */
  window(maxCapacity: number): number {
    const { capacity, prefetch } = this.registeredShare ?? this.share;
    const features = this.features;
    const slots = capacity > maxCapacity && !features.has('slots') ? maxCapacity : capacity;
    return slots + (features.has('prefetch') ? prefetch : 0);
  }

  view(): SessionView {
    return {
      coordinator: this.session.coordinator,
      shards: [...this.shards],
      capacity: this.share.capacity,
      prefetch: this.share.prefetch,
      mode: this.session.mode,
      attempts: this.attempts.size,
      closing: this.retiring,
    };
  }
}
