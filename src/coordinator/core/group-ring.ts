/**
 * The queued jobs of one queue and base priority, by group key in turn.
 *
 * One ring per queue and base priority, whatever the jobs' task types: each
 * group has a *turn number* (lower goes first) and, per task type, a heap of
 * its jobs by ready-since. A *lane* is the view of the ring for one task
 * type: the groups with a job of that type, by turn number. A pick asks the
 * lanes of the types some free worker runs for their front groups and takes
 * the one with the lowest turn number; that group then gets the next turn
 * number, so it goes to the back of every lane at once. So the turns are
 * the queue's, not a task type's: a worker that runs several types serves
 * the groups of all of them in one rotation.
 *
 * Turn numbers only grow (a new group, a served group and a group put back
 * after a limit held it all take the next one), so a group waiting in a lane
 * is passed by each other group at most once among the picks that could
 * have taken it: once passed, the other group's number is higher.
 *
 * States of a group in the ring: *in turn* (in the lanes of its task types),
 * *parked* (held by a group limit: out of every lane until put back, at the
 * back), gone (no job left). Removal of jobs is lazy: a job that left QUEUED
 * by another path stays in its heap until it reaches the head.
 */
import type { CoreJob } from './job.js';
import { BinaryHeap } from './binary-heap.js';
import { IndexedHeap } from './indexed-heap.js';

/** One group's jobs in a ring. */
export interface GroupEntry {
  readonly group: string;
  /** Its place in the turns: lower goes first; a new, higher one each time it goes to the back. */
  turn: number;
  /** Its queued jobs per task type, oldest first (dead entries included). */
  readonly byType: Map<string, BinaryHeap<CoreJob>>;
  parked: boolean;
}

const byTurn = (a: GroupEntry, b: GroupEntry): boolean => a.turn < b.turn;

export class GroupRing {
  /** The base level of its jobs (0 = LOW .. 2 = HIGH). */
  readonly base: number;
  readonly #groups = new Map<string, GroupEntry>();
  /** Per task type, the groups in turn (parked ones left out) with a job of that type. */
  readonly #lanes = new Map<string, IndexedHeap<GroupEntry>>();
  readonly #jobOrder: (a: CoreJob, b: CoreJob) => boolean;
  #lastTurn = 0;

  /** @param jobOrder the order of one group's jobs of one type (its head goes first). */
  constructor(base: number, jobOrder: (a: CoreJob, b: CoreJob) => boolean) {
    this.base = base;
    this.#jobOrder = jobOrder;
  }

  /** True when no group has a job here, parked ones included. */
  get isEmpty(): boolean {
    return this.#groups.size === 0;
  }

  /** How many task types have a group in turn. */
  get laneCount(): number {
    return this.#lanes.size;
  }

  /** Task types with a group in turn. */
  laneTypes(): IterableIterator<string> {
    return this.#lanes.keys();
  }

  hasLane(taskType: string): boolean {
    return this.#lanes.has(taskType);
  }

  /** Every group with jobs here, parked ones included. */
  entries(): IterableIterator<GroupEntry> {
    return this.#groups.values();
  }

  /** Adds a job of group `group`: a group new to the ring joins at the back. */
  push(group: string, job: CoreJob): void {
    let entry = this.#groups.get(group);
    if (entry === undefined) {
      entry = { group, turn: ++this.#lastTurn, byType: new Map(), parked: false };
      this.#groups.set(group, entry);
    }
    let heap = entry.byType.get(job.taskType);
    if (heap === undefined) {
      heap = new BinaryHeap(this.#jobOrder);
      entry.byType.set(job.taskType, heap);
      if (!entry.parked) this.#lane(job.taskType).push(entry);
    }
    heap.push(job);
  }

  /** The group whose turn it is among those with a job of `taskType`. */
  front(taskType: string): GroupEntry | undefined {
    return this.#lanes.get(taskType)?.peek();
  }

  /** Pops the head of `entry`'s jobs of `taskType`; the group goes to the back of the turns. */
  take(entry: GroupEntry, taskType: string): CoreJob {
    const heap = entry.byType.get(taskType);
    const job = heap?.pop();
    if (heap === undefined || job === undefined) {
      throw new Error(`group ${entry.group} has no ${taskType} job to take`);
    }
    if (heap.size === 0) this.dropType(entry, taskType);
    if (!this.#groups.has(entry.group)) return job;
    entry.turn = ++this.#lastTurn;
    if (!entry.parked) for (const type of entry.byType.keys()) this.#lane(type).update(entry);
    return job;
  }

  /** `entry` has no live job of `taskType` left: it leaves that lane (and the ring when it has none). */
  dropType(entry: GroupEntry, taskType: string): void {
    if (!entry.byType.delete(taskType)) return;
    if (!entry.parked) this.#leaveLane(entry, taskType);
    if (entry.byType.size === 0) this.#groups.delete(entry.group);
  }

  /** Takes a group a limit holds out of every lane until {@link unpark}. */
  park(entry: GroupEntry): void {
    if (entry.parked) return;
    entry.parked = true;
    for (const type of entry.byType.keys()) this.#leaveLane(entry, type);
  }

  /** Puts a parked group back, at the back of the turns. */
  unpark(group: string): void {
    const entry = this.#groups.get(group);
    if (entry === undefined || !entry.parked) return;
    entry.parked = false;
    entry.turn = ++this.#lastTurn;
    for (const type of entry.byType.keys()) this.#lane(type).push(entry);
  }

  /** Puts every parked group back. */
  unparkAll(): void {
    for (const entry of [...this.#groups.values()]) if (entry.parked) this.unpark(entry.group);
  }

  /** Groups in turn order, parked ones left out (tests and invariant checks). */
  turns(): string[] {
    return [...this.#groups.values()]
      .filter((e) => !e.parked)
      .sort((a, b) => a.turn - b.turn)
      .map((e) => e.group);
  }

  #lane(taskType: string): IndexedHeap<GroupEntry> {
    let lane = this.#lanes.get(taskType);
    if (lane === undefined) this.#lanes.set(taskType, (lane = new IndexedHeap(byTurn)));
    return lane;
  }

  #leaveLane(entry: GroupEntry, taskType: string): void {
    const lane = this.#lanes.get(taskType);
    if (lane === undefined || !lane.has(entry)) return;
    lane.remove(entry);
    if (lane.size === 0) this.#lanes.delete(taskType);
  }
}
