/**
 * `client.queues`: the named queues and their settings (pause, resume,
 * limits). The requests are extensions (LIST_QUEUES, SET_QUEUE), sent only
 * when asked for; a coordinator that does not know them answers "not
 * understood", which becomes {@link FeatureUnsupportedError}.
 */
import { isNotUnderstood } from '../protocol/features.js';
import type {
  ClientReply,
  ClientRequest,
  QueueInfo,
  RateLimit,
  SetQueue,
} from '../protocol/messages.js';
import { concurrencyProblem, queueNameProblem, rateProblem } from '../protocol/queue-names.js';
import { FeatureUnsupportedError, RemoteError, UnexpectedReplyError } from './errors.js';

export type { QueueInfo, RateLimit } from '../protocol/messages.js';

/**
 * A change of a queue's limits: a field left out keeps its value, `null`
 * clears it (no limit).
 */
export interface QueueLimits {
  /** At most this many attempts of the queue hold a lease at once, 1..100,000. */
  concurrency?: number | null;
  /** At most `max` attempt starts in any window of `intervalMillis`. */
  rateLimit?: RateLimit | null;
  /** The same as `concurrency`, for each group key of the queue. */
  groupConcurrency?: number | null;
  /** The same as `rateLimit`, for each group key of the queue. */
  groupRateLimit?: RateLimit | null;
}

type Send = (msg: ClientRequest) => Promise<ClientReply>;

export class QueuesApi {
  readonly #send: Send;

  constructor(send: Send) {
    this.#send = send;
  }

  /** Every queue that has a job or a setting, sorted by name. */
  async list(): Promise<QueueInfo[]> {
    const request: ClientRequest = { type: 'LIST_QUEUES' };
    const reply = await this.#request(request);
    if (reply.type !== 'QUEUE_LIST') throw new UnexpectedReplyError(request.type, reply.type);
    return reply.queues;
  }

  /** One queue (a queue without jobs or settings shows its defaults). */
  async get(name: string): Promise<QueueInfo> {
    checkName(name);
    const found = (await this.list()).find((q) => q.name === name);
    return found ?? (await this.set(name, {}));
  }

  /** No attempt of the queue starts until {@link resume}; submissions are still accepted. */
  pause(name: string): Promise<QueueInfo> {
    checkName(name);
    return this.#set({ type: 'SET_QUEUE', name, paused: true });
  }

  resume(name: string): Promise<QueueInfo> {
    checkName(name);
    return this.#set({ type: 'SET_QUEUE', name, paused: false });
  }

  /** Changes limits; resolves with the queue once the change is durable. */
  set(name: string, limits: QueueLimits): Promise<QueueInfo> {
    checkName(name);
    return this.#set(setQueueMessage(name, limits));
  }

  async #set(msg: SetQueue): Promise<QueueInfo> {
    const reply = await this.#request(msg);
    if (reply.type !== 'QUEUE_INFO') throw new UnexpectedReplyError(msg.type, reply.type);
    return reply.queue;
  }

  async #request(msg: ClientRequest): Promise<ClientReply> {
    const reply = await this.#send(msg);
    if (reply.type !== 'ERROR') return reply;
    if (isNotUnderstood(reply)) throw new FeatureUnsupportedError('queues', null, msg.type);
    throw new RemoteError(reply);
  }
}

function checkName(name: string): void {
  const problem = queueNameProblem(name);
  if (problem !== null) throw new TypeError(`queue name ${problem}`);
}

/** The SET_QUEUE of a change of limits (checked here first: TypeError naming the field). */
export function setQueueMessage(name: string, limits: QueueLimits): SetQueue {
  const msg: SetQueue = { type: 'SET_QUEUE', name };
  const clear: string[] = [];
  for (const field of ['concurrency', 'groupConcurrency'] as const) {
    const value = limits[field];
    if (value === undefined) continue;
    if (value === null) clear.push(field);
    else {
      const problem = concurrencyProblem(value);
      if (problem !== null) throw new TypeError(`${field} ${problem}`);
      msg[field] = value;
    }
  }
  for (const field of ['rateLimit', 'groupRateLimit'] as const) {
    const value = limits[field];
    if (value === undefined) continue;
    if (value === null) clear.push(field);
    else {
      const problem = rateProblem(value);
      if (problem !== null) throw new TypeError(`${field} ${problem}`);
      msg[field] = { max: value.max, intervalMillis: value.intervalMillis };
    }
  }
  if (clear.length > 0) msg.clear = clear;
  return msg;
}
