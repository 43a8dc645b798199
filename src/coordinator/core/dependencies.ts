/**
 * Dependencies between jobs: which WAITING job waits for how many parents,
 * which dependents each unfinished parent has, and the finished parents'
 * outcomes that dependents' handlers read (`TASK_ASSIGN.parents`).
 *
 * A dependent is WAITING while it has open parents (not yet terminal). When
 * a parent ends, its dependents are settled at once, in the same input:
 *   COMPLETED, or the dependent says `onParentFailure: run`  -> one fewer open
 *     parent; at none the dependent becomes QUEUED;
 *   FAILED or CANCELLED (policy `cancel`, the default)       -> the dependent
 *     is cancelled with an error naming the parent, and so on transitively.
 * The reverse index holds open parents only, so a parent's end costs
 * O(its dependents), never a scan. A cascade runs from a work list, not by
 * recursion, so a long chain cannot exhaust the stack.
 *
 * Finished parents' outcomes are held (counted by the active dependents that
 * reference them) until every such dependent is terminal; recovery rebuilds
 * them from the store's rows of those parents (`RecoveredState.parentJobs`).
 *
 * For reading only (the dashboard's flow view), every parent, ended or not,
 * also lists its dependents that have not ended; settling never uses it.
 */
import type { JobState, ParentResult, ResultFormat } from '../../protocol/messages.js';
import { MAX_ASSIGNED_PARENT_RESULT_BYTES } from '../../protocol/limits.js';
import { MAX_FRAME_BYTES } from '../../protocol/framing.js';
import type { JobRecord } from '../../store/store.js';
import type { CoreJob } from './job.js';

/** A parent that has ended, as its dependents see it. */
export interface FinishedParent {
  readonly jobId: string;
  readonly taskType: string;
  readonly state: JobState;
  readonly result: string | null;
  readonly resultFormat: ResultFormat | null;
}

/** Room kept in an assignment frame for everything but the parents' results. */
const ASSIGN_ENVELOPE_BYTES = 64 * 1024;

export function finishedParentOf(job: Readonly<CoreJob> | Readonly<JobRecord>): FinishedParent {
  return {
    jobId: job.jobId,
    taskType: job.taskType,
    state: job.state,
    result: job.state === 'COMPLETED' ? job.result : null,
    resultFormat: job.state === 'COMPLETED' ? job.resultFormat : null,
  };
}

/** True when this parent's end lets the dependent go on (rather than cancelling it). */
export function parentAllows(parent: FinishedParent, dependent: Readonly<CoreJob>): boolean {
  return parent.state === 'COMPLETED' || dependent.onParentFailure === 'run';
}

/** The error a dependent cancelled by its parent carries. */
export function parentFailureError(parent: FinishedParent): string {
  return `parent job ${parent.jobId} ended ${parent.state}; dependent cancelled`;
}

/**
 * The error of a dependent whose parent no shard has: one named by a flow
 * or a submission that another shard could not check (cross-shard.ts).
 * Whatever its `onParentFailure`, it is cancelled: a submission naming an
 * unknown parent in the same shard is refused outright (UNKNOWN_JOB).
 */
export function unknownParentError(parentId: string): string {
  return `parent job ${parentId.slice(0, 200)} is unknown (named in dependsOn; no shard has it); dependent cancelled`;
}

export class DependencyGraph {
  /** Dependent job id -> how many of its parents have not ended. */
  readonly #open = new Map<string, number>();
  /** Open parent id -> its dependents (may name dependents that ended since: skipped). */
  readonly #dependents = new Map<string, string[]>();
  /** Ended parents that active dependents reference, with how many reference them. */
  readonly #finished = new Map<string, { parent: FinishedParent; refs: number }>();
  /**
   * Any parent (ended or not) -> its dependents that have not ended, for
   * reading only (the dashboard's flow view): never used to settle a job.
   */
  readonly #activeDependents = new Map<string, Set<string>>();

  /** Dependents waiting on at least one parent. */
  get waitingCount(): number {
    return this.#open.size;
  }

  /** Ended parents held for their dependents. */
  get heldParentCount(): number {
    return this.#finished.size;
  }

  /** Up to `limit` dependents of `jobId` that have not ended, in the order they were attached. */
  activeDependents(jobId: string, limit: number): string[] {
    const out: string[] = [];
    for (const id of this.#activeDependents.get(jobId) ?? []) {
      if (out.length >= limit) break;
      out.push(id);
    }
    return out;
  }

  /** Parents with at least one dependent that has not ended. */
  get indexedParentCount(): number {
    return this.#activeDependents.size;
  }

  /** Open parents of a dependent (0 when it waits for none). */
  openParents(jobId: string): number {
    return this.#open.get(jobId) ?? 0;
  }

  /**
   * Registers an active job's parents: `open` are still running (or
   * waiting), `finished` have ended. Returns the first finished parent whose
   * end cancels this job, if any (then nothing is registered for it).
   */
  attach(
    job: Readonly<CoreJob>,
    open: readonly string[],
    finished: readonly FinishedParent[],
  ): FinishedParent | undefined {
    const blocker = finished.find((parent) => !parentAllows(parent, job));
    if (blocker !== undefined) return blocker;
    for (const parentId of job.dependsOn ?? []) {
      let set = this.#activeDependents.get(parentId);
      if (set === undefined) this.#activeDependents.set(parentId, (set = new Set()));
      set.add(job.jobId);
    }
    for (const parent of finished) this.#hold(parent);
    if (open.length > 0) {
      this.#open.set(job.jobId, open.length);
      for (const parentId of open) listFor(this.#dependents, parentId).push(job.jobId);
    }
    return undefined;
  }

  /**
   * A parent ended (a job here, or one of another shard: cross-shard.ts):
   * returns the dependents that waited on it (their open count not yet
   * changed; see {@link resolveOne}), and holds its outcome for them; null
   * holds nothing (a parent no shard has: its dependents are cancelled).
   * A second call for the same parent returns none.
   */
  takeDependents(
    parentId: string,
    parent: FinishedParent | null,
    isActive: (jobId: string) => boolean,
  ): string[] {
    const dependents = this.#dependents.get(parentId);
    if (dependents === undefined) return [];
    this.#dependents.delete(parentId);
    const live = dependents.filter(isActive);
    if (live.length > 0 && parent !== null) {
      const held = this.#finished.get(parentId);
      if (held === undefined) this.#finished.set(parentId, { parent, refs: live.length });
      else held.refs += live.length;
    }
    return live;
  }

  /** One parent of the dependent ended in a way that lets it go on; returns its open parents left. */
  resolveOne(jobId: string): number {
    const left = (this.#open.get(jobId) ?? 1) - 1;
    if (left <= 0) this.#open.delete(jobId);
    else this.#open.set(jobId, left);
    return Math.max(left, 0);
  }

  /** The dependent ended: its references to ended parents are dropped. */
  release(job: Readonly<CoreJob>): void {
    this.#open.delete(job.jobId);
    for (const parentId of job.dependsOn ?? []) {
      const set = this.#activeDependents.get(parentId);
      if (set !== undefined && set.delete(job.jobId) && set.size === 0) {
        this.#activeDependents.delete(parentId);
      }
      const held = this.#finished.get(parentId);
      if (held === undefined) continue;
      held.refs -= 1;
      if (held.refs <= 0) this.#finished.delete(parentId);
    }
  }

  /**
   * The parents of a job about to be assigned, in `dependsOn` order, with
   * results as far as they fit the assignment's bound (the rest `omitted`).
   */
  parentsFor(job: Readonly<CoreJob>): ParentResult[] {
    let budget = Math.min(
      MAX_ASSIGNED_PARENT_RESULT_BYTES,
      MAX_FRAME_BYTES - ASSIGN_ENVELOPE_BYTES - job.payloadJson.length,
    );
    const out: ParentResult[] = [];
    for (const parentId of job.dependsOn ?? []) {
      const parent = this.#finished.get(parentId)?.parent;
      if (parent === undefined) {
        // Only a parent deleted from the store behind our back (purge keeps
        // the ones a dependent needs) can be missing.
        out.push({
          jobId: parentId,
          taskType: '',
          state: 'COMPLETED',
          result: null,
          omitted: true,
        });
        continue;
      }
      const entry: ParentResult = {
        jobId: parent.jobId,
        taskType: parent.taskType,
        state: parent.state,
        result: parent.result,
      };
      if (parent.resultFormat !== null) entry.resultFormat = parent.resultFormat;
      const size = parent.result === null ? 0 : Buffer.byteLength(JSON.stringify(parent.result));
      if (size > 0 && size > budget) {
        entry.result = null;
        entry.omitted = true;
      } else budget -= size;
      out.push(entry);
    }
    return out;
  }

  #hold(parent: FinishedParent): void {
    const held = this.#finished.get(parent.jobId);
    if (held === undefined) this.#finished.set(parent.jobId, { parent, refs: 1 });
    else held.refs += 1;
  }
}

function listFor<K, V>(map: Map<K, V[]>, key: K): V[] {
  let list = map.get(key);
  if (list === undefined) map.set(key, (list = []));
  return list;
}
