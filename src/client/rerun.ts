/**
 * `client.rerun(...)`: the options of a redrive of FAILED jobs and the
 * RERUN_JOBS message they make, checked here first (nothing is sent for a
 * bad option: `TypeError` for a bad name, `RangeError` for a number out of
 * range, each naming the option).
 */
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_FILTER_VALUE_LENGTH,
  MAX_RERUN_LIMIT,
} from '../protocol/limits.js';
import type { RerunJobs } from '../protocol/messages.js';
import { queueNameProblem } from '../protocol/queue-names.js';

export interface RerunOptions {
  /** The queue whose FAILED jobs to re-run. */
  queue: string;
  /** Only FAILED (the default) can be re-run. */
  state?: 'FAILED';
  /** Only jobs of this task type, as stored (e.g. `SHA256`). */
  taskType?: string;
  /** Only jobs that finished at or after this time (a Date or epoch ms). */
  since?: Date | number;
  /** At most this many jobs in this call, 1..10,000 (default 1,000). */
  limit?: number;
  /** Attempts each job may make from now, 1..1,000 (default: the coordinator's). */
  maxAttempts?: number;
}

export interface RerunResult {
  /** How many jobs were queued again. */
  rerun: number;
  /** Their ids, newest first. */
  jobIds: string[];
  /** More jobs matched than this call took: call again for the rest. */
  more: boolean;
}

function checkInt(name: string, value: number, min: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer in ${min}..${max}, got ${value}`);
  }
}

export function rerunMessage(options: RerunOptions): RerunJobs {
  const badQueue = queueNameProblem(options.queue);
  if (badQueue !== null) throw new TypeError(`queue ${badQueue}`);
  const state = options.state ?? 'FAILED';
  if (state !== 'FAILED') throw new TypeError(`state must be FAILED, got ${String(state)}`);
  const msg: RerunJobs = { type: 'RERUN_JOBS', queue: options.queue, state };
  if (options.taskType !== undefined) {
    const n = options.taskType.length;
    if (n === 0 || n > MAX_FILTER_VALUE_LENGTH) {
      throw new TypeError(`taskType must be 1..${MAX_FILTER_VALUE_LENGTH} characters`);
    }
    msg.taskType = options.taskType;
  }
  if (options.since !== undefined) {
    const ms = options.since instanceof Date ? options.since.getTime() : options.since;
    checkInt('since', ms, 0, Number.MAX_SAFE_INTEGER);
    msg.finishedSinceMillis = ms;
  }
  if (options.limit !== undefined) {
    checkInt('limit', options.limit, 1, MAX_RERUN_LIMIT);
    msg.limit = options.limit;
  }
  if (options.maxAttempts !== undefined) {
    checkInt('maxAttempts', options.maxAttempts, 1, MAX_ATTEMPTS_LIMIT);
    msg.maxAttempts = options.maxAttempts;
  }
  return msg;
}
