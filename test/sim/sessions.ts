/**
 * Worker-session checks against a model built from inputs and events:
 *
 * - a worker is lost for a heartbeat timeout only if it really was silent for
 *   longer than the timeout, and after any tick no session has been silent
 *   that long (only HEARTBEAT and registration count as signs of life); a
 *   gap between ticks of more than four sweep periods (at least 1 s) is a
 *   stall of the coordinator itself, reported as such, and the stalled time
 *   counts as nobody's silence;
 * - a draining session gets no new assignments, nor one still listing the
 *   attempts it holds (`moreHeld`, until its list ends); a registration is
 *   valid (a capacity of at most 10,000 slots) and replaces a live session
 *   of the same worker only after losing it;
 * - once the end of a connection has been read (`workerEnding`), nothing is
 *   assigned to its session and no registration read from it is accepted;
 * - leases are kept for a worker without a session only by a recovery (the
 *   attempts a restart found running) or when its session ended right after
 *   a stall of the coordinator (the tick that reports the stall has not run
 *   yet, or ran at most a stall threshold ago), and never for a draining one;
 * - after every step the core's sessions are exactly the model's (same
 *   workers, connections, draining and ending flags).
 */
import type { CoreConfig } from '../../src/coordinator/core/types.js';
import { MAX_SLOTS } from '../../src/protocol/limits.js';
import type { CoreInspection } from '../../src/coordinator/core/core.js';
import type { Judge } from './violation.js';
import type { HandledInput } from './world.js';

interface SessionModel {
  workerId: string;
  connId: number;
  lastHeartbeatMs: number;
  draining: boolean;
  ending: boolean;
  /** Registered with `moreHeld`, and its held list has not ended. */
  listingHeld: boolean;
}

export class SessionChecks {
  /** Live sessions by worker id. */
  readonly #sessions = new Map<string, SessionModel>();
  readonly #judge: Judge;
  readonly #config: CoreConfig;
  readonly #now: () => number;
  /** When the core last handled a tick (or started, for the first one). */
  #lastTickMs: number | null = null;
  /** When a tick last reported a stall. */
  #stallSeenAtMs: number | null = null;
  /** Connections whose end the core was told it has read. */
  readonly #endingConns = new Set<number>();

  constructor(judge: Judge, config: CoreConfig, now: () => number) {
    this.#judge = judge;
    this.#config = config;
    this.#now = now;
  }

  onHandled(h: HandledInput): void {
    const now = this.#now();
    const input = h.input;
    if (input.kind === 'recovery') this.#lastTickMs = now;
    if (input.kind === 'tick') this.beforeTick(h);
    const stalled = this.#recentlyStalled(now);
    if (input.kind === 'workerEnding') this.#ending(input.connId);
    if (input.kind === 'workerClosed') this.#endingConns.delete(input.connId);
    if (input.kind === 'workerMessage' && !h.linkClosedByCore && h.linkWorkerId !== null) {
      const session = this.#sessions.get(h.linkWorkerId);
      if (session !== undefined && session.connId === input.connId) {
        if (input.msg.type === 'HEARTBEAT') session.lastHeartbeatMs = now;
        if (input.msg.type === 'WORKER_DRAINING') session.draining = true;
      }
    }
    /** Sessions lost by this input, and whether they were draining. */
    const lostDraining = new Map<string, boolean>();
    for (const effect of h.effects) {
      if (effect.kind !== 'event') continue;
      const event = effect.event;
      if (event.type === 'worker.registered') {
        const previous = this.#sessions.get(event.workerId);
        this.#judge.check(
          previous === undefined &&
            event.workerId.trim().length > 0 &&
            event.capacity >= 1 &&
            event.capacity <= MAX_SLOTS &&
            !this.#endingConns.has(event.connId),
          () =>
            `worker ${JSON.stringify(event.workerId)} (capacity ${event.capacity}) registered on ${event.connId} (end read: ${this.#endingConns.has(event.connId)}); live session before: ${previous?.connId ?? 'none'}`,
        );
        this.#sessions.set(event.workerId, {
          workerId: event.workerId,
          connId: event.connId,
          lastHeartbeatMs: now,
          draining: false,
          ending: false,
          listingHeld:
            input.kind === 'workerMessage' &&
            input.msg.type === 'WORKER_REGISTER' &&
            input.msg.moreHeld === true,
        });
      } else if (event.type === 'worker.heldListEnded') {
        const session = this.#sessions.get(event.workerId);
        this.#judge.check(
          session?.connId === event.connId && session.listingHeld,
          () => `held list of ${event.workerId} on ${event.connId} ended, but none was under way`,
        );
        if (session !== undefined) session.listingHeld = false;
      } else if (event.type === 'worker.lost') {
        lostDraining.set(event.workerId, this.#sessions.get(event.workerId)?.draining === true);
        this.#lost(event.workerId, event.cause, event.reason, now);
      } else if (event.type === 'worker.leasesKept') {
        // A restart keeps the attempts it found running; otherwise only a stall of our own does.
        this.#judge.check(
          input.kind === 'recovery' || (stalled && lostDraining.get(event.workerId) === false),
          () =>
            `leases of ${event.workerId} kept (${event.reason}) at ${now}, but the coordinator had not just stalled (last tick ${this.#lastTickMs}, last stall ${this.#stallSeenAtMs})`,
        );
      } else if (event.type === 'job.assigned') {
        const session = this.#sessions.get(event.workerId);
        this.#judge.check(
          session !== undefined && !session.draining && !session.ending && !session.listingHeld,
          () =>
            `job ${event.jobId} assigned to ${session === undefined ? 'unknown' : session.draining ? 'draining' : session.ending ? 'ending' : 'still listing'} worker ${event.workerId}`,
        );
      }
    }
    if (input.kind === 'tick') this.#afterTick(now);
  }

  /** Before a tick's events: the stall the core must report, applied to the model. */
  beforeTick(h: HandledInput): void {
    const now = this.#now();
    const sweepMs = this.#config.sweepIntervalMs;
    const gapMs = this.#lastTickMs === null ? 0 : now - this.#lastTickMs;
    const stalledMs = gapMs > Math.max(4 * sweepMs, 1_000) ? gapMs - sweepMs : 0;
    const reported = h.effects.flatMap((e) =>
      e.kind === 'event' && e.event.type === 'coordinator.stalled' ? [e.event.stalledMs] : [],
    );
    this.#judge.check(
      reported.length === (stalledMs > 0 ? 1 : 0) && (reported[0] ?? 0) === stalledMs,
      () =>
        `tick after ${gapMs} ms reported stalls ${JSON.stringify(reported)}, expected ${stalledMs}`,
    );
    this.#lastTickMs = now;
    if (stalledMs > 0) this.#stallSeenAtMs = now;
    for (const session of this.#sessions.values()) {
      session.lastHeartbeatMs = Math.min(now, session.lastHeartbeatMs + stalledMs);
    }
  }

  /** The coordinator's loop just stalled: its tick has not noticed yet, or did so lately. */
  #recentlyStalled(now: number): boolean {
    const threshold = Math.max(4 * this.#config.sweepIntervalMs, 1_000);
    if (this.#lastTickMs !== null && now - this.#lastTickMs > threshold) return true;
    return this.#stallSeenAtMs !== null && now - this.#stallSeenAtMs <= threshold;
  }

  #ending(connId: number): void {
    this.#endingConns.add(connId);
    for (const session of this.#sessions.values()) {
      if (session.connId === connId) session.ending = true;
    }
  }

  /** Every connection died with the process. */
  onCrash(): void {
    this.#sessions.clear();
    this.#endingConns.clear();
    this.#lastTickMs = null;
    this.#stallSeenAtMs = null;
  }

  /** The core's sessions are the model's. */
  checkAgainst(workers: CoreInspection['workers']): void {
    const judge = this.#judge;
    judge.check(
      workers.length === this.#sessions.size,
      () => `the core has ${workers.length} sessions, the model ${this.#sessions.size}`,
    );
    for (const w of workers) {
      const model = this.#sessions.get(w.workerId);
      judge.check(
        model !== undefined &&
          model.connId === w.connId &&
          model.draining === w.draining &&
          model.ending === w.ending &&
          model.listingHeld === w.listingHeld,
        () =>
          `session ${w.workerId} on ${w.connId} (draining ${w.draining}, ending ${w.ending}, listing ${w.listingHeld}) is not the model's ${JSON.stringify(model)}`,
      );
    }
  }

  #lost(workerId: string, cause: string, reason: string, now: number): void {
    const session = this.#sessions.get(workerId);
    this.#judge.check(session !== undefined, () => `unknown worker ${workerId} lost (${reason})`);
    if (cause === 'heartbeat_timeout') {
      const silentMs = now - (session as SessionModel).lastHeartbeatMs;
      this.#judge.check(
        silentMs > this.#config.heartbeatTimeoutMs,
        () =>
          `worker ${workerId} lost for a heartbeat timeout after only ${silentMs} ms of silence`,
      );
    }
    this.#sessions.delete(workerId);
  }

  #afterTick(now: number): void {
    for (const session of this.#sessions.values()) {
      const silentMs = now - session.lastHeartbeatMs;
      if (silentMs > this.#config.heartbeatTimeoutMs) {
        throw this.#judge.violation(
          `after a tick, worker ${session.workerId} is still live after ${silentMs} ms of silence`,
        );
      }
    }
  }
}
