/**
 * What a task thread may use of memory, and how the pool tells which thread
 * went over. Decisions only (no timers, no threads): the pool samples and
 * acts (task-pool.ts), the tests feed samples.
 *
 * A task thread's budget is `taskMemoryMb`, in MiB, bounded three ways:
 *
 * 1. Its JavaScript heap: V8's own limit (`resourceLimits`), exact. A thread
 *    whose heap reaches it is ended by V8 (`ERR_WORKER_OUT_OF_MEMORY`).
 * 2. Its heap plus its memory outside the heap (Buffers, typed arrays,
 *    ArrayBuffers: V8's "external" memory, not covered by 1), as the thread
 *    itself measures it every {@link SAMPLE_INTERVAL_MS} while its event loop
 *    turns and at the end of each task. A thread over its budget is
 *    terminated.
 * 3. A thread that holds its event loop (synchronous code) takes no samples,
 *    so 2 cannot see it. The pool then watches the worker process's resident
 *    memory: over {@link rssBudgetMb} it terminates every busy thread that
 *    has taken no sample for {@link STALE_AFTER_MS}, since only those can be
 *    growing unseen. (A
 *    CPU-bound task that happens to hold its loop then loses its attempt
 *    too, which is retried like any other failed attempt.)
 *
 * After its task a thread that still holds more than
 * {@link RETAINED_LIMIT_MB} (garbage the idle thread would never collect) is
 * replaced, so the memory goes back to the system.
 */

/** Bounds and default of `taskMemoryMb` (the CLI's `--task-memory-mb`), in MiB. */
export const TASK_MEMORY_MB = { min: 32, max: 1_048_576, default: 512 } as const;

/** How often a task thread measures its own memory while its event loop turns, in ms. */
export const SAMPLE_INTERVAL_MS = 10;
/** How often the pool looks at the samples and the process's resident memory, in ms. */
export const CHECK_INTERVAL_MS = 20;
/** A busy thread that took no sample for this long holds its event loop, in ms. */
export const STALE_AFTER_MS = 100;
/** A thread that keeps more than this after its task is replaced, in MiB. */
export const RETAINED_LIMIT_MB = 64;
/** Resident memory of one task thread beyond its budget (its isolate, code, stacks), in MiB. */
export const THREAD_OVERHEAD_MB = 64;
/** Resident memory of the worker's own work beyond what it had at start, in MiB. */
export const PROCESS_SLACK_MB = 256;

/** The worker process's resident-memory budget, in MiB. */
export function rssBudgetMb(baselineMb: number, capacity: number, taskMemoryMb: number): number {
  return baselineMb + PROCESS_SLACK_MB + capacity * (taskMemoryMb + THREAD_OVERHEAD_MB);
}

/** One busy thread as the pool sees it at a check. */
export interface ThreadSample<T> {
  readonly thread: T;
  /** Heap + external memory at its last sample, in MiB. */
  readonly usedMb: number;
  /** False when it has taken no sample for {@link STALE_AFTER_MS} (it holds its event loop). */
  readonly fresh: boolean;
}

/** Why a thread is to be terminated for memory. */
export type MemoryVerdict<T> = { thread: T; error: string };

function mib(value: number): string {
  return `${Math.round(value).toLocaleString('en')} MiB`;
}

/**
 * The busy threads to terminate at one check: those whose own samples are
 * over `taskMemoryMb`, and, when the process is over its resident budget,
 * those that took no sample since the previous check.
 */
export function overBudget<T>(
  samples: readonly ThreadSample<T>[],
  check: { taskMemoryMb: number; rssMb: number; rssBudgetMb: number },
): MemoryVerdict<T>[] {
  const verdicts: MemoryVerdict<T>[] = [];
  const overRss = check.rssMb > check.rssBudgetMb;
  for (const { thread, usedMb, fresh } of samples) {
    if (usedMb > check.taskMemoryMb) {
      verdicts.push({
        thread,
        error:
          `task thread used ${mib(usedMb)} (JavaScript heap and Buffers), over its ` +
          `${mib(check.taskMemoryMb)} budget (--task-memory-mb): terminated`,
      });
    } else if (overRss && !fresh) {
      verdicts.push({
        thread,
        error:
          `the worker's memory (${mib(check.rssMb)} resident) went over its budget ` +
          `(${mib(check.rssBudgetMb)}, from --task-memory-mb ${check.taskMemoryMb}) while this ` +
          'task held its thread: terminated',
      });
    }
  }
  return verdicts;
}

/** The error of an attempt whose thread V8 ended for its heap. */
export function heapExhausted(taskMemoryMb: number): string {
  return (
    `task thread ran out of memory: its JavaScript heap reached the ${mib(taskMemoryMb)} ` +
    'limit (--task-memory-mb)'
  );
}
