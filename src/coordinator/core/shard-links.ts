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
 * kept with no batch yet, and the messages taken after it are held until it
 * is applied: they apply in the order read (by id), as their senders wrote
 * them (a flow's jobs before the watches of their children). A new term starts with none: the messages not
 * deleted yet are delivered again, and applying one twice changes nothing.
 *
 * Remote dependents. For each job of this shard that children of other
 * shards wait for: child id -> the child's shard. Stored (one row each) and
 * recovered; dropped, and told, when the job ends.
 */
import type { OutboxMessage, RemoteDependentRecord } from '../../store/store.js';
import type { ShardPlace } from './types.js';

/** A message being applied: its deletion waits for a read of the store. */
const PENDING = Number.POSITIVE_INFINITY;

export class ShardLinks {
  /** This core's shard; null without shards (every job is ours, no message is ever sent). */
  readonly place: ShardPlace | null;
  /** Applied message id -> the batch that deletes it (PENDING while not applied yet). */
  readonly #applied = new Map<number, number>();
  /** The message whose read of the store is out; null = none. */
  #reading: number | null = null;
  /** Messages taken while one's read is out: they apply after it, in order. */
  #held: OutboxMessage[] = [];
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

  /** True when the message was neither applied nor taken before (in this term). */
  takes(id: number): boolean {
    return !this.#applied.has(id);
  }

  /** True while a message waits for a read of the store: the next ones are held behind it. */
  get reading(): boolean {
    return this.#reading !== null;
  }

  /** The message waits for a read of the store; the messages taken after it are held. */
  read(id: number): void {
    this.#applied.set(id, PENDING);
    this.#reading = id;
  }

  /** A message taken while another's read is out: it applies after that one. */
  hold(message: OutboxMessage): void {
    this.#applied.set(message.id, PENDING);
    this.#held.push(message);
  }

  /** The next held message, once no read is out; undefined = none. */
  nextHeld(): OutboxMessage | undefined {
    return this.#reading === null ? this.#held.shift() : undefined;
  }

  /** The message is applied by the batch `batchId` (the one this input's writes go into). */
  applied(id: number, batchId: number): void {
    this.#applied.set(id, batchId);
    if (this.#reading === id) this.#reading = null;
  }

  /**
   * The read of the message failed: neither it nor those held behind it are
   * applied; they come again with a later read of the outbox, in order.
   */
  abandoned(id: number): void {
    this.#applied.delete(id);
    if (this.#reading === id) this.#reading = null;
    for (const held of this.#held) this.#applied.delete(held.id);
    this.#held = [];
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
