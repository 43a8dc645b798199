/**
 * The named queues under `/api/queues` (docs/HTTP.md): their list, pause,
 * resume and limits, as client requests (LIST_QUEUES, SET_QUEUE) answered
 * after their commit, exactly like a TCP client's.
 */
import type { QueueInfo, RateLimit, SetQueue } from '../protocol/messages.js';
import { parseRate, queueNameProblem } from '../protocol/queue-names.js';
import { setQueueMessage, type ChangedQueue, type QueueLimits } from '../client/queues.js';
import { ErrorCode, remoteCode } from '../protocol/error-codes.js';
import type { DashboardSource } from './api.js';
import { onlyFields } from './params.js';
import { HttpError, badRequest } from './responses.js';

/** HTTP status of an `ERROR` code of a queue request (anything else is the coordinator's: 503). */
const STATUS_OF_CODE: Partial<Record<string, number>> = {
  [ErrorCode.InvalidRequest]: 400,
  [ErrorCode.UnknownQueue]: 404,
};

async function answer(
  source: DashboardSource,
  msg: SetQueue | { type: 'LIST_QUEUES' },
): Promise<ChangedQueue[]> {
  const reply = await source.request(msg);
  if (reply.type === 'QUEUE_LIST') return reply.queues;
  if (reply.type === 'QUEUE_INFO') {
    return [reply.created === true ? { ...reply.queue, created: true } : reply.queue];
  }
  if (reply.type === 'ERROR') {
    const code = remoteCode(reply.code) ?? ErrorCode.InternalError;
    throw new HttpError(STATUS_OF_CODE[code] ?? 503, code, reply.message);
  }
  throw new HttpError(500, ErrorCode.InternalError, `unexpected ${reply.type}`);
}

/** `GET /api/queues`: every queue with a job or a setting. */
export async function listQueues(source: DashboardSource): Promise<{ queues: QueueInfo[] }> {
  return { queues: await answer(source, { type: 'LIST_QUEUES' }) };
}

function queueName(raw: string): string {
  const problem = queueNameProblem(raw);
  if (problem !== null) throw badRequest(`queue name ${problem}`);
  return raw;
}

/**
 * `POST /api/queues/<name>/pause` and `/resume` (body `{}` or
 * `{"create": true}`: also a queue that has no job and no setting yet).
 */
export async function pauseQueue(
  source: DashboardSource,
  name: string,
  paused: boolean,
  body: Record<string, unknown> = {},
): Promise<ChangedQueue> {
  onlyFields(body, ['create']);
  const create = body.create ?? false;
  if (typeof create !== 'boolean') throw badRequest('create must be true or false');
  const msg: SetQueue = { type: 'SET_QUEUE', name: queueName(name), paused };
  if (create) msg.create = true;
  const [queue] = await answer(source, msg);
  return queue as ChangedQueue;
}

const LIMIT_FIELDS = ['concurrency', 'rate', 'groupConcurrency', 'groupRate'] as const;

function rateOf(field: string, value: unknown): RateLimit | null {
  if (value === null) return null;
  if (typeof value !== 'string')
    throw badRequest(`${field} must be a string like "10/1s", or null`);
  const parsed = parseRate(value);
  if ('error' in parsed) throw badRequest(`${field}: ${parsed.error}`);
  return parsed.rate;
}

function countOf(field: string, value: unknown): number | null {
  if (value === null) return null;
  if (typeof value !== 'number') throw badRequest(`${field} must be an integer or null`);
  return value;
}

/**
 * `POST /api/queues/<name> {concurrency?, rate?, groupConcurrency?,
 * groupRate?}`: a field left out keeps its value, `null` clears it; rates
 * are written `"n/<duration>"`.
 */
export async function setQueueLimits(
  source: DashboardSource,
  name: string,
  body: Record<string, unknown>,
): Promise<QueueInfo> {
  onlyFields(body, LIMIT_FIELDS);
  const limits: QueueLimits = {};
  if (body.concurrency !== undefined) limits.concurrency = countOf('concurrency', body.concurrency);
  if (body.groupConcurrency !== undefined) {
    limits.groupConcurrency = countOf('groupConcurrency', body.groupConcurrency);
  }
  if (body.rate !== undefined) limits.rateLimit = rateOf('rate', body.rate);
  if (body.groupRate !== undefined) limits.groupRateLimit = rateOf('groupRate', body.groupRate);
  let msg: SetQueue;
  try {
    msg = setQueueMessage(queueName(name), limits);
  } catch (err) {
    if (err instanceof TypeError) throw badRequest(err.message);
    throw err;
  }
  const [queue] = await answer(source, msg);
  return queue as QueueInfo;
}
