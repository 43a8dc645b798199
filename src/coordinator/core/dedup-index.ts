/**
 * The index of deduplication keys (see dedup.ts for what they decide): for
 * each queue and key, the key's job while it can still decide a submission.
 *
 * Memory only and complete: rebuilt at recovery from the non-terminal jobs
 * with a key and the ended ones whose throttle window is still open (the
 * store keeps `dedupUntilMs` for that). An ended job's entry stays only for
 * the window its own creation opened (a `throttle` job's); the windows are
 * dropped from a heap as they close.
 */
import type { DedupMode } from '../../protocol/messages.js';
import { BinaryHeap } from './binary-heap.js';
import type { CoreJob } from './job.js';

/** A submission's deduplication, as checked (submission.ts). */
export interface DedupRequest {
  readonly key: string;
  readonly mode: DedupMode;
  /** `throttle` only: the window, ms. */
  readonly windowMs: number | null;
}

/** The key's job, as the index holds it. */
export interface Holder {
  readonly jobId: string;
  readonly createdAtMs: number;
  /** The end of the throttle window its creation opened; null = none. */
  readonly untilMs: number | null;
  /** True once it ended: it stays only while `untilMs` is ahead. */
  ended: boolean;
}

interface WindowEnd {
  readonly atMs: number;
  readonly id: string;
  readonly jobId: string;
}

const indexKey = (queue: string, key: string): string => `${queue}\u0000${key}`;

export class DedupIndex {
  readonly #holders = new Map<string, Holder>();
  /** Ended holders by the end of their window (lazily cleaned: a replaced holder is skipped). */
  readonly #windows = new BinaryHeap<WindowEnd>((a, b) => a.atMs < b.atMs);

  /** Keys held (live jobs and open windows of ended ones). */
  get size(): number {
    return this.#holders.size;
  }

  /** The key's job, if one can still decide a submission at `nowMs`. */
  holderOf(queue: string, key: string, nowMs: number): Holder | undefined {
    const id = indexKey(queue, key);
    const holder = this.#holders.get(id);
    if (holder === undefined || !holder.ended) return holder;
    if (holder.untilMs !== null && holder.untilMs > nowMs) return holder;
    this.#holders.delete(id);
    return undefined;
  }

  /** A job with a key was created (or found at recovery, not ended): it is the key's job now. */
  took(job: Readonly<CoreJob>): void {
    if (job.dedupKey == null) return;
    this.#holders.set(indexKey(job.queue, job.dedupKey), {
      jobId: job.jobId,
      createdAtMs: job.createdAtMs,
      untilMs: job.dedupUntilMs ?? null,
      ended: false,
    });
  }

  /**
   * A keyed job ended (or was found ended at recovery): it stays the key's
   * job while its throttle window is open, and is forgotten otherwise.
   */
  ended(
    job: Readonly<Pick<CoreJob, 'jobId' | 'queue' | 'dedupKey' | 'dedupUntilMs' | 'createdAtMs'>>,
    nowMs: number,
  ): void {
    if (job.dedupKey == null) return;
    const id = indexKey(job.queue, job.dedupKey);
    const holder = this.#holders.get(id);
    const untilMs = job.dedupUntilMs ?? null;
    if (holder === undefined) {
      // Recovery: an ended job whose window is still open.
      if (untilMs === null || untilMs <= nowMs) return;
      this.#holders.set(id, {
        jobId: job.jobId,
        createdAtMs: job.createdAtMs,
        untilMs,
        ended: true,
      });
    } else if (holder.jobId !== job.jobId) {
      return; // a later job holds the key now
    } else if (untilMs === null || untilMs <= nowMs) {
      this.#holders.delete(id);
      return;
    } else {
      holder.ended = true;
    }
    this.#windows.push({ atMs: untilMs, id, jobId: job.jobId });
  }

  /** Forgets the ended holders whose window closed by `nowMs`. */
  prune(nowMs: number): void {
    for (
      let end = this.#windows.peek();
      end !== undefined && end.atMs <= nowMs;
      end = this.#windows.peek()
    ) {
      this.#windows.pop();
      const holder = this.#holders.get(end.id);
      if (holder !== undefined && holder.ended && holder.jobId === end.jobId) {
        this.#holders.delete(end.id);
      }
    }
  }
}
