/**
 * Live worker sessions, their capacity, and which of them can run which task
 * type.
 *
 * A session exists from a valid WORKER_REGISTER until the worker is lost
 * (connection closed, protocol violation, heartbeat timeout, replaced by a
 * re-registration). `running` holds the jobs whose current lease names this
 * session; its size is the worker's active-task count and never exceeds
 * `capacity`, plus `prefetch` while the session is prefetching.
 *
 * Prefetch (an extension a worker asks for at registration): a busy worker
 * of short tasks is handed up to `prefetch` attempts beyond its capacity,
 * which it queues and starts the moment a slot frees, instead of each slot
 * idling for a round trip through the coordinator. Only while it pays: the
 * window opens when the spacing of the session's results says a slot takes
 * under {@link PREFETCH_OPEN_MS} per attempt, and closes when that grows past
 * {@link PREFETCH_CLOSE_MS} or no result came for that long. Long tasks
 * never wait on a worker behind others while another worker could start
 * them. Free slots are also summed in {@link WorkerRegistry.freeSlots},
 * so "is anyone free?" is O(1) on the hot path.
 *
 * Routing index. Sessions that declared the same task types form one
 * *class* (in practice: every worker started with the same task modules).
 * Each class keeps its sessions with a free slot in a heap ordered by idle
 * slots, then free ones (most first, ties by worker id), and each task type knows the
 * classes that declared it. So choosing a worker for a job looks at one heap
 * head per class that declared its type, never at every worker, and a slot
 * taken or freed costs O(log n) in its class and nothing per task type. A
 * session without a list (a v1 worker) serves the five built-ins and is
 * never handed anything else.
 */
import type { WorkerSnapshot } from '../../protocol/messages.js';
import { BUILTIN_TASK_TYPES } from '../../protocol/task-types.js';
import { IndexedHeap } from './indexed-heap.js';

export interface WorkerSession {
  readonly workerId: string;
  readonly connId: number;
  readonly capacity: number;
  /**
   * Extension: attempts it takes beyond `capacity`, queued on the worker
   * until a slot is free (0 for a worker that did not ask).
   */
  readonly prefetch: number;
  /** Whether the prefetch part of the window is open now ({@link WorkerRegistry.noteResult}). */
  prefetching: boolean;
  /** When its last accepted result came, epoch ms; null before the first. */
  lastResultMs: number | null;
  /** Smoothed time one slot takes per attempt, estimated from result spacing, ms. */
  slotMs: number | null;
  /** Task types this worker declared; null = the five built-ins (a v1 worker). */
  readonly taskTypes: ReadonlySet<string> | null;
  /** Extension: the named queues it takes attempts from; null = every queue. */
  readonly queues: ReadonlySet<string> | null;
  /** jobIds currently leased to this session. */
  readonly running: Set<string>;
  lastHeartbeatMs: number;
  /** Logged once per silence, when half the heartbeat timeout has passed. */
  suspected: boolean;
  /** Extension: the worker asked for no new assignments. */
  draining: boolean;
  /** Its connection's end has been read (its last frames are being handled): nothing new goes there. */
  ending: boolean;
  /**
   * Extension (`moreHeld`): the worker is still listing what it holds
   * (HELD_ATTEMPTS); nothing new goes there until the list ends. Null = no
   * list under way.
   */
  heldList: HeldList | null;
  /** Extension: the worker asked for a HEARTBEAT_ACK per HEARTBEAT. */
  readonly heartbeatAck: boolean;
  /** Extension: the worker asked for the parents' results with each assignment. */
  readonly parents: boolean;
  /** Extension: the worker asked for each job's trace context with its assignments. */
  readonly traceContext?: boolean;
  /** Extension: the worker asked for recorded steps with its assignments (durable steps). */
  readonly steps?: boolean;
}

/** A held list under way (worker-registration.ts). */
export interface HeldList {
  /** The list ends by this time at the latest, epoch ms. */
  untilMs: number;
  /** Attempts listed so far (bounded in all). */
  listed: number;
}

/** Prefetch opens when a slot takes less than this per attempt, ms. */
export const PREFETCH_OPEN_MS = 50;
/** Prefetch closes when a slot takes more than this per attempt, or no result came for this long, ms. */
export const PREFETCH_CLOSE_MS = 100;
/** Weight of the newest spacing in the smoothed estimate. */
const SLOT_ESTIMATE_WEIGHT = 0.2;

/** Leases a session may hold at once: its slots, and the attempts it queues while prefetching. */
const windowOf = (session: WorkerSession): number =>
  session.capacity + (session.prefetching ? session.prefetch : 0);

/** Takes no new assignments: it is draining, its connection is ending, or it is still listing what it holds. */
const closedToWork = (session: WorkerSession): boolean =>
  session.draining || session.ending || session.heldList !== null;

const freeOf = (session: WorkerSession): number =>
  closedToWork(session) ? 0 : Math.max(0, windowOf(session) - session.running.size);

/** Slots with nothing to run: an attempt sent there starts at once. */
const idleOf = (session: WorkerSession): number =>
  closedToWork(session) ? 0 : Math.max(0, session.capacity - session.running.size);

/** Most idle slots first, then most free places (prefetch included); ties: lowest worker id. */
const moreFree = (a: WorkerSession, b: WorkerSession): boolean => {
  const ia = idleOf(a);
  const ib = idleOf(b);
  if (ia !== ib) return ia > ib;
  const fa = freeOf(a);
  const fb = freeOf(b);
  return fa > fb || (fa === fb && a.workerId < b.workerId);
};

/** Sessions that declared exactly the same task types and queues. */
interface SessionClass {
  readonly key: string;
  readonly types: readonly string[];
  /** The queues its members take from; null = every queue. */
  readonly queues: ReadonlySet<string> | null;
  /** Members with at least one free slot, best first. */
  readonly free: IndexedHeap<WorkerSession>;
  /** Members, draining ones included (the class goes when this reaches 0). */
  members: number;
  /** Members that are not draining: the workers that serve these types. */
  serving: number;
}

/** Whether a class takes attempts from `queue` (undefined: any queue will do). */
const takesFrom = (cls: SessionClass, queue: string | undefined): boolean =>
  queue === undefined || cls.queues === null || cls.queues.has(queue);

function declaredTypes(session: WorkerSession): readonly string[] {
  return session.taskTypes === null ? BUILTIN_TASK_TYPES : [...session.taskTypes].sort();
}

export class WorkerRegistry {
  readonly #byId = new Map<string, WorkerSession>();
  readonly #byConn = new Map<number, WorkerSession>();
  readonly #classOf = new Map<WorkerSession, SessionClass>();
  readonly #classes = new Map<string, SessionClass>();
  /** Per task type: every class that declared it. */
  readonly #declaredBy = new Map<string, Set<SessionClass>>();
  /** Classes with at least one free slot. */
  readonly #available = new Set<SessionClass>();
  /** Sum of the declared types of the available classes. */
  #availableTypes = 0;
  #freeSlots = 0;

  get size(): number {
    return this.#byId.size;
  }

  /** Sum of free slots over sessions that take assignments. */
  get freeSlots(): number {
    return this.#freeSlots;
  }

  get(workerId: string): WorkerSession | undefined {
    return this.#byId.get(workerId);
  }

  byConnection(connId: number): WorkerSession | undefined {
    return this.#byConn.get(connId);
  }

  sessions(): IterableIterator<WorkerSession> {
    return this.#byId.values();
  }

  add(session: WorkerSession): void {
    if (this.#byId.has(session.workerId))
      throw new Error(`worker ${session.workerId} already registered`);
    const cls = this.#joinClass(session);
    cls.members++;
    if (!session.draining) cls.serving++;
    this.#byConn.set(session.connId, session);
    this.#changeFree(session, () => this.#byId.set(session.workerId, session));
  }

  remove(session: WorkerSession): void {
    if (this.#byId.get(session.workerId) !== session) return;
    this.#changeFree(session, () => this.#byId.delete(session.workerId));
    this.#byConn.delete(session.connId);
    const cls = this.#classOf.get(session) as SessionClass;
    this.#classOf.delete(session);
    cls.members--;
    if (!session.draining) cls.serving--;
    if (cls.members === 0) this.#dropClass(cls);
  }

  /** Records a lease on this session (one slot taken). */
  occupy(session: WorkerSession, jobId: string): void {
    if (session.running.size >= windowOf(session)) {
      throw new Error(`worker ${session.workerId} is full (${windowOf(session)})`);
    }
    if (session.running.has(jobId))
      throw new Error(`job ${jobId} already runs on ${session.workerId}`);
    this.#changeFree(session, () => session.running.add(jobId));
  }

  /**
   * Takes back a lease the worker held on an earlier session (it listed it
   * when it registered again). Bounded by the most any session of it may
   * hold, capacity plus prefetch, whether or not prefetch is open now;
   * returns false (nothing changed) when that is reached.
   */
  adopt(session: WorkerSession, jobId: string): boolean {
    if (session.running.size >= session.capacity + session.prefetch) return false;
    if (session.running.has(jobId))
      throw new Error(`job ${jobId} already runs on ${session.workerId}`);
    this.#changeFree(session, () => session.running.add(jobId));
    return true;
  }

  /** Releases a lease's slot; false if the job was not running there. */
  release(session: WorkerSession, jobId: string): boolean {
    if (!session.running.has(jobId)) return false;
    this.#changeFree(session, () => session.running.delete(jobId));
    return true;
  }

  /**
   * An accepted result came from this session at `nowMs`: updates its slot
   * time estimate (result spacing × capacity, which is the time per attempt
   * of one slot while the worker is busy) and opens or closes prefetch.
   */
  noteResult(session: WorkerSession, nowMs: number): void {
    const last = session.lastResultMs;
    session.lastResultMs = nowMs;
    if (session.prefetch === 0 || last === null) return;
    const sample = Math.max(0, nowMs - last) * session.capacity;
    const estimate =
      session.slotMs === null
        ? sample
        : session.slotMs + SLOT_ESTIMATE_WEIGHT * (sample - session.slotMs);
    session.slotMs = estimate;
    if (!session.prefetching && estimate < PREFETCH_OPEN_MS) this.#setPrefetching(session, true);
    else if (session.prefetching && estimate > PREFETCH_CLOSE_MS)
      this.#setPrefetching(session, false);
  }

  /** Closes prefetch on a session that sent no result for {@link PREFETCH_CLOSE_MS}. */
  closeIdlePrefetch(session: WorkerSession, nowMs: number): void {
    if (!session.prefetching) return;
    if (nowMs - (session.lastResultMs ?? nowMs) <= PREFETCH_CLOSE_MS) return;
    session.slotMs = null;
    this.#setPrefetching(session, false);
  }

  #setPrefetching(session: WorkerSession, on: boolean): void {
    this.#changeFree(session, () => (session.prefetching = on));
  }

  /** Stops assignments to a session (it keeps its running jobs). */
  markDraining(session: WorkerSession): void {
    if (session.draining) return;
    this.#changeFree(session, () => (session.draining = true));
    (this.#classOf.get(session) as SessionClass).serving--;
  }

  /** Its held list ended (`moreHeld`): it takes assignments from now on. */
  endHeldList(session: WorkerSession): void {
    if (session.heldList === null) return;
    this.#changeFree(session, () => (session.heldList = null));
  }

  /** Its connection's end has been read: no more assignments (it keeps its leases until it is lost). */
  markEnding(session: WorkerSession): void {
    if (session.ending) return;
    this.#changeFree(session, () => (session.ending = true));
  }

  /**
   * The session with the most idle, then free, slots that declared
   * `taskType` (ties: lowest workerId), or undefined. Looks at one heap head per class.
   */
  pickFor(taskType: string, queue?: string): WorkerSession | undefined {
    let best: WorkerSession | undefined;
    for (const cls of this.#declaredBy.get(taskType) ?? []) {
      if (!takesFrom(cls, queue)) continue;
      const head = cls.free.peek();
      if (head !== undefined && (best === undefined || moreFree(head, best))) best = head;
    }
    return best;
  }

  /** True if some session with a free slot declared `taskType`. O(classes that declared it). */
  canRun(taskType: string, queue?: string): boolean {
    for (const cls of this.#declaredBy.get(taskType) ?? []) {
      if (cls.free.size > 0 && takesFrom(cls, queue)) return true;
    }
    return false;
  }

  /**
   * Task types that some session with a free slot declared; a type declared
   * by several such classes comes once per class.
   */
  *runnableTypes(): IterableIterator<string> {
    for (const cls of this.#available) yield* cls.types;
  }

  /** How many task types {@link runnableTypes} yields (duplicates included). */
  get runnableTypeCount(): number {
    return this.#availableTypes;
  }

  /** Live, non-draining sessions that declared `taskType`. */
  servingCount(taskType: string): number {
    let count = 0;
    for (const cls of this.#declaredBy.get(taskType) ?? []) count += cls.serving;
    return count;
  }

  /** True if a live, non-draining session declared `taskType`. */
  isServed(taskType: string): boolean {
    for (const cls of this.#declaredBy.get(taskType) ?? []) if (cls.serving > 0) return true;
    return false;
  }

  /** Task types some live, non-draining session declared. */
  servedTaskTypes(): string[] {
    const out: string[] = [];
    for (const taskType of this.#declaredBy.keys()) if (this.isServed(taskType)) out.push(taskType);
    return out;
  }

  /** Live workers sorted by id. */
  snapshots(): WorkerSnapshot[] {
    return [...this.#byId.values()]
      .sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0))
      .map((s) => ({
        workerId: s.workerId,
        capacity: s.capacity,
        // A worker runs at most `capacity` of its leases; the rest wait there (prefetch).
        activeTasks: Math.min(s.running.size, s.capacity),
        lastHeartbeatMillis: s.lastHeartbeatMs,
        taskTypes: s.taskTypes === null ? null : [...s.taskTypes],
        ...(s.queues === null ? {} : { queues: [...s.queues] }),
        draining: s.draining,
        runningJobs: [...s.running],
        ...(s.prefetch === 0 ? {} : { queuedTasks: Math.max(0, s.running.size - s.capacity) }),
      }));
  }

  /**
   * Applies `change` to a session and keeps the free-slot sum, its class
   * heap and the per-type availability in step with it. A session counts
   * only while it is registered.
   */
  #changeFree(session: WorkerSession, change: () => unknown): void {
    const cls = this.#classOf.get(session);
    if (cls === undefined) {
      // Removed already (or never added): nothing here counts it any more.
      change();
      return;
    }
    const freeBefore = this.#isRegistered(session) ? freeOf(session) : 0;
    change();
    const freeAfter = this.#isRegistered(session) ? freeOf(session) : 0;
    this.#freeSlots += freeAfter - freeBefore;
    const wasAvailable = cls.free.size > 0;
    if (freeAfter > 0 && cls.free.has(session)) cls.free.update(session);
    else if (freeAfter > 0) cls.free.push(session);
    else if (cls.free.has(session)) cls.free.remove(session);
    const isAvailable = cls.free.size > 0;
    if (wasAvailable !== isAvailable) this.#setAvailable(cls, isAvailable);
  }

  #isRegistered(session: WorkerSession): boolean {
    return this.#byId.get(session.workerId) === session;
  }

  #setAvailable(cls: SessionClass, available: boolean): void {
    if (available) this.#available.add(cls);
    else this.#available.delete(cls);
    this.#availableTypes += available ? cls.types.length : -cls.types.length;
  }

  #joinClass(session: WorkerSession): SessionClass {
    const types = declaredTypes(session);
    const queues = session.queues === null ? null : [...session.queues].sort();
    // A tab cannot appear in a task type or a queue name: it separates the two lists.
    const key = queues === null ? types.join('\n') : `${types.join('\n')}\t${queues.join('\n')}`;
    let cls = this.#classes.get(key);
    if (cls === undefined) {
      cls = {
        key,
        types,
        queues: session.queues,
        free: new IndexedHeap(moreFree),
        members: 0,
        serving: 0,
      };
      this.#classes.set(key, cls);
      for (const type of types) {
        let set = this.#declaredBy.get(type);
        if (set === undefined) this.#declaredBy.set(type, (set = new Set()));
        set.add(cls);
      }
    }
    this.#classOf.set(session, cls);
    return cls;
  }

  #dropClass(cls: SessionClass): void {
    this.#classes.delete(cls.key);
    for (const type of cls.types) {
      const set = this.#declaredBy.get(type);
      set?.delete(cls);
      if (set?.size === 0) this.#declaredBy.delete(type);
    }
  }
}
