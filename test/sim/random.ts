/**
 * A small seeded pseudo-random generator for the simulation: xoshiro128**
 * (32-bit state words), seeded through splitmix32 so that nearby seeds give
 * unrelated streams. The same seed always yields the same sequence, which is
 * what makes a failing simulation replayable.
 */

const UINT32_RANGE = 0x1_0000_0000;

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** splitmix32: spreads one seed over the four state words. */
function splitmix32(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (x + 0x9e3779b9) >>> 0;
    let z = x;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export class Random {
  #s0: number;
  #s1: number;
  #s2: number;
  #s3: number;

  /** @param seed any integer; only its low 32 bits matter. */
  constructor(seed: number) {
    const next = splitmix32(seed);
    this.#s0 = next();
    this.#s1 = next();
    this.#s2 = next();
    this.#s3 = next();
    // The all-zero state is the one fixed point of xoshiro; never start there.
    if ((this.#s0 | this.#s1 | this.#s2 | this.#s3) === 0) this.#s0 = 1;
  }

  /** The next 32 random bits, as an unsigned integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.#s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (this.#s1 << 9) >>> 0;
    this.#s2 = (this.#s2 ^ this.#s0) >>> 0;
    this.#s3 = (this.#s3 ^ this.#s1) >>> 0;
    this.#s1 = (this.#s1 ^ this.#s2) >>> 0;
    this.#s0 = (this.#s0 ^ this.#s3) >>> 0;
    this.#s2 = (this.#s2 ^ t) >>> 0;
    this.#s3 = rotl(this.#s3, 11);
    return result;
  }

  /** A float in [0, 1). */
  float(): number {
    return this.nextUint32() / UINT32_RANGE;
  }

  /** An integer in [lo, hi], both inclusive. */
  int(lo: number, hi: number): number {
    if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi) || lo > hi) {
      throw new RangeError(`int(${lo}, ${hi}): need integers with lo <= hi`);
    }
    return lo + Math.floor(this.float() * (hi - lo + 1));
  }

  /** True with probability `p` (0..1). */
  chance(p: number): boolean {
    return this.float() < p;
  }

  /** One element of a non-empty array. */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('pick() from an empty array');
    return items[this.int(0, items.length - 1)] as T;
  }

  /** One key of `weights`, chosen with probability proportional to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const keys = Object.keys(weights) as K[];
    let total = 0;
    for (const key of keys) total += weights[key];
    if (total <= 0) throw new RangeError('weighted() needs a positive total weight');
    let roll = this.float() * total;
    for (const key of keys) {
      roll -= weights[key];
      if (roll < 0) return key;
    }
    return keys[keys.length - 1] as K;
  }

  /** Shuffles `items` in place (Fisher-Yates) and returns it. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(0, i);
      const tmp = items[i] as T;
      items[i] = items[j] as T;
      items[j] = tmp;
    }
    return items;
  }

  /** An independent generator derived from this one (a separate stream per actor). */
  fork(): Random {
    return new Random(this.nextUint32());
  }
}
