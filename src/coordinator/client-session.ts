/**
 * One client connection as the shell sees it: requests are numbered as they
 * arrive and replies leave strictly in that order, whenever the core produces
 * them (a WAIT_JOB may be answered long after later requests). A client may
 * pipeline; beyond {@link MAX_IN_FLIGHT} unanswered requests the socket is
 * paused, so a client cannot queue unbounded work in the coordinator.
 */
import type { FramedConnection } from '../net/framed-connection.js';
import type { ClientReply } from '../protocol/messages.js';

/** Unanswered requests per connection before reading pauses. */
export const MAX_IN_FLIGHT = 1_024;

export class ClientSession {
  readonly conn: FramedConnection;
  #nextRequestId = 0;
  #nextReplyId = 0;
  readonly #ready = new Map<number, ClientReply>();
  #paused = false;

  constructor(conn: FramedConnection) {
    this.conn = conn;
  }

  /** Numbers the next request (and pauses reading when too many are open). */
  nextRequest(): number {
    const requestId = this.#nextRequestId++;
    if (this.inFlight >= MAX_IN_FLIGHT && !this.#paused) {
      this.#paused = true;
      this.conn.pause();
    }
    return requestId;
  }

  /** Requests received and not yet answered. */
  get inFlight(): number {
    return this.#nextRequestId - this.#nextReplyId;
  }

  /** Records a reply and sends every reply that is now next in order. */
  deliver(requestId: number, reply: ClientReply): void {
    if (requestId < this.#nextReplyId || this.#ready.has(requestId)) {
      throw new Error(`second reply to request ${requestId} on connection ${this.conn.id}`);
    }
    this.#ready.set(requestId, reply);
    this.#sendReady();
  }

  /** Answers every request not answered yet with `reply` (fail-stop), in order. */
  answerAll(reply: ClientReply): void {
    for (let id = this.#nextReplyId; id < this.#nextRequestId; id++) {
      if (!this.#ready.has(id)) this.#ready.set(id, reply);
    }
    this.#sendReady();
  }

  #sendReady(): void {
    for (
      let next = this.#ready.get(this.#nextReplyId);
      next !== undefined;
      next = this.#ready.get(this.#nextReplyId)
    ) {
      this.#ready.delete(this.#nextReplyId);
      this.#nextReplyId++;
      this.conn.send(next);
    }
    if (this.#paused && this.inFlight < MAX_IN_FLIGHT / 2) {
      this.#paused = false;
      this.conn.resume();
    }
  }
}
