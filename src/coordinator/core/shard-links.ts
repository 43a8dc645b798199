/**
 * What a shard's core keeps about the other shards (cross-shard.ts): the
 * outbox messages it applied whose deletion is not yet known to be seen by
 * a read, and the children in other shards that wait for its jobs.
 *
 * Applied messages. A message is deleted by the batch that applies it, and
 * the shell reads the outbox again and again; a read that began before that
 * batch committed may return the message once more. So each applied id is
 * kept with the batch that deletes it until an `outboxMessages` input says
 * its read began after that batch had committed: from then on no read can
 * return it. A message whose application waits for a read of the store is
 * kept with no batch yet, and the messages after it wait (`blockedAt`): they
 * apply in id order, as their senders wrote them (a flow's jobs before the
 * watches of their children). A new term starts with none: the messages not
 * deleted yet are delivered again, and applying one twice changes nothing.
 *
 * Remote dependents. For each job of this shard that children of other
 * shards wait for: child id -> the child's shard. Stored (one row each) and
 * recovered; dropped, and told, when the job ends.
 */
import type { RemoteDependentRecord } from '../../store/store.js';
import type { ShardPlace } from './types.js';

/** A message being applied: its deletion waits for a read of the store. */
const PENDING = Number.POSITIVE_INFINITY;

export class ShardLinks {
  /** This core's shard; null without shards (every job is ours, no message is ever sent). */
  readonly place: ShardPlace | null;
  /** Applied message id -> the batch that deletes it (PENDING while its read is out). */
  readonly #applied = new Map<number, number>();
  /** The id of the message whose read is out; messages after it wait. Null = none. */
  #blockedAt: number | null = null;
  /** Parent job id -> its children in other shards (child id -> their shard). */
  readonly #dependents = new Map<string, Map<string, number>>();

  constructor(place: ShardPlace | undefined) {
    this.place = place !== undefined && place.shards > 1 ? place : null;
  }

  /** Messages applied (or being applied) whose deletion a read may not see yet. */
  get appliedCount(): number {
    return this.#applied.size;
  }

  /** Parents with children in other shards. */
  get watchedCount(): number {
    return this.#dependents.size;
  }

  /**
   * A read that began once every batch up to `batchId` had committed came
   * back: the messages those batches deleted can no longer be returned.
   */
  seenCommitted(batchId: number): void {
    for (const [id, deletedBy] of this.#applied) if (deletedBy <= batchId) this.#applied.delete(id);
  }

  /** True when the message is to be applied now (not applied before, nothing before it waiting). */
  takes(id: number): boolean {
    if (this.#applied.has(id)) return false;
    return this.#blockedAt === null || id < this.#blockedAt;
  }

  /** The message is applied by the batch `batchId` (the one this input's writes go into). */
  applied(id: number, batchId: number): void {
    this.#applied.set(id, batchId);
    if (this.#blockedAt === id) this.#blockedAt = null;
  }

  /** The message waits for a read of the store; the messages after it wait for it. */
  pending(id: number): void {
    this.#applied.set(id, PENDING);
    this.#blockedAt = this.#blockedAt === null ? id : Math.min(this.#blockedAt, id);
  }

  /** Its read failed: the message is not applied; it comes again with a later read. */
  abandoned(id: number): void {
    this.#applied.delete(id);
    if (this.#blockedAt === id) this.#blockedAt = null;
  }

  /** A child of another shard waits for `parentId`; false when it was known already. */
  addDependent(record: RemoteDependentRecord): boolean {
    let children = this.#dependents.get(record.parentId);
    if (children === undefined) {
      children = new Map<string, number>();
      this.#dependents.set(record.parentId, children);
    }
    if (children.has(record.childId)) return false;
    children.set(record.childId, record.childShard);
    return true;
  }

  /** The parent ended: its children in other shards, by shard (and forgotten here). */
  takeDependents(parentId: string): Map<number, string[]> {
    const children = this.#dependents.get(parentId);
    const byShard = new Map<number, string[]>();
    if (children === undefined) return byShard;
    this.#dependents.delete(parentId);
    for (const [childId, shard] of children) {
      const list = byShard.get(shard) ?? [];
      list.push(childId);
      byShard.set(shard, list);
    }
    return byShard;
  }
}
