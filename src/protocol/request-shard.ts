/**
 * Which shard a client request is for, on a database of `shards` shards:
 *
 * - `one`: a request about one queue (a submission, a queue's settings, a
 *   schedule or trigger being set, a listing filtered by queue) or about
 *   one job (by the shard its id names);
 * - `all`: a request about every queue (a listing without a queue, the
 *   workers, an event, a schedule or trigger named without its queue): each
 *   shard answers for its own part;
 * - `mixed`: a batch or flow whose jobs are in more than one shard (a
 *   batch is split by the router; a flow goes whole to its home shard,
 *   {@link flowHome}, whose core sends the other shards their jobs);
 * - `nowhere`: a job id that names no shard of this database (no shard has
 *   such a job).
 *
 * With one shard every request is `one` of shard 0. One rule for the
 * coordinator's router, a shard's own client port and the client library,
 * which sends a request about one shard straight to that shard.
 */
import type { ClientRequest, JsonObject, SubmitFlow } from './messages.js';
import { shardOfJobId, shardOfQueue } from './shards.js';

export type RequestShard =
  | { readonly kind: 'one'; readonly shard: number }
  | { readonly kind: 'all' }
  | { readonly kind: 'mixed'; readonly shards: readonly number[] }
  | { readonly kind: 'nowhere' };

const ALL: RequestShard = { kind: 'all' };

export function requestShard(msg: ClientRequest, shards: number): RequestShard {
  if (shards === 1) return { kind: 'one', shard: 0 };
  const ofQueue = (queue: string | null | undefined): RequestShard => ({
    kind: 'one',
    shard: shardOfQueue(queue, shards),
  });
  const ofJob = (jobId: string): RequestShard => {
    const shard = shardOfJobId(jobId, shards);
    return shard === null ? { kind: 'nowhere' } : { kind: 'one', shard };
  };
  switch (msg.type) {
    case 'SUBMIT_JOB':
      return ofQueue(msg.queue);
    case 'SUBMIT_JOBS':
      return together(
        msg.jobs.map((job: JsonObject) => shardOfQueue(queueField(job.queue), shards)),
      );
    case 'SUBMIT_FLOW':
      return together(msg.jobs.map((job) => shardOfQueue(job.queue, shards)));
    case 'GET_JOB_STATUS':
    case 'CANCEL_JOB':
    case 'WAIT_JOB':
    case 'SIGNAL_JOB':
      return ofJob(msg.jobId);
    case 'LIST_JOBS':
      return msg.queue === undefined || msg.queue === null ? ALL : ofQueue(msg.queue);
    case 'RERUN_JOBS':
      return ofQueue(msg.queue);
    case 'SET_QUEUE':
      return ofQueue(msg.name);
    case 'SUBSCRIBE_JOBS': {
      const { jobId, queue } = msg.filter;
      if (typeof jobId === 'string') return ofJob(jobId);
      return typeof queue === 'string' ? ofQueue(queue) : ALL;
    }
    case 'SET_SCHEDULE':
      return ofQueue(msg.schedule.queue);
    case 'SET_TRIGGER':
      return ofQueue(msg.trigger.queue);
    case 'AUTH':
    case 'LIST_WORKERS':
    case 'LIST_QUEUES':
    case 'PURGE_JOBS':
    case 'PUBLISH_EVENT':
    case 'LIST_TRIGGERS':
    case 'DELETE_TRIGGER':
    case 'LIST_SCHEDULES':
    case 'GET_SCHEDULE':
    case 'PAUSE_SCHEDULE':
    case 'RESUME_SCHEDULE':
    case 'DELETE_SCHEDULE':
    case 'TRIGGER_SCHEDULE':
    case 'LIST_SHARDS':
      return ALL;
  }
}

/** A queue field of a raw batch entry (anything but a string is the default queue here; the core judges it). */
function queueField(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

function together(shards: number[]): RequestShard {
  const distinct = [...new Set(shards)];
  if (distinct.length <= 1) return { kind: 'one', shard: distinct[0] ?? 0 };
  return { kind: 'mixed', shards: distinct.sort((a, b) => a - b) };
}

/**
 * The shard that takes a flow whose jobs are in several shards: its first
 * job's (coordinator/core/cross-shard.ts). One rule, for the router and for
 * the shard's own port.
 */
export function flowHome(msg: SubmitFlow, shards: number): number {
  return shardOfQueue(msg.jobs[0]?.queue, shards);
}
