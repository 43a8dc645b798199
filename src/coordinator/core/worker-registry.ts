/**
 * Live worker sessions and their capacity.
 *
 * A session exists from a valid WORKER_REGISTER until the worker is lost
 * (connection closed, protocol violation, heartbeat timeout, replaced by a
 * re-registration). `running` holds the jobs whose current lease names this
 * session; its size is the worker's active-task count and never exceeds
 * `capacity`. Free slots are also summed in {@link WorkerRegistry.freeSlots},
 * so "is anyone free?" is O(1) on the hot path.
 */
import type { WorkerSnapshot } from '../../protocol/messages.js';
import { isBuiltinTaskType } from '../../protocol/task-types.js';

export interface WorkerSession {
  readonly workerId: string;
  readonly connId: number;
  readonly capacity: number;
  /** Task types this worker runs; null = the five built-in types (a v1 worker). */
  readonly taskTypes: ReadonlySet<string> | null;
  /** jobIds currently leased to this session. */
  readonly running: Set<string>;
  lastHeartbeatMs: number;
  /** Logged once per silence, when half the heartbeat timeout has passed. */
  suspected: boolean;
  /** Extension: the worker asked for no new assignments. */
  draining: boolean;
}

/** The task types a v1 worker (no `taskTypes`) runs. */
const BUILTINS_KEY = '\u0000builtins';

/** A v1 session (no declared list) runs the built-ins only. */
function runs(session: WorkerSession, taskType: string): boolean {
  return session.taskTypes === null ? isBuiltinTaskType(taskType) : session.taskTypes.has(taskType);
}

export class WorkerRegistry {
  readonly #byId = new Map<string, WorkerSession>();
  readonly #byConn = new Map<number, WorkerSession>();
  /** Live sessions per declared task type (v1 sessions under {@link BUILTINS_KEY}). */
  readonly #serving = new Map<string, number>();
  #freeSlots = 0;

  /** Live workers that run `taskType` (busy or not). */
  servingCount(taskType: string): number {
    const declared = this.#serving.get(taskType) ?? 0;
    return isBuiltinTaskType(taskType)
      ? declared + (this.#serving.get(BUILTINS_KEY) ?? 0)
      : declared;
  }

  #countServing(session: WorkerSession, delta: 1 | -1): void {
    for (const type of session.taskTypes ?? [BUILTINS_KEY]) {
      const n = (this.#serving.get(type) ?? 0) + delta;
      if (n === 0) this.#serving.delete(type);
      else this.#serving.set(type, n);
    }
  }

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
    this.#byId.set(session.workerId, session);
    this.#byConn.set(session.connId, session);
    this.#freeSlots += this.#free(session);
    this.#countServing(session, 1);
  }

  remove(session: WorkerSession): void {
    if (this.#byId.get(session.workerId) !== session) return;
    this.#freeSlots -= this.#free(session);
    this.#byId.delete(session.workerId);
    this.#byConn.delete(session.connId);
    this.#countServing(session, -1);
  }

  /** Records a lease on this session (one slot taken). */
  occupy(session: WorkerSession, jobId: string): void {
    if (session.running.size >= session.capacity) {
      throw new Error(`worker ${session.workerId} is full (${session.capacity})`);
    }
    if (session.running.has(jobId))
      throw new Error(`job ${jobId} already runs on ${session.workerId}`);
    this.#freeSlots -= this.#free(session);
    session.running.add(jobId);
    this.#freeSlots += this.#free(session);
  }

  /** Releases a lease's slot; false if the job was not running there. */
  release(session: WorkerSession, jobId: string): boolean {
    if (!session.running.has(jobId)) return false;
    this.#freeSlots -= this.#free(session);
    session.running.delete(jobId);
    this.#freeSlots += this.#free(session);
    return true;
  }

  /** Stops assignments to a session (it keeps its running jobs). */
  markDraining(session: WorkerSession): void {
    if (session.draining) return;
    this.#freeSlots -= this.#free(session);
    session.draining = true;
  }

  /**
   * The session with the most free slots that runs `taskType` (ties: lowest
   * workerId), or undefined.
   */
  pickFor(taskType: string): WorkerSession | undefined {
    let best: WorkerSession | undefined;
    let bestFree = 0;
    for (const session of this.#byId.values()) {
      const free = this.#free(session);
      if (free === 0 || !runs(session, taskType)) continue;
      if (
        free > bestFree ||
        (free === bestFree && best !== undefined && session.workerId < best.workerId)
      ) {
        best = session;
        bestFree = free;
      }
    }
    return best;
  }

  /** True if some session with a free slot runs `taskType`. */
  canRun(taskType: string): boolean {
    return this.pickFor(taskType) !== undefined;
  }

  /** Live workers sorted by id. */
  snapshots(): WorkerSnapshot[] {
    return [...this.#byId.values()]
      .sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0))
      .map((s) => ({
        workerId: s.workerId,
        capacity: s.capacity,
        activeTasks: s.running.size,
        lastHeartbeatMillis: s.lastHeartbeatMs,
      }));
  }

  #free(session: WorkerSession): number {
    return session.draining ? 0 : session.capacity - session.running.size;
  }
}
