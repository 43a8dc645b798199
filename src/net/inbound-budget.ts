/**
 * One budget for the bytes that all connections of a process hold in
 * partially received frames.
 *
 * Each connection's frame decoder holds at most one partial frame (up to
 * 1 MiB). Without a shared bound, many peers that each start a large frame and
 * stall would together hold many times that; with it, the connection whose
 * growth would cross the bound is cut off instead (the caller decides how),
 * and every other connection keeps working.
 */
export class InboundBudget {
  /** The bound, in bytes. */
  readonly limitBytes: number;
  #usedBytes = 0;

  constructor(limitBytes: number) {
    if (!Number.isSafeInteger(limitBytes) || limitBytes < 1) {
      throw new RangeError(`inbound budget must be a positive integer of bytes, got ${limitBytes}`);
    }
    this.limitBytes = limitBytes;
  }

  /** Bytes held right now, over all connections. */
  get usedBytes(): number {
    return this.#usedBytes;
  }

  /**
   * Moves one holder's charge from `fromBytes` to `toBytes`. Shrinking always
   * succeeds; growing fails (and changes nothing) when it would cross the
   * bound.
   */
  update(fromBytes: number, toBytes: number): boolean {
    const next = this.#usedBytes - fromBytes + toBytes;
    if (toBytes > fromBytes && next > this.limitBytes) return false;
    this.#usedBytes = next;
    return true;
  }
}
