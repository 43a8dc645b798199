/**
 * Pending WAIT_JOB requests, findable by job (to answer them when it ends)
 * and by connection (to forget them when the client leaves). One owner for
 * the indexes, so they cannot drift apart.
 *
 * Lean on purpose: a client may hold many waits (up to the caps of
 * `maxWaitsPerConnection` and `maxWaits`), so each costs one small object
 * and one entry in each index, without keys built from strings, and the
 * caller hands in the job's own id string rather than the request's copy.
 */

export interface PendingWait {
  readonly jobId: string;
  readonly connId: number;
  readonly requestId: number;
}

export class WaitTable {
  readonly #byConn = new Map<number, Map<number, PendingWait>>();
  readonly #byJob = new Map<string, Set<PendingWait>>();
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Adds a wait; a request already waiting is replaced (request ids are unique per connection). */
  add(wait: PendingWait): void {
    this.take(wait.connId, wait.requestId);
    let ofConn = this.#byConn.get(wait.connId);
    if (ofConn === undefined)
      this.#byConn.set(wait.connId, (ofConn = new Map<number, PendingWait>()));
    ofConn.set(wait.requestId, wait);
    let ofJob = this.#byJob.get(wait.jobId);
    if (ofJob === undefined) this.#byJob.set(wait.jobId, (ofJob = new Set<PendingWait>()));
    ofJob.add(wait);
    this.#size++;
  }

  /** Pending waits of one connection. */
  countFor(connId: number): number {
    return this.#byConn.get(connId)?.size ?? 0;
  }

  /** Removes and returns one request's wait, if it is still pending. */
  take(connId: number, requestId: number): PendingWait | undefined {
    const ofConn = this.#byConn.get(connId);
    const wait = ofConn?.get(requestId);
    if (ofConn === undefined || wait === undefined) return undefined;
    ofConn.delete(requestId);
    if (ofConn.size === 0) this.#byConn.delete(connId);
    this.#unlinkJob(wait);
    this.#size--;
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
      ofConn?.delete(wait.requestId);
      if (ofConn?.size === 0) this.#byConn.delete(wait.connId);
    }
    this.#size -= waits.length;
    return waits;
  }

  /** Removes and returns every wait of a connection, in the order they came. */
  takeConnection(connId: number): PendingWait[] {
    const ofConn = this.#byConn.get(connId);
    if (ofConn === undefined) return [];
    const waits = [...ofConn.values()];
    this.dropConnection(connId);
    return waits;
  }

  /** Forgets every wait of a connection. */
  dropConnection(connId: number): void {
    const ofConn = this.#byConn.get(connId);
    if (ofConn === undefined) return;
    this.#byConn.delete(connId);
    for (const wait of ofConn.values()) this.#unlinkJob(wait);
    this.#size -= ofConn.size;
  }

  #unlinkJob(wait: PendingWait): void {
    const ofJob = this.#byJob.get(wait.jobId);
    ofJob?.delete(wait);
    if (ofJob?.size === 0) this.#byJob.delete(wait.jobId);
  }
}
