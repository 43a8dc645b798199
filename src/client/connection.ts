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
 * A request is encoded before anything about it is recorded: one that cannot
 * be encoded (too large for a frame, not JSON) is refused with nothing sent
 * and no pending entry, so the FIFO stays paired and the connection usable.
 *
 * Two first replies are not answers but refusals of the connection itself:
 * `ERROR` LIMIT_EXCEEDED (the coordinator refused it at a bound before
 * reading anything; {@link ClientConnection.open} dials again with back-off
 * for up to the connect timeout), and a worker port's "the first message
 * must be WORKER_REGISTER" ({@link WrongPortError}).
 *
 * States: `open` -> `closed` (peer close, violation, or {@link
 * ClientConnection.close}). A closed connection is never reused; the owner
 * dials a fresh one.
 */
import type { Socket } from 'node:net';
import { FramedConnection, describeCloseReason } from '../net/framed-connection.js';
import type { CloseReason } from '../net/framed-connection.js';
import { setTimeout as sleepMs } from 'node:timers/promises';
import { isWorkerPortAnswer } from '../net/port-kind.js';
import { DialError, dial } from '../net/tcp.js';
import type { ClientTls } from '../net/tls.js';
import { messageToJson } from '../protocol/codec.js';
import { ErrorCode, LocalErrorCode } from '../protocol/error-codes.js';
import type { ProtocolError } from '../protocol/errors.js';
import { isNotUnderstood } from '../protocol/features.js';
import { MAX_FRAME_BYTES, encodeTextFrame } from '../protocol/framing.js';
import { isClientReply } from '../protocol/messages.js';
import type {
  ClientReply,
  ClientRequest,
  ErrorMessage,
  EventsMissed,
  JobEvent,
  Message,
} from '../protocol/messages.js';
import {
  AuthError,
  ClientClosedError,
  NotLeaderError,
  RemoteError,
  RequestTooLargeError,
  TransportError,
  WrongPortError,
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

/**
 * The frame of one request, or the reason it cannot be sent. Throws
 * {@link RequestTooLargeError} past 1 MiB, or what JSON.stringify throws.
 */
export function requestFrame(msg: ClientRequest): Buffer {
  const json = messageToJson(msg);
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > MAX_FRAME_BYTES) throw new RequestTooLargeError(msg.type, bytes);
  return encodeTextFrame(json);
}

/** True for a refusal of the connection at a bound: nothing was processed, a later try may pass. */
export function isLimitRefusal(err: unknown): boolean {
  return err instanceof TransportError && err.code === ErrorCode.LimitExceeded;
}

const FIRST_REFUSAL_PAUSE_MS = 25;
const LONGEST_REFUSAL_PAUSE_MS = 250;

/**
 * Back-off between tries after a refusal at a bound: pauses from 25 ms
 * doubling to 250 ms, each between half and all of its step (so many refused
 * clients do not come back in step), until `budgetMs` from its creation.
 */
export class RefusalBackoff {
  readonly #deadlineMs: number;
  #stepMs = FIRST_REFUSAL_PAUSE_MS;
  #tries = 1;

  constructor(budgetMs: number) {
    this.#deadlineMs = performance.now() + budgetMs;
  }

  /** Time left of the budget, in ms. */
  get leftMs(): number {
    return Math.max(0, this.#deadlineMs - performance.now());
  }

  /** Waits before the next try; false (without waiting) when the budget would run out first. */
  async pause(): Promise<boolean> {
    const delayMs = Math.ceil(this.#stepMs * (0.5 + Math.random() / 2));
    if (delayMs >= this.leftMs) return false;
    await sleepMs(delayMs);
    this.#stepMs = Math.min(this.#stepMs * 2, LONGEST_REFUSAL_PAUSE_MS);
    this.#tries++;
    return true;
  }

  /** The refusal to give up with, saying how long it was retried. */
  giveUp(err: TransportError): TransportError {
    if (this.#tries === 1) return err;
    return new TransportError(
      ErrorCode.LimitExceeded,
      `${err.message} (refused ${this.#tries} times in a row)`,
      { cause: err.cause },
    );
  }
}

/** Pushed messages of a subscription (SUBSCRIBE_JOBS). */
export type PushMessage = JobEvent | EventsMissed;

/** Receives a connection's pushed messages, and its end. */
export interface PushSink {
  push(msg: PushMessage): void;
  closed(err: Error): void;
}

/** Pushes held for a sink not attached yet; beyond this the connection is dropped. */
const MAX_HELD_PUSHES = 10_000;

export class ClientConnection {
  readonly #conn: FramedConnection;
  readonly #port: number;
  readonly #pending: PendingRequest[] = [];
  /** Where pushes go once a subscription attached; until then they are held. */
  #sink: PushSink | null = null;
  #held: PushMessage[] = [];
  #replies = 0;
  #failure: Error | null = null;

  private constructor(socket: Socket, port: number) {
    this.#port = port;
    this.#conn = new FramedConnection(socket, {
      onMessage: (msg) => this.#onMessage(msg),
      onProtocolError: (err) => this.#onProtocolError(err),
      onClose: (reason) => this.#onClose(reason),
    });
  }

  /**
   * Dials host:port (TLS when asked) and, with a token, authenticates before
   * resolving. A refusal at a bound (LIMIT_EXCEEDED) is dialled again with
   * back-off while `connectTimeoutMs` lasts. Fails with {@link
   * TransportError} (`CONNECT_FAILED`, `TLS_FAILED`, `LIMIT_EXCEEDED`),
   * {@link AuthError}, {@link WrongPortError}, or a {@link RemoteError} the
   * coordinator sent instead of `AUTH_OK` (e.g. `TLS_REQUIRED`).
   */
  static async open(
    host: string,
    port: number,
    connectTimeoutMs: number,
    security: ConnectionSecurity = {},
  ): Promise<ClientConnection> {
    const backoff = new RefusalBackoff(connectTimeoutMs);
    for (;;) {
      try {
        return await ClientConnection.#openOnce(host, port, backoff.leftMs, security);
      } catch (err) {
        if (!isLimitRefusal(err)) throw err;
        if (!(await backoff.pause())) throw backoff.giveUp(err as TransportError);
      }
    }
  }

  static async #openOnce(
    host: string,
    port: number,
    connectTimeoutMs: number,
    security: ConnectionSecurity,
  ): Promise<ClientConnection> {
    let socket: Socket;
    try {
      const timeoutMs = Math.max(1, Math.ceil(connectTimeoutMs));
      socket = await dial(host, port, timeoutMs, undefined, security.tls ?? null);
    } catch (err) {
      const refused = err instanceof DialError && err.refused;
      const message = err instanceof DialError ? err.message : `cannot connect: ${String(err)}`;
      throw new TransportError(
        refused ? LocalErrorCode.TlsFailed : LocalErrorCode.ConnectFailed,
        message,
        { cause: err },
      );
    }
    const conn = new ClientConnection(socket, port);
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
      if (!(err instanceof TransportError) || isLimitRefusal(err)) throw err;
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

  /**
   * Sends one request; resolves with its reply, whatever its type. A request
   * that cannot be sent (too large: {@link RequestTooLargeError}) rejects
   * and leaves no trace: the connection and its other requests go on.
   */
  request(msg: ClientRequest): Promise<ClientReply> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    if (this.#pending.length >= MAX_PENDING_REQUESTS) {
      return Promise.reject(
        new RangeError(`more than ${MAX_PENDING_REQUESTS} requests in flight on one connection`),
      );
    }
    let frame: Buffer;
    try {
      frame = requestFrame(msg);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    // Queued for the socket first: only a request that left is waited for
    // (its reply cannot arrive before this returns).
    if (!this.#conn.sendFrame(frame)) {
      const lost = new TransportError(LocalErrorCode.ConnectionLost, 'connection is closed');
      this.#fail(lost);
      return Promise.reject(lost);
    }
    return new Promise<ClientReply>((resolve, reject) => {
      this.#pending.push({ resolve, reject });
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
    const refusal = this.#replies++ === 0 && msg.type === 'ERROR' ? this.#refusalOf(msg) : null;
    if (refusal !== null) {
      this.#fail(refusal);
      void this.#conn.destroy(refusal.message);
      return;
    }
    if (msg.type === 'JOB_EVENT' || msg.type === 'EVENTS_MISSED') {
      if (this.#sink !== null) this.#sink.push(msg);
      else if (this.#held.length < MAX_HELD_PUSHES) this.#held.push(msg);
      else void this.destroy('too many job events before anyone read them');
      return;
    }
    const head = this.#pending.shift();
    if (head === undefined) {
      void this.destroy(`coordinator sent an unsolicited ${msg.type}`);
      return;
    }
    head.resolve(msg);
  }

  /** A first reply that refuses the connection itself (see the module comment); else null. */
  #refusalOf(msg: ErrorMessage): Error | null {
    if (msg.code === ErrorCode.LimitExceeded) {
      return new TransportError(
        ErrorCode.LimitExceeded,
        `coordinator refused the connection: ${msg.message}`,
      );
    }
    if (isWorkerPortAnswer(msg)) return new WrongPortError(this.#port);
    return null;
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

  /**
   * Hands this connection's pushes (those that came already, then each as it
   * comes) and its end to `sink`.
   */
  attach(sink: PushSink): void {
    this.#sink = sink;
    const held = this.#held;
    this.#held = [];
    for (const msg of held) sink.push(msg);
    if (this.#failure !== null) sink.closed(this.#failure);
  }

  /** Records the first failure and rejects everything pending with it. */
  #fail(err: Error): void {
    const first = this.#failure === null;
    this.#failure ??= err;
    if (first) this.#sink?.closed(this.#failure);
    const pending = this.#pending.splice(0);
    for (const entry of pending) entry.reject(this.#failure);
  }
}
