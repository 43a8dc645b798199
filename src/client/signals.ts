/**
 * Signals, events and triggers: `client.signal`, `client.publish` and
 * `client.triggers`. The requests are extensions (SIGNAL_JOB, PUBLISH_EVENT,
 * SET_TRIGGER, LIST_TRIGGERS, DELETE_TRIGGER), sent only when asked for; a
 * coordinator that does not know them answers "not understood", which
 * becomes {@link FeatureUnsupportedError} (feature `signals`).
 *
 * What can be checked here is checked before anything is sent, with the
 * words the CLI uses too (the `…Problem` functions): a name as a queue's, a
 * payload of at most {@link MAX_SIGNAL_PAYLOAD_BYTES}, a key or event id of
 * 1..{@link MAX_EVENT_ID_LENGTH} characters. The coordinator checks
 * everything again and has the last word.
 */
import { isNotUnderstood } from '../protocol/features.js';
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_EVENT_ID_LENGTH,
  MAX_SIGNAL_PAYLOAD_BYTES,
} from '../protocol/limits.js';
import { PRIORITIES } from '../protocol/messages.js';
import type {
  ClientReply,
  ClientRequest,
  JsonValue,
  PublishEvent,
  SetTrigger,
  SignalJob,
  TriggerDefinition,
  TriggerSnapshot,
} from '../protocol/messages.js';
import { queueNameProblem } from '../protocol/queue-names.js';
import {
  FeatureUnsupportedError,
  RemoteError,
  RequestTooLargeError,
  UnexpectedReplyError,
} from './errors.js';

export type { TriggerSnapshot } from '../protocol/messages.js';

/** What {@link DtpClient.signal} resolves with, once the signal is durable. */
export interface SignalResult {
  jobId: string;
  name: string;
  /** True when a wait of the job took the signal at once (the job was waiting for it). */
  resumed: boolean;
  /** Signals the job holds that no wait has taken yet, this one included unless it was taken. */
  signalsHeld: number;
}

/** Options of {@link DtpClient.publish}. */
export interface PublishOptions {
  /** Only waits for this key (or for any key) wake; 1..256 characters. */
  key?: string;
  /**
   * The event's id, 1..256 characters (default: the coordinator makes one).
   * Publishing a known id again does nothing and resolves with the first reply.
   */
  eventId?: string;
}

/** What {@link DtpClient.publish} resolves with, once the event is durable. */
export interface PublishResult {
  eventId: string;
  /** The jobs the event's triggers created, in trigger-name order. */
  jobIds: string[];
  /** Waiting jobs it woke. */
  resumed: number;
  /** True when the event id was known: nothing was done again, the fields are the first reply's. */
  duplicate: boolean;
}

/** A trigger as {@link TriggersApi.set} takes it: each event `event` creates one job of `taskType`. */
export interface TriggerOptions {
  /** The trigger's name, as a queue's (`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`). */
  name: string;
  /** The event name it listens to, as a queue's. */
  event: string;
  /**
   * The task type of the jobs it creates. Their payload is the event's; one
   * that is not a JSON object reaches the job as `{ value }`.
   */
  taskType: string;
  /** The named queue of its jobs (default `default`). */
  queue?: string;
  /** Base priority of its jobs (default NORMAL). */
  priority?: TriggerDefinition['priority'];
  /** Attempts of each job, 1..1000 (default: the coordinator's). */
  maxAttempts?: number;
}

/** Why a signal or event name is refused, or null. */
export function signalNameProblem(name: unknown): string | null {
  if (typeof name !== 'string') return 'must be a string';
  return queueNameProblem(name);
}

/** Why an event key or event id is refused, or null. */
export function eventIdProblem(value: unknown): string | null {
  if (typeof value !== 'string') return 'must be a string';
  if (value.length < 1 || value.length > MAX_EVENT_ID_LENGTH) {
    return `must be 1..${MAX_EVENT_ID_LENGTH} characters, got ${value.length}`;
  }
  return null;
}

/**
 * The bytes of a payload's JSON text, or a problem: not JSON at all (a
 * function, a cycle, a BigInt) or larger than {@link MAX_SIGNAL_PAYLOAD_BYTES}.
 */
export function payloadBytesOf(payload: unknown): { bytes: number } | { problem: string } {
  let text: string | undefined;
  try {
    text = JSON.stringify(payload);
  } catch (err) {
    return { problem: `payload is not JSON: ${(err as Error).message}` };
  }
  if (text === undefined) return { problem: 'payload is not JSON' };
  return { bytes: Buffer.byteLength(text) };
}

function checkName(what: string, name: unknown): void {
  const problem = signalNameProblem(name);
  if (problem !== null) throw new TypeError(`${what} ${problem}`);
}

function checkEventId(what: string, value: unknown): void {
  const problem = eventIdProblem(value);
  if (problem === null) return;
  if (typeof value !== 'string') throw new TypeError(`${what} ${problem}`);
  throw new RangeError(`${what} ${problem}`);
}

/** A JSON value of at most the limit (absent = null); else TypeError or RequestTooLargeError. */
function checkedPayload(requestType: ClientRequest['type'], payload: unknown): JsonValue {
  const value = payload === undefined ? null : payload;
  const size = payloadBytesOf(value);
  if ('problem' in size) throw new TypeError(size.problem);
  if (size.bytes > MAX_SIGNAL_PAYLOAD_BYTES) {
    throw new RequestTooLargeError(requestType, size.bytes, MAX_SIGNAL_PAYLOAD_BYTES);
  }
  return value as JsonValue;
}

/** The SIGNAL_JOB of a signal (checked here first). */
export function signalMessage(jobId: string, name: string, payload: unknown): SignalJob {
  if (typeof jobId !== 'string' || jobId === '') {
    throw new TypeError('jobId must be a non-empty string');
  }
  checkName('signal name', name);
  return { type: 'SIGNAL_JOB', jobId, name, payload: checkedPayload('SIGNAL_JOB', payload) };
}

/** The PUBLISH_EVENT of an event (checked here first); unset options are left out. */
export function publishMessage(
  name: string,
  payload: unknown,
  options: PublishOptions = {},
): PublishEvent {
  checkName('event name', name);
  const msg: PublishEvent = {
    type: 'PUBLISH_EVENT',
    name,
    payload: checkedPayload('PUBLISH_EVENT', payload),
  };
  if (options.key !== undefined) {
    checkEventId('key', options.key);
    msg.key = options.key;
  }
  if (options.eventId !== undefined) {
    checkEventId('eventId', options.eventId);
    msg.eventId = options.eventId;
  }
  return msg;
}

/** The SET_TRIGGER of a trigger (checked here first); unset options are left out. */
export function setTriggerMessage(options: TriggerOptions): SetTrigger {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError('a trigger is { name, event, taskType, ... }');
  }
  checkName('trigger name', options.name);
  checkName('event name', options.event);
  if (typeof options.taskType !== 'string' || options.taskType === '') {
    throw new TypeError('taskType must be a non-empty string');
  }
  const trigger: TriggerDefinition = {
    name: options.name,
    event: options.event,
    taskType: options.taskType,
  };
  if (options.queue !== undefined) {
    const problem = queueNameProblem(options.queue);
    if (problem !== null) throw new TypeError(`queue ${problem}`);
    trigger.queue = options.queue;
  }
  if (options.priority !== undefined && options.priority !== null) {
    if (!PRIORITIES.includes(options.priority)) {
      throw new RangeError(
        `priority must be one of ${PRIORITIES.join(', ')}, got ${String(options.priority)}`,
      );
    }
    trigger.priority = options.priority;
  }
  if (options.maxAttempts !== undefined) {
    const n = options.maxAttempts;
    if (!Number.isSafeInteger(n) || n < 1 || n > MAX_ATTEMPTS_LIMIT) {
      throw new RangeError(`maxAttempts must be an integer in 1..${MAX_ATTEMPTS_LIMIT}, got ${n}`);
    }
    trigger.maxAttempts = n;
  }
  return { type: 'SET_TRIGGER', trigger };
}

type Send = (msg: ClientRequest) => Promise<ClientReply>;
type ReplyOf<T extends ClientReply['type']> = Extract<ClientReply, { type: T }>;

/**
 * Sends one request of this feature and expects a reply of `type`: "not
 * understood" is {@link FeatureUnsupportedError}, another `ERROR` a
 * {@link RemoteError}.
 */
export async function signalsRequest<T extends ClientReply['type']>(
  send: Send,
  msg: ClientRequest,
  type: T,
): Promise<ReplyOf<T>> {
  const reply = await send(msg);
  if (reply.type === type) return reply as ReplyOf<T>;
  if (reply.type !== 'ERROR') throw new UnexpectedReplyError(msg.type, reply.type);
  if (isNotUnderstood(reply)) throw new FeatureUnsupportedError('signals', null, msg.type);
  throw new RemoteError(reply);
}

/** `client.triggers`: the triggers that turn each event into a job. */
export class TriggersApi {
  readonly #send: Send;

  constructor(send: Send) {
    this.#send = send;
  }

  /**
   * Creates the trigger or replaces its definition (by name); resolves once
   * durable. From then on each event of `event` creates one job of
   * `taskType` whose payload is the event's, in the event's commit.
   */
  async set(options: TriggerOptions): Promise<TriggerSnapshot> {
    const msg = setTriggerMessage(options);
    return (await signalsRequest(this.#send, msg, 'TRIGGER_INFO')).trigger;
  }

  /** Every trigger, sorted by name. */
  async list(): Promise<TriggerSnapshot[]> {
    const msg: ClientRequest = { type: 'LIST_TRIGGERS' };
    return (await signalsRequest(this.#send, msg, 'TRIGGER_LIST')).triggers;
  }

  /** Deletes the trigger; resolves with false when there was none of that name. Jobs it made stay. */
  async delete(name: string): Promise<boolean> {
    checkName('trigger name', name);
    const msg: ClientRequest = { type: 'DELETE_TRIGGER', name };
    return (await signalsRequest(this.#send, msg, 'TRIGGER_DELETED')).deleted;
  }
}
