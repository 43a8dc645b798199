/**
 * The membership table of the coordinators sharing one database, in memory
 * on the simulated clock (the database's clock): each coordinator's row
 * holds when it last heartbeat and for how long that keeps it live. An
 * entry is live while `lastSeen + ttl >= now`, as the lease's expiry is.
 */
export class SimMembership {
  readonly #rows = new Map<string, { lastSeenMs: number; ttlMs: number }>();
  readonly #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  /** Upserts `nodeId`'s row (seen now, live for `ttlMs`) and returns the live ids, sorted. */
  heartbeat(nodeId: string, ttlMs: number): string[] {
    this.#rows.set(nodeId, { lastSeenMs: this.#now(), ttlMs });
    return this.live();
  }

  /** A clean stop: the row goes at once. */
  leave(nodeId: string): void {
    this.#rows.delete(nodeId);
  }

  /** The live ids, sorted. */
  live(): string[] {
    const now = this.#now();
    const ids: string[] = [];
    for (const [id, row] of this.#rows) if (row.lastSeenMs + row.ttlMs >= now) ids.push(id);
    return ids.sort();
  }
}
