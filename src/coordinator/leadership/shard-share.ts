/**
 * How many shards one coordinator leads, among the coordinators alive on
 * one database: the pure policy behind a sharded coordinator's elections.
 *
 * Every coordinator sees the same list of live members (the database's
 * membership table, on its clock) and computes the same shares from it:
 * `floor(shards / members)` each, and one more for the first
 * `shards mod members` members in node-id order, so the shares add up to
 * the shards and differ by one at most. A coordinator below its share lets
 * its standby elections try to take free leases (never more tries at once
 * than it is short of its share, so a fresh coordinator does not take every
 * free shard in one round); one above its share hands its excess over in
 * one round, so the shards move to the coordinators that have room for them
 * (the shares add up to the shards: what one is above, others are below).
 * One lease per round would take `shards / members` rounds to make room for
 * a coordinator that joins a running database, far longer than a failover.
 *
 * Views of the membership may differ for a moment (a heartbeat not seen
 * yet). Then the shares may add up to less than the shards and a shard
 * stays free until the views agree; a shard free for longer than
 * `orphanAfterMs` may be taken by anyone, whatever its share, so no view
 * can leave a shard unled for good. Leases decide who leads, never this
 * policy: two coordinators that both believe they may take a shard race
 * on its lease row, and one of them wins.
 */

export class ShardShare {
  readonly shards: number;
  readonly self: string;
  readonly orphanAfterMs: number;
  #members: readonly string[];

  constructor(shards: number, self: string, orphanAfterMs: number) {
    this.shards = shards;
    this.self = self;
    this.orphanAfterMs = orphanAfterMs;
    this.#members = [self];
  }

  /** The live members as the database listed them last (this one among them or not). */
  membersSeen(nodeIds: readonly string[]): void {
    const members = new Set(nodeIds);
    members.add(this.self);
    this.#members = [...members].sort();
  }

  get members(): readonly string[] {
    return this.#members;
  }

  /** The shards `nodeId` should lead (this coordinator's by default). */
  shareOf(nodeId: string = this.self): number {
    const count = this.#members.length;
    const rank = this.#members.indexOf(nodeId);
    if (rank < 0) return 0;
    return Math.floor(this.shards / count) + (rank < this.shards % count ? 1 : 0);
  }

  /**
   * May a standby election try to take its shard's lease now? `led` shards
   * are led here and `acquiring` tries are in flight; `freeForMs` is how
   * long the shard has been seen without a live leader (0 = it has one or
   * nobody knows).
   */
  mayAcquire(led: number, acquiring: number, freeForMs: number): boolean {
    if (freeForMs >= this.orphanAfterMs) return true;
    return led + acquiring < this.shareOf();
  }

  /** How many of the `led` shards to hand over now: as many as it leads above its share. */
  toHandOver(led: number): number {
    return Math.max(0, led - this.shareOf());
  }
}
