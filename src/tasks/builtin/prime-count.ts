/**
 * `PRIME_COUNT {"limit": n}`, n in 2..50000000: how many primes are strictly
 * below n, as a decimal string.
 *
 * A sieve of Eratosthenes over odd numbers only, one byte each (25 MB at the
 * top of the range). It is CPU-bound and synchronous: workers run it in a
 * worker thread and cancel it by terminating that thread.
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

/**
 * Number of primes `p` with `p < limit`. Entry `i` of the sieve stands for the
 * odd number `2i + 1`; entry 0 (the number 1) is never counted.
 */
export function countPrimesBelow(limit: number): number {
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
    for (let j = square >>> 1; j < oddCount; j += p) composite[j] = 1;
  }
  let primes = 1; // the only even prime, 2
  for (let i = 1; i < oddCount; i++) {
    if (composite[i] === 0) primes++;
  }
  return primes;
}

function runPrimeCount(payload: JsonObject, context: TaskContext): Promise<string> {
  return new Promise((resolve) => {
    const limit = readLimit(payload);
    // Only a cancellation that came before the start can be seen here: while
    // the sieve runs it holds the thread, so no abort event can be delivered.
    context.signal.throwIfAborted();
    resolve(String(countPrimesBelow(limit)));
  });
}

export const primeCountTask: TaskDefinition = {
  taskType: 'PRIME_COUNT',
  validate(payload) {
    readLimit(payload);
  },
  run: runPrimeCount,
};
