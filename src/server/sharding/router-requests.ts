/**
 * Client requests from inside a sharded coordinator's process (its HTTP
 * API), served exactly as its client port serves a TCP client's: through a
 * {@link ShardRouter}, so a request about one shard reaches that shard's
 * leader, here or on another coordinator, and a request about every queue
 * reaches every shard and is answered once, merged.
 *
 * The router is one of its own (its upstream connections to the other
 * coordinators too), so the HTTP side holds up no client of the client
 * port. Each request is a connection of its own to the router: its reply
 * resolves the request's promise, and the router's connections for it (a
 * WAIT_JOB's) end with it. Where the router would drop a TCP client's
 * connection (a shard's leader was lost while it had the request, so the
 * outcome is unknown), the request is answered NOT_LEADER instead, as a
 * coordinator answers its own in-process requests when its leadership ends.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type { ClientReply, ClientRequest } from '../../protocol/messages.js';
import { ShardRouter, type ShardDirectory, type ShardRouterOptions } from './shard-router.js';

/** Requests open at once; more are refused at once (the HTTP port's own bound is lower). */
export const MAX_ROUTED_IN_FLIGHT = 1_024;

export class RouterRequests {
  readonly #router: ShardRouter;
  readonly #open = new Map<number, (reply: ClientReply) => void>();
  #nextConnId = 1;
  #closing: Promise<void> | null = null;

  constructor(dir: ShardDirectory, options: ShardRouterOptions) {
    this.#router = new ShardRouter(
      dir,
      {
        reply: (connId, _requestId, reply) => this.#settle(connId, reply),
        // Nothing subscribes from here: the HTTP side follows the cores' own events.
        push: () => undefined,
        drop: (connId, reason) =>
          this.#settle(connId, {
            type: 'ERROR',
            code: ErrorCode.NotLeader,
            message: `NOT_LEADER: ${reason}; the outcome of the request is unknown`,
          }),
      },
      options,
    );
  }

  /** Requests not answered yet. */
  get inFlight(): number {
    return this.#open.size;
  }

  /** One request through the router; resolves with its reply (an ERROR included). Never rejects. */
  request(msg: ClientRequest): Promise<ClientReply> {
    if (this.#closing !== null) return Promise.resolve(stopped());
    if (this.#open.size >= MAX_ROUTED_IN_FLIGHT) {
      return Promise.resolve({
        type: 'ERROR',
        code: ErrorCode.LimitExceeded,
        message: `Limit exceeded: ${MAX_ROUTED_IN_FLIGHT} in-process requests are open`,
      });
    }
    const connId = this.#nextConnId++;
    return new Promise<ClientReply>((resolve) => {
      this.#open.set(connId, resolve);
      this.#router.request(connId, 0, msg);
    });
  }

  /** Answers every open request and closes the router's connections. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const connId of [...this.#open.keys()]) this.#settle(connId, stopped());
      await this.#router.close();
    })();
    return this.#closing;
  }

  #settle(connId: number, reply: ClientReply): void {
    const resolve = this.#open.get(connId);
    if (resolve === undefined) return;
    this.#open.delete(connId);
    this.#router.closed(connId);
    resolve(reply);
  }
}

function stopped(): ClientReply {
  return { type: 'ERROR', code: ErrorCode.InternalError, message: 'Coordinator is not running' };
}
