/**
 * One client-port connection carrying pipelined requests.
 *
 * The coordinator answers every request with exactly one reply, in request
 * order, so matching is a FIFO: each reply settles the oldest pending
 * request. Anything that breaks that pairing (a reply nobody asked for, a
 * malformed frame, the socket closing) ends the connection and rejects every
 * pending request with a {@link TransportError} `CONNECTION_LOST`: their
 * outcome is unknown.
 *
 * States: `open` -> `closed` (peer close, violation, or {@link
 * ClientConnection.close}). A closed connection is never reused; the owner
 * dials a fresh one.
 */
import type { Socket } from 'node:net';
import { FramedConnection, describeCloseReason } from '../net/framed-connection.js';
import type { CloseReason } from '../net/framed-connection.js';
import { DialError, dial } from '../net/tcp.js';
import type { ClientTls } from '../net/tls.js';
import { ErrorCode, LocalErrorCode } from '../protocol/error-codes.js';
import type { ProtocolError } from '../protocol/errors.js';
import { isNotUnderstood } from '../protocol/features.js';
import { isClientReply } from '../protocol/messages.js';
import type { ClientReply, ClientRequest, Message } from '../protocol/messages.js';
import {
  AuthError,
  ClientClosedError,
  NotLeaderError,
  RemoteError,
  TransportError,
} from './errors.js';

/** How a connection proves who it is and whom it talks to. */
export interface ConnectionSecurity {
  /** TLS with these settings (an empty object = system CAs); absent or null = plain TCP. */
  tls?: ClientTls | null;
  /** Sent in `AUTH` as the first frame; absent or null = no AUTH. Never logged or echoed. */
  token?: string | null;
}

/** Requests in flight allowed on one connection (a bound, not a tuning knob). */
export const MAX_PENDING_REQUESTS = 100_000;

interface PendingRequest {
  resolve(reply: ClientReply): void;
  reject(err: Error): void;
}

export class ClientConnection {
  readonly #conn: FramedConnection;
  readonly #pending: PendingRequest[] = [];
  #failure: Error | null = null;

  private constructor(socket: Socket) {
    this.#conn = new FramedConnection(socket, {
      onMessage: (msg) => this.#onMessage(msg),
      onProtocolError: (err) => this.#onProtocolError(err),
      onClose: (reason) => this.#onClose(reason),
    });
  }

  /**
   * Dials host:port (TLS when asked) and, with a token, authenticates before
   * resolving. Fails with {@link TransportError} (`CONNECT_FAILED`,
   * `TLS_FAILED`), {@link AuthError}, or a {@link RemoteError} the
   * coordinator sent instead of `AUTH_OK` (e.g. `TLS_REQUIRED`).
   */
  static async open(
    host: string,
    port: number,
    connectTimeoutMs: number,
    security: ConnectionSecurity = {},
  ): Promise<ClientConnection> {
    let socket: Socket;
    try {
      socket = await dial(host, port, connectTimeoutMs, undefined, security.tls ?? null);
    } catch (err) {
      const refused = err instanceof DialError && err.refused;
      const message = err instanceof DialError ? err.message : `cannot connect: ${String(err)}`;
      throw new TransportError(
        refused ? LocalErrorCode.TlsFailed : LocalErrorCode.ConnectFailed,
        message,
        { cause: err },
      );
    }
    const conn = new ClientConnection(socket);
    if (security.token != null) {
      try {
        await conn.#authenticate(security.token);
      } catch (err) {
        await conn.destroy('authentication failed');
        throw err;
      }
    }
    return conn;
  }

  /** AUTH as the first frame; anything but AUTH_OK is an error (never a downgrade). */
  async #authenticate(token: string): Promise<void> {
    let reply: ClientReply;
    try {
      reply = await this.request({ type: 'AUTH', token });
    } catch (err) {
      if (!(err instanceof TransportError)) throw err;
      // A close right after AUTH is how a peer that does not know it answers.
      throw new AuthError(
        LocalErrorCode.AuthUnsupported,
        `coordinator does not support authentication (${err.message})`,
      );
    }
    if (reply.type === 'AUTH_OK') return;
    if (reply.type !== 'ERROR') {
      throw new AuthError(
        LocalErrorCode.AuthUnsupported,
        `coordinator does not support authentication (it answered ${reply.type})`,
      );
    }
    if (reply.code === ErrorCode.Unauthenticated)
      throw new AuthError(ErrorCode.Unauthenticated, reply.message);
    if (reply.code === ErrorCode.NotLeader) throw new NotLeaderError(reply);
    if (isNotUnderstood(reply)) {
      throw new AuthError(
        LocalErrorCode.AuthUnsupported,
        `coordinator does not support authentication: ${reply.message}`,
      );
    }
    throw new RemoteError(reply);
  }

  /** False once the connection has failed or been closed. */
  get isOpen(): boolean {
    return this.#failure === null;
  }

  /** Requests sent and not yet answered. */
  get pendingCount(): number {
    return this.#pending.length;
  }

  /** Sends one request; resolves with its reply, whatever its type. */
  request(msg: ClientRequest): Promise<ClientReply> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    if (this.#pending.length >= MAX_PENDING_REQUESTS) {
      return Promise.reject(
        new RangeError(`more than ${MAX_PENDING_REQUESTS} requests in flight on one connection`),
      );
    }
    return new Promise<ClientReply>((resolve, reject) => {
      this.#pending.push({ resolve, reject });
      if (!this.#conn.send(msg)) {
        this.#fail(new TransportError(LocalErrorCode.ConnectionLost, 'connection is closed'));
      }
    });
  }

  /** Rejects pending requests with {@link ClientClosedError} and closes. Idempotent. */
  close(): Promise<void> {
    this.#fail(new ClientClosedError());
    return this.#conn.close('client closed');
  }

  /** Drops the socket at once, as if the connection broke. Idempotent. */
  destroy(message: string): Promise<void> {
    this.#fail(new TransportError(LocalErrorCode.ConnectionLost, message));
    return this.#conn.destroy(message);
  }

  #onMessage(msg: Message): void {
    if (!isClientReply(msg)) {
      void this.destroy(`coordinator sent ${msg.type}, which is not a client reply`);
      return;
    }
    const head = this.#pending.shift();
    if (head === undefined) {
      void this.destroy(`coordinator sent an unsolicited ${msg.type}`);
      return;
    }
    head.resolve(msg);
  }

  #onProtocolError(err: ProtocolError): void {
    const failure = new TransportError(
      LocalErrorCode.ConnectionLost,
      `coordinator broke the protocol: ${err.message}`,
      { cause: err },
    );
    this.#fail(failure);
    void this.#conn.destroy(failure.message);
  }

  #onClose(reason: CloseReason): void {
    this.#fail(new TransportError(LocalErrorCode.ConnectionLost, describeCloseReason(reason)));
  }

  /** Records the first failure and rejects everything pending with it. */
  #fail(err: Error): void {
    this.#failure ??= err;
    const pending = this.#pending.splice(0);
    for (const entry of pending) entry.reject(this.#failure);
  }
}
