/**
 * The QUEUED jobs, in scheduling order.
 *
 * The order (docs/PROTOCOL.md "Scheduling order"): among the jobs some free
 * worker may take, whose queue is not held (paused, at its concurrency, out
 * of rate) and whose group is not held (group concurrency, group rate):
 * 1. highest effective priority first;
 * 2. then the queue served longest ago (queues with ready work take turns);
 * 3. then, within one queue and base priority, group keys take turns
 *    (round robin, across task types): the group whose turn it is among
 *    those with a job some free worker runs gives its oldest such job;
 * 4. then the time each became ready (submission, or a delayed job's due
 *    time; see {@link readySinceMs}), then submission order (seq).
 *
 * A job's effective level is min(HIGH, base + floor(age / agingStep)), age
 * counted from when it became ready.
 *
 * Structure: per queue, per base priority a {@link GroupRing}: per group a
 * heap per task type ordered by ready-since and seq, and per task type a
 * lane of the groups in turn. The ring's candidate is the front group of the
 * runnable lanes with the lowest turn number, and that group's oldest job of
 * the lane's type. Queues are looked at in turn order, and the look stops at
 * the first queue whose candidate has the highest effective level any
 * queued job has now ({@link LevelBound}): so a pick usually costs
 * O(runnable task types x 3) candidate looks in one or a few queues (all
 * unheld queues only when a higher-level job waits in one that cannot run
 * it) plus O(log n) to remove the job and O(k log n) to send its group to
 * the back of its k lanes, never a sort or a scan of jobs. A group held by
 * a group limit is *parked* out of its lanes (so a held group costs nothing
 * per pick) and put back at the back when its lease ends or its rate window
 * opens.
 *
 * Fairness bound: while a group has a job of task type T waiting in a ring,
 * every other group of that ring is served at most once before it among the
 * picks that could have taken that job (some free worker ran T then and
 * took the queue, and no limit held the group). Picks that serve other
 * queues or priorities, or that no worker for T could have taken, do not
 * count against it.
 *
 * Removal is lazy: a job that leaves QUEUED by another path (cancel) stays in
 * its heap until it reaches the head, where it is skipped; `cancelled()`
 * keeps the per-group counts of live jobs exact meanwhile.
 */
import type { Priority } from '../../protocol/messages.js';
import type { CoreJob } from './job.js';
import { BinaryHeap } from './binary-heap.js';
import { GroupRing, type GroupEntry } from './group-ring.js';
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

interface QueueRings {
  readonly name: string;
  /** One ring per base priority, LOW..HIGH. */
  readonly rings: readonly GroupRing[];
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
  queue: QueueRings;
  ring: GroupRing;
  entry: GroupEntry;
  taskType: string;
  job: CoreJob;
  level: number;
}

export class ReadyQueue {
  readonly #queues = new Map<string, QueueRings>();
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
  readonly #fresh = new Set<QueueRings>();
  readonly #served = new Set<QueueRings>();
  readonly #bound = new LevelBound(readySinceMs);
  readonly #level = (job: CoreJob, nowMs: number): number =>
    effectiveLevel(job, nowMs, this.#agingStepMs);
  /** Live (QUEUED) jobs per queue and group: the Queues page's backlog. */
  readonly #live = new Map<string, Map<string, number>>();
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
      const rings = [0, 1, 2].map((base) => new GroupRing(base, byReadySince));
      q = { name: job.queue, rings, lastServed: 0 };
      this.#queues.set(job.queue, q);
      this.#fresh.add(q);
    }
    const base = BASE_LEVEL[job.priority];
    (q.rings[base] as GroupRing).push(groupOf(job), job);
    this.#bound.added(job, base);
    this.#size++;
    this.#count(job, 1);
  }

  /**
   * A QUEUED job was cancelled: it stays in its heap until it reaches the
   * head (lazy removal), but no longer counts in its group's backlog.
   */
  cancelled(job: Readonly<CoreJob>): void {
    this.#count(job, -1);
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
    best.ring.take(best.entry, best.taskType);
    this.#bound.removed(best.ring.base);
    this.#size--;
    this.#count(best.job, -1);
    const q = best.queue;
    q.lastServed = ++this.#picks;
    this.#fresh.delete(q);
    this.#served.delete(q);
    this.#served.add(q);
    this.#dropIfEmpty(q);
    return best.job;
  }

  /** The better of `best` and the candidates of queue `q`. */
  #consider(
    q: QueueRings,
    nowMs: number,
    runnable: RunnableTypes,
    best: Candidate | undefined,
  ): Candidate | undefined {
    const block = this.#limits.queueBlock(q.name, nowMs);
    if (block !== null) {
      if (block === 'rate') this.#noteQueueOpening(q.name, nowMs);
      return best;
    }
    for (const ring of q.rings) {
      const found = this.#ringCandidate(q, ring, nowMs, runnable);
      if (found !== undefined && (best === undefined || this.#better(found, best))) best = found;
    }
    return best;
  }

  /**
   * A ring's candidate: among the lanes some free worker runs, the front
   * group with the lowest turn number, and its oldest job of that lane's
   * type (the same group at the front of several lanes: its oldest of them).
   */
  #ringCandidate(
    q: QueueRings,
    ring: GroupRing,
    nowMs: number,
    runnable: RunnableTypes,
  ): Candidate | undefined {
    let found: Candidate | undefined;
    for (const taskType of this.#candidateTypes(q, ring, runnable)) {
      const entry = this.#front(q, ring, taskType, nowMs);
      if (entry === undefined) continue;
      const job = entry.byType.get(taskType)?.peek() as CoreJob;
      if (
        found === undefined ||
        entry.turn < found.entry.turn ||
        (entry === found.entry && byReadySince(job, found.job))
      ) {
        found = { queue: q, ring, entry, taskType, job, level: 0 };
      }
    }
    if (found !== undefined) found.level = effectiveLevel(found.job, nowMs, this.#agingStepMs);
    return found;
  }

  /** Candidates of different rings: level, then the queue served longest ago, then age. */
  #better(c: Candidate, best: Candidate): boolean {
    if (c.level !== best.level) return c.level > best.level;
    if (c.queue !== best.queue && c.queue.lastServed !== best.queue.lastServed) {
      return c.queue.lastServed < best.queue.lastServed;
    }
    return byReadySince(c.job, best.job);
  }

  /**
   * A group's lease ended or its queue's settings changed: the group (every
   * group of the queue, when `group` is undefined) is back in its rings.
   */
  unpark(queue: string, group?: string): void {
    const q = this.#queues.get(queue);
    if (q === undefined) return;
    for (const ring of q.rings) {
      if (group !== undefined) ring.unpark(group);
      else ring.unparkAll();
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

  /** The task types of a ring's lanes that some free worker runs (for the queue). */
  *#candidateTypes(q: QueueRings, ring: GroupRing, runnable: RunnableTypes): Iterable<string> {
    if (ring.laneCount === 0) return;
    if (ring.laneCount <= runnable.runnableTypeCount) {
      for (const taskType of ring.laneTypes())
        if (runnable.canRun(taskType, q.name)) yield taskType;
      return;
    }
    for (const taskType of runnable.runnableTypes()) {
      if (ring.hasLane(taskType) && runnable.canRun(taskType, q.name)) yield taskType;
    }
  }

  /** Forgets a queue once nothing is queued in it, live or lazily removed. */
  #dropIfEmpty(q: QueueRings): void {
    if (!q.rings.every((ring) => ring.isEmpty)) return;
    this.#queues.delete(q.name);
    this.#fresh.delete(q);
    this.#served.delete(q);
  }

  #count(job: Readonly<CoreJob>, by: 1 | -1): void {
    let groups = this.#live.get(job.queue);
    if (groups === undefined) this.#live.set(job.queue, (groups = new Map<string, number>()));
    const group = groupOf(job);
    const n = (groups.get(group) ?? 0) + by;
    if (n < 0) throw new Error(`queue ${job.queue} group ${group}: live count below zero`);
    if (n > 0) groups.set(group, n);
    else groups.delete(group);
    if (groups.size === 0) this.#live.delete(job.queue);
  }

  /** Task types that have at least one queued job. */
  *taskTypes(): Iterable<string> {
    const seen = new Set<string>();
    for (const q of this.#queues.values()) {
      for (const ring of q.rings) {
        for (const entry of ring.entries()) {
          for (const [taskType, heap] of entry.byType) {
            if (seen.has(taskType) || this.#liveHead(heap, ring.base) === undefined) continue;
            seen.add(taskType);
            yield taskType;
          }
        }
      }
    }
  }

  /** Queued jobs (live ones) per group of a queue, largest first (the Queues page). */
  groupBacklog(queue: string, limit: number): { group: string; queued: number }[] {
    return [...(this.#live.get(queue) ?? [])]
      .map(([group, queued]) => ({ group, queued }))
      .sort((a, b) => b.queued - a.queued || (a.group < b.group ? -1 : 1))
      .slice(0, limit);
  }

  /** Ring turn orders of a queue, for invariant checks: [level, groups][]. */
  turnsOf(queue: string): [number, string[]][] {
    const out: [number, string[]][] = [];
    for (const ring of this.#queues.get(queue)?.rings ?? []) {
      if (!ring.isEmpty) out.push([ring.base, ring.turns()]);
    }
    return out;
  }

  /**
   * The front group of a ring's lane with a live job: drops dead entries and
   * groups left without jobs of the type; parks the groups a group limit
   * holds.
   */
  #front(q: QueueRings, ring: GroupRing, taskType: string, nowMs: number): GroupEntry | undefined {
    for (let entry = ring.front(taskType); entry !== undefined; entry = ring.front(taskType)) {
      const heap = entry.byType.get(taskType);
      if (heap === undefined || this.#liveHead(heap, ring.base) === undefined) {
        ring.dropType(entry, taskType);
        continue;
      }
      const opensAtMs = this.#limits.groupOpeningMs(q.name, entry.group, nowMs);
      if (opensAtMs === nowMs) return entry;
      ring.park(entry);
      if (opensAtMs !== null) {
        this.#rateParked.push({ atMs: opensAtMs, queue: q.name, group: entry.group });
      }
    }
    return undefined;
  }

  /** The live head of a heap, dropping entries that are no longer QUEUED. */
  #liveHead(heap: BinaryHeap<CoreJob>, base: number): CoreJob | undefined {
    for (;;) {
      const job = heap.peek();
      if (job === undefined || job.state === 'QUEUED') return job;
      heap.pop();
      this.#bound.removed(base);
      this.#size--;
    }
  }
}
