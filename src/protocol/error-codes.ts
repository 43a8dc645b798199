/**
 * The one catalogue of error codes: every `code` a {@link DtpError} may
 * carry, as closed unions. Messages are for people; code that decides
 * anything decides on these. A code is never renamed once published: the
 * wire codes are part of the protocol (docs/PROTOCOL.md), the others appear
 * in logs, in the CLI's `--json` output (docs/CLI.md) and in the HTTP API's
 * error bodies (docs/HTTP.md).
 *
 * Groups:
 * - {@link ErrorCode}: carried by `ERROR.code` on the wire;
 * - {@link ProtocolErrorCode}: a peer broke the framing or envelope rules
 *   (raised here, never sent as such);
 * - {@link HttpErrorCode}: the HTTP API's own codes (the wire codes pass
 *   through it as they are);
 * - {@link LocalErrorCode}: raised by this side only (the client library,
 *   the programs' start-up, task code, the CLI).
 */

/** The values of `ERROR.code` on the wire. */
export const ErrorCode = {
  // Client requests
  UnknownJob: 'UNKNOWN_JOB',
  InvalidPayload: 'INVALID_PAYLOAD',
  InvalidTaskType: 'INVALID_TASK_TYPE',
  UnknownTaskType: 'UNKNOWN_TASK_TYPE',
  IdempotencyConflict: 'IDEMPOTENCY_CONFLICT',
  InvalidRequest: 'INVALID_REQUEST',
  UnsupportedRequest: 'UNSUPPORTED_REQUEST',
  MalformedRequest: 'MALFORMED_REQUEST',
  /** A flow (SUBMIT_FLOW) whose jobs' dependencies form a cycle. */
  FlowCycle: 'FLOW_CYCLE',
  /** A flow that is empty, too large, or names a ref twice. */
  InvalidFlow: 'INVALID_FLOW',
  /** Too many pending WAIT_JOBs: on one connection, from one address, or in all. */
  TooManyWaits: 'TOO_MANY_WAITS',
  /** Too many SUBSCRIBE_JOBS subscriptions: on one connection, from one address, or in all. */
  TooManySubscriptions: 'TOO_MANY_SUBSCRIPTIONS',
  /** No schedule has this name. */
  UnknownSchedule: 'UNKNOWN_SCHEDULE',
  /** A pause or resume of a queue that has no job and no setting, without `create`. */
  UnknownQueue: 'UNKNOWN_QUEUE',
  /** A schedule definition the coordinator refuses (cron, time zone, interval, name). */
  InvalidSchedule: 'INVALID_SCHEDULE',
  /** A read of history failed (that request only; the coordinator keeps working). */
  StoreReadFailed: 'STORE_READ_FAILED',
  /** RECORD_STEP (or GET_STEPS) named an index other than the next (or an existing) one. */
  StepOutOfOrder: 'STEP_OUT_OF_ORDER',
  // Worker registration
  InvalidRegistration: 'INVALID_REGISTRATION',
  NotRegistered: 'NOT_REGISTERED',
  /** A newer registration with the same worker id took this session over. */
  WorkerReplaced: 'WORKER_REPLACED',
  /** A call of an attempt whose lease is not current (or not this worker's): nothing changed. */
  StaleAttempt: 'STALE_ATTEMPT',
  // Either port
  /** A token or a client certificate was missing or refused. */
  Unauthenticated: 'UNAUTHENTICATED',
  /** The port speaks TLS and the peer sent plain bytes (sent in plain text, then closed). */
  TlsRequired: 'TLS_REQUIRED',
  /** This coordinator is a standby; `ERROR.leader` names the leader when known. */
  NotLeader: 'NOT_LEADER',
  /** A connection or resource limit refused this peer. */
  LimitExceeded: 'LIMIT_EXCEEDED',
  /** Fail-stop: a commit failed; nothing more is accepted until a restart. */
  StoreFailed: 'STORE_FAILED',
  /** Fail-stop: a bug in the coordinator. */
  InternalError: 'INTERNAL_ERROR',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Codes of a `ProtocolError`: what was wrong with the bytes or the envelope. */
export const ProtocolErrorCode = {
  /** A declared frame length outside 1..1 MiB. */
  FrameLength: 'PROTOCOL_FRAME_LENGTH',
  /** End of stream in the middle of a payload. */
  Truncated: 'PROTOCOL_TRUNCATED',
  /** The payload is not UTF-8 JSON. */
  MalformedJson: 'PROTOCOL_MALFORMED_JSON',
  /** The payload is JSON but not an object with a string `type`. */
  NotAnObject: 'PROTOCOL_NOT_AN_OBJECT',
  /** The `type` is not one this implementation knows. */
  UnknownType: 'PROTOCOL_UNKNOWN_TYPE',
  /** A known field has the wrong JSON type (or a required one is missing). */
  BadField: 'PROTOCOL_BAD_FIELD',
  /** A field has the right JSON type but a value outside its enumeration. */
  BadValue: 'PROTOCOL_BAD_VALUE',
  /** A writer was asked to emit an empty or oversized frame. */
  FrameEncode: 'PROTOCOL_FRAME_ENCODE',
} as const;
export type ProtocolErrorCode = (typeof ProtocolErrorCode)[keyof typeof ProtocolErrorCode];

/** Codes raised by this side only: never sent as `ERROR.code`. */
export const LocalErrorCode = {
  // The client library (docs/CLI.md lists what the CLI prints for each)
  /** Nothing answered at the address (or the dial timed out). */
  ConnectFailed: 'CONNECT_FAILED',
  /** The connection broke with requests in flight: their outcome is unknown. */
  ConnectionLost: 'CONNECTION_LOST',
  /** The server's certificate is not trusted, or it does not speak TLS. */
  TlsFailed: 'TLS_FAILED',
  /** The coordinator does not know `AUTH`. */
  AuthUnsupported: 'AUTH_UNSUPPORTED',
  /** Admission control refused a submission (a `SUBMIT_REJECTED` reply). */
  SubmitRejected: 'SUBMIT_REJECTED',
  /** A wait ended before the job was terminal. */
  WaitTimeout: 'WAIT_TIMEOUT',
  /** A well-formed reply of the wrong type. */
  UnexpectedReply: 'UNEXPECTED_REPLY',
  /** The client was closed by its owner. */
  ClientClosed: 'CLIENT_CLOSED',
  /** The coordinator does not support a feature the caller asked for (delayed jobs, schedules, bulk, events). */
  UnsupportedFeature: 'UNSUPPORTED_FEATURE',
  /** `result()` of a job that ended FAILED. */
  JobFailed: 'JOB_FAILED',
  /** `result()` of a job that ended CANCELLED. */
  JobCancelled: 'JOB_CANCELLED',
  /** An `ERROR` reply without a code that could not be classified, or with a code unknown here. */
  RemoteError: 'REMOTE_ERROR',
  // Starting a program
  /** An option of `startCoordinator`, `startWorker` or a class is out of its bounds. */
  InvalidOptions: 'INVALID_OPTIONS',
  /** A bad command line or environment (exit code 2). */
  Usage: 'USAGE',
  /** A port could not be bound. */
  ListenFailed: 'LISTEN_FAILED',
  /** A certificate or key file cannot be used. */
  TlsConfig: 'TLS_CONFIG',
  /** A token file cannot be used. */
  TokenFile: 'TOKEN_FILE',
  /** An address list does not parse. */
  BadAddress: 'BAD_ADDRESS',
  /** The database has another number of shards than `--shards` says (exit code 2). */
  ShardsMismatch: 'SHARDS_MISMATCH',
  /** Another coordinator holds the SQLite database. */
  DatabaseLocked: 'DATABASE_LOCKED',
  /** A task module cannot be loaded or breaks the rules. */
  TaskModuleInvalid: 'TASK_MODULE_INVALID',
  /** A worker dialled a client port, or a client a worker port. */
  WrongPort: 'WRONG_PORT',
  /** A request (its payload) would not fit in a frame; nothing was sent. */
  PayloadTooLarge: 'PAYLOAD_TOO_LARGE',
  // Tasks and tools
  /** A call of a handler (`ctx.enqueue`) got no answer: its attempt was stopped (cancel, deadline) or ended. */
  CallAborted: 'CALL_ABORTED',
  /** A handler has too many calls in flight at once (more than 64 per attempt). */
  TooManyCalls: 'TOO_MANY_CALLS',
  /** A task reported failure on purpose. */
  TaskFailed: 'TASK_FAILED',
  /** A replay called another step than the one recorded at that position. */
  NonDeterministic: 'NON_DETERMINISTIC',
  /** A step a handler cannot record: a bad name, a name used twice, a value JSON cannot carry. */
  InvalidStep: 'INVALID_STEP',
  /** `bench`: a submission went unanswered. */
  SubmitTimeout: 'SUBMIT_TIMEOUT',
  /** The CLI's code for a thrown value that is not a DtpError (a bug). */
  Internal: 'INTERNAL',
} as const;
export type LocalErrorCode = (typeof LocalErrorCode)[keyof typeof LocalErrorCode];

/** The HTTP API's own codes (docs/HTTP.md); the wire codes pass through it unchanged. */
export const HttpErrorCode = {
  BadRequest: 'BAD_REQUEST',
  Unauthenticated: ErrorCode.Unauthenticated,
  NotFound: 'NOT_FOUND',
  MethodNotAllowed: 'METHOD_NOT_ALLOWED',
  Conflict: 'CONFLICT',
  UnsupportedMediaType: 'UNSUPPORTED_MEDIA_TYPE',
  PayloadTooLarge: LocalErrorCode.PayloadTooLarge,
  SubmitRejected: LocalErrorCode.SubmitRejected,
  /** The Host header names no name of this coordinator (DNS rebinding). */
  HostNotAllowed: 'HOST_NOT_ALLOWED',
  /** A request that acts came from a page of another origin. */
  CrossOrigin: 'CROSS_ORIGIN',
} as const;
export type HttpErrorCode = (typeof HttpErrorCode)[keyof typeof HttpErrorCode];

/** Every code this side raises: a closed union. */
export type DtpErrorCode = ErrorCode | ProtocolErrorCode | LocalErrorCode | HttpErrorCode;

declare const unknownRemoteCode: unique symbol;
/**
 * A code a peer sent that this catalogue does not know (a newer coordinator,
 * or another implementation). It is passed on as data, as sent, and never
 * raised here: only {@link remoteCode} makes one.
 */
export type UnknownRemoteCode = string & { readonly [unknownRemoteCode]: true };

const WIRE_CODES: ReadonlySet<string> = new Set(Object.values(ErrorCode));

/** True for a code of the wire catalogue ({@link ErrorCode}). */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && WIRE_CODES.has(code);
}

/** `ERROR.code` as received: a code of the catalogue, another one as sent, or null when blank. */
export function remoteCode(code: string | null): ErrorCode | UnknownRemoteCode | null {
  if (code === null || code.trim() === '') return null;
  return isErrorCode(code) ? code : (code as UnknownRemoteCode);
}
