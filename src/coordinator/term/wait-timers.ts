/**
 * The timers of pending WAIT_JOBs, indexed by connection, so that a closing
 * connection clears its own timers without looking at anyone else's.
 */
export class WaitTimers {
  readonly #byConn = new Map<number, Map<number, NodeJS.Timeout>>();
  readonly #onExpire: (connId: number, requestId: number) => void;

  constructor(onExpire: (connId: number, requestId: number) => void) {
    this.#onExpire = onExpire;
  }

  arm(connId: number, requestId: number, timeoutMs: number): void {
    let timers = this.#byConn.get(connId);
    if (timers === undefined)
      this.#byConn.set(connId, (timers = new Map<number, NodeJS.Timeout>()));
    const conn = timers;
    conn.set(
      requestId,
      setTimeout(() => {
        conn.delete(requestId);
        if (conn.size === 0 && this.#byConn.get(connId) === conn) this.#byConn.delete(connId);
        this.#onExpire(connId, requestId);
      }, timeoutMs),
    );
  }

  /** Clears one request's timer, if it has one. */
  clear(connId: number, requestId: number): void {
    const timers = this.#byConn.get(connId);
    const timer = timers?.get(requestId);
    if (timers === undefined || timer === undefined) return;
    clearTimeout(timer);
    timers.delete(requestId);
    if (timers.size === 0) this.#byConn.delete(connId);
  }

  /** Clears every timer of a connection: O(its own timers). */
  dropConnection(connId: number): void {
    const timers = this.#byConn.get(connId);
    if (timers === undefined) return;
    for (const timer of timers.values()) clearTimeout(timer);
    this.#byConn.delete(connId);
  }

  clearAll(): void {
    for (const connId of [...this.#byConn.keys()]) this.dropConnection(connId);
  }
}
