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

const POOL_IDS = 256;
const HEX: readonly string[] = Array.from({ length: 256 }, (_, i) =>
  i.toString(16).padStart(2, '0'),
);

export class TimeOrderedIds {
  readonly #now: () => number;
  readonly #pool = Buffer.alloc(POOL_IDS * 8);
  #poolAt = POOL_IDS;
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
    if (this.#poolAt === POOL_IDS) {
      randomFillSync(this.#pool);
      this.#poolAt = 0;
    }
    const r = this.#poolAt++ * 8;
    const pool = this.#pool;
    const high = Math.floor(ms / 0x1_0000_0000);
    const low = ms >>> 0;
    const h = (n: number): string => HEX[n & 0xff] as string;
    return (
      h(high >>> 8) +
      h(high) +
      h(low >>> 24) +
      h(low >>> 16) +
      '-' +
      h(low >>> 8) +
      h(low) +
      '-' +
      h(0x70 | (this.#counter >>> 8)) +
      h(this.#counter) +
      '-' +
      h(0x80 | ((pool[r] as number) & 0x3f)) +
      h(pool[r + 1] as number) +
      '-' +
      h(pool[r + 2] as number) +
      h(pool[r + 3] as number) +
      h(pool[r + 4] as number) +
      h(pool[r + 5] as number) +
      h(pool[r + 6] as number) +
      h(pool[r + 7] as number)
    );
  }
}
