/**
 * The one catalogue of codes carried by `ERROR.code` on the wire (and shown
 * under `--json` by the CLI). Messages are for people; code that decides
 * anything decides on these. A code is never renamed once published.
 */
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
  /** Too many pending WAIT_JOBs on one connection. */
  TooManyWaits: 'TOO_MANY_WAITS',
  /** A read of history failed (that request only; the coordinator keeps working). */
  ReadFailed: 'STORE_READ_FAILED',
  // Worker registration
  InvalidRegistration: 'INVALID_REGISTRATION',
  NotRegistered: 'NOT_REGISTERED',
  /** A newer registration with the same worker id took this session over. */
  WorkerReplaced: 'WORKER_REPLACED',
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

const ALL_CODES: ReadonlySet<string> = new Set(Object.values(ErrorCode));

/** True for a code of this catalogue. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && ALL_CODES.has(code);
}
