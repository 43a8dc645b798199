/**
 * Worker settings and the one table of their bounds. The CLI takes each
 * flag's range from {@link WORKER_BOUNDS}; `startWorker`, `Worker.start` and
 * the task pool check the same table (the pool's queue limit is bounded by
 * the very bound of `prefetch`, so no prefetch a worker accepts is refused
 * further down).
 */
import { MAX_QUEUES_PER_WORKER, queueNameProblem } from '../protocol/queue-names.js';
import { MAX_TIMER_MS, tableProblem, type BoundsTable, type Phrasing } from '../common/bounds.js';
import { AddressError, parseAddressList } from '../net/address.js';
import type { ClientTls } from '../net/tls.js';
import type { Logger } from '../observability/logger.js';
import { LocalErrorCode } from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';
import {
  MAX_PORT,
  MAX_PREFETCH,
  MAX_PREFETCH_PER_SLOT,
  MAX_SLOTS,
  MAX_TASK_THREADS,
  maxPrefetch,
} from '../protocol/limits.js';
import { TASK_MEMORY_MB } from './memory-budget.js';
import type { LoadedTaskModules } from './task-modules.js';

export interface WorkerOptions {
  coordinatorHost: string;
  coordinatorPort: number;
  /** Non-blank; sent in every message. */
  workerId: string;
  /** Attempts run at once, shared and isolated together, 1..10,000. */
  capacity: number;
  /**
   * Shared task threads, 1..256 (default: the machine's available
   * parallelism): the attempts of tasks that are not isolated run on these,
   * many per thread.
   */
  threads?: number;
  /**
   * Attempts taken beyond `capacity` and queued here until a slot is free,
   * 0..4 x capacity and at most 4,096 (default: that most; 0 turns it off). Asked of the
   * coordinator at registration; one that offers `prefetch` uses it only
   * while this worker's attempts are short, one that does not never does.
   */
  prefetch?: number;
  /** Time between heartbeats while registered, in ms. */
  heartbeatIntervalMs: number;
  /** Wait between a lost or failed connection and the next dial, in ms (>= 1). */
  reconnectDelayMs: number;
  /** Lines get `workerId=…` added. */
  logger: Logger;
  /**
   * Users' task modules, loaded and checked by `loadTaskModules()` (see
   * task-modules.ts); default: the built-in tasks only.
   */
  tasks?: LoadedTaskModules;
  /**
   * After a cancel or a deadline, time a handler gets to settle before its
   * thread is terminated, in ms (default 1000).
   */
  cancelGraceMs?: number;
  /**
   * Memory budget of each task thread, in MiB, 32..1048576 (default 512): its
   * JavaScript heap is capped there, and a thread whose heap and Buffers go
   * over it is terminated, failing its attempt (see memory-budget.ts).
   */
  taskMemoryMb?: number;
  /**
   * Give up a dial, or a registration that gets no reply, after this long, in
   * ms (default 5000).
   */
  connectTimeoutMs?: number;
  /** TLS with these settings (`{}` = system CAs); absent or null = plain TCP. */
  tls?: ClientTls | null;
  /** The worker token sent in WORKER_REGISTER; absent or null = none. Never logged. */
  authToken?: string | null;
  /**
   * A coordinator that confirmed `heartbeatAck` and sends nothing for this
   * long is treated as gone, in ms (default 3 x `heartbeatIntervalMs`, and
   * never below {@link MIN_DEFAULT_COORDINATOR_TIMEOUT_MS}: an ack leaves
   * only after a commit, so a sub-second window would drop a coordinator that
   * is merely busy, and orphan every running task with it).
   */
  coordinatorTimeoutMs?: number;
  /**
   * Take attempts of these named queues only (default: every queue). Needs
   * a coordinator that offers `queues`: with one that does not, the worker
   * stops (`refused`) rather than take every queue.
   */
  queues?: readonly string[] | null;
  /**
   * With a sharded coordinator (its worker port answers the registration
   * with NOT_LEADER and the shard map): how often the worker asks it for
   * the map again (LIST_SHARDS), in ms (default 2000). It also asks at once
   * whenever one of its shard sessions loses its connection.
   */
  shardRefreshMs?: number;
}

/** Floor of the default coordinator timeout, in ms (an explicit value may be lower). */
export const MIN_DEFAULT_COORDINATOR_TIMEOUT_MS = 1_000;
/** Default time a stopped handler gets to settle before its thread is terminated, in ms. */
export const DEFAULT_CANCEL_GRACE_MS = 1_000;
/** Default `shardRefreshMs`. */
export const DEFAULT_SHARD_REFRESH_MS = 2_000;
/** Default `connectTimeoutMs`. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
/** Default `prefetch`, per unit of capacity. */
export const DEFAULT_PREFETCH_PER_SLOT = 4;

/** The `prefetch` of a worker that names none: 4 x capacity, at most {@link MAX_PREFETCH}. */
export function defaultPrefetch(capacity: number): number {
  return Math.min(DEFAULT_PREFETCH_PER_SLOT * capacity, MAX_PREFETCH);
}

/** Inclusive bounds of every numeric worker option. */
export const WORKER_BOUNDS = {
  coordinatorPort: { min: 1, max: MAX_PORT },
  capacity: { min: 1, max: MAX_SLOTS },
  threads: { min: 1, max: MAX_TASK_THREADS, optional: true },
  prefetch: {
    min: 0,
    max: maxPrefetch(MAX_SLOTS),
    perUnitOf: { of: 'capacity', times: MAX_PREFETCH_PER_SLOT },
    optional: true,
  },
  heartbeatIntervalMs: { min: 1, max: MAX_TIMER_MS },
  reconnectDelayMs: { min: 1, max: MAX_TIMER_MS },
  cancelGraceMs: { min: 0, max: MAX_TIMER_MS, optional: true },
  taskMemoryMb: { min: TASK_MEMORY_MB.min, max: TASK_MEMORY_MB.max, optional: true },
  connectTimeoutMs: { min: 1, max: MAX_TIMER_MS, optional: true },
  coordinatorTimeoutMs: { min: 1, max: MAX_TIMER_MS, optional: true },
  shardRefreshMs: { min: 1, max: MAX_TIMER_MS, optional: true },
} as const satisfies BoundsTable<WorkerOptions>;

/** What {@link workerOptionsProblem} looks at: the address, the id, the queues and every bounded number. */
export type CheckedWorkerOptions = Pick<
  WorkerOptions,
  'coordinatorHost' | 'workerId' | 'queues' | keyof typeof WORKER_BOUNDS
>;

function queuesProblem(queues: readonly string[] | null | undefined): string | null {
  if (queues === undefined || queues === null) return null;
  if (queues.length === 0 || queues.length > MAX_QUEUES_PER_WORKER) {
    return `must name 1..${MAX_QUEUES_PER_WORKER} queues, got ${queues.length}`;
  }
  for (const queue of queues) {
    const problem = typeof queue === 'string' ? queueNameProblem(queue) : 'must be a string';
    if (problem !== null) return `holds a bad queue name: it ${problem}`;
  }
  return null;
}

/**
 * The first problem of a worker's options, naming each option by `name`
 * (default: as in code; the CLI passes its flags' names); null when they are
 * fine.
 */
export function workerOptionsProblem(
  options: CheckedWorkerOptions,
  name: (key: keyof CheckedWorkerOptions) => string = (key) => key,
  phrasing: Phrasing = 'range',
): string | null {
  if (options.workerId.trim() === '') return `${name('workerId')} must not be blank`;
  if (options.coordinatorHost === '') return `${name('coordinatorHost')} must not be empty`;
  const queues = queuesProblem(options.queues);
  if (queues !== null) return `${name('queues')} ${queues}`;
  const bounds = tableProblem(options, WORKER_BOUNDS, name, phrasing);
  if (bounds !== null) return bounds;
  try {
    parseAddressList(options.coordinatorHost, options.coordinatorPort);
  } catch (err) {
    if (!(err instanceof AddressError)) throw err;
    return `${name('coordinatorHost')}: ${err.message}`;
  }
  return null;
}

/** Throws a DtpError `INVALID_OPTIONS` naming the first bad option. */
export function validateWorkerOptions(options: WorkerOptions): void {
  const problem = workerOptionsProblem(options);
  if (problem !== null) throw new DtpError(LocalErrorCode.InvalidOptions, problem);
}
