/**
 * The answers of several shards made into one, as one coordinator would
 * have answered (shard-router.ts): lists put together, counts added, a
 * request about one name answered by the shard that has it, and the parts
 * of a batch split across shards put back in the batch's order.
 */
import type {
  ClientReply,
  ClientRequest,
  ErrorMessage,
  JsonObject,
  WorkerSnapshot,
} from '../../protocol/messages.js';
import { ErrorCode } from '../../protocol/error-codes.js';

/** Where a listing of every queue goes on: which shard, and that shard's own cursor. */
export interface ListCursor {
  shard: number;
  inner: string | null;
}

const CURSOR_PREFIX = 's';

export function encodeListCursor(cursor: ListCursor): string {
  return `${CURSOR_PREFIX}${cursor.shard}.${cursor.inner ?? ''}`;
}

/** Throws on a cursor this router did not make. */
export function decodeListCursor(text: string): ListCursor {
  const match = /^s(\d{1,4})\.(.*)$/s.exec(text);
  if (match === null) throw new Error('not a sharded cursor');
  const inner = match[2] as string;
  return { shard: Number(match[1]), inner: inner === '' ? null : inner };
}

/** Requests about one schedule by name: answered by the shard that has it. */
const BY_SCHEDULE_NAME: ReadonlySet<ClientRequest['type']> = new Set([
  'GET_SCHEDULE',
  'PAUSE_SCHEDULE',
  'RESUME_SCHEDULE',
  'DELETE_SCHEDULE',
  'TRIGGER_SCHEDULE',
]);

/** The replies of every shard (in shard order) to one request about every queue. */
export function mergeAll(msg: ClientRequest, replies: ClientReply[]): ClientReply {
  const error = replies.find((r): r is ErrorMessage => r.type === 'ERROR');
  if (BY_SCHEDULE_NAME.has(msg.type)) return namedAnswer(replies);
  if (msg.type === 'DELETE_TRIGGER') {
    const deleted = replies.find((r) => r.type === 'TRIGGER_DELETED' && r.deleted);
    return deleted ?? error ?? (replies[0] as ClientReply);
  }
  if (error !== undefined) return error;
  return mergeLists(replies);
}

/** Lists put together (one entry per name), counts added; any other reply is the first shard's. */
function mergeLists(replies: ClientReply[]): ClientReply {
  const first = replies[0] as ClientReply;
  if (first.type === 'WORKER_LIST') return { type: 'WORKER_LIST', workers: mergeWorkers(replies) };
  if (first.type === 'QUEUE_LIST') {
    const queues = replies.flatMap((r) => (r.type === 'QUEUE_LIST' ? r.queues : []));
    return { type: 'QUEUE_LIST', queues: uniqueBy(queues, (q) => q.name) };
  }
  if (first.type === 'SCHEDULE_LIST') {
    const schedules = replies.flatMap((r) => (r.type === 'SCHEDULE_LIST' ? r.schedules : []));
    return { type: 'SCHEDULE_LIST', schedules: uniqueBy(schedules, (x) => x.name) };
  }
  if (first.type === 'TRIGGER_LIST') {
    const triggers = replies.flatMap((r) => (r.type === 'TRIGGER_LIST' ? r.triggers : []));
    return { type: 'TRIGGER_LIST', triggers: uniqueBy(triggers, (t) => t.name) };
  }
  if (first.type === 'JOBS_PURGED') {
    const deleted = replies.reduce((n, r) => n + (r.type === 'JOBS_PURGED' ? r.deleted : 0), 0);
    return { type: 'JOBS_PURGED', deleted };
  }
  if (first.type === 'EVENT_PUBLISHED') {
    const published = replies.filter((r) => r.type === 'EVENT_PUBLISHED');
    return {
      type: 'EVENT_PUBLISHED',
      eventId: first.eventId,
      jobIds: published.flatMap((r) => r.jobIds),
      resumed: published.reduce((n, r) => n + r.resumed, 0),
      ...(published.every((r) => r.duplicate === true) && { duplicate: true }),
    };
  }
  return first;
}

/** A request about one schedule by name: the answer of the shard that has it. */
function namedAnswer(replies: ClientReply[]): ClientReply {
  const found = replies.find((r) => r.type !== 'ERROR');
  if (found !== undefined) return found;
  const other = replies.find((r) => r.type === 'ERROR' && r.code !== ErrorCode.UnknownSchedule);
  return other ?? (replies[0] as ClientReply);
}

/** One worker has a session with each shard it serves: one entry, its counts added up. */
function mergeWorkers(replies: ClientReply[]): WorkerSnapshot[] {
  const byId = new Map<string, WorkerSnapshot>();
  for (const reply of replies) {
    if (reply.type !== 'WORKER_LIST') continue;
    for (const w of reply.workers) {
      const seen = byId.get(w.workerId);
      if (seen === undefined) {
        byId.set(w.workerId, { ...w });
        continue;
      }
      seen.capacity += w.capacity;
      seen.activeTasks += w.activeTasks;
      seen.lastHeartbeatMillis = Math.max(seen.lastHeartbeatMillis, w.lastHeartbeatMillis);
      if (w.runningJobs != null) seen.runningJobs = [...(seen.runningJobs ?? []), ...w.runningJobs];
      if (w.queuedTasks != null) seen.queuedTasks = (seen.queuedTasks ?? 0) + w.queuedTasks;
      if (w.draining === true) seen.draining = true;
    }
  }
  return [...byId.values()];
}

function uniqueBy<T>(items: T[], key: (item: T) => string): T[] {
  const seen = new Set<string>();
  return items.filter((item) => {
    const k = key(item);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/**
 * The replies to the parts of a batch split by shard, as the one reply to
 * the batch: ids (and the deduplicated / replaced marks) at their jobs'
 * places. A part that was refused answers for the whole batch; the other
 * parts' jobs were created all the same (each part is durable on its own).
 */
export function mergeSubmitted(
  count: number,
  answered: { part: { jobs: JsonObject[]; at: number[] }; reply: ClientReply }[],
): ClientReply {
  const refused = answered.find((a) => a.reply.type !== 'JOBS_SUBMITTED');
  if (refused !== undefined) {
    const { part, reply } = refused;
    if (reply.type !== 'ERROR') return reply;
    // The parts are not one transaction: say which jobs the other shards created.
    const created = answered
      .filter((a) => a.reply.type === 'JOBS_SUBMITTED')
      .flatMap((a) => a.part.at)
      .sort((x, y) => x - y);
    const message =
      created.length === 0
        ? reply.message
        : reply.message.replace(
            'no job of the batch was created',
            `no job of its shard's part was created, but those at indexes ${created.join(', ')} (other shards) were`,
          );
    // The job at fault, counted in the whole batch rather than in its shard's part.
    if (typeof reply.index !== 'number') return { ...reply, message };
    const index = part.at[reply.index] ?? reply.index;
    return {
      ...reply,
      index,
      message: message.replace(
        /^Job at index \d+ of the batch/,
        `Job at index ${index} of the batch`,
      ),
    };
  }
  const jobIds = new Array<string>(count).fill('');
  const deduplicated = new Array<boolean>(count).fill(false);
  const replaced = new Array<boolean>(count).fill(false);
  for (const { part, reply } of answered) {
    if (reply.type !== 'JOBS_SUBMITTED') continue;
    part.at.forEach((at, i) => {
      jobIds[at] = reply.jobIds[i] as string;
      deduplicated[at] = reply.deduplicated?.[i] === true;
      replaced[at] = reply.replaced?.[i] === true;
    });
  }
  return {
    type: 'JOBS_SUBMITTED',
    jobIds,
    ...(deduplicated.some(Boolean) && { deduplicated }),
    ...(replaced.some(Boolean) && { replaced }),
  };
}
