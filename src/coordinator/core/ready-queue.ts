/**
 * The QUEUED jobs, in scheduling order.
 *
 * The order (docs/PROTOCOL.md "Scheduling order"): among the jobs some free
 * worker may take, whose queue is not held (paused, at its concurrency, out
 * of rate) and whose group is not held (group concurrency, group rate):
 * 1. highest effective priority first;
 * 2. then the queue served longest ago (queues with ready work take turns);
 * 3. then, within one queue, task type and base priority, group keys take
 *    turns (round robin): the group whose turn it is gives its oldest job;
 * 4. then the time each became ready (submission, or a delayed job's due
 *    time; see {@link readySinceMs}), then submission order (seq).
 *
 * A job's effective level is min(HIGH, base + floor(age / agingStep)), age
 * counted from when it became ready.
 *
 * Structure: per queue, per task type (a *lane*), per base priority a
 * {@link GroupRing}: one heap per group key ordered by ready-since and seq
 * (its head is its oldest, so its highest level), and the ring of
 * groups in turn. The ring's front group's oldest job is the ring's
 * candidate. Queues are looked at in turn order, and the look stops at the
 * first queue whose candidate has the highest effective level any queued
 * job has now ({@link LevelBound}): so a pick usually costs O(runnable task
 * types x 3) candidate looks in one or a few queues (all unheld queues only
 * when a higher-level job waits in one that cannot run it) plus O(log n) to
 * remove the job, never a sort or a scan of jobs. A group held by a group limit is *parked* out of its rings (so a
 * held group costs nothing per pick) and put back at the end of the ring
 * when its lease ends or its rate window opens.
 *
 * Fairness bound: once a group is in a ring, every other group of that ring
 * is served at most once before it.
 *
 * Removal is lazy: a job that leaves QUEUED by another path (cancel) stays in
 * its heap until it reaches the head, where it is skipped.
 */
import type { Priority } from '../../protocol/messages.js';
import type { CoreJob } from './job.js';
import { BinaryHeap } from './binary-heap.js';
import { LevelBound } from './level-bound.js';
import { NO_GROUP } from './queue-table.js';

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

/** The group a job counts in (jobs without a key form one group). */
export const groupOf = (job: Readonly<CoreJob>): string => job.groupKey ?? NO_GROUP;

/** The task types (and queues) some worker can take a job of now (see WorkerRegistry). */
export interface RunnableTypes {
  /** Whether a free worker takes `taskType` (from `queue`, when given). */
  canRun(taskType: string, queue?: string): boolean;
  /** Every runnable type, possibly more than once. */
  runnableTypes(): Iterable<string>;
  /** How many types `runnableTypes()` yields, repeats included. */
  readonly runnableTypeCount: number;
}

/** What holds a queue or a group back (the queue table). */
export interface QueueLimits {
  /** Non-null when nothing of the queue may start now. */
  queueBlock(queue: string, nowMs: number): string | null;
  /** When the group may start its next attempt: now or later, or null (a lease must end). */
  groupOpeningMs(queue: string, group: string, nowMs: number): number | null;
  /** When a queue held by its rate may start again (after `nowMs`); null when its rate does not hold it. */
  queueOpeningMs?(queue: string, nowMs: number): number | null;
}

const NO_LIMITS: QueueLimits = {
  queueBlock: () => null,
  groupOpeningMs: (_queue, _group, nowMs) => nowMs,
};

/** The queued jobs of one queue, task type and base priority, by group in turn. */
class GroupRing {
  /** The base level of its jobs (0 = LOW .. 2 = HIGH). */
  readonly base: number;
  readonly heaps = new Map<string, BinaryHeap<CoreJob>>();
  /** Groups in turn, front first; each ready, unparked group once. */
  #turns: string[] = [];
  #front = 0;
  /** Groups held by a group limit: out of the turns until put back. */
  readonly parked = new Set<string>();

  constructor(base: number) {
    this.base = base;
  }

  get isEmpty(): boolean {
    return this.heaps.size === 0;
  }

  push(job: CoreJob): void {
    const group = groupOf(job);
    let heap = this.heaps.get(group);
    if (heap === undefined) {
      this.heaps.set(group, (heap = new BinaryHeap(byReadySince)));
      this.#turns.push(group);
    }
    heap.push(job);
  }

  /** The group whose turn it is, or undefined. */
  front(): string | undefined {
    return this.#turns[this.#front];
  }

  /** Takes the front group out of the turns (it is gone, or parked). */
  dropFront(): void {
    this.#front++;
    if (this.#front > 64 && this.#front * 2 > this.#turns.length) {
      this.#turns = this.#turns.slice(this.#front);
      this.#front = 0;
    }
  }

  /** Pops the front group's head; the group goes to the back while it has jobs. */
  take(): CoreJob {
    const group = this.front() as string;
    const heap = this.heaps.get(group) as BinaryHeap<CoreJob>;
    const job = heap.pop() as CoreJob;
    this.dropFront();
    if (heap.size > 0) this.#turns.push(group);
    else this.heaps.delete(group);
    return job;
  }

  park(group: string): void {
    this.dropFront();
    this.parked.add(group);
  }

  /** Puts a parked group back, at the end of the turns. */
  unpark(group: string): void {
    if (!this.parked.delete(group)) return;
    if (this.heaps.has(group)) this.#turns.push(group);
  }

  /** Groups in turn order (tests and invariant checks). */
  turns(): string[] {
    return this.#turns.slice(this.#front);
  }
}

/** The queued jobs of one queue and task type: one ring per base priority, LOW..HIGH. */
interface Lane {
  readonly taskType: string;
  readonly rings: readonly GroupRing[];
}

interface QueueLanes {
  readonly name: string;
  readonly lanes: Map<string, Lane>;
  /** The pick at which this queue was last served (lower = longer ago). */
  lastServed: number;
}

interface RateParked {
  atMs: number;
  queue: string;
  /** Null: the queue itself is held by its rate (nothing to put back; a wake-up only). */
  group: string | null;
}

interface Candidate {
  queue: QueueLanes;
  lane: Lane;
  ring: GroupRing;
  job: CoreJob;
  level: number;
}

export class ReadyQueue {
  readonly #queues = new Map<string, QueueLanes>();
  readonly #agingStepMs: number;
  readonly #limits: QueueLimits;
  readonly #rateParked = new BinaryHeap<RateParked>((a, b) => a.atMs < b.atMs);
  /** Queues held by their rate with an entry in #rateParked: the opening it names. */
  readonly #queueOpenings = new Map<string, number>();
  /**
   * The queues in turn order: those never served since they got ready work
   * (ties among them go by their jobs' age), then the served ones, served
   * longest ago first. Each queue is in exactly one.
   */
  readonly #fresh = new Set<QueueLanes>();
  readonly #served = new Set<QueueLanes>();
  readonly #bound = new LevelBound(readySinceMs);
  readonly #level = (job: CoreJob, nowMs: number): number =>
    effectiveLevel(job, nowMs, this.#agingStepMs);
  #size = 0;
  #picks = 0;

  constructor(agingStepMs: number, limits: QueueLimits = NO_LIMITS) {
    this.#agingStepMs = agingStepMs;
    this.#limits = limits;
  }

  /** Entries held, including lazily removed ones. */
  get size(): number {
    return this.#size;
  }

  push(job: CoreJob): void {
    let q = this.#queues.get(job.queue);
    if (q === undefined) {
      q = { name: job.queue, lanes: new Map(), lastServed: 0 };
      this.#queues.set(job.queue, q);
      this.#fresh.add(q);
    }
    let lane = q.lanes.get(job.taskType);
    if (lane === undefined) {
      const rings = [new GroupRing(0), new GroupRing(1), new GroupRing(2)];
      lane = { taskType: job.taskType, rings };
      q.lanes.set(job.taskType, lane);
    }
    const base = BASE_LEVEL[job.priority];
    (lane.rings[base] as GroupRing).push(job);
    this.#bound.added(job, base);
    this.#size++;
  }

  /**
   * Removes and returns the first job in scheduling order among the task
   * types (and queues) some worker can take now, or undefined.
   */
  popBest(nowMs: number, runnable: RunnableTypes): CoreJob | undefined {
    this.unparkDue(nowMs);
    // Queues are looked at in turn order; once the best candidate has the
    // highest level any queued job has, a queue served later cannot beat it,
    // so a pick usually looks at a few queues, not all of them.
    const bound = this.#bound.highest(nowMs, this.#level);
    let best: Candidate | undefined;
    for (const q of this.#fresh) best = this.#consider(q, nowMs, runnable, best);
    for (const q of this.#served) {
      if (best !== undefined && best.level >= bound) break;
      best = this.#consider(q, nowMs, runnable, best);
    }
    if (best === undefined) return undefined;
    best.ring.take();
    this.#bound.removed(best.ring.base);
    this.#size--;
    const q = best.queue;
    q.lastServed = ++this.#picks;
    this.#fresh.delete(q);
    this.#served.delete(q);
    this.#served.add(q);
    this.#dropIfEmpty(q, best.lane);
    return best.job;
  }

  /** The better of `best` and the candidates of queue `q`. */
  #consider(
    q: QueueLanes,
    nowMs: number,
    runnable: RunnableTypes,
    best: Candidate | undefined,
  ): Candidate | undefined {
    const block = this.#limits.queueBlock(q.name, nowMs);
    if (block !== null) {
      if (block === 'rate') this.#noteQueueOpening(q.name, nowMs);
      return best;
    }
    for (const lane of this.#candidateLanes(q, runnable)) {
      for (const ring of lane.rings) {
        const job = this.#head(q, ring, nowMs);
        if (job === undefined) continue;
        const level = effectiveLevel(job, nowMs, this.#agingStepMs);
        if (best === undefined || this.#better(level, q, job, best)) {
          best = { queue: q, lane, ring, job, level };
        }
      }
    }
    return best;
  }

  #better(level: number, q: QueueLanes, job: CoreJob, best: Candidate): boolean {
    if (level !== best.level) return level > best.level;
    if (q !== best.queue && q.lastServed !== best.queue.lastServed) {
      return q.lastServed < best.queue.lastServed;
    }
    return byReadySince(job, best.job);
  }

  /**
   * A group's lease ended or its queue's settings changed: the group (every
   * group of the queue, when `group` is undefined) is back in its rings.
   */
  unpark(queue: string, group?: string): void {
    const q = this.#queues.get(queue);
    if (q === undefined) return;
    for (const lane of q.lanes.values()) {
      for (const ring of lane.rings) {
        if (group !== undefined) ring.unpark(group);
        else for (const g of [...ring.parked]) ring.unpark(g);
      }
    }
  }

  /**
   * The earliest time a queue or group held by its rate may start again;
   * null when none is held so. It changes only with picks and
   * {@link unparkDue}, never by the clock alone (the core's wake-up).
   */
  nextUnparkMs(): number | null {
    return this.#rateParked.peek()?.atMs ?? null;
  }

  /** Puts back the groups whose rate window has opened by `nowMs` (and forgets queue openings passed). */
  unparkDue(nowMs: number): void {
    for (let due = this.#rateParked.peek(); due !== undefined && due.atMs <= nowMs;) {
      this.#rateParked.pop();
      if (due.group !== null) this.unpark(due.queue, due.group);
      else if (this.#queueOpenings.get(due.queue) === due.atMs)
        this.#queueOpenings.delete(due.queue);
      due = this.#rateParked.peek();
    }
  }

  #noteQueueOpening(queue: string, nowMs: number): void {
    const atMs = this.#limits.queueOpeningMs?.(queue, nowMs) ?? null;
    if (atMs === null || atMs <= nowMs || this.#queueOpenings.get(queue) === atMs) return;
    this.#queueOpenings.set(queue, atMs);
    this.#rateParked.push({ atMs, queue, group: null });
  }

  *#candidateLanes(q: QueueLanes, runnable: RunnableTypes): Iterable<Lane> {
    if (q.lanes.size <= runnable.runnableTypeCount) {
      for (const lane of q.lanes.values()) if (runnable.canRun(lane.taskType, q.name)) yield lane;
      return;
    }
    for (const taskType of runnable.runnableTypes()) {
      const lane = q.lanes.get(taskType);
      if (lane !== undefined && runnable.canRun(taskType, q.name)) yield lane;
    }
  }

  /** Forgets a lane (and its queue) once nothing is queued in it, live or lazily removed. */
  #dropIfEmpty(q: QueueLanes, lane: Lane): void {
    if (!lane.rings.every((ring) => ring.isEmpty)) return;
    q.lanes.delete(lane.taskType);
    if (q.lanes.size > 0) return;
    this.#queues.delete(q.name);
    this.#fresh.delete(q);
    this.#served.delete(q);
  }

  /** Task types that have at least one queued job. */
  *taskTypes(): Iterable<string> {
    const seen = new Set<string>();
    for (const q of this.#queues.values()) {
      for (const [taskType, lane] of q.lanes) {
        if (seen.has(taskType)) continue;
        if (lane.rings.some((r) => [...r.heaps.values()].some((h) => this.#live(h, r.base)))) {
          seen.add(taskType);
          yield taskType;
        }
      }
    }
  }

  /** Queued jobs (live ones) per group of a queue, largest first (the Queues page). */
  groupBacklog(queue: string, limit: number): { group: string; queued: number }[] {
    const counts = new Map<string, number>();
    for (const lane of this.#queues.get(queue)?.lanes.values() ?? []) {
      for (const ring of lane.rings) {
        for (const [group, heap] of ring.heaps) {
          counts.set(group, (counts.get(group) ?? 0) + heap.size);
        }
      }
    }
    return [...counts]
      .map(([group, queued]) => ({ group, queued }))
      .sort((a, b) => b.queued - a.queued || (a.group < b.group ? -1 : 1))
      .slice(0, limit);
  }

  /** Ring turn orders of a queue, for invariant checks: [taskType, level, groups][]. */
  turnsOf(queue: string): [string, number, string[]][] {
    const out: [string, number, string[]][] = [];
    for (const [taskType, lane] of this.#queues.get(queue)?.lanes ?? []) {
      lane.rings.forEach((ring, level) => out.push([taskType, level, ring.turns()]));
    }
    return out;
  }

  /**
   * The live head of a ring: the oldest QUEUED job of the group whose turn
   * it is. Drops entries no longer QUEUED and groups left empty; parks the
   * groups a group limit holds.
   */
  #head(q: QueueLanes, ring: GroupRing, nowMs: number): CoreJob | undefined {
    for (let group = ring.front(); group !== undefined; group = ring.front()) {
      const heap = ring.heaps.get(group);
      const job = heap === undefined ? undefined : this.#live(heap, ring.base);
      if (heap === undefined || job === undefined) {
        ring.heaps.delete(group);
        ring.dropFront();
        continue;
      }
      const opensAtMs = this.#limits.groupOpeningMs(q.name, group, nowMs);
      if (opensAtMs === nowMs) return job;
      ring.park(group);
      if (opensAtMs !== null) this.#rateParked.push({ atMs: opensAtMs, queue: q.name, group });
    }
    return undefined;
  }

  /** The live head of a heap, dropping entries that are no longer QUEUED. */
  #live(heap: BinaryHeap<CoreJob>, base: number): CoreJob | undefined {
    for (;;) {
      const job = heap.peek();
      if (job === undefined || job.state === 'QUEUED') return job;
      heap.pop();
      this.#bound.removed(base);
      this.#size--;
    }
  }
}
