/**
 * Runtime validation at the boundary: bytes of one frame <-> a typed
 * {@link Message}.
 *
 * One decoder table, `SCHEMAS`, lists the fields of every message type. Its
 * type makes the compiler check that every message type has an entry and that
 * every field has a codec of the right type, so a new message or field cannot
 * be forgotten here.
 *
 * Decoding rules (docs/PROTOCOL.md): unknown fields are dropped, absent
 * and `null` optional fields are the same, an unknown type or a field of the
 * wrong JSON type is a {@link ProtocolError}. Encoding emits exactly the fields
 * of the schema, nothing else.
 */
import { ProtocolError, ProtocolErrorCode } from './errors.js';
import { encodeTextFrame } from './framing.js';
import {
  ATTEMPT_OUTCOMES,
  DEDUP_MODES,
  JOB_EVENT_KINDS,
  JOB_STATES,
  PARENT_FAILURE_POLICIES,
  PRIORITIES,
  RATE_LIMIT_SCOPES,
  RESULT_FORMATS,
  SCHEDULE_CATCH_UPS,
  SCHEDULE_OVERLAPS,
  type AttemptSnapshot,
  type FlowJob,
  type FlowRef,
  type HeldAttempt,
  type HeldGroupInfo,
  type JobEventFilter,
  type JobProgress,
  type JobSnapshot,
  type JsonObject,
  type JsonValue,
  type Message,
  type MessageOf,
  type MessageType,
  type QueueGroupInfo,
  type QueueInfo,
  type RateLimit,
  type RateLimitedResult,
  type RecordedStep,
  type ParentResult,
  type ScheduleDefinition,
  type ScheduleJob,
  type ScheduleSnapshot,
  type StepSummary,
  type SubmitJobsElement,
  type TriggerDefinition,
  type TriggerSnapshot,
  type ShardInfo,
  type CoordinatorInfo,
  type WaitingFor,
  type WorkerSnapshot,
} from './messages.js';

/**
 * Validates one decoded JSON value and projects a typed value back to JSON.
 *
 * The value's place in the message, for an error, is `prefix` followed by
 * `key` (a field name, or an array index shown as `[i]`): the two are joined
 * only when there is an error to report, so a valid message costs no string
 * building.
 */
export interface Codec<T> {
  decode(value: unknown, prefix: string, key?: string | number): T;
  encode(value: T): unknown;
  /** Leave the field out of the encoded object when its value is null or undefined. */
  readonly omitWhenNull?: boolean;
  /** `encode` returns its argument unchanged (the field is copied as it is). */
  readonly plain?: boolean;
  /** `encode` returns null for null and undefined, any other value unchanged. */
  readonly plainOrNull?: boolean;
}

/** The place `prefix` + `key` names, as errors show it (`job.state`, `jobs[3]`). */
function pathOf(prefix: string, key: string | number | undefined): string {
  if (key === undefined) return prefix;
  return typeof key === 'number' ? `${prefix}[${key}]` : prefix + key;
}

function badField(path: string, expected: string, value: unknown): ProtocolError {
  const got =
    value === undefined
      ? 'nothing'
      : value === null
        ? 'null'
        : Array.isArray(value)
          ? 'an array'
          : `a ${typeof value}`;
  return new ProtocolError(
    ProtocolErrorCode.BadField,
    `field ${path} must be ${expected}, got ${got}`,
  );
}

const identity = <T>(value: T): T => value;

export const stringCodec: Codec<string> = {
  decode(value, prefix, key) {
    if (typeof value !== 'string') throw badField(pathOf(prefix, key), 'a string', value);
    return value;
  },
  encode: identity,
  plain: true,
};

export const intCodec: Codec<number> = {
  decode(value, prefix, key) {
    if (typeof value !== 'number' || !Number.isSafeInteger(value))
      throw badField(pathOf(prefix, key), 'an integer', value);
    return value;
  },
  encode: identity,
  plain: true,
};

/** Any finite JSON number (fractions). */
export const numberCodec: Codec<number> = {
  decode(value, prefix, key) {
    if (typeof value !== 'number' || !Number.isFinite(value))
      throw badField(pathOf(prefix, key), 'a number', value);
    return value;
  },
  encode: identity,
  plain: true,
};

export const boolCodec: Codec<boolean> = {
  decode(value, prefix, key) {
    if (typeof value !== 'boolean') throw badField(pathOf(prefix, key), 'a boolean', value);
    return value;
  },
  encode: identity,
  plain: true,
};

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Deepest nesting accepted inside a kept-as-is object (the object itself is
 * level 1). JSON.parse copes with any depth a 1 MiB frame can hold, but
 * JSON.stringify recurses and overflows the stack after a few thousand levels,
 * so an unbounded payload would decode fine and then throw a RangeError
 * wherever it is stored or forwarded. 1000 levels is far more than any task
 * payload needs and far below that limit.
 */
const MAX_OBJECT_DEPTH = 1000;

/**
 * Whether an object nests deeper than `limit` levels (the object itself is
 * level 1). Iterative on purpose: a recursive walk would hit the limit it
 * guards against. Objects whose members are all scalars, most task
 * payloads, cost one pass over their values and nothing else.
 */
function nestsDeeper(root: Record<string, unknown>, limit: number): boolean {
  let pending: [object, number][] | null = null;
  for (const key in root) {
    const child = root[key];
    if (typeof child === 'object' && child !== null) (pending ??= []).push([child, 2]);
  }
  if (pending === null) return false;
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [value, depth] = next;
    if (depth > limit) return true;
    for (const child of Array.isArray(value) ? value : Object.values(value)) {
      if (typeof child === 'object' && child !== null) pending.push([child as object, depth + 1]);
    }
  }
  return false;
}

/** Any JSON object, kept as it is (task payloads), nested at most 1000 levels. */
export const objectCodec: Codec<JsonObject> = {
  decode(value, prefix, key) {
    if (!isPlainObject(value)) throw badField(pathOf(prefix, key), 'an object', value);
    if (nestsDeeper(value, MAX_OBJECT_DEPTH)) {
      throw new ProtocolError(
        ProtocolErrorCode.BadValue,
        `field ${pathOf(prefix, key)} nests deeper than ${MAX_OBJECT_DEPTH} levels`,
      );
    }
    return value as JsonObject;
  },
  encode: identity,
  plain: true,
};

/** Any JSON value (a signal's or event's payload), nested at most 1000 levels; absent = null. */
export const jsonValueCodec: Codec<JsonValue> = {
  decode(value, prefix, key) {
    if (value === undefined) return null;
    if (typeof value === 'object' && value !== null && nestsDeeper({ value }, MAX_OBJECT_DEPTH)) {
      throw new ProtocolError(
        ProtocolErrorCode.BadValue,
        `field ${pathOf(prefix, key)} nests deeper than ${MAX_OBJECT_DEPTH} levels`,
      );
    }
    return value as JsonValue;
  },
  encode: identity,
  plain: true,
};

/** `null` and absent both decode to `null`. */
export function nullable<T>(inner: Codec<T>): Codec<T | null> {
  return {
    decode: (value, prefix, key) =>
      value === undefined || value === null ? null : inner.decode(value, prefix, key),
    encode: (value) => (value === null || value === undefined ? null : inner.encode(value)),
    plainOrNull: inner.plain === true,
  };
}

/** A string from a closed set; another string is `PROTOCOL_BAD_VALUE`. */
/**
 * An extension field (beyond version 1): null and absent mean the same, as for
 * {@link nullable}, but the field is left out (rather than set to null) both
 * when decoding and when encoding, so a peer that never uses the extension
 * never sees it and a decoded message equals what its sender built.
 */
export function optional<T>(inner: Codec<T>): Codec<T | null | undefined> {
  return { ...nullable(inner), omitWhenNull: true };
}

export function enumCodec<T extends string>(values: readonly T[]): Codec<T> {
  const allowed: ReadonlySet<string> = new Set(values);
  return {
    decode(value, prefix, key) {
      const s = stringCodec.decode(value, prefix, key);
      if (!allowed.has(s)) {
        throw new ProtocolError(
          ProtocolErrorCode.BadValue,
          `field ${pathOf(prefix, key)} must be one of ${values.join(', ')}, got ${JSON.stringify(s).slice(0, 80)}`,
        );
      }
      return s as T;
    },
    encode: identity,
    plain: true,
  };
}

export function arrayOf<T>(inner: Codec<T>): Codec<T[]> {
  return {
    decode(value, prefix, key) {
      const path = pathOf(prefix, key);
      if (!Array.isArray(value)) throw badField(path, 'an array', value);
      return value.map((item, i) => inner.decode(item, path, i));
    },
    encode: (value) => value.map((item) => inner.encode(item)),
  };
}

/**
 * A complete message of one type inside another (the elements of
 * TASK_ASSIGNS and TASK_RESULTS): `type` must name it, and its fields are
 * checked as that message's own.
 */
function messageCodec<T extends MessageType>(type: T): Codec<MessageOf<T>> {
  return {
    decode(value, prefix, key) {
      const path = pathOf(prefix, key);
      if (!isPlainObject(value) || value.type !== type) {
        throw badField(path, `a ${type} message`, value);
      }
      const walk = WALKS.get(type) as FieldWalk;
      return walk.decode(value, `${path}.`, { type }) as unknown as MessageOf<T>;
    },
    encode(value) {
      const walk = WALKS.get(type) as FieldWalk;
      return walk.encode(value as unknown as Record<string, unknown>, { type });
    },
  };
}

/** The codecs of every field of T (all required: optional ones use `nullable`). */
export type Fields<T> = { [K in keyof T]-?: Codec<T[K]> };

/** What a record's fields are read and written with (see {@link compileWalk}). */
interface FieldWalk {
  /** Decodes the fields of `raw` into `out` (which may already hold `type`) and returns it. */
  readonly decode: (
    raw: Record<string, unknown>,
    prefix: string,
    out: Record<string, unknown>,
  ) => Record<string, unknown>;
  /** Encodes the fields of `value` into `out` (which may already hold `type`) and returns it. */
  readonly encode: (
    value: Record<string, unknown>,
    out: Record<string, unknown>,
  ) => Record<string, unknown>;
}

/** Field names are identifiers (checked before they become code). */
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The two walks over one record's fields, made once when its codec is made,
 * as functions of their own: straight-line code with one read, one codec
 * call and one write per field, in the schema's order.
 *
 * Why code is made here instead of one loop over a list of fields: in a
 * shared loop every field of every message passes through the same
 * property reads and the same `codec.decode` call, which V8 then handles
 * as megamorphic sites; in a walk of its own each site sees one codec and
 * one object shape. Measured on the messages every job passes through, what
 * the codec adds to JSON.parse fell to between a twelfth and a quarter of
 * what the loop added (docs/MEASURED_BEHAVIOR.md, "The message codec"). The code is built only from the schema's field names,
 * each checked against {@link FIELD_NAME} (nothing that arrives on the wire
 * ever becomes code); every check is still the codec's own.
 */
function compileWalk<T>(fields: Fields<T>): FieldWalk {
  const keys = Object.keys(fields);
  const codecs = keys.map((key) => fields[key as keyof T] as Codec<unknown>);
  const decode: string[] = [];
  const encode: string[] = [];
  keys.forEach((key, i) => {
    if (!FIELD_NAME.test(key)) throw new Error(`codec: field name ${key} is not an identifier`);
    const codec = codecs[i] as Codec<unknown>;
    const name = JSON.stringify(key);
    decode.push(`v = c${i}.decode(raw.${key}, prefix, ${name});`);
    decode.push(
      codec.omitWhenNull === true ? `if (v !== null) out.${key} = v;` : `out.${key} = v;`,
    );
    const value =
      codec.plain === true
        ? 'v'
        : codec.plainOrNull === true
          ? '(v === undefined ? null : v)'
          : `c${i}.encode(v)`;
    encode.push(`v = value.${key};`);
    encode.push(
      codec.omitWhenNull === true
        ? `if (v !== null && v !== undefined) out.${key} = ${value};`
        : `out.${key} = ${value};`,
    );
  });
  const locals = codecs.map((_, i) => `const c${i} = codecs[${i}];`).join('\n');
  const source = `${locals}
return {
  decode(raw, prefix, out) {
    let v;
    ${decode.join('\n    ')}
    return out;
  },
  encode(value, out) {
    let v;
    ${encode.join('\n    ')}
    return out;
  },
};`;
  let make: (list: Codec<unknown>[]) => FieldWalk;
  try {
    // Made from schema names only (see above).
    // eslint-disable-next-line @typescript-eslint/no-implied-eval
    make = new Function('codecs', source) as (list: Codec<unknown>[]) => FieldWalk;
  } catch {
    // Code generation is disallowed (node --disallow-code-generation-from-strings):
    // the same walks as loops, slower and otherwise the same.
    return loopWalk(keys, codecs);
  }
  return make(codecs);
}

/** {@link compileWalk}'s walks as loops over the fields, where code cannot be made. */
function loopWalk(keys: readonly string[], codecs: readonly Codec<unknown>[]): FieldWalk {
  const list = keys.map((key, i) => ({ key, codec: codecs[i] as Codec<unknown> }));
  return {
    decode(raw, prefix, out) {
      for (const { key, codec } of list) {
        const v = codec.decode(raw[key], prefix, key);
        if (codec.omitWhenNull !== true || v !== null) out[key] = v;
      }
      return out;
    },
    encode(value, out) {
      for (const { key, codec } of list) {
        const v = value[key];
        if (codec.omitWhenNull === true && (v === null || v === undefined)) continue;
        out[key] = codec.plain === true ? v : codec.encode(v);
      }
      return out;
    },
  };
}

function decodeFields<T>(walk: FieldWalk, raw: Record<string, unknown>, prefix: string): T {
  return walk.decode(raw, prefix, {}) as T;
}

function encodeFields<T>(walk: FieldWalk, value: T): Record<string, unknown> {
  return walk.encode(value as Record<string, unknown>, {});
}

export function recordCodec<T>(fields: Fields<T>): Codec<T> {
  const walk = compileWalk(fields);
  return {
    decode(value, prefix, key) {
      const path = pathOf(prefix, key);
      if (!isPlainObject(value)) throw badField(path, 'an object', value);
      return decodeFields(walk, value, `${path}.`);
    },
    encode: (value) => encodeFields(walk, value),
  };
}

export const jobStateCodec = enumCodec(JOB_STATES);
export const priorityCodec = enumCodec(PRIORITIES);
export const resultFormatCodec = enumCodec(RESULT_FORMATS);

export const attemptSnapshotCodec: Codec<AttemptSnapshot> = recordCodec<AttemptSnapshot>({
  attemptNumber: intCodec,
  attemptId: stringCodec,
  workerId: stringCodec,
  startedAtMillis: intCodec,
  finishedAtMillis: nullable(intCodec),
  outcome: enumCodec(ATTEMPT_OUTCOMES),
  error: nullable(stringCodec),
});

export const jobProgressCodec: Codec<JobProgress> = recordCodec<JobProgress>({
  fraction: numberCodec,
  message: nullable(stringCodec),
  atMillis: intCodec,
});

/**
 * A subscription filter: unlike the rest of the protocol, an unknown field
 * here is refused (a filter the coordinator does not understand would
 * silently match more than asked for).
 */
const FILTER_FIELDS: Fields<JobEventFilter> = {
  jobId: optional(stringCodec),
  taskType: optional(stringCodec),
  queue: optional(stringCodec),
};
const FILTER_WALK = compileWalk(FILTER_FIELDS);

export const jobEventFilterCodec: Codec<JobEventFilter> = {
  decode(value, prefix, at) {
    const path = pathOf(prefix, at);
    if (!isPlainObject(value)) throw badField(path, 'an object', value);
    for (const key of Object.keys(value)) {
      if (!Object.prototype.hasOwnProperty.call(FILTER_FIELDS, key)) {
        throw new ProtocolError(
          ProtocolErrorCode.BadValue,
          `field ${path}.${key.slice(0, 40)} is not a known filter (jobId, taskType, queue)`,
        );
      }
    }
    return decodeFields(FILTER_WALK, value, `${path}.`);
  },
  encode: (value) => {
    const out: Record<string, unknown> = {};
    for (const key of ['jobId', 'taskType', 'queue'] as const) {
      const v = value[key];
      if (v !== null && v !== undefined) out[key] = v;
    }
    return out;
  },
};

const stepSummaryCodec: Codec<StepSummary> = recordCodec<StepSummary>({
  name: stringCodec,
  atMillis: intCodec,
  resultBytes: optional(intCodec),
});

const recordedStepCodec: Codec<RecordedStep> = recordCodec<RecordedStep>({
  name: stringCodec,
  result: nullable(stringCodec),
  atMillis: intCodec,
});

const waitingForCodec: Codec<WaitingFor> = recordCodec<WaitingFor>({
  jobId: optional(stringCodec),
  signal: optional(stringCodec),
  event: optional(stringCodec),
  key: optional(stringCodec),
  untilMillis: nullable(intCodec),
});

export const jobSnapshotCodec: Codec<JobSnapshot> = recordCodec<JobSnapshot>({
  jobId: stringCodec,
  taskType: stringCodec,
  state: jobStateCodec,
  attempts: intCodec,
  maxAttempts: intCodec,
  workerId: nullable(stringCodec),
  result: nullable(stringCodec),
  error: nullable(stringCodec),
  createdAtMillis: intCodec,
  updatedAtMillis: intCodec,
  priority: priorityCodec,
  startedAtMillis: optional(intCodec),
  finishedAtMillis: optional(intCodec),
  resultFormat: optional(resultFormatCodec),
  timeoutMillis: optional(intCodec),
  idempotencyKey: optional(stringCodec),
  dependsOn: optional(arrayOf(stringCodec)),
  progress: optional(jobProgressCodec),
  parentJobId: optional(stringCodec),
  children: optional(arrayOf(stringCodec)),
  runAtMillis: optional(intCodec),
  scheduleName: optional(stringCodec),
  queue: optional(stringCodec),
  groupKey: optional(stringCodec),
  steps: optional(arrayOf(stepSummaryCodec)),
  suspensions: optional(intCodec),
  requeues: optional(intCodec),
  rateLimited: optional(intCodec),
  dedupKey: optional(stringCodec),
  dedupMode: optional(enumCodec(DEDUP_MODES)),
  expiresAtMillis: optional(intCodec),
  expired: optional(boolCodec),
  waitingFor: optional(waitingForCodec),
  signalsHeld: optional(intCodec),
});

const rateLimitCodec: Codec<RateLimit> = recordCodec<RateLimit>({
  max: intCodec,
  intervalMillis: intCodec,
});

/** An object of integers keyed by any string (counts by state). */
const countsCodec: Codec<Record<string, number>> = {
  decode(value, prefix, at) {
    const path = pathOf(prefix, at);
    if (!isPlainObject(value)) throw badField(path, 'an object', value);
    const out: Record<string, number> = {};
    for (const [key, n] of Object.entries(value)) out[key] = intCodec.decode(n, `${path}.`, key);
    return out;
  },
  encode: identity,
};

const queueGroupInfoCodec: Codec<QueueGroupInfo> = recordCodec<QueueGroupInfo>({
  groupKey: nullable(stringCodec),
  queued: intCodec,
  running: intCodec,
});

const heldGroupInfoCodec: Codec<HeldGroupInfo> = recordCodec<HeldGroupInfo>({
  groupKey: nullable(stringCodec),
  untilMillis: intCodec,
});

export const queueInfoCodec: Codec<QueueInfo> = recordCodec<QueueInfo>({
  name: stringCodec,
  paused: boolCodec,
  concurrency: nullable(intCodec),
  rateLimit: nullable(rateLimitCodec),
  groupConcurrency: nullable(intCodec),
  groupRateLimit: nullable(rateLimitCodec),
  counts: countsCodec,
  running: optional(intCodec),
  groups: optional(arrayOf(queueGroupInfoCodec)),
  rateLimitedUntilMillis: optional(intCodec),
  heldGroups: optional(arrayOf(heldGroupInfoCodec)),
});

const scheduleSnapshotCodec: Codec<ScheduleSnapshot> = recordCodec<ScheduleSnapshot>({
  name: stringCodec,
  taskType: stringCodec,
  cron: nullable(stringCodec),
  everyMillis: nullable(intCodec),
  timezone: nullable(stringCodec),
  payload: objectCodec,
  paused: boolCodec,
  overlap: enumCodec(SCHEDULE_OVERLAPS),
  catchUp: enumCodec(SCHEDULE_CATCH_UPS),
  nextRunAtMillis: nullable(intCodec),
  lastRunAtMillis: nullable(intCodec),
  lastJobId: nullable(stringCodec),
  maxAttempts: nullable(intCodec),
  priority: nullable(priorityCodec),
  timeoutMillis: nullable(intCodec),
  queue: optional(stringCodec),
});

const scheduleDefinitionCodec: Codec<ScheduleDefinition> = recordCodec<ScheduleDefinition>({
  name: stringCodec,
  taskType: stringCodec,
  cron: nullable(stringCodec),
  everyMillis: nullable(intCodec),
  timezone: nullable(stringCodec),
  payload: objectCodec,
  maxAttempts: nullable(intCodec),
  priority: nullable(priorityCodec),
  timeoutMillis: nullable(intCodec),
  overlap: nullable(enumCodec(SCHEDULE_OVERLAPS)),
  catchUp: nullable(enumCodec(SCHEDULE_CATCH_UPS)),
  paused: nullable(boolCodec),
  queue: optional(stringCodec),
});

const scheduleJobCodec: Codec<ScheduleJob> = recordCodec<ScheduleJob>({
  jobId: stringCodec,
  state: jobStateCodec,
  runAtMillis: nullable(intCodec),
});

export const parentResultCodec: Codec<ParentResult> = recordCodec<ParentResult>({
  jobId: stringCodec,
  taskType: stringCodec,
  state: jobStateCodec,
  result: nullable(stringCodec),
  resultFormat: optional(resultFormatCodec),
  omitted: optional(boolCodec),
});

const flowJobCodec: Codec<FlowJob> = recordCodec<FlowJob>({
  ref: stringCodec,
  taskType: stringCodec,
  payload: objectCodec,
  dependsOn: optional(arrayOf(stringCodec)),
  maxAttempts: optional(intCodec),
  priority: optional(priorityCodec),
  idempotencyKey: optional(stringCodec),
  timeoutMillis: optional(intCodec),
  onParentFailure: optional(enumCodec(PARENT_FAILURE_POLICIES)),
  runAtMillis: optional(intCodec),
  traceparent: optional(stringCodec),
  tracestate: optional(stringCodec),
  queue: optional(stringCodec),
  groupKey: optional(stringCodec),
  dedupKey: optional(stringCodec),
  dedupMode: optional(enumCodec(DEDUP_MODES)),
  dedupWindowMillis: optional(intCodec),
  expiresAtMillis: optional(intCodec),
});

const flowRefCodec: Codec<FlowRef> = recordCodec<FlowRef>({
  ref: stringCodec,
  jobId: stringCodec,
  deduplicated: optional(boolCodec),
  replaced: optional(boolCodec),
});

const rateLimitedCodec: Codec<RateLimitedResult> = recordCodec<RateLimitedResult>({
  retryAfterMillis: intCodec,
  scope: enumCodec(RATE_LIMIT_SCOPES),
});

const triggerDefinitionCodec: Codec<TriggerDefinition> = recordCodec<TriggerDefinition>({
  name: stringCodec,
  event: stringCodec,
  taskType: stringCodec,
  queue: optional(stringCodec),
  priority: optional(priorityCodec),
  maxAttempts: optional(intCodec),
});

const triggerSnapshotCodec: Codec<TriggerSnapshot> = recordCodec<TriggerSnapshot>({
  name: stringCodec,
  event: stringCodec,
  taskType: stringCodec,
  queue: stringCodec,
  priority: nullable(priorityCodec),
  maxAttempts: nullable(intCodec),
  createdAtMillis: intCodec,
  updatedAtMillis: intCodec,
});

const shardInfoCodec: Codec<ShardInfo> = recordCodec<ShardInfo>({
  shard: intCodec,
  leader: nullable(stringCodec),
  epoch: intCodec,
  clientAddress: nullable(stringCodec),
  workerAddress: nullable(stringCodec),
  leaseLeftMillis: optional(nullable(intCodec)),
});

const coordinatorInfoCodec: Codec<CoordinatorInfo> = recordCodec<CoordinatorInfo>({
  address: stringCodec,
  workerAddress: nullable(stringCodec),
  shards: intCodec,
});

const heldAttemptCodec: Codec<HeldAttempt> = recordCodec<HeldAttempt>({
  jobId: stringCodec,
  attemptId: stringCodec,
});

/** The fields of a SUBMIT_JOB but `knownStates`: also those of one job of a SUBMIT_JOBS. */
const SUBMIT_ELEMENT_FIELDS: Fields<SubmitJobsElement> = {
  taskType: stringCodec,
  payload: objectCodec,
  maxAttempts: nullable(intCodec),
  idempotencyKey: nullable(stringCodec),
  priority: nullable(priorityCodec),
  timeoutMillis: optional(intCodec),
  runAtMillis: optional(intCodec),
  queue: optional(stringCodec),
  groupKey: optional(stringCodec),

  dependsOn: optional(arrayOf(stringCodec)),
  onParentFailure: optional(enumCodec(PARENT_FAILURE_POLICIES)),
  traceparent: optional(stringCodec),
  tracestate: optional(stringCodec),
  dedupKey: optional(stringCodec),
  dedupMode: optional(enumCodec(DEDUP_MODES)),
  dedupWindowMillis: optional(intCodec),
  expiresAtMillis: optional(intCodec),
};
const SUBMIT_ELEMENT_WALK = compileWalk(SUBMIT_ELEMENT_FIELDS);

/**
 * Validates one job of a SUBMIT_JOBS (`path` names it in the error, e.g.
 * `jobs[3]`). Throws {@link ProtocolError} as {@link decodeMessage} does.
 */
export function decodeSubmitElement(raw: JsonObject, path: string): SubmitJobsElement {
  return decodeFields(SUBMIT_ELEMENT_WALK, raw, `${path}.`);
}

/** The JSON value of one job of a SUBMIT_JOBS (the fields of its schema only). */
export function submitElementToJson(element: SubmitJobsElement): JsonObject {
  return encodeFields(SUBMIT_ELEMENT_WALK, element) as JsonObject;
}

export const workerSnapshotCodec: Codec<WorkerSnapshot> = recordCodec<WorkerSnapshot>({
  workerId: stringCodec,
  capacity: intCodec,
  activeTasks: intCodec,
  lastHeartbeatMillis: intCodec,
  taskTypes: optional(arrayOf(stringCodec)),
  draining: optional(boolCodec),
  runningJobs: optional(arrayOf(stringCodec)),
  queuedTasks: optional(intCodec),
  queues: optional(arrayOf(stringCodec)),
});

type Schemas = { [K in MessageType]: Fields<Omit<MessageOf<K>, 'type'>> };

const SCHEMAS: Schemas = {
  WORKER_REGISTER: {
    workerId: stringCodec,
    capacity: intCodec,
    taskTypes: nullable(arrayOf(stringCodec)),
    authToken: optional(stringCodec),
    heartbeatAck: optional(boolCodec),
    prefetch: optional(intCodec),
    heldAttempts: optional(arrayOf(heldAttemptCodec)),
    queues: optional(arrayOf(stringCodec)),

    parents: optional(boolCodec),

    traceContext: optional(boolCodec),
    children: optional(boolCodec),
    steps: optional(boolCodec),
    slots: optional(intCodec),
    moreHeld: optional(boolCodec),
    batches: optional(boolCodec),
  },
  HELD_ATTEMPTS: {
    workerId: stringCodec,
    heldAttempts: arrayOf(heldAttemptCodec),
    more: boolCodec,
  },
  WORKER_REGISTERED: { workerId: stringCodec, features: optional(arrayOf(stringCodec)) },
  HEARTBEAT: { workerId: stringCodec },
  HEARTBEAT_ACK: { workerId: stringCodec },
  TASK_ASSIGN: {
    jobId: stringCodec,
    attemptId: stringCodec,
    attemptNumber: intCodec,
    taskType: stringCodec,
    payload: objectCodec,
    timeoutMillis: optional(intCodec),
    maxAttempts: optional(intCodec),
    parents: optional(arrayOf(parentResultCodec)),

    traceparent: optional(stringCodec),
    tracestate: optional(stringCodec),
    queue: optional(stringCodec),
    steps: optional(arrayOf(recordedStepCodec)),
    stepCount: optional(intCodec),
  },
  TASK_ASSIGNS: { attempts: arrayOf(messageCodec('TASK_ASSIGN')) },
  TASK_CANCEL: { jobId: stringCodec, attemptId: stringCodec },
  TASK_RESULT: {
    workerId: stringCodec,
    jobId: stringCodec,
    attemptId: stringCodec,
    success: boolCodec,
    result: nullable(stringCodec),
    error: nullable(stringCodec),
    retryable: optional(boolCodec),
    resultFormat: optional(resultFormatCodec),
    requeue: optional(boolCodec),
    rateLimited: optional(rateLimitedCodec),
  },
  TASK_RESULTS: { workerId: stringCodec, results: arrayOf(messageCodec('TASK_RESULT')) },
  WORKER_DRAINING: { workerId: stringCodec },
  TASK_PROGRESS: {
    workerId: stringCodec,
    jobId: stringCodec,
    attemptId: stringCodec,
    fraction: numberCodec,
    message: nullable(stringCodec),
  },
  RECORD_STEP: {
    workerId: stringCodec,
    jobId: stringCodec,
    attemptId: stringCodec,
    requestId: intCodec,
    index: intCodec,
    name: stringCodec,
    result: stringCodec,
  },
  STEP_RECORDED: { requestId: intCodec, jobId: stringCodec, index: intCodec },
  GET_STEPS: {
    workerId: stringCodec,
    jobId: stringCodec,
    attemptId: stringCodec,
    requestId: intCodec,
    fromIndex: intCodec,
  },
  STEPS: {
    requestId: intCodec,
    jobId: stringCodec,
    steps: arrayOf(recordedStepCodec),
    more: boolCodec,
  },
  TASK_SUSPEND: {
    workerId: stringCodec,
    jobId: stringCodec,
    attemptId: stringCodec,
    sleepMillis: optional(intCodec),
    waitForJobId: optional(stringCodec),
    waitForSignal: optional(recordCodec({ name: stringCodec, timeoutMillis: optional(intCodec) })),
    waitForEvent: optional(
      recordCodec({
        name: stringCodec,
        key: optional(stringCodec),
        timeoutMillis: optional(intCodec),
      }),
    ),
  },
  ERROR: {
    message: stringCodec,
    code: nullable(stringCodec),
    leader: optional(stringCodec),
    index: optional(intCodec),
    requestId: optional(intCodec),
    shards: optional(arrayOf(shardInfoCodec)),
  },
  ENQUEUE_CHILD: {
    workerId: stringCodec,
    jobId: stringCodec,
    attemptId: stringCodec,
    requestId: intCodec,
    key: stringCodec,
    taskType: stringCodec,
    payload: objectCodec,
    maxAttempts: optional(intCodec),
    priority: optional(priorityCodec),
    timeoutMillis: optional(intCodec),
    idempotencyKey: optional(stringCodec),
    queue: optional(stringCodec),
    groupKey: optional(stringCodec),
    runAtMillis: optional(intCodec),
  },
  CHILD_ENQUEUED: { requestId: intCodec, jobId: stringCodec, created: boolCodec },
  SUBMIT_JOB: { ...SUBMIT_ELEMENT_FIELDS, knownStates: optional(arrayOf(stringCodec)) },
  SUBMIT_JOBS: { jobs: arrayOf(objectCodec) },
  JOBS_SUBMITTED: {
    jobIds: arrayOf(stringCodec),
    deduplicated: optional(arrayOf(boolCodec)),
    replaced: optional(arrayOf(boolCodec)),
  },
  JOB_SUBMITTED: {
    jobId: stringCodec,
    job: nullable(jobSnapshotCodec),
    servingWorkers: optional(intCodec),
    queuePaused: optional(boolCodec),
    deduplicated: optional(boolCodec),
    replaced: optional(boolCodec),
  },
  SUBMIT_REJECTED: {
    reason: stringCodec,
    activeCount: intCodec,
    limit: intCodec,
    retryable: boolCodec,
  },
  GET_JOB_STATUS: {
    jobId: stringCodec,
    attempts: optional(boolCodec),
    payload: optional(boolCodec),
    knownStates: optional(arrayOf(stringCodec)),
  },
  JOB_STATUS: {
    job: jobSnapshotCodec,
    attempts: optional(arrayOf(attemptSnapshotCodec)),
    payload: optional(objectCodec),
    payloadOmitted: optional(boolCodec),
  },
  LIST_JOBS: {
    limit: nullable(intCodec),
    state: nullable(jobStateCodec),
    cursor: nullable(stringCodec),
    taskType: optional(stringCodec),
    idempotencyKey: optional(stringCodec),
    knownStates: optional(arrayOf(stringCodec)),
    queue: optional(stringCodec),
  },
  JOB_LIST: { jobs: arrayOf(jobSnapshotCodec), nextCursor: nullable(stringCodec) },
  LIST_WORKERS: {},
  WORKER_LIST: {
    workers: arrayOf(workerSnapshotCodec),
    leader: optional(stringCodec),
    epoch: optional(intCodec),
  },
  CANCEL_JOB: { jobId: stringCodec, knownStates: optional(arrayOf(stringCodec)) },
  JOB_CANCEL: { cancelled: boolCodec, job: jobSnapshotCodec },
  WAIT_JOB: {
    jobId: stringCodec,
    timeoutMillis: nullable(intCodec),
    knownStates: optional(arrayOf(stringCodec)),
  },
  AUTH: { token: stringCodec },
  AUTH_OK: {},
  PURGE_JOBS: { state: jobStateCodec, olderThanMillis: intCodec },
  JOBS_PURGED: { deleted: intCodec },
  RERUN_JOBS: {
    queue: stringCodec,
    state: jobStateCodec,
    taskType: optional(stringCodec),
    finishedSinceMillis: optional(intCodec),
    limit: optional(intCodec),
    maxAttempts: optional(intCodec),
  },
  JOBS_RERUN: { rerun: intCodec, jobIds: arrayOf(stringCodec), more: boolCodec },
  LIST_QUEUES: {},
  QUEUE_LIST: { queues: arrayOf(queueInfoCodec) },
  SET_QUEUE: {
    name: stringCodec,
    paused: optional(boolCodec),
    concurrency: optional(intCodec),
    rateLimit: optional(rateLimitCodec),
    groupConcurrency: optional(intCodec),
    groupRateLimit: optional(rateLimitCodec),
    clear: optional(arrayOf(stringCodec)),
    create: optional(boolCodec),
  },
  QUEUE_INFO: { queue: queueInfoCodec, created: optional(boolCodec) },

  SUBMIT_FLOW: { jobs: arrayOf(flowJobCodec) },
  FLOW_SUBMITTED: { jobs: arrayOf(flowRefCodec) },
  SUBSCRIBE_JOBS: { filter: jobEventFilterCodec, knownStates: optional(arrayOf(stringCodec)) },
  SUBSCRIBED: {},
  JOB_EVENT: { event: enumCodec(JOB_EVENT_KINDS), atMillis: intCodec, job: jobSnapshotCodec },
  EVENTS_MISSED: { missed: intCodec },
  SET_SCHEDULE: { schedule: scheduleDefinitionCodec },
  LIST_SCHEDULES: {},
  GET_SCHEDULE: { name: stringCodec, knownStates: optional(arrayOf(stringCodec)) },
  PAUSE_SCHEDULE: { name: stringCodec },
  RESUME_SCHEDULE: { name: stringCodec },
  DELETE_SCHEDULE: { name: stringCodec },
  TRIGGER_SCHEDULE: { name: stringCodec, knownStates: optional(arrayOf(stringCodec)) },
  SCHEDULE_INFO: {
    schedule: scheduleSnapshotCodec,
    recentJobs: optional(arrayOf(scheduleJobCodec)),
  },
  SCHEDULE_LIST: { schedules: arrayOf(scheduleSnapshotCodec) },
  SCHEDULE_DELETED: { name: stringCodec },
  SIGNAL_JOB: { jobId: stringCodec, name: stringCodec, payload: jsonValueCodec },
  JOB_SIGNALLED: {
    jobId: stringCodec,
    name: stringCodec,
    resumed: boolCodec,
    signalsHeld: intCodec,
  },
  PUBLISH_EVENT: {
    name: stringCodec,
    payload: jsonValueCodec,
    key: optional(stringCodec),
    eventId: optional(stringCodec),
  },
  EVENT_PUBLISHED: {
    eventId: stringCodec,
    jobIds: arrayOf(stringCodec),
    resumed: intCodec,
    duplicate: optional(boolCodec),
  },
  SET_TRIGGER: { trigger: triggerDefinitionCodec },
  LIST_TRIGGERS: {},
  DELETE_TRIGGER: { name: stringCodec },
  TRIGGER_INFO: { trigger: triggerSnapshotCodec },
  TRIGGER_LIST: { triggers: arrayOf(triggerSnapshotCodec) },
  TRIGGER_DELETED: { name: stringCodec, deleted: boolCodec },
  LIST_SHARDS: { authToken: optional(stringCodec) },
  SHARD_LIST: {
    shards: arrayOf(shardInfoCodec),
    coordinators: arrayOf(coordinatorInfoCodec),
  },
};

/** Each message type's walks, made once. */
const WALKS: ReadonlyMap<string, FieldWalk> = new Map(
  Object.entries(SCHEMAS).map(([type, fields]) => [
    type,
    compileWalk(fields as Fields<Record<string, unknown>>),
  ]),
);

// ignoreBOM keeps a leading U+FEFF in the text, so JSON.parse refuses it: a
// frame is JSON, and a byte order mark is not part of JSON.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function hasSchema(type: string): type is MessageType {
  return Object.prototype.hasOwnProperty.call(SCHEMAS, type);
}

/**
 * Parses and validates one frame payload. Throws {@link ProtocolError} with
 * code `PROTOCOL_MALFORMED_JSON`, `PROTOCOL_NOT_AN_OBJECT`,
 * `PROTOCOL_UNKNOWN_TYPE`, `PROTOCOL_BAD_FIELD` or `PROTOCOL_BAD_VALUE`.
 */
export function decodeMessage(payload: Uint8Array): Message {
  let raw: unknown;
  try {
    raw = JSON.parse(utf8.decode(payload));
  } catch (err) {
    throw new ProtocolError(ProtocolErrorCode.MalformedJson, 'frame is not UTF-8 JSON', {
      cause: err,
    });
  }
  return decodeValue(raw);
}

/** Validates an already parsed JSON value as a message. */
export function decodeValue(raw: unknown): Message {
  if (!isPlainObject(raw) || typeof raw.type !== 'string') {
    throw new ProtocolError(
      ProtocolErrorCode.NotAnObject,
      'frame is not a JSON object with a string "type"',
    );
  }
  const type = raw.type;
  if (!hasSchema(type)) {
    throw new ProtocolError(
      ProtocolErrorCode.UnknownType,
      `unknown message type ${JSON.stringify(type).slice(0, 80)}`,
    );
  }
  const version = raw.v;
  if (version !== undefined && version !== null && version !== 1) {
    throw new ProtocolError(
      ProtocolErrorCode.BadValue,
      `unsupported protocol version ${JSON.stringify(version).slice(0, 20)}`,
    );
  }
  const walk = WALKS.get(type) as FieldWalk; // every type with a schema has its walk
  return walk.decode(raw, '', { type }) as unknown as Message;
}

/** The JSON text of a message: exactly its schema's fields, `type` first. */
export function messageToJson(msg: Message): string {
  const walk = WALKS.get(msg.type) as FieldWalk;
  return JSON.stringify(walk.encode(msg as unknown as Record<string, unknown>, { type: msg.type }));
}

/** One complete frame (length prefix + JSON) for a message. */
export function encodeMessage(msg: Message): Buffer {
  return encodeTextFrame(messageToJson(msg));
}
