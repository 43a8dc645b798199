/**
 * Protocol v1 exactly as the reference implementation knows it, at the JSON
 * level: the message types and fields of the first part of the protocol and
 * nothing else. Used by the strict v1 peers (strict-v1.ts), which must not
 * go through our codec: it knows every extension and writes extension fields
 * (as null) that a v1 peer never sends.
 *
 * Decoding follows the reference (a Jackson polymorphic type id): an unknown
 * `type`, a payload that is not a JSON object, or a known field of the wrong
 * JSON type is undecodable; unknown fields are ignored.
 */
import type { Socket } from 'node:net';
import { FrameDecoder, encodeFrame } from '../../src/protocol/framing.js';

export type RawMessage = Record<string, unknown> & { type: string };

type FieldKind = 'string' | 'int' | 'bool' | 'object' | 'array';
type FieldTable = Readonly<Record<string, FieldKind>>;

/** Every v1 message type with the JSON kind of each field (all may be null or absent). */
export const V1_TYPES: Readonly<Record<string, FieldTable>> = {
  WORKER_REGISTER: { workerId: 'string', capacity: 'int' },
  WORKER_REGISTERED: { workerId: 'string' },
  HEARTBEAT: { workerId: 'string' },
  TASK_ASSIGN: {
    jobId: 'string',
    attemptId: 'string',
    attemptNumber: 'int',
    taskType: 'string',
    payload: 'object',
  },
  TASK_CANCEL: { jobId: 'string', attemptId: 'string' },
  TASK_RESULT: {
    workerId: 'string',
    jobId: 'string',
    attemptId: 'string',
    success: 'bool',
    result: 'string',
    error: 'string',
  },
  ERROR: { message: 'string' },
  SUBMIT_JOB: {
    taskType: 'string',
    payload: 'object',
    maxAttempts: 'int',
    idempotencyKey: 'string',
    priority: 'string',
  },
  JOB_SUBMITTED: { jobId: 'string' },
  SUBMIT_REJECTED: { reason: 'string', activeCount: 'int', limit: 'int', retryable: 'bool' },
  GET_JOB_STATUS: { jobId: 'string' },
  JOB_STATUS: { job: 'object' },
  LIST_JOBS: {},
  JOB_LIST: { jobs: 'array' },
  LIST_WORKERS: {},
  WORKER_LIST: { workers: 'array' },
  CANCEL_JOB: { jobId: 'string' },
  JOB_CANCEL: { cancelled: 'bool', job: 'object' },
};

/** The five built-in task types: the only ones a v1 peer can name. */
export const V1_TASK_TYPES = ['SLEEP', 'WORD_COUNT', 'SHA256', 'PRIME_COUNT', 'FAIL'] as const;

/** The job snapshot fields of v1, in order. */
export const V1_JOB_FIELDS = [
  'jobId',
  'taskType',
  'state',
  'attempts',
  'maxAttempts',
  'workerId',
  'result',
  'error',
  'createdAtMillis',
  'updatedAtMillis',
  'priority',
] as const;

/** The worker snapshot fields of v1. */
export const V1_WORKER_FIELDS = [
  'workerId',
  'capacity',
  'activeTasks',
  'lastHeartbeatMillis',
] as const;

/** Why a frame could not be decoded, worded like the reference's decoder. */
export class UndecodableError extends Error {}

function kindOf(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  if (typeof value === 'number') return Number.isSafeInteger(value) ? 'int' : 'number';
  if (typeof value === 'boolean') return 'bool';
  return typeof value;
}

/** Decodes one payload the v1 way: unknown fields dropped, unknown types refused. */
export function decodeV1(payload: Uint8Array): RawMessage {
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch (err) {
    throw new UndecodableError(`Unexpected character: ${(err as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new UndecodableError('Unexpected token: expected START_OBJECT');
  }
  const object = raw as Record<string, unknown>;
  const type = object.type;
  if (typeof type !== 'string') {
    throw new UndecodableError("Missing type id when trying to resolve subtype of 'Message'");
  }
  const table = V1_TYPES[type];
  if (table === undefined) {
    throw new UndecodableError(
      `Could not resolve type id '${type}' as a subtype of 'Message': known type ids = ` +
        `[${Object.keys(V1_TYPES).join(', ')}]`,
    );
  }
  const out: RawMessage = { type };
  for (const [field, kind] of Object.entries(table)) {
    const value = object[field];
    if (value === undefined || value === null) continue;
    const actual = kindOf(value);
    const ok = kind === 'int' ? actual === 'int' : actual === kind;
    if (!ok) {
      throw new UndecodableError(
        `Cannot deserialize value of type '${kind}' from ${actual} (field ${type}.${field})`,
      );
    }
    out[field] = value;
  }
  return out;
}

/** A socket carrying v1 frames as raw JSON objects. */
export class V1Socket {
  readonly #socket: Socket;
  readonly #decoder = new FrameDecoder();
  #closed = false;
  /** Resolves once the socket is closed, by either side. */
  readonly closed: Promise<void>;

  constructor(
    socket: Socket,
    handlers: {
      onFrame(payload: Buffer): void;
      onBrokenFraming?(message: string): void;
    },
  ) {
    this.#socket = socket;
    socket.setNoDelay(true);
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => undefined);
    socket.on('close', () => (this.#closed = true));
    socket.on('data', (chunk: Buffer) => {
      if (this.#closed) return;
      let frames: Buffer[];
      try {
        frames = this.#decoder.push(chunk);
      } catch (err) {
        handlers.onBrokenFraming?.((err as Error).message);
        this.destroy();
        return;
      }
      for (const frame of frames) if (!this.#closed) handlers.onFrame(frame);
    });
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  /** Writes one object as a frame; objects are written exactly as given. */
  send(message: Record<string, unknown>): void {
    if (this.#closed) return;
    this.#socket.write(encodeFrame(Buffer.from(JSON.stringify(message), 'utf8')));
  }

  /** Flushes what was written, then closes. */
  end(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#socket.end();
  }

  destroy(): void {
    this.#closed = true;
    this.#socket.destroy();
  }
}

/** `source` without the fields that are null or absent (a v1 peer sends no nulls it need not). */
export function withoutNulls(source: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(source).filter(([, v]) => v !== null && v !== undefined),
  );
}

/** Only the listed fields of `source`, in order. */
export function pick(
  source: Record<string, unknown>,
  fields: readonly string[],
): Record<string, unknown> {
  return Object.fromEntries(fields.map((f) => [f, source[f] ?? null]));
}
