/**
 * TLS for both ends of a connection, with `node:tls` (TLS 1.2 or later).
 *
 * Server side: {@link ServerTls} reads a certificate, its key and optionally
 * a CA for client certificates from PEM files, and hands them to every server
 * that uses them (the worker port, the client port, the HTTP port). `reload()`
 * reads the files again (SIGHUP): new connections get the new certificate,
 * open ones keep theirs. A reload that fails keeps the previous material.
 *
 * Client side: {@link ClientTls} is what a worker or a client trusts (system
 * CAs, or a given CA) and optionally presents (its own certificate).
 * {@link isTlsRefusal} tells a configuration problem (an untrusted or wrong
 * certificate, a peer that does not speak TLS) from a transient network one,
 * so a worker can exit instead of dialling forever.
 */
import { LocalErrorCode } from '../protocol/error-codes.js';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { DtpError, describeError } from '../protocol/errors.js';

/** Oldest protocol version offered or accepted. */
export const MIN_TLS_VERSION = 'TLSv1.2';

export interface ServerTlsFiles {
  /** PEM certificate (chain) of this server. */
  certFile: string;
  /** PEM private key of that certificate. */
  keyFile: string;
  /** PEM CA: when given, peers must present a certificate it signed. */
  clientCaFile?: string | null;
}

/** A TLS file that cannot be read or used. Exit-worthy at start; logged on reload. */
export class TlsConfigError extends DtpError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(LocalErrorCode.TlsConfig, message, options);
  }
}

function readPem(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new TlsConfigError(`cannot read ${what} ${path}: ${describeError(err)}`, { cause: err });
  }
}

/** The server's certificate material, re-readable. */
export class ServerTls {
  readonly files: ServerTlsFiles;
  #options: SecureContextOptions;
  readonly #listeners = new Set<(options: SecureContextOptions) => void>();

  private constructor(files: ServerTlsFiles, options: SecureContextOptions) {
    this.files = files;
    this.#options = options;
  }

  /** Reads and checks the files; throws {@link TlsConfigError}. */
  static load(files: ServerTlsFiles): ServerTls {
    return new ServerTls(files, ServerTls.#read(files));
  }

  static #read(files: ServerTlsFiles): SecureContextOptions {
    const options: SecureContextOptions = {
      cert: readPem(files.certFile, 'TLS certificate'),
      key: readPem(files.keyFile, 'TLS key'),
      minVersion: MIN_TLS_VERSION,
    };
    if (files.clientCaFile != null) options.ca = readPem(files.clientCaFile, 'client CA');
    try {
      // Builds a context once, so a key that does not match its certificate
      // (or a file that is not PEM) fails here and not at the first handshake.
      createSecureContext(options);
    } catch (err) {
      throw new TlsConfigError(`unusable TLS certificate or key: ${describeError(err)}`, {
        cause: err,
      });
    }
    return options;
  }

  /** True when peers must present a certificate signed by the client CA. */
  get requiresClientCertificate(): boolean {
    return this.files.clientCaFile != null;
  }

  /** Options for `tls.createServer` / `setSecureContext`, current as of now. */
  get secureContextOptions(): SecureContextOptions {
    return this.#options;
  }

  /** Calls `listener` with the new options after every successful reload. */
  onReload(listener: (options: SecureContextOptions) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Reads the files again; on failure throws and keeps the old material. */
  reload(): void {
    const options = ServerTls.#read(this.files);
    this.#options = options;
    for (const listener of this.#listeners) listener(options);
  }
}

/** What a dialling worker or client uses for TLS. */
export interface ClientTls {
  /** PEM CA(s) to trust instead of the system's; absent = system CAs. */
  ca?: string | Buffer;
  /** PEM certificate to present (with `key`). */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** Name to verify the server certificate against (default: the host dialled, unless an IP). */
  servername?: string;
}

export interface ClientTlsFiles {
  caFile?: string | null;
  certFile?: string | null;
  keyFile?: string | null;
}

/** Reads a client's TLS files; throws {@link TlsConfigError}. */
export function readClientTls(files: ClientTlsFiles): ClientTls {
  const out: ClientTls = {};
  if (files.caFile != null) out.ca = readPem(files.caFile, 'TLS CA');
  if ((files.certFile == null) !== (files.keyFile == null)) {
    throw new TlsConfigError('a client certificate needs both --tls-cert and --tls-key');
  }
  if (files.certFile != null && files.keyFile != null) {
    out.cert = readPem(files.certFile, 'TLS certificate');
    out.key = readPem(files.keyFile, 'TLS key');
  }
  return out;
}

/** The `servername` to verify for a host: the host itself, unless it is an IP address. */
export function serverNameFor(host: string, tls: ClientTls): string | undefined {
  if (tls.servername !== undefined) return tls.servername;
  return isIP(host) === 0 ? host : undefined;
}

/**
 * OpenSSL and certificate-check codes that no retry can fix: the peer's
 * certificate is not trusted or not for this name, ours was refused, or the
 * peer does not speak TLS at all.
 */
const REFUSAL_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'INVALID_CA',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** True for a TLS error that means "misconfigured", not "try again later". */
export function isTlsRefusal(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return REFUSAL_CODES.has(code) || code.startsWith('ERR_SSL_');
}

/** A TLS error in words, with a hint when the peer probably does not speak TLS. */
export function describeTlsError(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  const text = describeError(err).split('\n')[0] ?? '';
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG') {
    return `TLS handshake failed (${String(code)}): the server does not seem to speak TLS on this port`;
  }
  return typeof code === 'string' && !text.includes(code)
    ? `TLS handshake failed (${code}): ${text}`
    : `TLS handshake failed: ${text}`;
}
