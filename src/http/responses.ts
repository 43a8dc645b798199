/**
 * How the HTTP API answers: JSON bodies, and errors as
 * `{"error": {"code", "message"}}` with a status that says whose fault it
 * was (400 bad parameters, 401 no token, 403 not this host or not this origin, 404 no such thing, 409 not in a
 * state that allows it, 415 not JSON, 429/503 try later).
 */
import type { ServerResponse } from 'node:http';
import {
  HttpErrorCode,
  type DtpErrorCode,
  type UnknownRemoteCode,
} from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';

export { HttpErrorCode };

/** An answer other than 2xx, thrown by a handler and turned into a response once. */
export class HttpError extends DtpError {
  readonly status: number;
  readonly extra: Record<string, unknown>;

  constructor(
    status: number,
    code: DtpErrorCode | UnknownRemoteCode,
    message: string,
    extra: Record<string, unknown> = {},
  ) {
    super(code, message);
    this.status = status;
    this.extra = extra;
  }
}

/** A 400 with a message naming the parameter. */
export function badRequest(message: string): HttpError {
  return new HttpError(400, HttpErrorCode.BadRequest, message);
}

/** Headers every answer carries: no caching of API data, no sniffing, no framing. */
const COMMON_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
} as const;

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string | string[]> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...COMMON_HEADERS,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
    ...headers,
  });
  res.end(text);
}

export function sendText(
  res: ServerResponse,
  status: number,
  body: string | Buffer,
  contentType = 'text/plain; charset=utf-8',
  headers: Record<string, string | string[]> = {},
): void {
  res.writeHead(status, {
    ...COMMON_HEADERS,
    'Content-Type': contentType,
    'Content-Length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

export function sendError(res: ServerResponse, err: HttpError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const headers: Record<string, string> = {};
  if (err.status === 405 && typeof err.extra.allow === 'string') headers.Allow = err.extra.allow;
  const { allow: _allow, ...extra } = err.extra;
  sendJson(res, err.status, { error: { code: err.code, message: err.message, ...extra } }, headers);
}
