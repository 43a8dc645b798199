/**
 * Typed errors of the client library. Every one extends {@link DtpError}, so
 * its stable `code` is what the CLI prints under `--json` and what callers
 * branch on:
 *
 * - {@link RemoteError}: the coordinator answered `ERROR` (`UNKNOWN_JOB`,
 *   `INVALID_PAYLOAD`, `IDEMPOTENCY_CONFLICT`, ... or `REMOTE_ERROR`).
 * - {@link SubmitRejectedError}: admission control refused a submission
 *   (`SUBMIT_REJECTED`); nothing was created.
 * - {@link TransportError}: no connection (`CONNECT_FAILED`, or `TLS_FAILED`
 *   when the server's certificate is not trusted or it does not speak TLS) or
 *   it broke with requests in flight (`CONNECTION_LOST`); their outcome is
 *   unknown.
 * - {@link AuthError}: the token was refused (`UNAUTHENTICATED`) or the
 *   coordinator does not know `AUTH` (`AUTH_UNSUPPORTED`).
 * - {@link WaitTimeoutError}: a wait ended before the job was terminal.
 * - {@link UnexpectedReplyError}: a well-formed reply of the wrong type.
 * - {@link ClientClosedError}: the client was closed by its owner.
 * - {@link InvalidPayloadError}: the payload failed the task's schema here;
 *   nothing was sent (`INVALID_PAYLOAD`, the code the coordinator uses too).
 * - {@link RequestTooLargeError}: the request would not fit in one frame
 *   (`PAYLOAD_TOO_LARGE`); nothing was encoded or sent, and the connection
 *   stays usable.
 * - {@link WrongPortError}: the address is a coordinator's worker port, not
 *   its client port (`WRONG_PORT`); retrying cannot help.
 * - {@link JobFailedError} / {@link JobCancelledError}: what `result()` of a
 *   job that ended FAILED / CANCELLED rejects with.
 */
import {
  ErrorCode,
  LocalErrorCode,
  remoteCode,
  type UnknownRemoteCode,
} from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';
import { MAX_FRAME_BYTES } from '../protocol/framing.js';
import { WRONG_PORT_CODE, clientOnWorkerPortMessage } from '../net/port-kind.js';
import type {
  ErrorMessage,
  JobSnapshot,
  MessageType,
  SubmitRejected,
} from '../protocol/messages.js';
import type { PayloadIssue } from '../sdk/payload-schema.js';

/**
 * Codes inferred from the message of an `ERROR` reply that carries no `code`
 * (a reference peer never sends one). Checked in order; first match wins.
 */
const INFERRED_CODES: readonly {
  readonly code: ErrorCode;
  readonly test: (m: string) => boolean;
}[] = [
  { code: ErrorCode.UnknownJob, test: (m) => m.includes('Unknown job') },
  { code: ErrorCode.InvalidPayload, test: (m) => m.startsWith('Invalid payload') },
  { code: ErrorCode.IdempotencyConflict, test: (m) => m.includes('Idempotency key') },
];

/** What {@link RemoteError.code} may be: the code sent (known here or not), inferred, or REMOTE_ERROR. */
export type RemoteErrorCode = ErrorCode | UnknownRemoteCode | typeof LocalErrorCode.RemoteError;

/** The stable code of an `ERROR` reply: its own `code`, else inferred from the message. */
export function remoteErrorCode(reply: Pick<ErrorMessage, 'message' | 'code'>): RemoteErrorCode {
  const sent = remoteCode(reply.code);
  if (sent !== null) return sent;
  return (
    INFERRED_CODES.find((entry) => entry.test(reply.message))?.code ?? LocalErrorCode.RemoteError
  );
}

/** The coordinator answered `ERROR`: do not resend the request as it is. */
export class RemoteError extends DtpError {
  declare readonly code: RemoteErrorCode;
  /** For a refused SUBMIT_JOBS: the 0-based index of the job at fault (else null). */
  readonly index: number | null;

  constructor(reply: Pick<ErrorMessage, 'message' | 'code' | 'index'>) {
    super(remoteErrorCode(reply), reply.message);
    this.index = reply.index ?? null;
  }
}

/** A standby answered (an `AUTH`) with NOT_LEADER; `leader` names the leader when known. */
export class NotLeaderError extends RemoteError {
  readonly leader: string | null;

  constructor(reply: Pick<ErrorMessage, 'message' | 'code' | 'leader'>) {
    super(reply);
    this.leader = reply.leader ?? null;
  }
}

/** Admission control refused the submission; no job was created. */
export class SubmitRejectedError extends DtpError {
  /** The coordinator's explanation, as sent. */
  readonly reason: string;
  /** Non-terminal jobs at the time of the refusal. */
  readonly activeCount: number;
  /** The coordinator's `--max-active-jobs`. */
  readonly limit: number;
  /** True when resending later may succeed. */
  readonly retryable: boolean;

  constructor(reply: Omit<SubmitRejected, 'type'>) {
    super(LocalErrorCode.SubmitRejected, reply.reason);
    this.reason = reply.reason;
    this.activeCount = reply.activeCount;
    this.limit = reply.limit;
    this.retryable = reply.retryable;
  }
}

export type TransportErrorCode =
  | typeof LocalErrorCode.ConnectFailed
  | typeof LocalErrorCode.ConnectionLost
  | typeof LocalErrorCode.TlsFailed
  | typeof ErrorCode.LimitExceeded;

/**
 * The connection could not be made or broke. For `CONNECTION_LOST` the fate of
 * the requests in flight is unknown: they may or may not have taken effect.
 * `LIMIT_EXCEEDED`: the coordinator refused the connection at a bound (too
 * many connections, or too many still authenticating); nothing sent on it
 * was processed, and trying again later may succeed (the client already
 * retried for its connect timeout).
 */
export class TransportError extends DtpError {
  declare readonly code: TransportErrorCode;

  constructor(code: TransportErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/**
 * Authentication failed: the coordinator refused the token
 * (`UNAUTHENTICATED`), or it does not understand `AUTH` at all
 * (`AUTH_UNSUPPORTED`). Retrying with the same settings cannot help.
 */
export class AuthError extends DtpError {
  constructor(
    code: typeof ErrorCode.Unauthenticated | typeof LocalErrorCode.AuthUnsupported,
    message: string,
  ) {
    super(code, message);
  }
}

/** A wait ended before the job reached a terminal state. */
export class WaitTimeoutError extends DtpError {
  /** The job as last seen. */
  readonly job: JobSnapshot;
  readonly timeoutMs: number;

  constructor(job: JobSnapshot, timeoutMs: number) {
    super(
      LocalErrorCode.WaitTimeout,
      `Timed out after ${timeoutMs} ms waiting for job ${job.jobId} (state ${job.state})`,
    );
    this.job = job;
    this.timeoutMs = timeoutMs;
  }
}

/** The coordinator sent a well-formed reply that does not answer the request. */
export class UnexpectedReplyError extends DtpError {
  constructor(requestType: string, replyType: string) {
    super(LocalErrorCode.UnexpectedReply, `Unexpected reply ${replyType} to ${requestType}`);
  }
}

/** The client was closed by its owner; the request was not (or no longer) sent. */
export class ClientClosedError extends DtpError {
  constructor() {
    super(LocalErrorCode.ClientClosed, 'The client is closed');
  }
}

/**
 * The coordinator does not support what was asked (delayed jobs, schedules,
 * bulk submission, job events: it predates them, or is a v1 coordinator);
 * nothing was sent, or the request was answered "not understood" and nothing
 * was created. One class and one code for every such feature.
 */
export class UnsupportedFeatureError extends DtpError {
  /** The request that was not understood, when one was sent. */
  readonly requestType: string | null;

  constructor(message: string, requestType: string | null = null) {
    super(LocalErrorCode.UnsupportedFeature, message);
    this.requestType = requestType;
  }
}

/** The coordinator does not understand SUBSCRIBE_JOBS (job events, `watch`, `events`). */
export class EventsUnsupportedError extends UnsupportedFeatureError {
  constructor() {
    const request: MessageType = 'SUBSCRIBE_JOBS';
    super('This coordinator does not support job events (watch, events)', request);
  }
}

/** The coordinator does not understand an extension request (e.g. SUBMIT_JOBS); nothing was created. */
export class UnsupportedRequestError extends UnsupportedFeatureError {
  constructor(requestType: string, what: string, answer: string) {
    super(`this coordinator does not support ${what} (${answer})`, requestType);
  }
}

/**
 * The coordinator is of a version that does not know what this call needs
 * (e.g. the queue requests, flows); `feature` names it.
 */
export class FeatureUnsupportedError extends UnsupportedFeatureError {
  readonly feature: string;

  constructor(feature: string, detail: string | null = null, requestType: string | null = null) {
    super(
      `this coordinator does not support ${feature}${detail === null ? '' : ` (${detail})`}`,
      requestType,
    );
    this.feature = feature;
  }
}

/** The payload failed the task's schema on this side; nothing was sent. */
export class InvalidPayloadError extends DtpError {
  /** Every problem found, with its field. */
  readonly issues: readonly PayloadIssue[];

  constructor(message: string, issues: readonly PayloadIssue[]) {
    super(ErrorCode.InvalidPayload, message);
    this.issues = issues;
  }
}

/** `1 MiB` for 1,048,576, `256 KiB` for 262,144; otherwise the bytes with thousands separators. */
function describeBytes(bytes: number): string {
  const mib = 1024 * 1024;
  if (bytes % mib === 0) return `${bytes / mib} MiB`;
  if (bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes.toLocaleString('en-US')} bytes`;
}

/** Requests whose size is their payload's: the error says "payload". */
const PAYLOAD_REQUESTS: ReadonlySet<string> = new Set([
  'SUBMIT_JOB',
  'SIGNAL_JOB',
  'PUBLISH_EVENT',
]);

/**
 * A request too large for one frame (the protocol's 1 MiB), or a signal's or
 * event's payload above its own limit (256 KiB): refused before anything was
 * encoded or sent, so the connection is untouched and later requests work.
 * For a submission, a signal or an event the payload is what makes it large,
 * hence the wording.
 */
export class RequestTooLargeError extends DtpError {
  /** UTF-8 bytes of the request's JSON. */
  readonly bytes: number;
  /** The largest frame, in bytes. */
  readonly limitBytes: number;

  constructor(requestType: string, bytes: number, limitBytes: number = MAX_FRAME_BYTES) {
    const what = PAYLOAD_REQUESTS.has(requestType) ? 'payload' : `${requestType} request`;
    const hint = requestType === 'SUBMIT_JOBS' ? '; send fewer jobs per batch' : '';
    super(
      LocalErrorCode.PayloadTooLarge,
      `${what} too large (${bytes.toLocaleString('en-US')} bytes; the limit is ${describeBytes(limitBytes)})${hint}`,
    );
    this.bytes = bytes;
    this.limitBytes = limitBytes;
  }
}

/**
 * The address answered like a coordinator's worker port (a client request
 * got "the first message must be WORKER_REGISTER"): a configuration error.
 */
export class WrongPortError extends DtpError {
  /** The port that was dialled. */
  readonly port: number;

  constructor(port: number) {
    super(WRONG_PORT_CODE, clientOnWorkerPortMessage(port));
    this.port = port;
  }
}

/** The job ended FAILED; `job.error` says why (also as {@link JobFailedError.jobError}). */
export class JobFailedError extends DtpError {
  /** The job's final snapshot. */
  readonly job: JobSnapshot;
  /** The error of its last attempt, as the coordinator recorded it. */
  readonly jobError: string | null;

  constructor(job: JobSnapshot) {
    super(LocalErrorCode.JobFailed, `Job ${job.jobId} failed: ${job.error ?? 'no error recorded'}`);
    this.job = job;
    this.jobError = job.error;
  }
}

/** The job ended CANCELLED. */
export class JobCancelledError extends DtpError {
  /** The job's final snapshot. */
  readonly job: JobSnapshot;

  constructor(job: JobSnapshot) {
    super(LocalErrorCode.JobCancelled, `Job ${job.jobId} was cancelled`);
    this.job = job;
  }
}
