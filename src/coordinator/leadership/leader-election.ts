/**
 * Runs a {@link Leadership} for real: one timer (set for the machine's next
 * wake-up), the lease operations on a {@link LeaseBackend}, and the
 * machine's outcomes handed to the shell as `lead` / `stepDown` calls.
 * Time is `performance.now()`: monotonic, so a wall-clock jump cannot
 * stretch a lease, and it keeps running while the process is frozen, so a
 * leader that wakes up from SIGSTOP sees at once that its lease is stale.
 */
import { performance } from 'node:perf_hooks';
import { describeError } from '../../protocol/errors.js';
import type { LeaseBackend, LeaseHolder, LeaseView } from '../../store/lease.js';
import type { Logger } from '../../observability/logger.js';
import {
  type AcquireGate,
  Leadership,
  type LeadershipAction,
  type LeadershipConfig,
  type LossCause,
} from './leadership.js';

export interface ElectionHooks {
  /** The lease of `epoch` is ours: start serving under it. */
  lead(epoch: number): void;
  /** Leadership of `epoch` ended: stop at once. */
  stepDown(epoch: number, reason: string): void;
  /**
   * A try to take the lease found it held (`current` says by whom): a
   * sharded coordinator tells its OwnershipRound, whose freed try may go to
   * another shard at once.
   */
  acquireFailed?(current: LeaseView): void;
}

export class LeaderElection {
  readonly leadership: Leadership;
  readonly #lease: LeaseBackend;
  readonly #hooks: ElectionHooks;
  readonly #log: Logger;
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;
  #releases: Promise<void>[] = [];
  #lastError: string | null = null;

  constructor(
    config: LeadershipConfig,
    me: LeaseHolder,
    lease: LeaseBackend,
    hooks: ElectionHooks,
    log: Logger,
    gate: AcquireGate | null = null,
  ) {
    this.leadership = new Leadership(config, me, gate);
    this.#lease = lease;
    this.#hooks = hooks;
    this.#log = log;
  }

  /** Starts trying to lead (the first attempt right away). */
  start(): void {
    this.#apply(this.leadership.tick(performance.now()));
  }

  /** True while leading and the lease is trusted right now. */
  leadsNow(): boolean {
    return this.leadership.leadsAt(performance.now());
  }

  /** The shell's term ended on its own (a fenced or a failed write). */
  lost(cause: LossCause): void {
    this.#apply(this.leadership.lost(cause, performance.now()));
  }

  /** Hands the lease over to whoever takes it next (a sharded coordinator above its share). */
  handOver(): void {
    this.#apply(this.leadership.handOver(performance.now()));
  }

  /** A standby its gate held back takes its turn now (a sharded coordinator's round opened the gate). */
  tryNow(): void {
    this.#apply(this.leadership.tryNow(performance.now()));
  }

  /** Checks the clock now (e.g. before serving): steps down if the lease went stale. */
  check(): void {
    this.#apply(this.leadership.tick(performance.now()));
  }

  /** Stops: a leader steps down and releases its lease. Idempotent. */
  async stop(): Promise<void> {
    if (!this.#stopped) {
      this.#stopped = true;
      if (this.#timer !== null) clearTimeout(this.#timer);
      this.#apply(this.leadership.stop());
    }
    await Promise.all(this.#releases);
    await this.#lease.close();
  }

  #apply(actions: LeadershipAction[]): void {
    for (const action of actions) this.#run(action);
    this.#schedule();
  }

  #run(action: LeadershipAction): void {
    switch (action.kind) {
      case 'acquire':
        this.#lease.tryAcquire(this.#meOf(), this.#ttlMs()).then(
          (result) => {
            this.#after(() => this.leadership.acquireDone(result, performance.now()));
            if (!result.acquired && !this.#stopped) this.#hooks.acquireFailed?.(result.current);
          },
          (err: unknown) => this.#failed('acquire', err),
        );
        return;
      case 'renew':
        this.#lease.renew(this.#meOf().nodeId, action.epoch, this.#ttlMs()).then(
          (ok) => this.#after(() => this.leadership.renewDone(ok, performance.now())),
          (err: unknown) => this.#failed('renew', err),
        );
        return;
      case 'lead':
        this.#lastError = null;
        this.#log.info({ epoch: action.epoch }, 'leading: lease acquired');
        this.#hooks.lead(action.epoch);
        return;
      case 'stepDown':
        this.#log.warn({ epoch: action.epoch, reason: action.reason }, 'stepping down');
        this.#hooks.stepDown(action.epoch, action.reason);
        return;
      case 'release':
        this.#releases.push(
          this.#lease.release(this.#meOf().nodeId, action.epoch).catch((err: unknown) => {
            this.#log.warn({ err: describeError(err) }, 'could not release the lease');
          }),
        );
        return;
    }
  }

  #after(step: () => LeadershipAction[]): void {
    if (this.#stopped) return;
    this.#apply(step());
  }

  #failed(op: string, err: unknown): void {
    const message = describeError(err);
    // Said once per distinct problem, not at every retry.
    if (message !== this.#lastError) {
      this.#log.warn({ op, err: message }, 'lease operation failed; retrying');
      this.#lastError = message;
    }
    this.#after(() => this.leadership.operationFailed(performance.now()));
  }

  #schedule(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#stopped) return;
    const wakeAt = this.leadership.nextWakeAtMs();
    if (!Number.isFinite(wakeAt)) return;
    const delayMs = Math.max(0, Math.ceil(wakeAt - performance.now()));
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#apply(this.leadership.tick(performance.now()));
    }, delayMs);
  }

  #meOf(): LeaseHolder {
    return this.leadership.self;
  }

  #ttlMs(): number {
    return this.leadership.config.ttlMs;
  }
}
