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

/** Options of a pause or resume. */
export interface QueueStateOptions {
  /**
   * Also for a queue that has no job and no setting yet (default false: the
   * coordinator may refuse such a name, `RemoteError` `UNKNOWN_QUEUE`: a
   * resume always, a pause when the name is a near miss of a queue that exists).
   */
  create?: boolean;
}

/** A queue after a change; `created` when it had no job and no setting before. */
export type ChangedQueue = QueueInfo & { created?: true };

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

  /**
   * No attempt of the queue starts until {@link resume}; submissions are
   * still accepted. A name no job or setting has yet is refused when it is a
   * near miss of one that has (`UNKNOWN_QUEUE`), unless `create`.
   */
  pause(name: string, options: QueueStateOptions = {}): Promise<ChangedQueue> {
    checkName(name);
    return this.#set({ type: 'SET_QUEUE', name, paused: true, ...createField(options) });
  }

  /** Attempts of the queue start again; a queue without jobs or settings is `UNKNOWN_QUEUE` unless `create`. */
  resume(name: string, options: QueueStateOptions = {}): Promise<ChangedQueue> {
    checkName(name);
    return this.#set({ type: 'SET_QUEUE', name, paused: false, ...createField(options) });
  }

  /** Changes limits (creating the queue's settings if it has none); resolves once durable. */
  set(name: string, limits: QueueLimits): Promise<ChangedQueue> {
    checkName(name);
    return this.#set(setQueueMessage(name, limits));
  }

  async #set(msg: SetQueue): Promise<ChangedQueue> {
    const reply = await this.#request(msg);
    if (reply.type !== 'QUEUE_INFO') throw new UnexpectedReplyError(msg.type, reply.type);
    return reply.created === true ? { ...reply.queue, created: true } : reply.queue;
  }

  async #request(msg: ClientRequest): Promise<ClientReply> {
    const reply = await this.#send(msg);
    if (reply.type !== 'ERROR') return reply;
    if (isNotUnderstood(reply)) throw new FeatureUnsupportedError('queues', null, msg.type);
    throw new RemoteError(reply);
  }
}

function createField(options: QueueStateOptions): { create?: true } {
  return options.create === true ? { create: true } : {};
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
