/**
 * The invariants across the shards of the sharded simulation
 * (sharded-simulator.ts), beside each shard's own (invariants.ts, run per
 * shard), and the outbox's (observed-outbox.ts: a message applied by one
 * committed batch only, a parent's end told once to each child).
 *
 * After every step, on what is committed:
 * - a job lives in one store only: the shard its id names, which is also
 *   its queue's shard;
 * - an acknowledged job is durable: in its shard's store, or (a flow's job
 *   of another shard) in a `createJobs` message still in the outbox; once
 *   in its store, its shard's own checks hold it (`onAck`);
 * - a dependent released (neither WAITING nor ended) has every parent ended
 *   in the parent's shard, COMPLETED unless its policy is `run`; one
 *   cancelled for a parent names a parent that did end so (or that no
 *   shard has).
 *
 * When a shard applies the end of a parent of another shard that did not
 * complete, each child it names (all in that shard) that depends on it
 * with policy `cancel` (with any policy, for a parent no shard has) has
 * ended in the commit that applied it.
 *
 * A handler's wait (`ctx.waitFor`) for a job of another shard that a
 * committed batch ended has that job's real end: the state, error and
 * result (unless left out for size) of its committed terminal row there;
 * "unknown" only when that shard has no such job.
 *
 * Once the run is quiet: the outbox is empty, every job a `createJobs`
 * carried exists in its shard, a dependent that ran was told the end of
 * each parent in another shard (once: checked as it is sent), and every
 * dependent's end agrees with its parents' (cancelled when one did not
 * complete, unless `run`; never cancelled for a parent that completed).
 */
import {
  finishedParentOf,
  parentFailureError,
  unknownParentError,
} from '../../src/coordinator/core/dependencies.js';
import { WAIT_STEP } from '../../src/coordinator/core/step-names.js';
import type { WaitOutcome } from '../../src/coordinator/core/step-records.js';
import { isTerminalState, type JobState, type SubmitJob } from '../../src/protocol/messages.js';
import { shardOfJobId, shardOfQueue } from '../../src/protocol/shards.js';
import type { JobRecord, OutboxBody, WriteBatch } from '../../src/store/store.js';
import type { Invariants } from './invariants.js';
import type { ObservedOutbox } from './observed-outbox.js';
import type { Judge } from './violation.js';
import type { World } from './world.js';

/** One shard as the checks see it. */
export interface CheckedShard {
  world: World;
  invariants: Invariants;
}

export interface CrossShardCounts {
  /** Acknowledged jobs of a flow made in another shard than the flow's. */
  ackedElsewhere: number;
  /** Dependents with a parent in another shard, and those cancelled for it. */
  remoteDependents: number;
  remoteCascades: number;
  /** Waits (`ctx.waitFor`) for a job of another shard that ended with its outcome. */
  remoteWaits: number;
}

/** A wait for a job of another shard, ended by a committed batch of the waiter's shard. */
interface EndedWait {
  jobId: string;
  index: number;
  outcome: WaitOutcome;
}

export class CrossShardChecks {
  readonly #judge: Judge;
  readonly #shards: readonly CheckedShard[];
  readonly #outbox: ObservedOutbox;
  /** Acknowledged jobs (a client got their ids), in order of first ack, every shard's. */
  readonly ackedIds: string[] = [];
  readonly #acked = new Set<string>();
  /** Acknowledged jobs not in their shard's store yet (a flow's, made elsewhere). */
  readonly #pending = new Map<string, { submission: SubmitJob; deduplicated: boolean }>();
  readonly counts: CrossShardCounts = {
    ackedElsewhere: 0,
    remoteDependents: 0,
    remoteCascades: 0,
    remoteWaits: 0,
  };
  /** Waits for jobs of other shards ended by commits since the last step's checks. */
  #endedWaits: EndedWait[] = [];
  /** "jobId index" of each wait step checked, so that each counts once. */
  readonly #checkedWaits = new Set<string>();

  constructor(judge: Judge, shards: readonly CheckedShard[], outbox: ObservedOutbox) {
    this.#judge = judge;
    this.#shards = shards;
    this.#outbox = outbox;
  }

  /** A job of another shard: its committed terminal state there. */
  terminalElsewhere(jobId: string): JobState | undefined {
    const shard = this.#shardOf(jobId);
    return shard?.invariants.tracker.terminal.get(jobId)?.state;
  }

  /** A client got a job's id: its shard's checks take it once it is in its store. */
  onAck(jobId: string, submission: SubmitJob, deduplicated: boolean): void {
    const shard = this.#shardOf(jobId);
    this.#judge.check(shard !== undefined, () => `acknowledged job ${jobId} names no shard`);
    if (!this.#acked.has(jobId)) {
      this.#acked.add(jobId);
      this.ackedIds.push(jobId);
    }
    if (shard?.world.store.committedJob(jobId) !== undefined) {
      shard.invariants.onAck(jobId, submission, deduplicated);
      return;
    }
    this.#judge.check(
      this.#outbox.carries(jobId),
      () => `acknowledged job ${jobId} is neither in its shard nor on its way there`,
    );
    if (!this.#pending.has(jobId)) this.counts.ackedElsewhere++;
    this.#pending.set(jobId, { submission, deduplicated });
  }

  /** Shard `shard` committed `batch`: its waits for jobs of other shards that it ended. */
  onCommitted(shard: number, batch: Readonly<WriteBatch>): void {
    for (const step of batch.steps ?? []) {
      if (step.name !== WAIT_STEP || step.result === null) continue;
      const outcome = JSON.parse(step.result) as WaitOutcome;
      // A wait begun holds {jobId} only; one for a job of its own shard is not for these checks.
      if (!('state' in outcome) || shardOfJobId(outcome.jobId, this.#shards.length) === shard) {
        continue;
      }
      this.#endedWaits.push({ jobId: step.jobId, index: step.index, outcome });
    }
  }

  /** A wait for a job of another shard ended with that job's committed end there. */
  #checkWait({ jobId, index, outcome }: EndedWait): void {
    const target = outcome.jobId;
    const row = this.#parentRow(target);
    const what = (): string =>
      `job ${jobId} waited (step ${index}) for ${target} of another shard and got ${JSON.stringify(outcome)}; that shard has ${row === undefined ? 'no such job' : JSON.stringify({ state: row.state, result: row.result, error: row.error })}`;
    if (outcome.state === null) {
      this.#judge.check(row === undefined, what);
    } else {
      const completed = row?.state === 'COMPLETED';
      const left = outcome.omitted === true;
      this.#judge.check(
        row !== undefined &&
          isTerminalState(row.state) &&
          outcome.state === row.state &&
          outcome.error === row.error &&
          outcome.result === (completed && !left ? row.result : null) &&
          outcome.resultFormat === (completed ? row.resultFormat : null),
        what,
      );
    }
    const key = `${jobId} ${index}`;
    if (!this.#checkedWaits.has(key)) {
      this.#checkedWaits.add(key);
      this.counts.remoteWaits++;
    }
  }

  /** The children a parent's end was told to, applied by a commit of their shard. */
  #checkTold(shard: number, body: Extract<OutboxBody, { type: 'parentEnded' }>): void {
    const store = (this.#shards[shard] as CheckedShard).world.store;
    for (const childId of body.childIds) {
      const child = store.committedJob(childId);
      this.#judge.check(
        child !== undefined,
        () =>
          `the end of ${body.parentId} was told to child ${childId}, which shard ${shard} does not have`,
      );
      // A job that waits for it in `ctx.waitFor` only, not a child of it: nothing cancels it.
      const dependent = child?.dependsOn?.includes(body.parentId) === true;
      const cancels =
        dependent &&
        (body.state === null || (body.state !== 'COMPLETED' && child?.onParentFailure !== 'run'));
      this.#judge.check(
        !cancels || isTerminalState(child?.state ?? 'WAITING'),
        () =>
          `child ${childId} heard its parent ${body.parentId} ended ${body.state ?? 'in no shard'} and is still ${child?.state}`,
      );
    }
  }

  /** After every step. */
  checkStep(): void {
    for (const { targetShard, body } of this.#outbox.takeApplied()) {
      if (body.type === 'parentEnded') this.#checkTold(targetShard, body);
    }
    const waits = this.#endedWaits;
    this.#endedWaits = [];
    for (const wait of waits) this.#checkWait(wait);
    for (const [index, shard] of this.#shards.entries()) {
      for (const row of shard.world.store.committedJobRows()) {
        this.#checkPlace(index, row);
        if (row.dependsOn !== null) this.#checkDependent(row);
      }
    }
    for (const [jobId, ack] of this.#pending) {
      const shard = this.#shardOf(jobId) as CheckedShard;
      if (shard.world.store.committedJob(jobId) !== undefined) {
        this.#pending.delete(jobId);
        shard.invariants.onAck(jobId, ack.submission, ack.deduplicated);
        continue;
      }
      this.#judge.check(
        this.#outbox.carries(jobId),
        () =>
          `acknowledged job ${jobId} was lost: its message was applied, its shard does not have it`,
      );
    }
  }

  /** Null once nothing is on its way between shards. */
  quiescenceProblem(): string | null {
    if (this.#outbox.size > 0) return `${this.#outbox.size} outbox messages not applied`;
    if (this.#pending.size > 0) return `${this.#pending.size} acknowledged jobs not made yet`;
    return null;
  }

  /** Once the run is quiet: what crossed the shards came out whole. */
  checkEnd(): void {
    for (const [jobId, { shard }] of this.#outbox.sentJobs) {
      this.#judge.check(
        this.#shards[shard]?.world.store.committedJob(jobId) !== undefined,
        () => `job ${jobId} was sent to shard ${shard} and never made there`,
      );
    }
    for (const [index, shard] of this.#shards.entries()) {
      for (const row of shard.world.store.committedJobRows()) {
        if (row.dependsOn !== null) this.#checkEnded(index, row);
      }
    }
  }

  /** A job is where its id and its queue say. */
  #checkPlace(index: number, row: Readonly<JobRecord>): void {
    const shards = this.#shards.length;
    const byId = shardOfJobId(row.jobId, shards);
    const byQueue = shardOfQueue(row.queue, shards);
    if (byId === index && byQueue === index) return;
    throw this.#judge.violation(
      `job ${row.jobId} of queue ${row.queue} is in shard ${index}; its id names shard ${byId}, its queue is in shard ${byQueue}`,
    );
  }

  /** The committed row of a parent, in its own shard; undefined when no shard has it. */
  #parentRow(parentId: string): JobRecord | undefined {
    return this.#shardOf(parentId)?.world.store.committedJob(parentId);
  }

  /** A dependent released, or cancelled for a parent, agrees with its parents' committed ends. */
  #checkDependent(row: Readonly<JobRecord>): void {
    const run = row.onParentFailure === 'run';
    if (row.state === 'CANCELLED') {
      for (const parentId of row.dependsOn ?? []) {
        const parent = this.#parentRow(parentId);
        if (row.error?.startsWith(`parent job ${parentId} `) !== true) continue;
        // A parent no shard has cancels whatever the policy; one that ended, unless `run`.
        const blamed =
          parent === undefined
            ? row.error === unknownParentError(parentId)
            : isTerminalState(parent.state) &&
              parent.state !== 'COMPLETED' &&
              !run &&
              row.error === parentFailureError(finishedParentOf(parent));
        this.#judge.check(
          blamed,
          () =>
            `dependent ${row.jobId} was cancelled with "${row.error}", its parent is ${parent?.state ?? 'in no shard'}`,
        );
      }
      return;
    }
    if (row.state === 'WAITING' || isTerminalState(row.state)) return;
    for (const parentId of row.dependsOn ?? []) {
      const state = this.#parentRow(parentId)?.state;
      this.#judge.check(
        state !== undefined && isTerminalState(state) && (run || state === 'COMPLETED'),
        () =>
          `dependent ${row.jobId} is ${row.state} while its parent ${parentId} is ${state ?? 'in no shard'}`,
      );
    }
  }

  /** Once quiet: a dependent's end agrees with its parents', and one that ran heard of them. */
  #checkEnded(index: number, row: Readonly<JobRecord>): void {
    const parents = [...new Set(row.dependsOn ?? [])];
    const ends = parents.map((id) => ({ id, row: this.#parentRow(id) }));
    const remote = parents.filter((id) => shardOfJobId(id, this.#shards.length) !== index);
    if (remote.length > 0) this.counts.remoteDependents++;
    // One that ran heard of every parent's end (a cancelled one may have ended first).
    for (const parentId of row.state === 'CANCELLED' ? [] : remote) {
      this.#judge.check(
        this.#outbox.told.has(`${parentId} ${row.jobId}`),
        () => `child ${row.jobId} was never told how its parent ${parentId} ended`,
      );
    }
    const failed = ends.find((p) => p.row === undefined || p.row.state !== 'COMPLETED');
    const unknown = ends.find((p) => p.row === undefined);
    if (unknown !== undefined || (failed !== undefined && row.onParentFailure !== 'run')) {
      this.#judge.check(
        row.state === 'CANCELLED',
        () =>
          `dependent ${row.jobId} ended ${row.state} though its parent ${(unknown ?? failed)?.id} ended ${(unknown ?? failed)?.row?.state ?? 'in no shard'}`,
      );
      if (remote.includes((unknown ?? failed)?.id as string)) this.counts.remoteCascades++;
      return;
    }
    this.#judge.check(
      !(row.error ?? '').startsWith('parent job '),
      () =>
        `dependent ${row.jobId} ended ${row.state} with "${row.error}", every parent allowed it`,
    );
  }

  #shardOf(jobId: string): CheckedShard | undefined {
    const shard = shardOfJobId(jobId, this.#shards.length);
    return shard === null ? undefined : this.#shards[shard];
  }
}
