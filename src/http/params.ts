/**
 * Reading request parameters strictly: an unknown or repeated query
 * parameter, a value out of range or a body that is not the expected JSON
 * object is a 400 whose message names the parameter, never a silent default.
 */
import type { IncomingMessage } from 'node:http';
import {
  JOB_STATES,
  TERMINAL_STATES,
  type JobState,
  type TerminalState,
} from '../protocol/messages.js';
import { MAX_SIGNAL_PAYLOAD_BYTES } from '../protocol/limits.js';
import { HttpError, HttpErrorCode, badRequest } from './responses.js';

/** Largest request body accepted, in bytes (actions carry a few fields). */
export const MAX_BODY_BYTES = 64 * 1024;
/**
 * Largest body of a signal or an event: its payload may be 256 KiB of
 * compact JSON, and the body has the other fields and perhaps whitespace.
 */
export const MAX_SIGNAL_BODY_BYTES = MAX_SIGNAL_PAYLOAD_BYTES + MAX_BODY_BYTES;

export class QueryParams {
  readonly #params: URLSearchParams;

  /** Refuses parameters outside `allowed` and any given twice. */
  constructor(params: URLSearchParams, allowed: readonly string[]) {
    for (const name of new Set(params.keys())) {
      if (!allowed.includes(name)) {
        const known = allowed.length === 0 ? 'none' : allowed.join(', ');
        throw badRequest(`unknown query parameter "${name.slice(0, 40)}" (allowed: ${known})`);
      }
      if (params.getAll(name).length > 1) throw badRequest(`query parameter "${name}" given twice`);
    }
    this.#params = params;
  }

  /** The value, or undefined when absent; an empty value counts as absent. */
  string(name: string, maxLength = 256): string | undefined {
    const value = this.#params.get(name);
    if (value === null || value === '') return undefined;
    if (value.length > maxLength)
      throw badRequest(`${name} is longer than ${maxLength} characters`);
    return value;
  }

  int(name: string, min: number, max: number): number | undefined {
    const text = this.string(name, 20);
    if (text === undefined) return undefined;
    if (!/^-?[0-9]+$/.test(text) || Number(text) < min || Number(text) > max) {
      throw badRequest(`${name} must be an integer from ${min} to ${max}; got "${text}"`);
    }
    return Number(text);
  }

  state(name: string): JobState | undefined {
    const text = this.string(name, 20);
    return text === undefined ? undefined : jobState(name, text);
  }
}

/** A job state from any letter case; 400 otherwise. */
export function jobState(name: string, text: string): JobState {
  const state = JOB_STATES.find((s) => s === text.toUpperCase());
  if (state === undefined) {
    throw badRequest(`${name} must be one of ${JOB_STATES.join(', ')}; got "${text.slice(0, 40)}"`);
  }
  return state;
}

/** A terminal state (COMPLETED, FAILED, CANCELLED); 400 for any other value. */
export function terminalState(name: string, text: string): TerminalState {
  const state = jobState(name, text);
  const terminal = TERMINAL_STATES.find((s) => s === state);
  if (terminal === undefined) {
    throw badRequest(
      `${name}: only terminal jobs can be purged (${TERMINAL_STATES.join(', ')}), not ${state}`,
    );
  }
  return terminal;
}

/**
 * After a body went past its bound, how much more of it is read and dropped
 * before the connection is cut: cutting it with the client's bytes unread
 * makes the kernel reset it, and the client then loses the 413 it was sent.
 */
export const DISCARD_AFTER_BOUND_BYTES = 1024 * 1024;

/**
 * Reads a request's body, at most `maxBytes` (413 beyond: the rest is read
 * and dropped, up to {@link DISCARD_AFTER_BOUND_BYTES}, so that the answer
 * reaches the client). Read before the request takes a place among those in
 * progress, so a body that stalls holds only its own connection, until the
 * port's request timeout.
 */
export function readBody(req: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    const onData = (chunk: Buffer): void => {
      bytes += chunk.length;
      if (bytes <= maxBytes) {
        chunks.push(chunk);
        return;
      }
      if (bytes - chunk.length <= maxBytes) {
        chunks.length = 0;
        reject(
          new HttpError(413, HttpErrorCode.PayloadTooLarge, `body larger than ${maxBytes} bytes`),
        );
      }
      if (bytes > maxBytes + DISCARD_AFTER_BOUND_BYTES) {
        req.off('data', onData);
        req.destroy();
      }
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
    req.once('close', () => {
      if (!req.complete) reject(new Error('the request ended before its body was complete'));
    });
  });
}

/**
 * The JSON object body of a POST, from the bytes {@link readBody} read.
 * `Content-Type: application/json` is required: a cross-site form cannot
 * send it, so a session cookie alone cannot be used to act from another site.
 */
export function jsonBody(req: IncomingMessage, body: Buffer): Record<string, unknown> {
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/json\b/i.test(type)) {
    throw new HttpError(
      415,
      HttpErrorCode.UnsupportedMediaType,
      'send the body as application/json',
    );
  }
  const text = body.toString('utf8');
  let value: unknown;
  try {
    value = text.trim() === '' ? {} : JSON.parse(text);
  } catch {
    throw badRequest('the body is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw badRequest('the body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/** Refuses body fields outside `allowed`. */
export function onlyFields(body: Record<string, unknown>, allowed: readonly string[]): void {
  for (const name of Object.keys(body)) {
    if (!allowed.includes(name)) {
      throw badRequest(
        `unknown field "${name.slice(0, 40)}" (allowed: ${allowed.join(', ') || 'none'})`,
      );
    }
  }
}
