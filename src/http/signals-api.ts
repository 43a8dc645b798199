/**
 * Signals, events and triggers in the JSON API (docs/HTTP.md), for webhooks
 * and the dashboard: `POST /api/jobs/:id/signal`, `POST /api/events` and
 * `GET /api/triggers`, each one client request (SIGNAL_JOB, PUBLISH_EVENT,
 * LIST_TRIGGERS) answered after its commit, exactly like a TCP client's.
 *
 * The body's fields are checked here for their JSON types and names, so a
 * mistake is a 400 that names the field; bounds the core holds (payload
 * size, signals held, triggers) come back as its `ERROR` codes.
 */
import { jsonValueCodec } from '../protocol/codec.js';
import { MAX_EVENT_ID_LENGTH } from '../protocol/limits.js';
import type { JsonValue, TriggerSnapshot } from '../protocol/messages.js';
import { queueNameProblem } from '../protocol/queue-names.js';
import { expect, type ApiContext } from './api.js';
import { onlyFields } from './params.js';
import { badRequest } from './responses.js';

/** `POST /api/jobs/:id/signal`: the JOB_SIGNALLED fields. */
export interface SignalResult {
  jobId: string;
  name: string;
  /** True when the job was waiting for it and goes on now. */
  resumed: boolean;
  /** Signals the job holds that no wait has taken yet. */
  signalsHeld: number;
}

/** `POST /api/events`: the EVENT_PUBLISHED fields. */
export interface PublishResult {
  eventId: string;
  /** The jobs its triggers created. */
  jobIds: string[];
  /** Waiting jobs it woke. */
  resumed: number;
  /** True when the event id was known: nothing was done again (the first answer's ids). */
  duplicate: boolean;
}

export interface TriggersResult {
  triggers: TriggerSnapshot[];
}

/** The body's `name`: required, as a queue name. */
function nameOf(body: Record<string, unknown>): string {
  const { name } = body;
  if (typeof name !== 'string') throw badRequest('name is required: a string');
  const problem = queueNameProblem(name);
  if (problem !== null) throw badRequest(`name ${problem}`);
  return name;
}

/**
 * The body's `payload`: any JSON value, nested as deep as the wire allows
 * (deeper would overflow the stack wherever it is encoded); absent = null.
 */
function payloadOf(body: Record<string, unknown>): JsonValue {
  try {
    return jsonValueCodec.decode(body.payload, '', 'payload');
  } catch (err) {
    throw badRequest(err instanceof Error ? err.message : String(err));
  }
}

/** An optional string field of 1..256 characters; absent or null = null. */
function optionalId(body: Record<string, unknown>, field: 'key' | 'eventId'): string | null {
  const value = body[field];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_EVENT_ID_LENGTH) {
    throw badRequest(`${field} must be a string of 1..${MAX_EVENT_ID_LENGTH} characters`);
  }
  return value;
}

/** `POST /api/jobs/:id/signal {"name", "payload"}`. */
export async function signalJob(
  ctx: ApiContext,
  jobId: string,
  body: Record<string, unknown>,
): Promise<SignalResult> {
  onlyFields(body, ['name', 'payload']);
  const reply = await ctx.source.request({
    type: 'SIGNAL_JOB',
    jobId,
    name: nameOf(body),
    payload: payloadOf(body),
  });
  const signalled = expect(reply, 'JOB_SIGNALLED');
  return {
    jobId: signalled.jobId,
    name: signalled.name,
    resumed: signalled.resumed,
    signalsHeld: signalled.signalsHeld,
  };
}

/** `POST /api/events {"name", "payload", "key"?, "eventId"?}`. */
export async function publishEvent(
  ctx: ApiContext,
  body: Record<string, unknown>,
): Promise<PublishResult> {
  onlyFields(body, ['name', 'payload', 'key', 'eventId']);
  const name = nameOf(body);
  const key = optionalId(body, 'key');
  const eventId = optionalId(body, 'eventId');
  const reply = await ctx.source.request({
    type: 'PUBLISH_EVENT',
    name,
    payload: payloadOf(body),
    ...(key !== null && { key }),
    ...(eventId !== null && { eventId }),
  });
  const published = expect(reply, 'EVENT_PUBLISHED');
  return {
    eventId: published.eventId,
    jobIds: published.jobIds,
    resumed: published.resumed,
    duplicate: published.duplicate === true,
  };
}

/** `GET /api/triggers`: every trigger, as `client.sh trigger list --json` shows them. */
export async function listTriggers(ctx: ApiContext): Promise<TriggersResult> {
  const reply = await ctx.source.request({ type: 'LIST_TRIGGERS' });
  return { triggers: expect(reply, 'TRIGGER_LIST').triggers };
}
