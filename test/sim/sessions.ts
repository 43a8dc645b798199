/**
 * Worker-session checks against a model built from inputs and events:
 *
 * - a worker is lost for a heartbeat timeout only if it really was silent for
 *   longer than the timeout, and after any tick no session has been silent
 *   that long (only HEARTBEAT and registration count as signs of life); a
 *   gap between ticks of more than four sweep periods (at least 1 s) is a
 *   stall of the coordinator itself, reported as such, and the stalled time
 *   counts as nobody's silence;
 * - a draining session gets no new assignments; a registration is valid and
 *   replaces a live session of the same worker only after losing it;
 * - after every step the core's sessions are exactly the model's (same
 *   workers, connections and draining flags).
 */
import type { CoreConfig } from '../../src/coordinator/core/types.js';
import type { CoreInspection } from '../../src/coordinator/core/core.js';
import type { Judge } from './violation.js';
import type { HandledInput } from './world.js';

interface SessionModel {
  workerId: string;
  connId: number;
  lastHeartbeatMs: number;
  draining: boolean;
}

export class SessionChecks {
  /** Live sessions by worker id. */
  readonly #sessions = new Map<string, SessionModel>();
  readonly #judge: Judge;
  readonly #config: CoreConfig;
  readonly #now: () => number;
  /** When the core last handled a tick (or started, for the first one). */
  #lastTickMs: number | null = null;

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
    if (input.kind === 'workerMessage' && !h.linkClosedByCore && h.linkWorkerId !== null) {
      const session = this.#sessions.get(h.linkWorkerId);
      if (session !== undefined && session.connId === input.connId) {
        if (input.msg.type === 'HEARTBEAT') session.lastHeartbeatMs = now;
        if (input.msg.type === 'WORKER_DRAINING') session.draining = true;
      }
    }
    for (const effect of h.effects) {
      if (effect.kind !== 'event') continue;
      const event = effect.event;
      if (event.type === 'worker.registered') {
        const previous = this.#sessions.get(event.workerId);
        this.#judge.check(
          previous === undefined &&
            event.workerId.trim().length > 0 &&
            event.capacity >= 1 &&
            event.capacity <= 1024,
          () =>
            `worker ${JSON.stringify(event.workerId)} (capacity ${event.capacity}) registered on ${event.connId}; live session before: ${previous?.connId ?? 'none'}`,
        );
        this.#sessions.set(event.workerId, {
          workerId: event.workerId,
          connId: event.connId,
          lastHeartbeatMs: now,
          draining: false,
        });
      } else if (event.type === 'worker.lost') {
        this.#lost(event.workerId, event.cause, event.reason, now);
      } else if (event.type === 'job.assigned') {
        const session = this.#sessions.get(event.workerId);
        this.#judge.check(
          session !== undefined && !session.draining,
          () =>
            `job ${event.jobId} assigned to ${session === undefined ? 'unknown' : 'draining'} worker ${event.workerId}`,
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
    for (const session of this.#sessions.values()) {
      session.lastHeartbeatMs = Math.min(now, session.lastHeartbeatMs + stalledMs);
    }
  }

  /** Every connection died with the process. */
  onCrash(): void {
    this.#sessions.clear();
    this.#lastTickMs = null;
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
        model !== undefined && model.connId === w.connId && model.draining === w.draining,
        () =>
          `session ${w.workerId} on ${w.connId} (draining ${w.draining}) is not the model's ${JSON.stringify(model)}`,
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
