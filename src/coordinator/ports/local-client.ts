/**
 * Client requests made inside the coordinator process (the HTTP API). They
 * reach the core exactly as a TCP client's do, as `clientRequest` inputs, on a
 * connection id no socket ever has ({@link LOCAL_CONN_ID}); each promise
 * resolves with the reply when the shell releases it, that is after the
 * commit of the batch it was produced with. No state is read around the core.
 *
 * Unlike a socket, the requests here are independent of each other: a reply
 * is handed over as soon as it is released, not held behind earlier ones (an
 * HTTP request never waits for another). At most `maxInFlight` requests are
 * open at once; beyond that {@link LocalClient.request} refuses at once.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type { ClientReply, ClientRequest } from '../../protocol/messages.js';

/** Socket connection ids count up from 1; this one is never used by a socket. */
export const LOCAL_CONN_ID = 0;
/** Open local requests allowed at once (the HTTP server's own bound is lower). */
export const DEFAULT_MAX_LOCAL_IN_FLIGHT = 1_024;

export class LocalClient {
  readonly connId = LOCAL_CONN_ID;
  readonly #dispatch: (requestId: number, msg: ClientRequest) => void;
  readonly #maxInFlight: number;
  readonly #open = new Map<number, (reply: ClientReply) => void>();
  #nextRequestId = 0;

  /** `dispatch` feeds one request to the core (the shell's `#dispatch`). */
  constructor(
    dispatch: (requestId: number, msg: ClientRequest) => void,
    maxInFlight = DEFAULT_MAX_LOCAL_IN_FLIGHT,
  ) {
    this.#dispatch = dispatch;
    this.#maxInFlight = maxInFlight;
  }

  /** Requests not answered yet. */
  get inFlight(): number {
    return this.#open.size;
  }

  /**
   * Sends one request through the core; resolves with its reply (an `ERROR`
   * reply included). Never rejects.
   */
  request(msg: ClientRequest): Promise<ClientReply> {
    if (this.#open.size >= this.#maxInFlight) {
      return Promise.resolve({
        type: 'ERROR',
        code: ErrorCode.LimitExceeded,
        message: `Limit exceeded: ${this.#maxInFlight} local requests are open`,
      });
    }
    const requestId = this.#nextRequestId++;
    return new Promise<ClientReply>((resolve) => {
      this.#open.set(requestId, resolve);
      this.#dispatch(requestId, msg);
    });
  }

  /** A released reply for one of our requests. */
  deliver(requestId: number, reply: ClientReply): void {
    const resolve = this.#open.get(requestId);
    if (resolve === undefined) {
      throw new Error(`reply to local request ${requestId}, which is not open`);
    }
    this.#open.delete(requestId);
    resolve(reply);
  }

  /** Answers every open request with `reply` (fail-stop, shutdown). */
  answerAll(reply: ClientReply): void {
    const open = [...this.#open.values()];
    this.#open.clear();
    for (const resolve of open) resolve(reply);
  }
}
