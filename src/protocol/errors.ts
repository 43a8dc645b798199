/**
 * The error base class shared by every layer of dtp, and the protocol's own
 * errors.
 *
 * Every error carries a stable, upper-case `code` from the one catalogue
 * (error-codes.ts). Codes appear in logs and in the CLI's `--json` output, so
 * they are part of the contract: never rename one.
 */
import { ProtocolErrorCode, type DtpErrorCode, type UnknownRemoteCode } from './error-codes.js';

export { ProtocolErrorCode };

/**
 * Base class: a stable `code`, a human message, and an optional `cause`. The
 * code is one of the catalogue, or (for an error a peer reported) the code it
 * sent.
 */
export class DtpError extends Error {
  readonly code: DtpErrorCode | UnknownRemoteCode;

  constructor(
    code: DtpErrorCode | UnknownRemoteCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

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

/** A one-line description of any thrown value, for logs and replies. */
export function describeError(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
