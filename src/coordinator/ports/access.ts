/**
 * Who may use the coordinator: the client tokens (client port and HTTP API)
 * and the worker tokens (worker port), each read from a file that may list
 * several (one per line, so a new token can be added before the old one is
 * removed).
 *
 * Tokens are compared in constant time: the candidate and every known token
 * are hashed with SHA-256 and all digests are compared with
 * `timingSafeEqual`, without stopping at the first match, so neither the
 * position of a difference nor which token matched shows in the timing.
 * A token is never logged, echoed or kept in an error message.
 *
 * `reload()` (SIGHUP) reads the files again; a file that cannot be read or
 * holds no token keeps the tokens it had, and the problem is reported.
 */
import { LocalErrorCode } from '../../protocol/error-codes.js';
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { DtpError, describeError } from '../../protocol/errors.js';

/** A token file that cannot be used. Exit-worthy at start; reported on reload. */
export class TokenFileError extends DtpError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(LocalErrorCode.TokenFile, message, options);
  }
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** The tokens of one file: non-blank lines, trimmed; `#` starts a comment line. */
export function parseTokens(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** The tokens of one file, as digests only. */
export class TokenFile {
  readonly path: string;
  #digests: Buffer[];

  private constructor(path: string, digests: Buffer[]) {
    this.path = path;
    this.#digests = digests;
  }

  /** Reads the file; throws {@link TokenFileError} when it is unreadable or empty. */
  static load(path: string): TokenFile {
    return new TokenFile(path, TokenFile.#read(path));
  }

  static #read(path: string): Buffer[] {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new TokenFileError(`cannot read token file ${path}: ${describeError(err)}`, {
        cause: err,
      });
    }
    const tokens = parseTokens(text);
    if (tokens.length === 0) throw new TokenFileError(`token file ${path} holds no token`);
    return tokens.map(digest);
  }

  /** How many tokens are accepted. */
  get count(): number {
    return this.#digests.length;
  }

  /** True when others than the owner may read the file (worth a warning). */
  get readableByOthers(): boolean {
    try {
      return (statSync(this.path).mode & 0o077) !== 0;
    } catch {
      return false;
    }
  }

  /** Constant-time check against every token (see the module comment). */
  matches(candidate: unknown): boolean {
    if (typeof candidate !== 'string' || candidate === '') return false;
    return this.matchesDigest(digest(candidate));
  }

  /** True when a token with this SHA-256 digest is listed (constant time, as above). */
  matchesDigest(wanted: Buffer): boolean {
    if (wanted.length !== 32) return false;
    let found = false;
    for (const known of this.#digests) {
      // No early exit: every token is compared whatever the outcome.
      found = timingSafeEqual(wanted, known) || found;
    }
    return found;
  }

  /** Reads the file again; on failure throws and keeps the old tokens. */
  reload(): void {
    this.#digests = TokenFile.#read(this.path);
  }
}

export interface AccessOptions {
  /** Tokens for the client port and the HTTP API; null = no client authentication. */
  clientTokenFile?: string | null;
  /** Tokens for the worker port; null = no worker authentication. */
  workerTokenFile?: string | null;
}

/** The coordinator's tokens: client and worker. */
export class AccessControl {
  readonly client: TokenFile | null;
  readonly worker: TokenFile | null;

  /** Reads the token files; throws {@link TokenFileError}. */
  constructor(options: AccessOptions = {}) {
    this.client = options.clientTokenFile == null ? null : TokenFile.load(options.clientTokenFile);
    this.worker = options.workerTokenFile == null ? null : TokenFile.load(options.workerTokenFile);
  }

  /** True when client connections must send AUTH first (and HTTP needs a token). */
  get clientTokensRequired(): boolean {
    return this.client !== null;
  }

  get workerTokensRequired(): boolean {
    return this.worker !== null;
  }

  /** True when `token` may use the client port (always, without client tokens). */
  allowsClient(token: unknown): boolean {
    return this.client === null || this.client.matches(token);
  }

  /** True when `token` may register a worker (always, without worker tokens). */
  allowsWorker(token: unknown): boolean {
    return this.worker === null || this.worker.matches(token);
  }

  /** Re-reads both files; returns the problems (files that failed keep their tokens). */
  reload(): string[] {
    const problems: string[] = [];
    for (const file of [this.client, this.worker]) {
      if (file === null) continue;
      try {
        file.reload();
      } catch (err) {
        problems.push(describeError(err));
      }
    }
    return problems;
  }
}
