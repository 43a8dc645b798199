/**
 * The index of deduplication keys (see dedup.ts for what they decide): for
 * each queue and key, the keyed jobs that can still decide a submission —
 * those not terminal, and the ended ones whose throttle window is open.
 *
 * Memory only and complete: rebuilt at recovery from the non-terminal jobs
 * with a key and the ended ones whose throttle window is still open (the
 * store keeps `dedupUntilMs` for that), so a restart finds the same entries
 * as the process before it had. An ended job's entry stays only for the
 * window its own creation opened (a `throttle` job's); the windows are
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

/** A keyed job, as the index holds it. */
export interface Holder {
  readonly jobId: string;
  /** Creation order: the latest entry of a key is its job. */
  readonly seq: number;
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

type KeyedJob = Pick<
  CoreJob,
  'jobId' | 'seq' | 'queue' | 'dedupKey' | 'dedupUntilMs' | 'createdAtMs'
>;

const indexKey = (queue: string, key: string): string => `${queue}\u0000${key}`;

export class DedupIndex {
  /** Per key, its entries in creation order (few: live jobs and open windows). */
  readonly #entries = new Map<string, Holder[]>();
  /** Ended entries by the end of their window (lazily cleaned: a removed entry is skipped). */
  readonly #windows = new BinaryHeap<WindowEnd>((a, b) => a.atMs < b.atMs);

  /** Keys held (by live jobs or open windows of ended ones). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * The key's job at `nowMs`: the latest created of those that can still
   * decide (live, or ended within its own throttle window).
   */
  holderOf(queue: string, key: string, nowMs: number): Holder | undefined {
    const id = indexKey(queue, key);
    const list = this.#entries.get(id);
    if (list === undefined) return undefined;
    const open = list.filter((h) => !h.ended || (h.untilMs !== null && h.untilMs > nowMs));
    if (open.length === 0) this.#entries.delete(id);
    else if (open.length < list.length) this.#entries.set(id, open);
    return open.at(-1);
  }

  /** The latest created of the key's jobs that are not terminal, if any. */
  liveOf(queue: string, key: string): Holder | undefined {
    const list = this.#entries.get(indexKey(queue, key)) ?? [];
    for (let i = list.length - 1; i >= 0; i--) {
      const entry = list[i] as Holder;
      if (!entry.ended) return entry;
    }
    return undefined;
  }

  /** A job with a key was created (or found at recovery, not ended). */
  took(job: Readonly<KeyedJob>): void {
    if (job.dedupKey == null) return;
    this.#insert(indexKey(job.queue, job.dedupKey), {
      jobId: job.jobId,
      seq: job.seq,
      createdAtMs: job.createdAtMs,
      untilMs: job.dedupUntilMs ?? null,
      ended: false,
    });
  }

  /**
   * A keyed job ended (or was found ended at recovery): it stays while its
   * throttle window is open, and is forgotten otherwise.
   */
  ended(job: Readonly<KeyedJob>, nowMs: number): void {
    if (job.dedupKey == null) return;
    const id = indexKey(job.queue, job.dedupKey);
    const list = this.#entries.get(id) ?? [];
    const index = list.findIndex((h) => h.jobId === job.jobId);
    const untilMs = job.dedupUntilMs ?? null;
    const open = untilMs !== null && untilMs > nowMs;
    if (index < 0) {
      // Recovery: an ended job whose window is still open.
      if (!open) return;
      this.#insert(id, {
        jobId: job.jobId,
        seq: job.seq,
        createdAtMs: job.createdAtMs,
        untilMs,
        ended: true,
      });
    } else if (!open) {
      list.splice(index, 1);
      if (list.length === 0) this.#entries.delete(id);
      return;
    } else {
      (list[index] as Holder).ended = true;
    }
    this.#windows.push({ atMs: untilMs, id, jobId: job.jobId });
  }

  /** Forgets the ended entries whose window closed by `nowMs`. */
  prune(nowMs: number): void {
    for (
      let end = this.#windows.peek();
      end !== undefined && end.atMs <= nowMs;
      end = this.#windows.peek()
    ) {
      this.#windows.pop();
      const list = this.#entries.get(end.id);
      if (list === undefined) continue;
      const index = list.findIndex((h) => h.jobId === end.jobId && h.ended);
      if (index < 0) continue;
      list.splice(index, 1);
      if (list.length === 0) this.#entries.delete(end.id);
    }
  }

  /** Adds an entry in creation order (new jobs come last; recovery may interleave). */
  #insert(id: string, entry: Holder): void {
    const list = this.#entries.get(id) ?? [];
    const existing = list.findIndex((h) => h.jobId === entry.jobId);
    if (existing >= 0) list.splice(existing, 1);
    let at = list.length;
    while (at > 0 && (list[at - 1] as Holder).seq > entry.seq) at--;
    list.splice(at, 0, entry);
    this.#entries.set(id, list);
  }
}
