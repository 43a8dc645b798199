/**
 * Who may use the HTTP API when the coordinator has client tokens.
 *
 * A request is authorized by `Authorization: Bearer <token>` (scripts), or by
 * a session cookie (the dashboard): `POST /api/session {"token"}` checks the
 * token once and sets `dtp_session`, an unguessable id, so that the browser's
 * EventSource, which cannot send headers, is authorized too. The session
 * keeps the token in memory and checks it again on every use, so a token
 * removed from the token file ends its sessions at the next reload. Sessions
 * expire after {@link SESSION_TTL_MS}; at most {@link MAX_SESSIONS} exist
 * (the oldest goes first). Tokens and session ids are never logged.
 *
 * Without client tokens everything is allowed and no cookie is needed.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** Checks one client token (constant time is the checker's business). */
export type TokenCheck = (token: string) => boolean;

export const SESSION_COOKIE = 'dtp_session';
/** A session lasts this long from its creation, in ms. */
export const SESSION_TTL_MS = 12 * 3_600_000;
/** Sessions kept at most; creating one more drops the oldest. */
export const MAX_SESSIONS = 1_024;

interface Session {
  token: string;
  expiresAtMs: number;
}

export class SessionStore {
  /** Null when the coordinator has no client tokens. */
  readonly #check: TokenCheck | null;
  readonly #now: () => number;
  /** Insertion order = age order (Map iteration), for eviction. */
  readonly #sessions = new Map<string, Session>();

  constructor(check: TokenCheck | null, now: () => number = Date.now) {
    this.#check = check;
    this.#now = now;
  }

  /** True when requests need a token or a session. */
  get required(): boolean {
    return this.#check !== null;
  }

  /** Opens a session for a valid token; null for a wrong one. */
  open(token: string): { id: string; maxAgeMs: number } | null {
    if (this.#check === null) return { id: '', maxAgeMs: 0 };
    if (!this.#check(token)) return null;
    while (this.#sessions.size >= MAX_SESSIONS) {
      const oldest = this.#sessions.keys().next().value;
      if (oldest === undefined) break;
      this.#sessions.delete(oldest);
    }
    const id = randomBytes(32).toString('base64url');
    this.#sessions.set(id, { token, expiresAtMs: this.#now() + SESSION_TTL_MS });
    return { id, maxAgeMs: SESSION_TTL_MS };
  }

  /** Ends a session (logout). */
  close(id: string): void {
    this.#sessions.delete(id);
  }

  /** True when the request carries a valid bearer token or session cookie. */
  authorizes(req: IncomingMessage): boolean {
    const check = this.#check;
    if (check === null) return true;
    const bearer = bearerToken(req);
    if (bearer !== null) return check(bearer);
    const id = sessionId(req);
    if (id === null) return false;
    const session = this.#sessions.get(id);
    if (session === undefined) return false;
    if (session.expiresAtMs <= this.#now() || !check(session.token)) {
      this.#sessions.delete(id);
      return false;
    }
    return true;
  }
}

/** The token of `Authorization: Bearer <token>`, or null. */
export function bearerToken(req: IncomingMessage): string | null {
  const header = req.headers.authorization;
  if (header === undefined) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

/** The session id of the `dtp_session` cookie, or null. */
export function sessionId(req: IncomingMessage): string | null {
  const header = req.headers.cookie;
  if (header === undefined) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim() || null;
  }
  return null;
}

/** The Set-Cookie value for a session (`Secure` on TLS). */
export function sessionCookie(id: string, maxAgeMs: number, secure: boolean): string {
  const attributes = [
    `${SESSION_COOKIE}=${id}`,
    'Path=/',
    'HttpOnly',
    'SameSite=Strict',
    `Max-Age=${Math.floor(maxAgeMs / 1_000)}`,
  ];
  if (secure) attributes.push('Secure');
  return attributes.join('; ');
}
