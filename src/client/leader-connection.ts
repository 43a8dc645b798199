/**
 * The client's way to its coordinator when several share one database and
 * one of them leads (`host` = `h1[:p1],h2[:p2],…`): a {@link LeaderFollower}
 * picks the address to dial, and each request is resent where that is safe.
 *
 * - `ERROR` NOT_LEADER: the request was not processed. The connection is
 *   dropped and the request goes to the leader the standby named (or the
 *   next address) - any request, submissions without a key included.
 * - The connection broke with the request in flight (the leader died or
 *   stepped down): its outcome is unknown. With several addresses, requests
 *   that are safe to repeat are resent to whichever leads: reads, waits,
 *   cancels, purges and submissions that carry an idempotency key (the new
 *   leader answers a known key with the original job). A submission without
 *   a key fails with `CONNECTION_LOST` as always: resending could create a
 *   second job.
 * - A dial that fails moves on to the next address; after a whole round the
 *   client pauses (growing from 50 ms to 1 s) and tries again, until
 *   `followTimeoutMs` has passed since the request was made.
 *
 * - A refusal at a bound (`LIMIT_EXCEEDED`, nothing processed) is tried
 *   again after a back-off, for up to the connect timeout.
 *
 * With a single address nothing changes from a plain connection, except
 * that a NOT_LEADER naming a leader is followed there.
 */
import { parseAddressList, type HostPort } from '../net/address.js';
import { GrowingPause, LeaderFollower, type TryOutcome } from '../net/leader-follower.js';
import { ErrorCode, LocalErrorCode } from '../protocol/error-codes.js';
import type { ClientReply, ClientRequest } from '../protocol/messages.js';
import {
  ClientConnection,
  RefusalBackoff,
  isLimitRefusal,
  type ConnectionSecurity,
} from './connection.js';
import { ClientClosedError, NotLeaderError, TransportError } from './errors.js';

/** How long one request may spend finding a leader, by default, in ms. */
export const DEFAULT_FOLLOW_TIMEOUT_MS = 30_000;
/** Pauses between rounds while every coordinator stands by (a takeover is under way). */
const PAUSE = { firstMs: 50, longestMs: 1_000 } as const;

export interface LeaderConnectionOptions {
  /** `host`, `host:port`, or `h1[:p1],h2[:p2],…`. */
  host: string;
  /** Port of the addresses that name none. */
  port: number;
  connectTimeoutMs: number;
  /** Give up finding a leader for one request after this long (default 30 s). */
  followTimeoutMs?: number;
  /** TLS and token of every connection (default: plain, no AUTH). */
  security?: ConnectionSecurity;
}

/** True when a request may be sent again after its connection broke in flight. */
export function isSafeToRepeat(msg: ClientRequest): boolean {
  // A batch or a flow may be sent again only when every job of it has a key
  // (a flow's keyed jobs sent again are the jobs the first sending made).
  if (msg.type === 'SUBMIT_JOBS' || msg.type === 'SUBMIT_FLOW') {
    const jobs: readonly { idempotencyKey?: unknown }[] = msg.jobs;
    return jobs.every((job) => typeof job.idempotencyKey === 'string' && job.idempotencyKey !== '');
  }
  if (msg.type !== 'SUBMIT_JOB') return msg.type !== 'AUTH';
  return (
    msg.idempotencyKey !== null && msg.idempotencyKey !== undefined && msg.idempotencyKey !== ''
  );
}

function isNotLeader(reply: ClientReply): reply is Extract<ClientReply, { type: 'ERROR' }> {
  return reply.type === 'ERROR' && reply.code === ErrorCode.NotLeader;
}

export class LeaderConnection {
  readonly #follower: LeaderFollower;
  readonly #connectTimeoutMs: number;
  readonly #followTimeoutMs: number;
  readonly #security: ConnectionSecurity;
  #current: ClientConnection | null = null;
  #dialing: Promise<ClientConnection> | null = null;
  #closed = false;

  private constructor(options: LeaderConnectionOptions, addresses: HostPort[]) {
    this.#follower = new LeaderFollower(addresses, options.port);
    this.#connectTimeoutMs = options.connectTimeoutMs;
    this.#followTimeoutMs = options.followTimeoutMs ?? DEFAULT_FOLLOW_TIMEOUT_MS;
    this.#security = options.security ?? {};
  }

  /** Parses the addresses (throws `BAD_ADDRESS`) and dials the first that answers. */
  static async open(options: LeaderConnectionOptions): Promise<LeaderConnection> {
    const self = new LeaderConnection(options, parseAddressList(options.host, options.port));
    await self.#connection(performance.now() + self.#followTimeoutMs);
    return self;
  }

  /** Every configured address, for messages. */
  get addresses(): string {
    return this.#follower.describe();
  }

  /** The address dialled last (the leader, once one answered). */
  get current(): HostPort {
    return this.#follower.current;
  }

  /** {@link current} as `host:port`. */
  get address(): string {
    return this.#follower.address;
  }

  /**
   * Sends `msg` to the leader; resolves with its reply (any type but a
   * NOT_LEADER that could still be followed). The fast path is synchronous:
   * on an open connection the request leaves before this returns.
   */
  async request(msg: ClientRequest): Promise<ClientReply> {
    return (await this.requestOn(msg)).reply;
  }

  /** {@link request}, also naming the connection that answered. */
  async requestOn(msg: ClientRequest): Promise<{ reply: ClientReply; conn: ClientConnection }> {
    const deadlineMs = performance.now() + this.#followTimeoutMs;
    const pause = new GrowingPause(PAUSE);
    let refusals: RefusalBackoff | null = null;
    for (;;) {
      const conn =
        this.#current?.isOpen === true ? this.#current : await this.#connection(deadlineMs);
      let reply: ClientReply;
      try {
        reply = await conn.request(msg);
      } catch (err) {
        // Refused at a bound before anything was read (a connection without
        // AUTH learns it from its first reply): nothing was processed, so
        // any request may go again, for up to the connect timeout.
        if (isLimitRefusal(err) && !this.#closed) {
          refusals ??= new RefusalBackoff(this.#connectTimeoutMs);
          if (await refusals.pause()) continue;
          throw refusals.giveUp(err as TransportError);
        }
        if (!this.#mayResend(err, msg, deadlineMs)) throw err;
        continue;
      }
      if (!isNotLeader(reply) || this.#closed) {
        this.#follower.served();
        return { reply, conn };
      }
      this.#follower.notLeader(reply.leader ?? null);
      this.#drop(conn);
      const leftMs = deadlineMs - performance.now();
      if (leftMs <= 0) return { reply, conn };
      // Every coordinator stands by (a takeover is under way): do not spin.
      if (this.#follower.shouldPause()) await pause.wait(leftMs);
    }
  }

  /** Closes the current connection; pending requests fail with {@link ClientClosedError}. */
  async close(): Promise<void> {
    this.#closed = true;
    const current = this.#current;
    this.#current = null;
    await current?.close();
  }

  #mayResend(err: unknown, msg: ClientRequest, deadlineMs: number): boolean {
    return (
      this.#follower.several &&
      !this.#closed &&
      err instanceof TransportError &&
      err.code === LocalErrorCode.ConnectionLost &&
      isSafeToRepeat(msg) &&
      performance.now() < deadlineMs
    );
  }

  #drop(conn: ClientConnection): void {
    if (this.#current === conn) this.#current = null;
    void conn.close();
  }

  /** The open connection, or one dial shared by every request that needs it. */
  #connection(deadlineMs: number): Promise<ClientConnection> {
    if (this.#closed) return Promise.reject(new ClientClosedError());
    if (this.#current?.isOpen === true) return Promise.resolve(this.#current);
    this.#dialing ??= this.#dial(deadlineMs).finally(() => {
      this.#dialing = null;
    });
    return this.#dialing;
  }

  async #dial(deadlineMs: number): Promise<ClientConnection> {
    const follower = this.#follower;
    const outcome = await follower.follow((address) => this.#open(address), {
      pause: PAUSE,
      deadlineMs,
      retry: () => follower.several,
    });
    if (outcome.kind === 'served') return outcome.value;
    const err = outcome.error as Error;
    if (!follower.several) throw err;
    throw new TransportError(
      LocalErrorCode.ConnectFailed,
      `no coordinator of ${this.addresses} answered (last: ${follower.address}: ${err.message})`,
      { cause: err },
    );
  }

  /** One dial; a standby answers AUTH with NOT_LEADER, followed like any request's. */
  async #open(address: HostPort): Promise<TryOutcome<ClientConnection>> {
    let conn: ClientConnection;
    try {
      conn = await ClientConnection.open(
        address.host,
        address.port,
        this.#connectTimeoutMs,
        this.#security,
      );
    } catch (err) {
      if (err instanceof NotLeaderError)
        return { kind: 'notLeader', leader: err.leader, error: err };
      if (err instanceof TransportError) return { kind: 'failed', error: err };
      throw err;
    }
    if (this.#closed) {
      await conn.close();
      throw new ClientClosedError();
    }
    this.#current = conn;
    return { kind: 'served', value: conn };
  }
}
