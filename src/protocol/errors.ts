/**
 * The error base class shared by every layer of dtp, and the protocol's own
 * errors.
 *
 * Every error carries a stable, upper-case `code`. Codes appear in logs and in
 * the CLI's `--json` output, so they are part of the contract: never rename one.
 */

/** Base class: a stable `code`, a human message, and an optional `cause`. */
export class DtpError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Codes of {@link ProtocolError}. */
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

/**
 * The peer broke the framing or envelope rules of the protocol. On the wire this
 * costs the offending connection (or, for `PROTOCOL_BAD_VALUE` on the client
 * port, only the offending request).
 */
export class ProtocolError extends DtpError {
  declare readonly code: ProtocolErrorCode;

  constructor(code: ProtocolErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** True for errors this package raised on purpose (as opposed to bugs). */
export function isDtpError(err: unknown): err is DtpError {
  return err instanceof DtpError;
}

/** A one-line description of any thrown value, for logs and replies. */
export function describeError(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
