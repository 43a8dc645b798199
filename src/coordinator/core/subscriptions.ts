/**
 * Subscriptions to job events (SUBSCRIBE_JOBS), and the changes of one input
 * that they are told about.
 *
 * Every job written (a new job, a new state, a new attempt) or given new
 * progress during an input is noted; at the end of the input each noted job
 * is pushed once, as it is then, to every subscription whose filter matches
 * it: one `push` effect per job naming all those subscriptions' connections
 * (released after the input's batch commits, like replies), so the shell
 * encodes its frame once and hands it to each connection's own buffer.
 * With no subscription nothing is noted, so the feature costs one size check
 * per write when unused.
 *
 * Bounds (checked by `subscribe` in subscriber-requests.ts): 16 per
 * connection (limits.ts), `maxSubscriptionsPerAddress` from one address and
 * `maxSubscriptions` in all. What a subscriber has not read yet is bounded by
 * the shell (client-session.ts), which drops and counts beyond it and says
 * when a subscriber starts and stops leaving events unread: the table keeps
 * since when each such subscriber has been stalled, oldest first, so one
 * that stopped reading can make room for a newcomer.
 */
import type { JobEvent, JobEventKind } from '../../protocol/messages.js';
import { coreJobSnapshot, type CoreJob } from './job.js';

/** The queue of a job (a filter's `queue` matches it). */
export function queueOf(job: CoreJob): string {
  return job.queue;
}

function matches(sub: Subscription, job: CoreJob): boolean {
  return (
    (sub.taskType === null || sub.taskType === job.taskType) &&
    (sub.queue === null || sub.queue === queueOf(job))
  );
}

export interface Subscription {
  readonly connId: number;
  /** The peer's address; null for an in-process client (not counted per address). */
  readonly address: string | null;
  readonly jobId: string | null;
  readonly taskType: string | null;
  readonly queue: string | null;
}

export class SubscriptionTable {
  readonly #byConn = new Map<number, Subscription[]>();
  /** Subscriptions to one job, by its id. */
  readonly #byJob = new Map<string, Set<Subscription>>();
  /** Subscriptions without a job id. */
  readonly #broad = new Set<Subscription>();
  /** Subscriptions per address (in-process ones not counted). */
  readonly #byAddress = new Map<string, number>();
  /** Connections leaving events unread, and since when (ms); oldest first. */
  readonly #stalled = new Map<number, number>();
  #size = 0;
  /** Jobs changed during the current input, and how. */
  readonly changed = new Map<string, { job: CoreJob; event: JobEventKind }>();

  get size(): number {
    return this.#size;
  }

  /** Connections holding at least one subscription. */
  get connections(): number {
    return this.#byConn.size;
  }

  countFor(connId: number): number {
    return this.#byConn.get(connId)?.length ?? 0;
  }

  /** Subscriptions held by connections from `address`. */
  countForAddress(address: string): number {
    return this.#byAddress.get(address) ?? 0;
  }

  /** Subscriptions per address (for inspection). */
  byAddress(): ReadonlyMap<string, number> {
    return this.#byAddress;
  }

  /** Subscriber connections leaving events unread, and since when (for inspection). */
  stalled(): ReadonlyMap<number, number> {
    return this.#stalled;
  }

  /**
   * A subscriber's connection started leaving events unread at `sinceMs`
   * (true) or took everything again (false). Ignored for a connection that
   * holds no subscription; a second start keeps the first time.
   */
  noteStalled(connId: number, stalled: boolean, sinceMs: number): void {
    if (!stalled) this.#stalled.delete(connId);
    else if (this.#byConn.has(connId) && !this.#stalled.has(connId))
      this.#stalled.set(connId, sinceMs);
  }

  /**
   * The connection stalled first (in the order they were noted) among those
   * stalled since `notAfterMs` or earlier: of `address` when given, never
   * `except`. Bounded by the stalled connections (at most one per
   * subscriber connection).
   */
  longestStalled(
    notAfterMs: number,
    address: string | null,
    except: number,
  ): { connId: number; sinceMs: number; address: string | null } | null {
    for (const [connId, sinceMs] of this.#stalled) {
      if (sinceMs > notAfterMs || connId === except) continue;
      const of = this.#addressOf(connId);
      if (address !== null && of !== address) continue;
      return { connId, sinceMs, address: of };
    }
    return null;
  }

  #addressOf(connId: number): string | null {
    return this.#byConn.get(connId)?.[0]?.address ?? null;
  }

  add(sub: Subscription): void {
    const list = this.#byConn.get(sub.connId);
    if (list === undefined) this.#byConn.set(sub.connId, [sub]);
    else list.push(sub);
    if (sub.jobId === null) this.#broad.add(sub);
    else {
      let set = this.#byJob.get(sub.jobId);
      if (set === undefined) this.#byJob.set(sub.jobId, (set = new Set()));
      set.add(sub);
    }
    if (sub.address !== null)
      this.#byAddress.set(sub.address, (this.#byAddress.get(sub.address) ?? 0) + 1);
    this.#size++;
  }

  dropConnection(connId: number): void {
    const list = this.#byConn.get(connId);
    if (list === undefined) return;
    this.#byConn.delete(connId);
    this.#stalled.delete(connId);
    const address = list[0]?.address ?? null;
    if (address !== null) {
      const left = (this.#byAddress.get(address) ?? 0) - list.length;
      if (left > 0) this.#byAddress.set(address, left);
      else this.#byAddress.delete(address);
    }
    for (const sub of list) {
      this.#size--;
      if (sub.jobId === null) {
        this.#broad.delete(sub);
        continue;
      }
      const set = this.#byJob.get(sub.jobId);
      set?.delete(sub);
      if (set?.size === 0) this.#byJob.delete(sub.jobId);
    }
  }

  /** A job was written during this input. */
  noteWrite(job: CoreJob): void {
    if (this.#size === 0) return;
    this.changed.set(job.jobId, { job, event: 'state' });
  }

  /** A job got new progress during this input (a write in the same input wins). */
  noteProgress(job: CoreJob): void {
    if (this.#size === 0 || this.changed.has(job.jobId)) return;
    this.changed.set(job.jobId, { job, event: 'progress' });
  }

  /**
   * The connections to tell about this job, one entry per matching
   * subscription (in the order they were added); null when none matches.
   */
  matching(job: CoreJob): number[] | null {
    let out: number[] | null = null;
    const byJob = this.#byJob.get(job.jobId);
    if (byJob !== undefined) {
      for (const sub of byJob) if (matches(sub, job)) (out ??= []).push(sub.connId);
    }
    for (const sub of this.#broad) if (matches(sub, job)) (out ??= []).push(sub.connId);
    return out;
  }

  /**
   * One event per changed job for everyone who follows it (the snapshot
   * made once, the connections listed together), then forgets the changes.
   */
  publish(nowMs: number, push: (connIds: readonly number[], msg: JobEvent) => void): void {
    if (this.changed.size === 0) return;
    for (const { job, event } of this.changed.values()) {
      const connIds = this.matching(job);
      if (connIds === null) continue;
      push(connIds, { type: 'JOB_EVENT', event, atMillis: nowMs, job: coreJobSnapshot(job) });
    }
    this.changed.clear();
  }
}
