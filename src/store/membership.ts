/**
 * Membership: which coordinators of a sharded cluster are alive, as the
 * store layer offers it. Each coordinator says every few moments that it is
 * alive for a while more, on the database's clock, and gets back the list of
 * those alive; who serves which shard is the coordinator's decision
 * (this is only the record and its atomic operations).
 *
 * Implementations: the PostgreSQL one (postgres/membership.ts, the table
 * `dtp.coordinators`) and {@link MemoryMembership} (tests and the simulation).
 */

/** A coordinator, and where others reach it. */
export interface Member {
  /** Unique per coordinator process. */
  nodeId: string;
  /** `host:port` of its client port. */
  clientAddress: string | null;
  /** `host:port` of its worker port. */
  workerAddress: string | null;
  /** `host:port` of its HTTP port; absent when it has none or did not say. */
  httpAddress?: string | null;
}

export interface MembershipBackend {
  /**
   * Says `me` is alive for `ttlMs` more (database clock) and returns every
   * live member (me included), sorted by nodeId. Also deletes members dead
   * for over 10 × ttlMs.
   */
  heartbeat(me: Member, ttlMs: number): Promise<Member[]>;
  /** Removes `nodeId` at once (a clean stop). */
  leave(nodeId: string): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}

/** How many ttls a member stays listed (though not alive) before a heartbeat deletes it. */
export const FORGET_AFTER_TTLS = 10;

/** Members in nodeId order, by code point (the same order on every machine, whatever its locale). */
export function byNodeId(members: Member[]): Member[] {
  return members.sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
}

interface MemoryMember {
  member: Member;
  expiresAtMs: number;
}

/**
 * Membership in memory, on a clock the caller gives (tests, simulation).
 * Operations are atomic and instant. A member is alive while its expiry is
 * not in the past, as {@link MemoryLease}'s holder is.
 */
export class MemoryMembership implements MembershipBackend {
  readonly #members = new Map<string, MemoryMember>();
  readonly #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  heartbeat(me: Member, ttlMs: number): Promise<Member[]> {
    return Promise.resolve(this.heartbeatNow(me, ttlMs));
  }

  leave(nodeId: string): Promise<void> {
    this.leaveNow(nodeId);
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  heartbeatNow(me: Member, ttlMs: number): Member[] {
    const now = this.#now();
    this.#members.set(me.nodeId, { member: copyOf(me), expiresAtMs: now + ttlMs });
    const live: Member[] = [];
    for (const [nodeId, { member, expiresAtMs }] of this.#members) {
      if (expiresAtMs >= now) live.push(copyOf(member));
      else if (expiresAtMs < now - FORGET_AFTER_TTLS * ttlMs) this.#members.delete(nodeId);
    }
    return byNodeId(live);
  }

  leaveNow(nodeId: string): void {
    this.#members.delete(nodeId);
  }

  /** Every member recorded, alive or not yet forgotten, in nodeId order (tests). */
  recorded(): Member[] {
    return byNodeId([...this.#members.values()].map(({ member }) => copyOf(member)));
  }
}

/** A copy of `member`, without an `httpAddress` that says nothing. */
function copyOf(member: Member): Member {
  const { nodeId, clientAddress, workerAddress, httpAddress } = member;
  return {
    nodeId,
    clientAddress,
    workerAddress,
    ...(httpAddress !== undefined && httpAddress !== null && { httpAddress }),
  };
}
