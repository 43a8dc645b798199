/**
 * Listening and dialling, with lifetimes that end cleanly: a {@link TcpServer}
 * tracks its sockets so `close()` leaves nothing behind, and {@link dial}
 * gives up after a timeout or an abort.
 *
 * A TcpServer admits each connection through an {@link AdmissionGate} (how
 * many, from where, how many still pending and for how long), and with a
 * {@link ServerTls} speaks TLS from the first byte. A peer that sends plain
 * frames to a TLS port is told so in plain text (`ERROR` code TLS_REQUIRED);
 * one whose client certificate is refused is told so over TLS (`ERROR` code
 * UNAUTHENTICATED); either way the connection then closes. Each refusal and
 * handshake is reported as a {@link NetEvent}.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { connect as tlsConnect, createServer as createTlsServer } from 'node:tls';
import type { Server as TlsServer, TLSSocket } from 'node:tls';
import { encodeMessage } from '../protocol/codec.js';
import { ErrorCode, LocalErrorCode } from '../protocol/error-codes.js';
import { DtpError, describeError } from '../protocol/errors.js';
import { AdmissionGate, UNLIMITED, type Admission, type AdmissionLimits } from './admission.js';
import type { NetEventSink, PortName } from './net-events.js';
import {
  MIN_TLS_VERSION,
  describeTlsError,
  isTlsRefusal,
  serverNameFor,
  type ClientTls,
  type ServerTls,
} from './tls.js';

export interface TcpServerOptions {
  /** Which port this is, in events (default `client`). */
  name?: PortName;
  /** Admission bounds (default: none). */
  limits?: AdmissionLimits;
  /** Speak TLS with this material (default: plain TCP). */
  tls?: ServerTls | null;
  /** Refusals, limits and handshakes (default: dropped). */
  onEvent?: NetEventSink;
}

/** First byte of a TLS record carrying a handshake (a ClientHello starts with it). */
const TLS_HANDSHAKE_RECORD = 0x16;
/** How long a refused peer gets to read its last frame before the socket is destroyed, in ms. */
const LAST_WORDS_MS = 1_000;

/** Called with each connection that got through admission (and TLS). */
export type SocketHandler = (socket: Socket, admission: Admission) => void;

interface PendingTls {
  admission: Admission;
  remote: string;
}

export class TcpServer {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #onSocket: SocketHandler;
  readonly #name: PortName;
  readonly #gate: AdmissionGate;
  readonly #onEvent: NetEventSink;
  readonly #tls: ServerTls | null;
  readonly #tlsServer: TlsServer | null = null;
  /** Raw sockets handed to the TLS server, by `address|port`, until their handshake ends. */
  readonly #handshaking = new Map<string, PendingTls>();
  #stopReloads: (() => void) | null = null;
  #closing: Promise<void> | null = null;

  constructor(onSocket: SocketHandler, options: TcpServerOptions = {}) {
    this.#onSocket = onSocket;
    this.#name = options.name ?? 'client';
    this.#gate = new AdmissionGate(options.limits ?? UNLIMITED);
    this.#onEvent = options.onEvent ?? (() => undefined);
    this.#tls = options.tls ?? null;
    this.#server = createServer({ noDelay: true }, (socket) => this.#accept(socket));
    if (this.#tls !== null) this.#tlsServer = this.#createTlsServer(this.#tls);
  }

  /** Starts listening; resolves with the port actually bound (useful with port 0). */
  async listen(port: number, host: string): Promise<number> {
    this.#server.listen({ port, host, exclusive: true });
    try {
      // once() rejects on 'error', and removes both listeners either way.
      await once(this.#server, 'listening');
    } catch (err) {
      const message = `cannot listen on ${host}:${port}: ${describeError(err)}`;
      throw new DtpError(LocalErrorCode.ListenFailed, message, { cause: err });
    }
    const address = this.#server.address();
    if (address === null || typeof address === 'string')
      throw new DtpError(LocalErrorCode.ListenFailed, 'no TCP address');
    return address.port;
  }

  /** Open sockets right now (TLS sockets and the TCP sockets under them count once each). */
  get connectionCount(): number {
    return this.#gate.openCount;
  }

  /** Connections not yet established (handshake, AUTH or registration under way). */
  get pendingCount(): number {
    return this.#gate.pendingCount;
  }

  /** Stops accepting (new connections are refused at once). Idempotent. */
  stopAccepting(): void {
    if (this.#server.listening) this.#server.close();
  }

  /** Stops accepting and destroys every socket. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const closed = this.#server.listening ? once(this.#server, 'close') : Promise.resolve();
      this.stopAccepting();
      this.#stopReloads?.();
      for (const socket of this.#sockets) socket.destroy();
      await closed;
    })();
    return this.#closing;
  }

  #track(socket: Socket): void {
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
  }

  #accept(socket: Socket): void {
    this.#track(socket);
    // A reset before anyone else listens must not become an uncaught error.
    socket.on('error', () => undefined);
    const remote = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
    const limited = (limit: 'handshake_timeout' | 'pending_evicted') => (): void =>
      this.#onEvent({ type: 'connection.limited', port: this.#name, limit, remote });
    const admitted = this.#gate.admit(socket.remoteAddress ?? '?', {
      onDeadline: limited('handshake_timeout'),
      onEvicted: limited('pending_evicted'),
    });
    if (typeof admitted === 'string') {
      this.#onEvent({ type: 'connection.refused', port: this.#name, limit: admitted, remote });
      this.#refuse(socket, ErrorCode.LimitExceeded, refusalMessage(admitted), this.#tls === null);
      return;
    }
    const admission = admitted;
    admission.setOnExpired(() => socket.destroy());
    socket.once('close', () => admission.release());
    if (this.#tlsServer === null) this.#onSocket(socket, admission);
    else this.#startTls(socket, admission, remote);
  }

  /** Peeks at the first chunk: a TLS ClientHello goes to the TLS server, anything else is told off. */
  #startTls(socket: Socket, admission: Admission, remote: string): void {
    const tlsServer = this.#tlsServer as TlsServer;
    socket.once('data', (chunk: Buffer) => {
      // Pause before returning, or the next chunk is emitted to nobody.
      socket.pause();
      if (chunk[0] !== TLS_HANDSHAKE_RECORD) {
        const error = 'peer did not start a TLS handshake';
        this.#onEvent({ type: 'tls.handshake', port: this.#name, remote, ok: false, error });
        const message = 'This port requires TLS: connect with TLS (--tls or --tls-ca)';
        this.#refuse(socket, ErrorCode.TlsRequired, message, true);
        return;
      }
      socket.unshift(chunk);
      const key = socketKey(socket);
      this.#handshaking.set(key, { admission, remote });
      socket.once('close', () => this.#handshaking.delete(key));
      tlsServer.emit('connection', socket);
    });
  }

  #createTlsServer(material: ServerTls): TlsServer {
    const server = createTlsServer({
      ...material.secureContextOptions,
      requestCert: material.requiresClientCertificate,
      // Checked below instead, so a refused peer can be told why in a frame.
      rejectUnauthorized: false,
    });
    this.#stopReloads = material.onReload((options) => server.setSecureContext(options));
    server.on('secureConnection', (socket: TLSSocket) => this.#onSecure(socket, material));
    server.on('tlsClientError', (err: Error, socket: TLSSocket) => {
      const entry = this.#handshaking.get(socketKey(socket));
      const remote = entry?.remote ?? `${socket.remoteAddress ?? '?'}`;
      const error = describeTlsError(err);
      this.#onEvent({ type: 'tls.handshake', port: this.#name, remote, ok: false, error });
      socket.destroy();
    });
    return server;
  }

  #onSecure(socket: TLSSocket, material: ServerTls): void {
    const key = socketKey(socket);
    const entry = this.#handshaking.get(key);
    this.#handshaking.delete(key);
    this.#track(socket);
    socket.on('error', () => undefined);
    if (entry === undefined || this.#closing !== null) {
      socket.destroy();
      return;
    }
    const { admission, remote } = entry;
    this.#onEvent({ type: 'tls.handshake', port: this.#name, remote, ok: true });
    admission.setOnExpired(() => socket.destroy());
    if (material.requiresClientCertificate && !socket.authorized) {
      const why = String(socket.authorizationError ?? 'no certificate');
      this.#onEvent({
        type: 'auth.refused',
        port: this.#name,
        remote,
        reason: `client certificate refused (${why})`,
      });
      const message = `Unauthenticated: a client certificate signed by this coordinator's CA is required (${why})`;
      this.#refuse(socket, ErrorCode.Unauthenticated, message, true);
      return;
    }
    this.#onSocket(socket, admission);
  }

  /** Ends a socket, after one last ERROR frame when `tell`; destroyed soon either way. */
  #refuse(socket: Socket, code: ErrorCode, message: string, tell: boolean): void {
    if (!tell) {
      socket.destroy();
      return;
    }
    socket.end(encodeMessage({ type: 'ERROR', code, message }));
    setTimeout(() => socket.destroy(), LAST_WORDS_MS).unref();
  }
}

function socketKey(socket: Socket): string {
  return `${socket.remoteAddress ?? '?'}|${socket.remotePort ?? '?'}`;
}

function refusalMessage(limit: string): string {
  switch (limit) {
    case 'per_address':
      return 'Too many connections from this address; try again later';
    case 'pending':
      return 'Too many connections are still registering or authenticating; try again later';
    default:
      return 'Too many connections; try again later';
  }
}

export class DialError extends DtpError {
  /**
   * True when the failure is a TLS refusal (untrusted or wrong certificate, a
   * peer that does not speak TLS): retrying cannot help.
   */
  readonly refused: boolean;

  constructor(
    message: string,
    options?: {
      cause?: unknown;
      code?: typeof LocalErrorCode.ConnectFailed | typeof LocalErrorCode.TlsFailed;
      refused?: boolean;
    },
  ) {
    super(options?.code ?? LocalErrorCode.ConnectFailed, message, options);
    this.refused = options?.refused ?? false;
  }
}

/**
 * Connects to host:port (with TLS when `tls` is given), failing with
 * {@link DialError} after `timeoutMs`. A TLS socket is returned only after
 * its handshake, with the server's certificate verified.
 */
export async function dial(
  host: string,
  port: number,
  timeoutMs: number,
  signal?: AbortSignal,
  tls?: ClientTls | null,
): Promise<Socket> {
  // An already aborted signal never fires 'abort' again: check it up front.
  if (signal?.aborted) {
    throw new DialError(`cannot connect to ${host}:${port}: aborted`, { cause: signal.reason });
  }
  if (tls != null) return dialTls(host, port, timeoutMs, tls, signal);
  const socket = connect({ host, port, noDelay: true });
  try {
    return await settled(socket, 'connect', timeoutMs, signal);
  } catch (err) {
    throw new DialError(`cannot connect to ${host}:${port}: ${describeError(err)}`, { cause: err });
  }
}

/**
 * Resolves with `socket` once it emits `event`; destroys it (and rejects) on
 * an error, after `timeoutMs`, or when `signal` aborts.
 */
async function settled(
  socket: Socket,
  event: 'connect' | 'secureConnect',
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<Socket> {
  const timer = setTimeout(
    () => socket.destroy(new Error(`timed out after ${timeoutMs} ms`)),
    timeoutMs,
  );
  const onAbort = (): void => {
    socket.destroy(new Error('aborted'));
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await once(socket, event);
    return socket;
  } catch (err) {
    socket.destroy();
    throw err;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

async function dialTls(
  host: string,
  port: number,
  timeoutMs: number,
  tls: ClientTls,
  signal?: AbortSignal,
): Promise<Socket> {
  const { servername: _ignored, ...material } = tls;
  const socket = tlsConnect({
    host,
    port,
    ...material,
    servername: serverNameFor(host, tls),
    minVersion: MIN_TLS_VERSION,
  });
  socket.setNoDelay(true);
  let reachedTcp = false;
  socket.once('connect', () => (reachedTcp = true));
  try {
    return await settled(socket, 'secureConnect', timeoutMs, signal);
  } catch (err) {
    if (reachedTcp && isTlsRefusal(err)) {
      throw new DialError(`cannot connect to ${host}:${port}: ${describeTlsError(err)}`, {
        cause: err,
        code: LocalErrorCode.TlsFailed,
        refused: true,
      });
    }
    const what = reachedTcp ? describeTlsError(err) : describeError(err);
    throw new DialError(`cannot connect to ${host}:${port}: ${what}`, { cause: err });
  }
}
