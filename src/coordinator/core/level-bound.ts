/**
 * The highest effective level any QUEUED job can have now, for the ready
 * queue's early stop: queues are looked at in turn order, and once the best
 * candidate found has this level no later queue can beat it.
 *
 * Per base priority, a heap of (ready-since, job) entries: its oldest live
 * entry is that priority's most aged job, so its effective level is the
 * highest of the priority's jobs. Entries whose job left QUEUED (or became
 * ready again at another time) are dropped when they reach the top; when
 * stale entries outnumber the live ones the heap is rebuilt, so it stays
 * within a constant factor of the jobs queued.
 */
import { BinaryHeap } from './binary-heap.js';
import type { CoreJob } from './job.js';

interface Entry {
  readonly readySinceMs: number;
  readonly seq: number;
  readonly job: CoreJob;
}

const before = (a: Entry, b: Entry): boolean =>
  a.readySinceMs !== b.readySinceMs ? a.readySinceMs < b.readySinceMs : a.seq < b.seq;

/** Entries a heap may hold beyond twice the queued entries before it is rebuilt. */
const SLACK = 1024;

export class LevelBound {
  #heaps = [new BinaryHeap(before), new BinaryHeap(before), new BinaryHeap(before)];
  /** Ready-queue entries per base level (lazily removed ones included). */
  readonly #queued = [0, 0, 0];
  readonly #readySince: (job: Readonly<CoreJob>) => number;

  constructor(readySince: (job: Readonly<CoreJob>) => number) {
    this.#readySince = readySince;
  }

  /** A job entered the ready queue at base level `base`. */
  added(job: CoreJob, base: number): void {
    const heap = this.#heaps[base] as BinaryHeap<Entry>;
    heap.push({ readySinceMs: this.#readySince(job), seq: job.seq, job });
    this.#queued[base] = (this.#queued[base] as number) + 1;
    if (heap.size > 2 * this.#queued[base] + SLACK) this.#rebuild(base);
  }

  /** An entry of base level `base` left the ready queue (taken or dropped). */
  removed(base: number): void {
    this.#queued[base] = (this.#queued[base] as number) - 1;
  }

  /**
   * The highest effective level (0..max) of any QUEUED job at `nowMs`, or
   * -1 when none is queued. `level` computes a job's effective level.
   */
  highest(nowMs: number, level: (job: CoreJob, nowMs: number) => number): number {
    let bound = -1;
    for (let base = this.#heaps.length - 1; base >= 0; base--) {
      const job = this.#oldest(base);
      if (job === undefined) continue;
      bound = Math.max(bound, level(job, nowMs));
      if (bound >= this.#heaps.length - 1) break;
    }
    return bound;
  }

  /** Entries held per base level (tests: the heaps stay bounded). */
  sizes(): number[] {
    return this.#heaps.map((h) => h.size);
  }

  #live(entry: Entry): boolean {
    return entry.job.state === 'QUEUED' && this.#readySince(entry.job) === entry.readySinceMs;
  }

  #oldest(base: number): CoreJob | undefined {
    const heap = this.#heaps[base] as BinaryHeap<Entry>;
    for (let top = heap.peek(); top !== undefined; top = heap.peek()) {
      if (this.#live(top)) return top.job;
      heap.pop();
    }
    return undefined;
  }

  #rebuild(base: number): void {
    const old = this.#heaps[base] as BinaryHeap<Entry>;
    const fresh = new BinaryHeap(before);
    const seen = new Set<CoreJob>();
    for (let e = old.pop(); e !== undefined; e = old.pop()) {
      if (!this.#live(e) || seen.has(e.job)) continue;
      seen.add(e.job);
      fresh.push(e);
    }
    this.#heaps[base] = fresh;
  }
}
