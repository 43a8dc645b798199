/**
 * Messages to other shards' cores, as data in the write batch: a message is
 * an outbox row written in the same commit as the change that sends it, so
 * it exists exactly when that change does (cross-shard.ts applies the
 * messages that come in; docs/ARCHITECTURE.md, "Across shards: the outbox").
 *
 * This module is what the rest of the core calls when a job here meets a job
 * of another shard: a new job waits for a parent elsewhere, or a handler's
 * `ctx.waitFor` for a job elsewhere (a `watch` to that job's shard), and a
 * job here that jobs elsewhere wait for ends (a `parentEnded` to each of
 * their shards, in the commit of the end). Without
 * shards (`links.place` null) every job id is this core's and nothing here
 * is ever called with one of another shard.
 */
import { shardOfJobId } from '../../protocol/shards.js';
import { isTerminalState } from '../../protocol/messages.js';
import type { OutboxBody, RemoteDependentRecord } from '../../store/store.js';
import { finishedParentOf, type FinishedParent } from './dependencies.js';
import type { CoreJob } from './job.js';
import type { CoreState } from './state.js';

/** The shard a job id names when that is another shard than this core's; null otherwise. */
export function otherShardOf(s: CoreState, jobId: string): number | null {
  const place = s.links.place;
  if (place === null) return null;
  const shard = shardOfJobId(jobId, place.shards);
  // An id naming no shard is nobody's: this core says it is unknown.
  return shard === null || shard === place.shard ? null : shard;
}

/** Sends a message to another shard's core with the next batch. */
export function sendMessage(s: CoreState, targetShard: number, body: OutboxBody): void {
  s.jobs.sendMessage({ targetShard, body });
}

/**
 * A new job waits for parents of other shards: each parent's shard is asked
 * to tell it of the parent's end (a `watch`, answered at once when the
 * parent has ended already).
 */
export function watchRemoteParents(
  s: CoreState,
  child: Readonly<CoreJob>,
  parentIds: readonly string[],
): void {
  const place = s.links.place;
  if (place === null) return;
  for (const parentId of parentIds) {
    const shard = otherShardOf(s, parentId);
    if (shard !== null) watchElsewhere(s, shard, parentId, child.jobId);
  }
}

/**
 * `jobId` waits for `targetId`, a job of `shard` (another one): that shard
 * tells this one of its end, at once if it has ended (`parentEnded`).
 */
export function watchElsewhere(s: CoreState, shard: number, targetId: string, jobId: string): void {
  const place = s.links.place;
  if (place === null) throw new Error(`job ${targetId} is of no other shard: this core has none`);
  sendMessage(s, shard, {
    type: 'watch',
    parentId: targetId,
    childId: jobId,
    childShard: place.shard,
  });
}

/** A child of another shard waits for a job of ours (not ended): remembered, and stored. */
export function addRemoteDependent(s: CoreState, record: RemoteDependentRecord): void {
  if (s.links.addDependent(record)) s.jobs.saveRemoteDependent(record);
}

/**
 * A job of ours ended: the children of other shards that wait for it are
 * told, one message per shard, in the commit of the end; their rows go in
 * the same commit.
 */
export function tellRemoteDependents(s: CoreState, job: Readonly<CoreJob>): void {
  const byShard = s.links.takeDependents(job.jobId);
  if (byShard.size === 0) return;
  const parent = finishedParentOf(job);
  for (const [shard, childIds] of byShard) {
    sendMessage(s, shard, parentEndedBody(job.jobId, parent, job.error, childIds));
  }
  s.jobs.remoteDependentsTold(job.jobId);
}

/**
 * The message telling the jobs that wait for a job of ours of its end, with
 * its `error` (a waiter in `ctx.waitFor` gets it); `parent` null: no such
 * job here.
 */
export function parentEndedBody(
  parentId: string,
  parent: FinishedParent | null,
  error: string | null,
  childIds: readonly string[],
): OutboxBody {
  if (parent !== null && !isTerminalState(parent.state)) {
    throw new Error(`parent ${parentId} has not ended (${parent.state})`);
  }
  return {
    type: 'parentEnded',
    parentId,
    taskType: parent?.taskType ?? '',
    state: parent === null || !isTerminalState(parent.state) ? null : parent.state,
    result: parent?.result ?? null,
    resultFormat: parent?.resultFormat ?? null,
    ...(parent !== null && error !== null && { error }),
    childIds: [...childIds],
  };
}
