/**
 * Leadership in the simulation: two coordinator nodes share one store and
 * one lease (the real {@link Leadership} machine on a {@link MemoryLease}
 * with the simulated clock), and every commit is fenced by the epoch it was
 * made under, as the PostgreSQL store's commits are.
 *
 * Checked here, at every commit: a commit is applied only under the current
 * epoch; at most one term (one incarnation of a core) ever writes under an
 * epoch; a term the lease has moved past never gets a commit through.
 */
import { Leadership, type LeadershipAction } from '../../src/coordinator/leadership/leadership.js';
import { LeaseLostError, MemoryLease, type LeaseHolder } from '../../src/store/lease.js';
import type { MemoryStore } from '../../src/store/memory-store.js';
import type { WriteBatch } from '../../src/store/store.js';
import type { SimClock } from './network.js';
import type { Judge } from './violation.js';

export interface LeaseTiming {
  ttlMs: number;
  renewIntervalMs: number;
}

const holder = (nodeId: string): LeaseHolder => ({
  nodeId,
  workerAddress: `${nodeId}:7070`,
  clientAddress: `${nodeId}:7071`,
});

export class SimElection {
  readonly lease: MemoryLease;
  readonly timing: LeaseTiming;
  readonly #nodes: Leadership[];
  readonly #clock: SimClock;
  readonly #judge: Judge;
  /** Which term (incarnation of a core) wrote under each epoch. */
  readonly #writers = new Map<number, number>();
  /** Commits refused because their epoch was superseded. */
  fenced = 0;
  #incarnations = 0;

  constructor(clock: SimClock, timing: LeaseTiming, judge: Judge) {
    this.#clock = clock;
    this.timing = timing;
    this.#judge = judge;
    this.lease = new MemoryLease(() => clock.nowMs);
    this.#nodes = ['node-a', 'node-b'].map((id) => new Leadership(timing, holder(id)));
  }

  /** Node `node` takes the (free or expired) lease now; returns the new epoch. */
  elect(node: number): number {
    const actions = this.#run(node, this.#leadershipOf(node).tick(this.#clock.nowMs));
    const lead = actions.find((a) => a.kind === 'lead');
    this.#judge.check(
      lead !== undefined,
      () => `node ${node} could not take the lease: ${JSON.stringify(actions)}`,
    );
    return (lead as Extract<LeadershipAction, { kind: 'lead' }>).epoch;
  }

  /** The leader renews (and a standby, unless frozen, tries its luck) as their timers say. */
  tick(leader: number, standby: number | null): void {
    const now = this.#clock.nowMs;
    const led = this.#run(leader, this.#leadershipOf(leader).tick(now));
    this.#judge.check(
      !led.some((a) => a.kind === 'stepDown'),
      () => `the leader lost its lease without a failover: ${JSON.stringify(led)}`,
    );
    if (standby === null) return;
    const stood = this.#run(standby, this.#leadershipOf(standby).tick(now));
    this.#judge.check(
      !stood.some((a) => a.kind === 'lead'),
      () => `a standby took a live lease: ${JSON.stringify(stood)}`,
    );
  }

  /**
   * A leader's process crashed and was restarted at once: its lease is given
   * up and the new process (a new identity, a fresh machine) takes the next
   * epoch. Returns that epoch.
   */
  restarted(node: number): number {
    this.#run(node, this.#leadershipOf(node).lost('failed', this.#clock.nowMs));
    this.#incarnations++;
    this.#nodes[node] = new Leadership(this.timing, holder(`node-${node}-${this.#incarnations}`));
    return this.elect(node);
  }

  /** A paused leader wakes up: its machine must notice it no longer leads. */
  wakes(node: number, epoch: number): void {
    const actions = this.#run(node, this.#leadershipOf(node).tick(this.#clock.nowMs));
    this.#judge.check(
      actions.some((a) => a.kind === 'stepDown' && a.epoch === epoch) &&
        this.#leadershipOf(node).mode === 'standby',
      () => `a deposed leader (epoch ${epoch}) did not step down: ${JSON.stringify(actions)}`,
    );
  }

  /**
   * Applies `batch` for term `term` under `epoch`, or throws LeaseLostError
   * when the epoch is no longer current (nothing applied).
   */
  commit(store: MemoryStore, batch: WriteBatch, epoch: number, term: number): void {
    if (epoch !== this.lease.epoch) {
      this.fenced++;
      throw new LeaseLostError(`epoch ${epoch} superseded by ${this.lease.epoch}`);
    }
    const writer = this.#writers.get(epoch);
    this.#judge.check(
      writer === undefined || writer === term,
      () => `two terms (${writer} and ${term}) wrote under epoch ${epoch}`,
    );
    this.#writers.set(epoch, term);
    store.commitNow(batch);
  }

  /** Earliest time a lease timer is due (quiescence jumps no further). */
  nextWakeAtMs(leader: number): number {
    return this.#leadershipOf(leader).nextWakeAtMs();
  }

  #leadershipOf(node: number): Leadership {
    return this.#nodes[node] as Leadership;
  }

  /** Carries out lease operations at once (the simulated lease answers instantly). */
  #run(node: number, actions: LeadershipAction[]): LeadershipAction[] {
    const leadership = this.#leadershipOf(node);
    const now = this.#clock.nowMs;
    const id = leadership.self.nodeId;
    const all: LeadershipAction[] = [];
    for (const action of actions) {
      all.push(action);
      switch (action.kind) {
        case 'acquire':
          all.push(
            ...this.#run(
              node,
              leadership.acquireDone(
                this.lease.tryAcquireNow(leadership.self, this.timing.ttlMs),
                now,
              ),
            ),
          );
          break;
        case 'renew':
          all.push(
            ...this.#run(
              node,
              leadership.renewDone(this.lease.renewNow(id, action.epoch, this.timing.ttlMs), now),
            ),
          );
          break;
        case 'release':
          this.lease.releaseNow(id, action.epoch);
          break;
        case 'lead':
        case 'stepDown':
          break;
      }
    }
    return all;
  }
}
