/**
 * Leases kept for a worker that is not connected: attempts whose session
 * ended only because the coordinator itself had stalled (its loop did not
 * run, so the worker judged it gone, dropped the connection and redialled),
 * and attempts a restarted coordinator (or a new leader) found running.
 * Such an attempt may still run, or have finished meanwhile; its worker
 * reports it on its next session. So the lease stays the job's current one
 * (the job stays RUNNING, and counts toward its queue's and group's
 * concurrency) for a grace period instead of being revoked at once:
 *
 * - a result from the same worker id on any later session counts as usual;
 * - a registration of that worker that lists what it still holds
 *   (`heldAttempts`) takes the listed ones back into its session and revokes
 *   the rest at once;
 * - whatever is still kept when the grace period ends is revoked as its
 *   {@link Revocation} says: a lost worker's attempt ("worker w lost (…)"),
 *   or an attempt the restart interrupted ("coordinator restarted during
 *   attempt n; outcome unknown …").
 *
 * One owner for the index; every attempt that ends for another reason
 * (cancel, deadline) is released here by the code that ends it.
 */

/** How a kept attempt ends if its worker does not come back for it. */
export type Revocation =
  /** As a lost worker's attempt, with this error (retried at once, or failed). */
  | { readonly kind: 'lost'; readonly error: string }
  /** As an attempt a restart interrupted (`coordinator restarted`, `leader changed (…)`). */
  | { readonly kind: 'interrupted'; readonly interruption: string };

interface Kept {
  /** Jobs whose current lease names the worker, and how each ends if it is revoked. */
  readonly jobs: Map<string, Revocation>;
  /** Revoked after this, epoch ms. */
  untilMs: number;
  /** When the latest of them was kept, epoch ms. */
  keptAtMs: number;
}

/** Kept attempts taken out: each job with how it ends if it is revoked. */
export type KeptJobs = [jobId: string, revocation: Revocation][];

export interface KeptLeasesView {
  workerId: string;
  jobIds: string[];
  untilMs: number;
}

export class KeptLeases {
  readonly #byWorker = new Map<string, Kept>();

  /**
   * Keeps `jobIds` for `workerId` from `nowMs` until `untilMs` (joining what
   * is kept already), each to end as `revocation` says if it is revoked.
   */
  keep(
    workerId: string,
    jobIds: readonly string[],
    nowMs: number,
    untilMs: number,
    revocation: Revocation,
  ): void {
    if (jobIds.length === 0) return;
    let kept = this.#byWorker.get(workerId);
    if (kept === undefined) {
      kept = { jobs: new Map(), untilMs, keptAtMs: nowMs };
      this.#byWorker.set(workerId, kept);
    }
    for (const jobId of jobIds) kept.jobs.set(jobId, revocation);
    kept.untilMs = Math.max(kept.untilMs, untilMs);
    kept.keptAtMs = nowMs;
  }

  /** True if `jobId`'s lease is kept for `workerId`. */
  has(workerId: string, jobId: string): boolean {
    return this.#byWorker.get(workerId)?.jobs.has(jobId) === true;
  }

  /** How `jobId`'s attempt ends if revoked, while it is kept for `workerId`. */
  revocationOf(workerId: string, jobId: string): Revocation | undefined {
    return this.#byWorker.get(workerId)?.jobs.get(jobId);
  }

  /** Forgets one attempt (it ended some other way). */
  release(workerId: string, jobId: string): void {
    const kept = this.#byWorker.get(workerId);
    if (kept === undefined) return;
    kept.jobs.delete(jobId);
    if (kept.jobs.size === 0) this.#byWorker.delete(workerId);
  }

  /** Removes and returns everything kept for a worker. */
  take(workerId: string): KeptJobs | undefined {
    const kept = this.#byWorker.get(workerId);
    if (kept === undefined) return undefined;
    this.#byWorker.delete(workerId);
    return [...kept.jobs];
  }

  /** Removes and returns the workers whose grace period ended before `nowMs`. */
  takeExpired(nowMs: number): { workerId: string; jobs: KeptJobs }[] {
    const out: { workerId: string; jobs: KeptJobs }[] = [];
    for (const [workerId, kept] of this.#byWorker) {
      if (kept.untilMs >= nowMs) continue;
      this.#byWorker.delete(workerId);
      out.push({ workerId, jobs: [...kept.jobs] });
    }
    return out;
  }

  /**
   * A stall of our own, which ended at `nowMs`, is nobody's absence: every
   * grace period grows by the part of it after the leases were kept (a
   * session that ended on waking from this very stall gets nothing extra).
   */
  extend(stalledMs: number, nowMs: number): void {
    for (const kept of this.#byWorker.values()) {
      kept.untilMs += Math.max(0, Math.min(stalledMs, nowMs - kept.keptAtMs));
    }
  }

  /** Kept attempts in total. */
  get size(): number {
    let n = 0;
    for (const kept of this.#byWorker.values()) n += kept.jobs.size;
    return n;
  }

  /** Copies, for inspection. */
  views(): KeptLeasesView[] {
    return [...this.#byWorker].map(([workerId, kept]) => ({
      workerId,
      jobIds: [...kept.jobs.keys()],
      untilMs: kept.untilMs,
    }));
  }
}
