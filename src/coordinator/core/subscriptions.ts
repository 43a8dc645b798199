/**
 * Subscriptions to job events (SUBSCRIBE_JOBS), and the changes of one input
 * that they are told about.
 *
 * Every job written (a new job, a new state, a new attempt) or given new
 * progress during an input is noted; at the end of the input each noted job
 * is pushed once, as it is then, to every subscription whose filter matches
 * it (`push` effects, released after the input's batch commits like replies).
 * With no subscription nothing is noted, so the feature costs one size check
 * per write when unused.
 *
 * Bounds (checked by `subscribe` in client-requests.ts): 16 per connection
 * and 1,024 in all (limits.ts). What a subscriber has not read yet is
 * bounded by the shell (client-session.ts), which drops and counts beyond it.
 */
import type { JobEvent, JobEventKind } from '../../protocol/messages.js';
import { coreJobSnapshot, type CoreJob } from './job.js';

/** The queue of a job (a filter's `queue` matches it). */
export function queueOf(job: CoreJob): string {
  return job.queue;
}

export interface Subscription {
  readonly connId: number;
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
  #size = 0;
  /** Jobs changed during the current input, and how. */
  readonly changed = new Map<string, { job: CoreJob; event: JobEventKind }>();

  get size(): number {
    return this.#size;
  }

  countFor(connId: number): number {
    return this.#byConn.get(connId)?.length ?? 0;
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
    this.#size++;
  }

  dropConnection(connId: number): void {
    const list = this.#byConn.get(connId);
    if (list === undefined) return;
    this.#byConn.delete(connId);
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

  /** The connections to tell about this job (one entry per matching subscription). */
  *matching(job: CoreJob): Generator<number> {
    const queue = queueOf(job);
    const matches = (sub: Subscription): boolean =>
      (sub.taskType === null || sub.taskType === job.taskType) &&
      (sub.queue === null || sub.queue === queue);
    for (const sub of this.#byJob.get(job.jobId) ?? []) if (matches(sub)) yield sub.connId;
    for (const sub of this.#broad) if (matches(sub)) yield sub.connId;
  }

  /** Snapshots for everyone who follows the changed jobs, then forgets them. */
  publish(nowMs: number, push: (connId: number, msg: JobEvent) => void): void {
    if (this.changed.size === 0) return;
    for (const { job, event } of this.changed.values()) {
      let snapshot = null;
      for (const connId of this.matching(job)) {
        snapshot ??= coreJobSnapshot(job);
        push(connId, { type: 'JOB_EVENT', event, atMillis: nowMs, job: snapshot });
      }
    }
    this.changed.clear();
  }
}
