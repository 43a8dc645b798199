/**
 * A sharded coordinator's own client port: every request is served all the
 * same, whichever coordinator leads the shards it is about.
 *
 * - A request about one shard (requestShard) goes to that shard: straight
 *   into its core when this process leads it (`Coordinator.request`, the
 *   reply released after its commit), else over a client connection to the
 *   shard's own client port on the coordinator that leads it.
 * - A request about every queue goes to every shard and the replies are
 *   merged (merge.ts); a batch whose jobs are in several shards is split,
 *   each part submitted to its shard, and answered once every part is; a
 *   flow whose jobs are in several shards goes whole to its first job's
 *   shard, whose core sends the others their jobs (core/cross-shard.ts).
 * - A subscription gets a connection to each shard it needs; their events
 *   are relayed as they come.
 *
 * Replies leave in request order (the client session orders them). What is
 * "accepted" is durable in its shard before its reply leaves, as with one
 * coordinator. When a shard's leader is lost while a request is with it,
 * its outcome is unknown: the client's connection is dropped, as it would
 * be by the leader itself. A shard that no coordinator leads for the
 * moment (a takeover under way) is waited for, up to `leaderWaitMs`; then
 * the request is answered NOT_LEADER, which clients retry.
 */
import { randomUUID } from 'node:crypto';
import { ClientConnection, type ConnectionSecurity } from '../../client/connection.js';
import { parseHostPort } from '../../net/address.js';
import type { Logger } from '../../observability/logger.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { describeError } from '../../protocol/errors.js';
import type {
  ClientReply,
  ClientRequest,
  ErrorMessage,
  JobEvent,
  JsonObject,
  ListJobs,
  PublishEvent,
  ShardList,
  SubmitJobs,
  SubscribeJobs,
} from '../../protocol/messages.js';
import { shardOfQueue } from '../../protocol/shards.js';
import { flowHome, requestShard } from '../../protocol/request-shard.js';
import {
  decodeListCursor,
  encodeListCursor,
  mergeAll,
  mergeSubmitted,
  type ListCursor,
} from './merge.js';

/** Where a shard is served, as the sharded coordinator knows it now. */
export interface ShardDirectory {
  readonly shards: number;
  /** Serves a request in this process when it leads `shard` and its term serves; else null. */
  local(shard: number): ((msg: ClientRequest) => Promise<ClientReply>) | null;
  /** The client port of `shard` on the coordinator that leads it; null = nobody leads it now. */
  clientAddress(shard: number): string | null;
  /** Resolves once the directory may have changed (a round read the leases again). */
  changed(): Promise<void>;
  shardList(): ShardList;
}

/** How the router answers: through the client port's sessions. */
export interface RouterOutlets {
  reply(connId: number, requestId: number, msg: ClientReply): void;
  push(connId: number, msg: JobEvent): void;
  /** Drops a client connection (an outcome became unknown). */
  drop(connId: number, reason: string): void;
}

export interface ShardRouterOptions {
  security: ConnectionSecurity;
  connectTimeoutMs: number;
  /** How long a request waits for a shard without a leader before NOT_LEADER. */
  leaderWaitMs: number;
  logger: Logger;
}

/** Connections kept per shard client port for later waits once their wait was answered. */
const IDLE_WAITS_PER_PORT = 64;

/** A request's outcome is unknown (its shard's leader was lost with it). */
class OutcomeUnknown extends Error {}

export class ShardRouter {
  readonly #dir: ShardDirectory;
  readonly #out: RouterOutlets;
  readonly #options: ShardRouterOptions;
  /** One pipelined connection per shard client port of another coordinator. */
  readonly #upstreams = new Map<string, Promise<ClientConnection>>();
  /** The upstream connections of each client connection's subscriptions and waits. */
  readonly #owned = new Map<number, Set<ClientConnection>>();
  /** Connections a wait was answered on, kept for the next wait to the same port. */
  readonly #idleWaits = new Map<string, ClientConnection[]>();
  /** Requests sent to one shard: into a core of this process, or forwarded to another coordinator. */
  readonly #sent = { local: 0, forwarded: 0 };
  #closed = false;

  constructor(dir: ShardDirectory, out: RouterOutlets, options: ShardRouterOptions) {
    this.#dir = dir;
    this.#out = out;
    this.#options = options;
  }

  /** How many requests went to a shard so far: led here (`local`) or elsewhere (`forwarded`). */
  get sent(): { local: number; forwarded: number } {
    return { ...this.#sent };
  }

  request(connId: number, requestId: number, msg: ClientRequest): void {
    this.#answer(connId, msg).then(
      (reply) => this.#out.reply(connId, requestId, reply),
      (err: unknown) => {
        const reason =
          err instanceof OutcomeUnknown ? err.message : `routing failed: ${describeError(err)}`;
        if (!(err instanceof OutcomeUnknown)) {
          this.#options.logger.error({ err: describeError(err), type: msg.type }, reason);
        }
        this.#out.drop(connId, reason);
      },
    );
  }

  closed(connId: number): void {
    const owned = this.#owned.get(connId);
    this.#owned.delete(connId);
    for (const conn of owned ?? []) void conn.close();
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const connId of [...this.#owned.keys()]) this.closed(connId);
    for (const idle of this.#idleWaits.values()) for (const conn of idle) void conn.close();
    this.#idleWaits.clear();
    const upstreams = [...this.#upstreams.values()];
    this.#upstreams.clear();
    await Promise.all(
      upstreams.map((p) =>
        p.then(
          (c) => c.close(),
          () => undefined,
        ),
      ),
    );
  }

  async #answer(connId: number, msg: ClientRequest): Promise<ClientReply> {
    const shards = this.#dir.shards;
    if (msg.type === 'LIST_SHARDS') return this.#dir.shardList();
    if (msg.type === 'AUTH') return { type: 'AUTH_OK' };
    if (msg.type === 'SUBSCRIBE_JOBS') return this.#subscribe(connId, msg);
    if (msg.type === 'LIST_JOBS') return this.#listJobs(msg);
    const target = requestShard(msg, shards);
    switch (target.kind) {
      case 'one':
        if (msg.type === 'SET_SCHEDULE' || msg.type === 'SET_TRIGGER') {
          return this.#setByName(connId, target.shard, msg);
        }
        return this.#toShard(connId, target.shard, msg);
      case 'nowhere':
        // No shard has such a job: shard 0 says so in its own words.
        return this.#toShard(connId, 0, msg);
      case 'mixed':
        if (msg.type === 'SUBMIT_JOBS') return this.#submitSplit(connId, msg);
        // A flow goes whole to its first job's shard, which sends the other
        // shards their jobs through the outbox (core/cross-shard.ts).
        if (msg.type === 'SUBMIT_FLOW') return this.#toShard(connId, flowHome(msg, shards), msg);
        return {
          type: 'ERROR',
          code: ErrorCode.InvalidRequest,
          message: `Invalid request: its jobs are in the queues of shards ${target.shards.join(', ')}`,
        };
      case 'all': {
        const sent = msg.type === 'PUBLISH_EVENT' ? withEventId(msg) : msg;
        const replies = await Promise.all(
          Array.from({ length: shards }, (_, shard) => this.#toShard(connId, shard, sent)),
        );
        return mergeAll(sent, replies);
      }
    }
  }

  /**
   * A schedule or trigger is set in its queue's shard, and a name is one
   * schedule (trigger) across the shards: one of that name in another
   * shard (set before with a queue of that shard) is deleted first, so
   * that the name never ticks (fires) twice. Should a deletion fail, its
   * error is the answer and nothing is set; the user's retry finishes it.
   */
  async #setByName(
    connId: number,
    shard: number,
    msg: Extract<ClientRequest, { type: 'SET_SCHEDULE' | 'SET_TRIGGER' }>,
  ): Promise<ClientReply> {
    const name = msg.type === 'SET_SCHEDULE' ? msg.schedule.name : msg.trigger.name;
    const others = Array.from({ length: this.#dir.shards }, (_, s) => s).filter((s) => s !== shard);
    const deletion: ClientRequest =
      msg.type === 'SET_SCHEDULE'
        ? { type: 'DELETE_SCHEDULE', name: String(name) }
        : { type: 'DELETE_TRIGGER', name: String(name) };
    const replies = await Promise.all(others.map((s) => this.#toShard(connId, s, deletion)));
    const failed = replies.find((r) => r.type === 'ERROR' && r.code !== ErrorCode.UnknownSchedule);
    return failed ?? this.#toShard(connId, shard, msg);
  }

  /** A batch across shards: each shard's part in one SUBMIT_JOBS, the replies put back in order. */
  async #submitSplit(connId: number, msg: SubmitJobs): Promise<ClientReply> {
    const shards = this.#dir.shards;
    const parts = new Map<number, { jobs: JsonObject[]; at: number[] }>();
    msg.jobs.forEach((job, at) => {
      const queue = typeof job.queue === 'string' ? job.queue : null;
      const shard = shardOfQueue(queue, shards);
      const part = parts.get(shard) ?? { jobs: [], at: [] };
      part.jobs.push(job);
      part.at.push(at);
      parts.set(shard, part);
    });
    const answered = await Promise.all(
      [...parts].map(async ([shard, part]) => ({
        part,
        reply: await this.#toShard(connId, shard, { type: 'SUBMIT_JOBS', jobs: part.jobs }),
      })),
    );
    return mergeSubmitted(msg.jobs.length, answered);
  }

  /**
   * LIST_JOBS without a queue: shard after shard, each to its end, the
   * cursor saying which shard and where in it (a queue's listing is its
   * shard's own).
   */
  async #listJobs(msg: ListJobs): Promise<ClientReply> {
    const shards = this.#dir.shards;
    if (msg.queue !== undefined && msg.queue !== null) {
      return this.#toShard(-1, shardOfQueue(msg.queue, shards), msg);
    }
    let cursor: ListCursor | null;
    try {
      cursor = msg.cursor === null ? { shard: 0, inner: null } : decodeListCursor(msg.cursor);
    } catch {
      cursor = null;
    }
    if (cursor === null || cursor.shard >= shards) {
      return {
        type: 'ERROR',
        code: ErrorCode.InvalidRequest,
        message: 'Invalid request: bad cursor',
      };
    }
    for (let shard = cursor.shard; shard < shards; shard++) {
      const inner = shard === cursor.shard ? cursor.inner : null;
      const reply = await this.#toShard(-1, shard, { ...msg, cursor: inner });
      if (reply.type !== 'JOB_LIST') return reply;
      if (reply.nextCursor !== null) {
        return { ...reply, nextCursor: encodeListCursor({ shard, inner: reply.nextCursor }) };
      }
      if (reply.jobs.length > 0 || shard === shards - 1) {
        const next =
          shard + 1 < shards ? encodeListCursor({ shard: shard + 1, inner: null }) : null;
        return { ...reply, nextCursor: next };
      }
    }
    return { type: 'JOB_LIST', jobs: [], nextCursor: null };
  }

  /** A subscription: one upstream per shard it needs, their events relayed to the client. */
  async #subscribe(connId: number, msg: SubscribeJobs): Promise<ClientReply> {
    const target = requestShard(msg, this.#dir.shards);
    const shards =
      target.kind === 'one'
        ? [target.shard]
        : target.kind === 'nowhere'
          ? [0]
          : Array.from({ length: this.#dir.shards }, (_, s) => s);
    const replies = await Promise.all(
      shards.map(async (shard) => {
        const address = await this.#leaderAddress(shard);
        if (address === null) return noLeader(shard);
        const conn = await this.#dedicated(connId, address);
        const reply = await conn.request(msg);
        if (reply.type === 'SUBSCRIBED') {
          conn.attach({
            push: (event) => {
              if (event.type === 'JOB_EVENT') this.#out.push(connId, event);
            },
            closed: () => {
              if (this.#owned.get(connId)?.has(conn) === true) {
                this.#out.drop(connId, `the subscription's shard ${shard} went away`);
              }
            },
          });
        }
        return reply;
      }),
    );
    return replies.find((r) => r.type !== 'SUBSCRIBED') ?? { type: 'SUBSCRIBED' };
  }

  /**
   * One request to one shard. A shard led here is asked directly; another's
   * leader over its client port (a WAIT_JOB on a connection of its own, so
   * that it holds up no other reply). NOT_LEADER from a shard that was not
   * reached (nobody leads it, or its leader moved) is retried once the
   * directory changed, until `leaderWaitMs`.
   */
  async #toShard(connId: number, shard: number, msg: ClientRequest): Promise<ClientReply> {
    const deadline = Date.now() + this.#options.leaderWaitMs;
    for (;;) {
      const reply = await this.#toShardOnce(connId, shard, msg);
      if (!isNotLeader(reply) || Date.now() >= deadline || this.#closed) return reply;
      await Promise.race([this.#dir.changed(), delay(deadline - Date.now())]);
    }
  }

  async #toShardOnce(connId: number, shard: number, msg: ClientRequest): Promise<ClientReply> {
    const local = this.#dir.local(shard);
    if (local !== null) {
      this.#sent.local++;
      const reply = await local(msg);
      // A request the shard took, and then its leadership ended: outcome unknown.
      if (isNotLeader(reply))
        throw new OutcomeUnknown(`shard ${shard} lost its leader mid-request`);
      return reply;
    }
    const address = this.#dir.clientAddress(shard);
    if (address === null) return noLeader(shard);
    let conn: ClientConnection;
    try {
      conn =
        msg.type === 'WAIT_JOB'
          ? await this.#waitConnection(connId, address)
          : await this.#upstream(address);
    } catch (err) {
      // Not reached: nothing was sent, so it is safe to try again elsewhere.
      this.#options.logger.debug({ shard, address, err: describeError(err) }, 'shard unreachable');
      return noLeader(shard);
    }
    let answered = false;
    this.#sent.forwarded++;
    try {
      const reply = await conn.request(msg);
      answered = true;
      return reply;
    } catch (err) {
      throw new OutcomeUnknown(`shard ${shard} at ${address}: ${describeError(err)}`);
    } finally {
      if (msg.type === 'WAIT_JOB') this.#waitDone(connId, address, conn, answered);
    }
  }

  /**
   * A connection for one WAIT_JOB: one a wait to `address` was answered on
   * before, else a new one. A wait holds up every later reply on its
   * connection, so each outstanding wait has one of its own; reusing them
   * spares a connection set-up per wait.
   */
  #waitConnection(connId: number, address: string): Promise<ClientConnection> {
    const idle = this.#idleWaits.get(address);
    while (idle !== undefined && idle.length > 0) {
      const conn = idle.pop() as ClientConnection;
      if (conn.isOpen) return Promise.resolve(this.#own(connId, conn));
    }
    return this.#dedicated(connId, address);
  }

  /** An answered wait's connection goes back for the next (up to IDLE_WAITS_PER_PORT); others close. */
  #waitDone(connId: number, address: string, conn: ClientConnection, answered: boolean): void {
    const owned = this.#owned.get(connId);
    // Not owned any more: its client left while it waited, and it was closed.
    if (owned?.delete(conn) !== true) return;
    const idle = this.#idleWaits.get(address) ?? [];
    if (answered && conn.isOpen && !this.#closed && idle.length < IDLE_WAITS_PER_PORT) {
      idle.push(conn);
      this.#idleWaits.set(address, idle);
    } else {
      void conn.close();
    }
  }

  /** The shared pipelined connection to a shard's client port (opened again once broken). */
  #upstream(address: string): Promise<ClientConnection> {
    const known = this.#upstreams.get(address);
    if (known !== undefined) {
      return known.then((conn) => {
        if (conn.isOpen) return conn;
        if (this.#upstreams.get(address) === known) this.#upstreams.delete(address);
        return this.#upstream(address);
      });
    }
    const opened = this.#open(address);
    this.#upstreams.set(address, opened);
    opened.catch(() => {
      if (this.#upstreams.get(address) === opened) this.#upstreams.delete(address);
    });
    return opened;
  }

  /** The client port of `shard`'s leader, waited for up to `leaderWaitMs` while none is known. */
  async #leaderAddress(shard: number): Promise<string | null> {
    const deadline = Date.now() + this.#options.leaderWaitMs;
    for (;;) {
      const address = this.#dir.clientAddress(shard);
      if (address !== null || Date.now() >= deadline || this.#closed) return address;
      await Promise.race([this.#dir.changed(), delay(deadline - Date.now())]);
    }
  }

  /** A connection of a client's own (a subscription, a wait), closed with it. */
  async #dedicated(connId: number, address: string): Promise<ClientConnection> {
    return this.#own(connId, await this.#open(address));
  }

  #own(connId: number, conn: ClientConnection): ClientConnection {
    const owned = this.#owned.get(connId) ?? new Set<ClientConnection>();
    owned.add(conn);
    this.#owned.set(connId, owned);
    return conn;
  }

  #open(address: string): Promise<ClientConnection> {
    const { host, port } = parseHostPort(address, 0);
    return ClientConnection.open(
      host,
      port,
      this.#options.connectTimeoutMs,
      this.#options.security,
    );
  }
}

function isNotLeader(reply: ClientReply): reply is ErrorMessage {
  return reply.type === 'ERROR' && reply.code === ErrorCode.NotLeader;
}

function noLeader(shard: number): ErrorMessage {
  return {
    type: 'ERROR',
    code: ErrorCode.NotLeader,
    message: `NOT_LEADER: no coordinator leads shard ${shard} at the moment (a takeover is under way); try again`,
  };
}

/** An event goes to every shard under one id, so that each shard's duplicate check agrees. */
function withEventId(msg: PublishEvent): PublishEvent {
  return msg.eventId === undefined || msg.eventId === null
    ? { ...msg, eventId: randomUUID() }
    : msg;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)).unref());
}
