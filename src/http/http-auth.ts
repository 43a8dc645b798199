/**
 * Authentication on the coordinator's HTTP port, with the client tokens.
 *
 * When client tokens exist, a request to a protected path must carry
 * `Authorization: Bearer <token>` or the session cookie. A browser (the
 * dashboard, its EventSource or WebSocket) cannot set a header on every
 * request, so it posts the token once to `/api/session`
 * (`{"token": "..."}` as `application/json`, or the Bearer header) and gets
 * an HttpOnly, SameSite=Strict cookie back (Secure under TLS); the cookie is
 * then accepted like the token for as long as that token stays listed (a
 * rotation that removes it ends its sessions) and at most `sessionTtlMs`.
 * `DELETE /api/session` ends the session (the dashboard serves those paths,
 * src/http/dashboard.ts). Without client tokens, everything is open.
 *
 * Sessions are kept in memory (a restart ends them), at most
 * {@link MAX_SESSIONS} (the oldest goes first). Session ids are 256 random
 * bits; only their SHA-256 is kept.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { ClientTokens } from '../coordinator/view.js';

/** Sessions kept at once; a new one beyond this ends the oldest. */
export const MAX_SESSIONS = 1_024;
/** Default lifetime of a session, in ms (12 h). */
export const DEFAULT_SESSION_TTL_MS = 12 * 60 * 60 * 1_000;
/** Name of the session cookie. */
export const SESSION_COOKIE = 'dtp_session';

export interface HttpAuthOptions {
  /** Set the cookie's Secure attribute (the port speaks TLS). */
  secureCookie: boolean;
  sessionTtlMs?: number;
  /** Clock in ms (default Date.now). */
  now?: () => number;
  /** A refused token or session (the token itself is never part of it). */
  onRefused?: (remote: string, reason: string) => void;
}

interface Session {
  /** The token it was opened with, as a SHA-256 digest (still listed = still valid). */
  tokenDigest: Buffer;
  expiresAtMs: number;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

function bearerToken(req: IncomingMessage): string | null {
  const header = req.headers.authorization;
  if (header === undefined) return null;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

function cookieValue(req: IncomingMessage, name: string): string | null {
  const header = req.headers.cookie;
  if (header === undefined) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}

function remoteOf(req: IncomingMessage): string {
  return `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`;
}

/** The HTTP port's gate: bearer tokens and session cookies. Reusable by any HTTP handler. */
export class HttpAuth {
  readonly #access: ClientTokens;
  readonly #secureCookie: boolean;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #onRefused: (remote: string, reason: string) => void;
  /** By SHA-256 of the session id (hex), oldest first. */
  readonly #sessions = new Map<string, Session>();

  constructor(access: ClientTokens, options: HttpAuthOptions) {
    this.#access = access;
    this.#secureCookie = options.secureCookie;
    this.#ttlMs = options.sessionTtlMs ?? DEFAULT_SESSION_TTL_MS;
    this.#now = options.now ?? Date.now;
    this.#onRefused = options.onRefused ?? (() => undefined);
  }

  /** True when protected paths need a token (the coordinator has client tokens). */
  get required(): boolean {
    return this.#access.clientTokensRequired;
  }

  /** Sessions open right now. */
  get sessionCount(): number {
    return this.#sessions.size;
  }

  /**
   * True when the request may see a protected path: no client tokens, a
   * listed bearer token, or a live session. A refusal is reported.
   */
  authorize(req: IncomingMessage): boolean {
    if (this.isAuthorized(req)) return true;
    this.#onRefused(remoteOf(req), 'no valid token or session');
    return false;
  }

  /** The same test without reporting a refusal (for "is this page logged in?"). */
  isAuthorized(req: IncomingMessage): boolean {
    if (!this.required) return true;
    const bearer = bearerToken(req);
    if (bearer !== null) return this.#access.allowsClient(bearer);
    const id = cookieValue(req, SESSION_COOKIE);
    return id !== null && this.#sessionValid(id);
  }

  #sessionValid(id: string): boolean {
    const key = sha256(id).toString('hex');
    const session = this.#sessions.get(key);
    if (session === undefined) return false;
    const listed = this.#access.client?.matchesDigest(session.tokenDigest) ?? false;
    if (session.expiresAtMs <= this.#now() || !listed) {
      this.#sessions.delete(key);
      return false;
    }
    return true;
  }

  /**
   * Opens a session for `token` (or for the request's bearer token when
   * `token` is null). Returns the `Set-Cookie` value, `''` when no tokens are
   * configured (nothing to open), or null when the token is refused (reported).
   */
  openSession(req: IncomingMessage, token: string | null): string | null {
    if (!this.required) return '';
    const candidate = token ?? bearerToken(req);
    if (candidate === null || !this.#access.allowsClient(candidate)) {
      this.#onRefused(remoteOf(req), candidate === null ? 'no token' : 'token refused');
      return null;
    }
    const id = randomBytes(32).toString('base64url');
    this.#sessions.set(sha256(id).toString('hex'), {
      tokenDigest: sha256(candidate),
      expiresAtMs: this.#now() + this.#ttlMs,
    });
    while (this.#sessions.size > MAX_SESSIONS) {
      const oldest = this.#sessions.keys().next().value as string;
      this.#sessions.delete(oldest);
    }
    return this.#cookie(id, Math.floor(this.#ttlMs / 1_000));
  }

  /** Ends the request's session, if any; returns the `Set-Cookie` value that clears it. */
  endSession(req: IncomingMessage): string {
    const id = cookieValue(req, SESSION_COOKIE);
    if (id !== null) this.#sessions.delete(sha256(id).toString('hex'));
    return this.#cookie('', 0);
  }

  #cookie(value: string, maxAgeS: number): string {
    const parts = [`${SESSION_COOKIE}=${value}`, 'HttpOnly', 'SameSite=Strict', 'Path=/'];
    parts.push(`Max-Age=${maxAgeS}`);
    if (this.#secureCookie) parts.push('Secure');
    return parts.join('; ');
  }
}
