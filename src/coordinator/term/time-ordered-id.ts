/**
 * Ids that sort by creation time: UUID version 7 (RFC 9562), so a new job's
 * id lands at the end of the store's unique index on job ids instead of on a
 * random page of it. A commit then rewrites one index page for a whole batch
 * of new jobs rather than one page per job.
 *
 * Layout: 48 bits of Unix milliseconds, the version nibble, 12 bits of a
 * counter that keeps ids of the same millisecond in order, the variant bits,
 * and 62 random bits. Within one process the ids strictly increase, even if
 * the clock steps back (the last millisecond is kept until the clock passes
 * it). The random part keeps ids of different coordinators apart.
 */
import { randomFillSync } from 'node:crypto';

/** Random bytes drawn at once (one draw per call would cost six times the id). */
const RANDOM_POOL_BYTES = 4_096;

export class TimeOrderedIds {
  readonly #now: () => number;
  readonly #bytes = Buffer.alloc(16);
  readonly #random = Buffer.alloc(RANDOM_POOL_BYTES);
  #randomAt = RANDOM_POOL_BYTES;
  #lastMs = -1;
  #counter = 0;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  next(): string {
    let ms = Math.max(0, Math.floor(this.#now()));
    if (ms > this.#lastMs) {
      this.#lastMs = ms;
      this.#counter = 0;
    } else if (this.#counter < 0xfff) {
      ms = this.#lastMs;
      this.#counter += 1;
    } else {
      // 4,096 ids in one millisecond: borrow the next one.
      ms = ++this.#lastMs;
      this.#counter = 0;
    }
    const b = this.#bytes;
    b.writeUIntBE(ms, 0, 6);
    b.writeUInt16BE(0x7000 | this.#counter, 6);
    if (this.#randomAt === RANDOM_POOL_BYTES) {
      randomFillSync(this.#random);
      this.#randomAt = 0;
    }
    this.#random.copy(b, 8, this.#randomAt, (this.#randomAt += 8));
    b[8] = 0x80 | ((b[8] as number) & 0x3f);
    const hex = b.toString('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }
}
