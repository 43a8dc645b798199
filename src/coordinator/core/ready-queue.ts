/**
 * The QUEUED jobs, in scheduling order: highest effective priority first, then
 * the time each became ready (submission, or a delayed job's due time; see
 * {@link readySinceMs}), then submission order (seq).
 *
 * A job's effective level is min(HIGH, base + floor(age / agingStep)), age
 * counted from its original submission. Jobs are kept in one heap per
 * (task type, base priority), ordered by ready-since and seq. Within such a
 * heap the first job is also the oldest, so it has the highest effective level:
 * the best job overall is always one of the heap heads. Picking it costs
 * O(runnable task types x 3) plus O(log n) to remove it, never a sort or a
 * scan; task types that no free worker serves are not looked at, so their
 * jobs wait without holding back anything else.
 *
 * Removal is lazy: a job that leaves QUEUED by another path (cancel) stays in
 * its heap until it reaches the head, where it is skipped.
 */
import type { Priority } from '../../protocol/messages.js';
import type { CoreJob } from './job.js';
import { BinaryHeap } from './binary-heap.js';

const BASE_LEVEL: Readonly<Record<Priority, number>> = { LOW: 0, NORMAL: 1, HIGH: 2 };
const MAX_LEVEL = 2;

/**
 * When a job became ready to run: its submission, or for a delayed job its
 * due time (a job that waited a month for its time has not been waiting for
 * a worker all along). Age for aging counts from here, and the queue's order
 * follows it, so overdue delayed jobs run in due-time order.
 */
export function readySinceMs(job: Readonly<CoreJob>): number {
  return job.runAtMs ?? job.createdAtMs;
}

/** Effective level (0 = LOW .. 2 = HIGH) of a job at `nowMs`. */
export function effectiveLevel(job: Readonly<CoreJob>, nowMs: number, agingStepMs: number): number {
  const base = BASE_LEVEL[job.priority];
  if (base >= MAX_LEVEL || agingStepMs <= 0) return base;
  const age = Math.max(0, nowMs - readySinceMs(job));
  return Math.min(MAX_LEVEL, base + Math.floor(age / agingStepMs));
}

/** Ready-since, then submission order: the head of a heap is its oldest, so its highest level. */
const byReadySince = (a: CoreJob, b: CoreJob): boolean => {
  const ra = readySinceMs(a);
  const rb = readySinceMs(b);
  return ra !== rb ? ra < rb : a.seq < b.seq;
};

/** The task types some worker can take a job of now (see WorkerRegistry). */
export interface RunnableTypes {
  canRun(taskType: string): boolean;
  /** Every runnable type, possibly more than once. */
  runnableTypes(): Iterable<string>;
  /** How many types `runnableTypes()` yields, repeats included. */
  readonly runnableTypeCount: number;
}

/** The queued jobs of one task type: one heap per base priority, LOW..HIGH. */
interface Lane {
  readonly taskType: string;
  readonly heaps: readonly BinaryHeap<CoreJob>[];
}

export class ReadyQueue {
  readonly #lanes = new Map<string, Lane>();
  readonly #agingStepMs: number;
  #size = 0;

  constructor(agingStepMs: number) {
    this.#agingStepMs = agingStepMs;
  }

  /** Entries held, including lazily removed ones. */
  get size(): number {
    return this.#size;
  }

  push(job: CoreJob): void {
    let lane = this.#lanes.get(job.taskType);
    if (lane === undefined) {
      const heaps = [0, 1, 2].map(() => new BinaryHeap(byReadySince));
      lane = { taskType: job.taskType, heaps };
      this.#lanes.set(job.taskType, lane);
    }
    (lane.heaps[BASE_LEVEL[job.priority]] as BinaryHeap<CoreJob>).push(job);
    this.#size++;
  }

  /**
   * Removes and returns the first job in scheduling order among the task
   * types some worker can take now, or undefined. Looks only at the lanes of
   * those types: from whichever is smaller, the queued task types or the
   * runnable ones, so a type nobody serves costs nothing here.
   */
  popBest(nowMs: number, runnable: RunnableTypes): CoreJob | undefined {
    let best: { lane: Lane; heap: BinaryHeap<CoreJob>; job: CoreJob; level: number } | undefined;
    for (const lane of this.#candidateLanes(runnable)) {
      for (const heap of lane.heaps) {
        const job = this.#head(heap);
        if (job === undefined) continue;
        const level = effectiveLevel(job, nowMs, this.#agingStepMs);
        if (
          best === undefined ||
          level > best.level ||
          (level === best.level && byReadySince(job, best.job))
        ) {
          best = { lane, heap, job, level };
        }
      }
    }
    if (best === undefined) return undefined;
    best.heap.pop();
    this.#size--;
    this.#dropIfEmpty(best.lane);
    return best.job;
  }

  *#candidateLanes(runnable: RunnableTypes): Iterable<Lane> {
    if (this.#lanes.size <= runnable.runnableTypeCount) {
      for (const lane of this.#lanes.values()) if (runnable.canRun(lane.taskType)) yield lane;
      return;
    }
    for (const taskType of runnable.runnableTypes()) {
      const lane = this.#lanes.get(taskType);
      if (lane !== undefined) yield lane;
    }
  }

  /** Forgets a task type's lane once nothing is queued in it (live or lazily removed). */
  #dropIfEmpty(lane: Lane): void {
    if (lane.heaps.every((heap) => heap.size === 0)) this.#lanes.delete(lane.taskType);
  }

  /** Task types that have at least one queued job. */
  *taskTypes(): Iterable<string> {
    for (const [taskType, lane] of this.#lanes) {
      if (lane.heaps.some((heap) => this.#head(heap) !== undefined)) yield taskType;
    }
  }

  /** The live head of a heap, dropping entries that are no longer QUEUED. */
  #head(heap: BinaryHeap<CoreJob>): CoreJob | undefined {
    for (;;) {
      const job = heap.peek();
      if (job === undefined || job.state === 'QUEUED') return job;
      heap.pop();
      this.#size--;
    }
  }
}
