/**
 * Pending WAIT_JOB requests, findable by job (to answer them when it ends)
 * and by connection (to forget them when the client leaves), and counted by
 * the address of their connection. One owner for the indexes, so they cannot
 * drift apart.
 *
 * Lean on purpose: a client may hold many waits (up to the caps of
 * `maxWaitsPerConnection`, `maxWaitsPerAddress` and `maxWaits`), so each
 * costs one small object and one entry in each index, without keys built
 * from strings, and the caller hands in the job's own id string rather than
 * the request's copy. The address is kept once per connection, not per wait.
 */

export interface PendingWait {
  readonly jobId: string;
  readonly connId: number;
  readonly requestId: number;
}

/** The waits of one connection, and its address (null: in-process, not counted per address). */
interface ConnectionWaits {
  readonly address: string | null;
  readonly waits: Map<number, PendingWait>;
}

export class WaitTable {
  readonly #byConn = new Map<number, ConnectionWaits>();
  readonly #byJob = new Map<string, Set<PendingWait>>();
  readonly #byAddress = new Map<string, number>();
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /**
   * Adds a wait of a connection from `address`; a request already waiting is
   * replaced (request ids are unique per connection).
   */
  add(wait: PendingWait, address: string | null): void {
    this.take(wait.connId, wait.requestId);
    let ofConn = this.#byConn.get(wait.connId);
    if (ofConn === undefined) {
      ofConn = { address, waits: new Map<number, PendingWait>() };
      this.#byConn.set(wait.connId, ofConn);
    }
    ofConn.waits.set(wait.requestId, wait);
    this.#count(ofConn.address, 1);
    let ofJob = this.#byJob.get(wait.jobId);
    if (ofJob === undefined) this.#byJob.set(wait.jobId, (ofJob = new Set<PendingWait>()));
    ofJob.add(wait);
    this.#size++;
  }

  /** Pending waits of one connection. */
  countFor(connId: number): number {
    return this.#byConn.get(connId)?.waits.size ?? 0;
  }

  /** Pending waits of the connections from `address`. */
  countForAddress(address: string): number {
    return this.#byAddress.get(address) ?? 0;
  }

  /** Pending waits per address (for inspection). */
  byAddress(): ReadonlyMap<string, number> {
    return this.#byAddress;
  }

  /** Removes and returns one request's wait, if it is still pending. */
  take(connId: number, requestId: number): PendingWait | undefined {
    const ofConn = this.#byConn.get(connId);
    const wait = ofConn?.waits.get(requestId);
    if (ofConn === undefined || wait === undefined) return undefined;
    this.#forget(connId, ofConn, wait);
    this.#unlinkJob(wait);
    return wait;
  }

  /** Removes and returns every wait on a job. */
  takeForJob(jobId: string): PendingWait[] {
    const ofJob = this.#byJob.get(jobId);
    if (ofJob === undefined) return [];
    this.#byJob.delete(jobId);
    const waits = [...ofJob];
    for (const wait of waits) {
      const ofConn = this.#byConn.get(wait.connId);
      if (ofConn !== undefined) this.#forget(wait.connId, ofConn, wait);
    }
    return waits;
  }

  /** Removes and returns every wait of a connection, in the order they came. */
  takeConnection(connId: number): PendingWait[] {
    const ofConn = this.#byConn.get(connId);
    if (ofConn === undefined) return [];
    const waits = [...ofConn.waits.values()];
    this.dropConnection(connId);
    return waits;
  }

  /** Forgets every wait of a connection. */
  dropConnection(connId: number): void {
    const ofConn = this.#byConn.get(connId);
    if (ofConn === undefined) return;
    this.#byConn.delete(connId);
    for (const wait of ofConn.waits.values()) this.#unlinkJob(wait);
    this.#size -= ofConn.waits.size;
    this.#count(ofConn.address, -ofConn.waits.size);
  }

  /** Takes one wait out of its connection's index and the counts. */
  #forget(connId: number, ofConn: ConnectionWaits, wait: PendingWait): void {
    ofConn.waits.delete(wait.requestId);
    if (ofConn.waits.size === 0) this.#byConn.delete(connId);
    this.#size--;
    this.#count(ofConn.address, -1);
  }

  #count(address: string | null, delta: number): void {
    if (address === null) return;
    const count = (this.#byAddress.get(address) ?? 0) + delta;
    if (count > 0) this.#byAddress.set(address, count);
    else this.#byAddress.delete(address);
  }

  #unlinkJob(wait: PendingWait): void {
    const ofJob = this.#byJob.get(wait.jobId);
    ofJob?.delete(wait);
    if (ofJob?.size === 0) this.#byJob.delete(wait.jobId);
  }
}
