/**
 * `PRIME_COUNT {"limit": n}`, n in 2..50000000: how many primes are strictly
 * below n, as a decimal string.
 *
 * A sieve of Eratosthenes over odd numbers only, one byte each (25 MB at the
 * top of the range). It is CPU-bound and synchronous: workers run it in a
 * worker thread, and it looks at its signal between steps, so a cancel stops
 * it within a fraction of a millisecond and the thread is reused.
 */
import type { JsonObject } from '../../protocol/messages.js';
import { BUILTIN_TASKS } from '../../protocol/task-types.js';
import type { TaskContext, TaskDefinition } from '../registry.js';
import { requireIntegerField } from '../validation.js';

/** The `limit` field and its bounds. */
const FIELD = BUILTIN_TASKS.PRIME_COUNT.field;

function readLimit(payload: JsonObject): number {
  return requireIntegerField(payload, FIELD.name, FIELD);
}

/** Sieve steps between two checkpoints: well under a millisecond of work. */
const STEPS_PER_CHECKPOINT = 1 << 16;

/**
 * Number of primes `p` with `p < limit`. Entry `i` of the sieve stands for the
 * odd number `2i + 1`; entry 0 (the number 1) is never counted. `checkpoint`
 * is called every {@link STEPS_PER_CHECKPOINT} steps at most; a throw from it
 * ends the count.
 */
export function countPrimesBelow(limit: number, checkpoint: () => void = () => undefined): number {
  if (limit <= 2) return 0;
  const oddCount = limit >>> 1; // odd numbers in [1, limit)
  const composite = new Uint8Array(oddCount);
  for (let i = 1; ; i++) {
    const p = 2 * i + 1;
    const square = p * p;
    if (square >= limit) break;
    if (composite[i] !== 0) continue;
    // Smaller multiples of p were crossed out by smaller primes; stepping p
    // entries moves 2p in value, skipping the even multiples.
    for (let j = square >>> 1; j < oddCount;) {
      const end = Math.min(oddCount, j + p * STEPS_PER_CHECKPOINT);
      for (; j < end; j += p) composite[j] = 1;
      checkpoint();
    }
  }
  let primes = 1; // the only even prime, 2
  for (let start = 1; start < oddCount; start += STEPS_PER_CHECKPOINT) {
    const end = Math.min(oddCount, start + STEPS_PER_CHECKPOINT);
    for (let i = start; i < end; i++) {
      if (composite[i] === 0) primes++;
    }
    checkpoint();
  }
  return primes;
}

function runPrimeCount(payload: JsonObject, context: TaskContext): Promise<string> {
  return new Promise((resolve) => {
    const limit = readLimit(payload);
    // The sieve holds the thread, so no abort event can be delivered while it
    // runs; the worker's signal reads a flag shared with the main thread
    // instead, so asking it every few thousand steps sees a cancel at once.
    const checkpoint = (): void => context.signal.throwIfAborted();
    checkpoint();
    resolve(String(countPrimesBelow(limit, checkpoint)));
  });
}

export const primeCountTask: TaskDefinition = {
  taskType: 'PRIME_COUNT',
  validate(payload) {
    readLimit(payload);
  },
  run: runPrimeCount,
  // Seconds of computing that holds its thread: preempted by termination, alone on it.
  isolate: true,
};
