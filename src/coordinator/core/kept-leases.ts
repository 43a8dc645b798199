/**
 * Leases kept for a worker that is not connected: attempts whose session
 * ended only because the coordinator itself had stalled (its loop did not
 * run, so the worker judged it gone, dropped the connection and redialled).
 * Such an attempt may have finished meanwhile; its worker reports it on its
 * next session. So the lease stays the job's current one (the job stays
 * RUNNING) for a grace period instead of being revoked at once:
 *
 * - a result from the same worker id on any later session counts as usual;
 * - a registration of that worker that lists what it still holds
 *   (`heldAttempts`) takes the listed ones back into its session and revokes
 *   the rest at once;
 * - whatever is still kept when the grace period ends is revoked as a lost
 *   worker's attempt ("worker w lost (…)").
 *
 * One owner for the index; every attempt that ends for another reason
 * (cancel, deadline) is released here by the code that ends it.
 */

interface Kept {
  /** Jobs whose current lease names the worker. */
  readonly jobIds: Set<string>;
  /** Revoked after this, epoch ms. */
  untilMs: number;
  /** When the latest of them was kept, epoch ms. */
  keptAtMs: number;
  /** Why the session ended, for the error of a revoked attempt. */
  readonly reason: string;
}

export interface KeptLeasesView {
  workerId: string;
  jobIds: string[];
  untilMs: number;
}

export class KeptLeases {
  readonly #byWorker = new Map<string, Kept>();

  /** Keeps `jobIds` for `workerId` from `nowMs` until `untilMs` (joining what is kept already). */
  keep(
    workerId: string,
    jobIds: readonly string[],
    nowMs: number,
    untilMs: number,
    reason: string,
  ): void {
    if (jobIds.length === 0) return;
    const kept = this.#byWorker.get(workerId);
    if (kept === undefined) {
      this.#byWorker.set(workerId, { jobIds: new Set(jobIds), untilMs, keptAtMs: nowMs, reason });
      return;
    }
    for (const jobId of jobIds) kept.jobIds.add(jobId);
    kept.untilMs = Math.max(kept.untilMs, untilMs);
    kept.keptAtMs = nowMs;
  }

  /** True if `jobId`'s lease is kept for `workerId`. */
  has(workerId: string, jobId: string): boolean {
    return this.#byWorker.get(workerId)?.jobIds.has(jobId) === true;
  }

  /** Forgets one attempt (it ended some other way). */
  release(workerId: string, jobId: string): void {
    const kept = this.#byWorker.get(workerId);
    if (kept === undefined) return;
    kept.jobIds.delete(jobId);
    if (kept.jobIds.size === 0) this.#byWorker.delete(workerId);
  }

  /** Removes and returns everything kept for a worker (its jobs and the loss reason). */
  take(workerId: string): { jobIds: string[]; reason: string } | undefined {
    const kept = this.#byWorker.get(workerId);
    if (kept === undefined) return undefined;
    this.#byWorker.delete(workerId);
    return { jobIds: [...kept.jobIds], reason: kept.reason };
  }

  /** Removes and returns the workers whose grace period ended before `nowMs`. */
  takeExpired(nowMs: number): { workerId: string; jobIds: string[]; reason: string }[] {
    const out: { workerId: string; jobIds: string[]; reason: string }[] = [];
    for (const [workerId, kept] of this.#byWorker) {
      if (kept.untilMs >= nowMs) continue;
      this.#byWorker.delete(workerId);
      out.push({ workerId, jobIds: [...kept.jobIds], reason: kept.reason });
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
    for (const kept of this.#byWorker.values()) n += kept.jobIds.size;
    return n;
  }

  /** Copies, for inspection. */
  views(): KeptLeasesView[] {
    return [...this.#byWorker].map(([workerId, kept]) => ({
      workerId,
      jobIds: [...kept.jobIds],
      untilMs: kept.untilMs,
    }));
  }
}
