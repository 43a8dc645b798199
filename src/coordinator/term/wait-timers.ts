/**
 * The timeouts of pending WAIT_JOBs: one Node timer for all of them, armed
 * for the earliest, over a binary heap of due times. Each entry also sits in
 * an index by connection, so answering a wait or closing a connection
 * removes its entries at once (O(log n) each) and nothing of a closed
 * connection lingers until its timeouts would have passed. A timer object
 * per wait (a few hundred bytes each, ~2 M of them under a flood) is what
 * this replaces.
 *
 * Due times are whole milliseconds on the monotonic clock, counted from this
 * object's creation (small integers: no boxed numbers per entry).
 */

interface Entry {
  readonly connId: number;
  readonly requestId: number;
  readonly dueMs: number;
  /** Position in the heap array. */
  pos: number;
}

export class WaitTimers {
  readonly #onExpire: (connId: number, requestId: number) => void;
  #heap: Entry[] = [];
  readonly #byConn = new Map<number, Map<number, Entry>>();
  readonly #originMs = performance.now();
  #timer: NodeJS.Timeout | null = null;
  /** When the armed timer fires (relative ms); meaningless while none is armed. */
  #timerDueMs = 0;

  constructor(onExpire: (connId: number, requestId: number) => void) {
    this.#onExpire = onExpire;
  }

  /** Timeouts pending. */
  get size(): number {
    return this.#heap.length;
  }

  /** Calls `onExpire(connId, requestId)` after `timeoutMs` unless cleared first. */
  arm(connId: number, requestId: number, timeoutMs: number): void {
    this.clear(connId, requestId);
    const entry: Entry = { connId, requestId, dueMs: this.#nowMs() + timeoutMs, pos: 0 };
    let ofConn = this.#byConn.get(connId);
    if (ofConn === undefined) this.#byConn.set(connId, (ofConn = new Map<number, Entry>()));
    ofConn.set(requestId, entry);
    this.#push(entry);
    this.#schedule();
  }

  /** Clears one request's timeout, if it has one. */
  clear(connId: number, requestId: number): void {
    const ofConn = this.#byConn.get(connId);
    const entry = ofConn?.get(requestId);
    if (ofConn === undefined || entry === undefined) return;
    ofConn.delete(requestId);
    if (ofConn.size === 0) this.#byConn.delete(connId);
    this.#remove(entry);
    this.#schedule();
  }

  /** Clears every timeout of a connection: O(its own timeouts × log n). */
  dropConnection(connId: number): void {
    const ofConn = this.#byConn.get(connId);
    if (ofConn === undefined) return;
    this.#byConn.delete(connId);
    for (const entry of ofConn.values()) this.#remove(entry);
    this.#schedule();
  }

  clearAll(): void {
    this.#heap.length = 0;
    this.#byConn.clear();
    this.#schedule();
  }

  #nowMs(): number {
    return Math.ceil(performance.now() - this.#originMs);
  }

  /** Keeps one timer armed for the earliest due time (none when empty). */
  #schedule(): void {
    const first = this.#heap[0];
    if (first === undefined) {
      if (this.#timer !== null) clearTimeout(this.#timer);
      this.#timer = null;
      this.#heap = []; // an emptied array keeps its capacity: give it back
      return;
    }
    if (this.#timer !== null && this.#timerDueMs <= first.dueMs) return;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timerDueMs = first.dueMs;
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, first.dueMs - this.#nowMs()));
  }

  #fire(): void {
    this.#timer = null;
    const nowMs = this.#nowMs();
    for (let first = this.#heap[0]; first !== undefined && first.dueMs <= nowMs;) {
      this.#remove(first);
      const ofConn = this.#byConn.get(first.connId);
      ofConn?.delete(first.requestId);
      if (ofConn?.size === 0) this.#byConn.delete(first.connId);
      this.#onExpire(first.connId, first.requestId);
      first = this.#heap[0];
    }
    this.#schedule();
  }

  #push(entry: Entry): void {
    entry.pos = this.#heap.length;
    this.#heap.push(entry);
    this.#siftUp(entry.pos);
  }

  #remove(entry: Entry): void {
    const heap = this.#heap;
    const last = heap.pop() as Entry;
    if (last === entry) return;
    heap[entry.pos] = last;
    last.pos = entry.pos;
    this.#siftDown(this.#siftUp(last.pos));
  }

  #siftUp(i: number): number {
    const heap = this.#heap;
    const entry = heap[i] as Entry;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const above = heap[parent] as Entry;
      if (above.dueMs <= entry.dueMs) break;
      heap[i] = above;
      above.pos = i;
      i = parent;
    }
    heap[i] = entry;
    entry.pos = i;
    return i;
  }

  #siftDown(i: number): void {
    const heap = this.#heap;
    const entry = heap[i] as Entry;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child =
        right < heap.length && (heap[right] as Entry).dueMs < (heap[left] as Entry).dueMs
          ? right
          : left;
      const below = heap[child] as Entry;
      if (below.dueMs >= entry.dueMs) break;
      heap[i] = below;
      below.pos = i;
      i = child;
    }
    heap[i] = entry;
    entry.pos = i;
  }
}
