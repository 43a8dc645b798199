/**
 * Pending WAIT_JOB requests, findable by job (to answer them when it ends)
 * and by connection (to forget them when the client leaves). One owner for
 * the three indexes, so they cannot drift apart.
 */

export interface PendingWait {
  readonly jobId: string;
  readonly connId: number;
  readonly requestId: number;
}

function keyOf(connId: number, requestId: number): string {
  return `${connId}/${requestId}`;
}

export class WaitTable {
  readonly #waits = new Map<string, PendingWait>();
  readonly #byJob = new Map<string, Set<string>>();
  readonly #byConn = new Map<number, Set<string>>();

  get size(): number {
    return this.#waits.size;
  }

  add(wait: PendingWait): void {
    const key = keyOf(wait.connId, wait.requestId);
    this.#waits.set(key, wait);
    addTo(this.#byJob, wait.jobId, key);
    addTo(this.#byConn, wait.connId, key);
  }

  /** Pending waits of one connection. */
  countFor(connId: number): number {
    return this.#byConn.get(connId)?.size ?? 0;
  }

  /** Removes and returns one request's wait, if it is still pending. */
  take(connId: number, requestId: number): PendingWait | undefined {
    return this.#remove(keyOf(connId, requestId));
  }

  /** Removes and returns every wait on a job. */
  takeForJob(jobId: string): PendingWait[] {
    return [...(this.#byJob.get(jobId) ?? [])].flatMap((key) => this.#remove(key) ?? []);
  }

  /** Forgets every wait of a connection. */
  dropConnection(connId: number): void {
    for (const key of [...(this.#byConn.get(connId) ?? [])]) this.#remove(key);
  }

  #remove(key: string): PendingWait | undefined {
    const wait = this.#waits.get(key);
    if (wait === undefined) return undefined;
    this.#waits.delete(key);
    removeFrom(this.#byJob, wait.jobId, key);
    removeFrom(this.#byConn, wait.connId, key);
    return wait;
  }
}

function addTo<K>(index: Map<K, Set<string>>, k: K, key: string): void {
  let keys = index.get(k);
  if (keys === undefined) index.set(k, (keys = new Set()));
  keys.add(key);
}

function removeFrom<K>(index: Map<K, Set<string>>, k: K, key: string): void {
  const keys = index.get(k);
  keys?.delete(key);
  if (keys?.size === 0) index.delete(k);
}
