/**
 * One client connection as the shell sees it: requests are numbered as they
 * arrive and replies leave strictly in that order, whenever the core produces
 * them (a WAIT_JOB may be answered long after later requests).
 *
 * It also owns the connection's own bounds:
 * - authentication: with client tokens, the first frame must be a valid
 *   `AUTH` (answered `AUTH_OK`); anything else gets `ERROR` UNAUTHENTICATED
 *   and the connection closes, and nothing before that reaches the core;
 * - flow: beyond {@link MAX_IN_FLIGHT} unanswered requests other than the
 *   waits the core holds (or {@link MAX_LISTS_IN_FLIGHT} unanswered
 *   LIST_JOBS), or beyond `maxUnsentReplyBytes` of replies produced but not
 *   yet taken by the peer, reading stops (at once, mid-chunk) until it
 *   drains, so a client that pipelines heavy requests without reading cannot
 *   make the coordinator work for it or hold its replies in memory. When
 *   reading stops behind a held wait (replies leave in request order, so
 *   nothing after it could drain), `onBlockedByWait` asks the core to answer
 *   the connection's waits now: a paused connection would not even see its
 *   peer close, and would keep its waits until they time out;
 * - fairness: at most {@link MAX_REQUESTS_PER_TURN} requests are read from
 *   one connection per turn of the event loop;
 * - idleness: with nothing in flight and no request for `idleTimeoutMs`, the
 *   connection is closed (the client library simply dials again).
 *
 * States: `authenticating` (tokens required, no AUTH yet) -> `open` ->
 * `refused` (AUTH failed; closing). Without tokens it starts `open`.
 */
import type { Admission } from '../../net/admission.js';
import type { FramedConnection } from '../../net/framed-connection.js';
import type { NetEvent } from '../../net/net-events.js';
import { notAuthFirstReason } from '../../net/port-kind.js';
import { encodeMessage } from '../../protocol/codec.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { StateView } from '../../protocol/job-view.js';
import { MAX_SUBSCRIBER_BUFFER_BYTES } from '../../protocol/limits.js';
import type { ClientReply, JobEvent, Message } from '../../protocol/messages.js';

/**
 * Unanswered requests per connection, pending WAIT_JOBs not counted, before
 * reading pauses. Waits are bounded by the core instead (a cap per
 * connection), so that many of them may wait on one connection at once.
 */
export const MAX_IN_FLIGHT = 1_024;
/**
 * Unanswered LIST_JOBS per connection before reading pauses: each may cost a
 * large read and a reply of up to a frame, so a client that pipelines them
 * gets them served a couple at a time, behind everyone else's requests.
 */
export const MAX_LISTS_IN_FLIGHT = 2;

/**
 * Requests read from one connection in one turn of the event loop before it
 * waits for the next turn: a connection that pipelines thousands of requests
 * (waits above all, which are not in flight once held) cannot make one turn
 * long for everybody else.
 */
export const MAX_REQUESTS_PER_TURN = 128;

type PauseReason = 'inFlight' | 'lists' | 'unsent' | 'turn';

export interface ClientSessionOptions {
  /** Checks an AUTH token; null = no tokens, every connection is open at once. */
  checkToken: ((token: string) => boolean) | null;
  /** Its place in the port's admission (established once authenticated). */
  admission: Admission | null;
  /** See the module comment (default: no bound). */
  maxUnsentReplyBytes?: number;
  /** See the module comment; 0 = never (default). */
  idleTimeoutMs?: number;
  /** Where bounds that bite and refused tokens are reported. */
  report?: (event: NetEvent) => void;
  /** Reading paused behind a held wait: the core should answer this connection's waits. */
  onBlockedByWait?: () => void;
  /** Unread bytes beyond which pushed job events are dropped (default MAX_SUBSCRIBER_BUFFER_BYTES). */
  maxPushBytes?: number;
  /** The peer's address, normalized (as admission counts it); null = unknown. */
  address?: string | null;
  /**
   * The subscriber started leaving more than `maxPushBytes` of events unread
   * (true: its events are dropped from now on), or took everything again (false).
   */
  onSubscriberStalled?: (stalled: boolean) => void;
}

/** The frames of the last job event pushed, one per state view it was shown in. */
interface PushedFrames {
  readonly msg: JobEvent;
  readonly views: StateView[];
  readonly frames: Buffer[];
}
let lastPushed: PushedFrames | null = null;
/** Views whose frames are kept per event; a rarer one is encoded for each subscriber. */
const MAX_VIEWS_KEPT = 4;

/**
 * The frame of a job event as `view` shows it. The core hands one event to
 * all its subscribers at once (one `push` effect, one message object), so
 * the frame is encoded once per view for all of them, not once per
 * subscriber.
 */
function pushFrame(view: StateView, msg: JobEvent): Buffer {
  let last = lastPushed;
  if (last === null || last.msg !== msg) last = lastPushed = { msg, views: [], frames: [] };
  const i = last.views.indexOf(view);
  if (i >= 0) return last.frames[i] as Buffer;
  const frame = encodeMessage(view.reply(msg));
  if (last.views.length < MAX_VIEWS_KEPT) {
    last.views.push(view);
    last.frames.push(frame);
  }
  return frame;
}

/**
 * How long pushed job events wait to leave together: each subscriber's
 * events of one window go out in one write, not one write per change (with
 * many subscribers, the writes were most of what the events cost).
 */
export const PUSH_WINDOW_MS = 5;
/** Sessions with pushed events waiting for the window to end; one timer for all. */
const waitingPushes = new Set<ClientSession>();
let pushTimer: NodeJS.Timeout | null = null;

function flushWaitingPushes(): void {
  pushTimer = null;
  const sessions = [...waitingPushes];
  waitingPushes.clear();
  for (const session of sessions) session.flushPushes();
}

interface StagedReply {
  msg: ClientReply;
  frame: Buffer;
}

export class ClientSession {
  readonly conn: FramedConnection;
  /** The peer's address, by which the core budgets waits and subscriptions; null = unknown. */
  readonly address: string | null;
  #state: 'authenticating' | 'open' | 'refused';
  #nextRequestId = 0;
  #nextReplyId = 0;
  readonly #ready = new Map<number, ClientReply>();
  /** Replies encoded as soon as they were produced, until they are sent. */
  readonly #staged = new Map<number, StagedReply>();
  #stagedBytes = 0;
  readonly #checkToken: ((token: string) => boolean) | null;
  readonly #admission: Admission | null;
  readonly #maxUnsentBytes: number;
  readonly #idleTimeoutMs: number;
  readonly #report: (event: NetEvent) => void;
  #pausedFor: PauseReason | null = null;
  /** A drain listener is waiting to re-check the flow. */
  #drainArmed = false;
  /** Requests read in this turn of the event loop (reset at its end). */
  #readThisTurn = 0;
  /** Request ids of unanswered LIST_JOBS. */
  readonly #lists = new Set<number>();
  /**
   * The state views of unanswered requests whose client does not know every
   * job state (job-view.ts); a request absent here is shown everything.
   */
  readonly #views = new Map<number, StateView>();
  /** Request ids of the WAIT_JOBs the core holds (answered later, not in flight). */
  readonly #held = new Set<number>();
  readonly #onBlockedByWait: () => void;
  /** `onBlockedByWait` was called for the current head of the queue. */
  #releaseAskedFor: number | null = null;
  #idleTimer: NodeJS.Timeout | null = null;
  #lastActivityMs = Date.now();
  /**
   * How pushed job events are shown (the knownStates of the SUBSCRIBE_JOBS);
   * null while the connection holds no subscription.
   */
  #subscriptionView: StateView | null = null;
  /** Events dropped since the peer last kept up (told in EVENTS_MISSED once it does). */
  #missed = 0;
  #missedDrainArmed = false;
  readonly #maxPushBytes: number;
  readonly #onSubscriberStalled: (stalled: boolean) => void;
  /** Event frames waiting for the end of the push window, and their bytes. */
  #pushes: Buffer[] = [];
  #pushBytes = 0;

  constructor(
    conn: FramedConnection,
    options: ClientSessionOptions = { checkToken: null, admission: null },
  ) {
    this.conn = conn;
    this.#checkToken = options.checkToken;
    this.#admission = options.admission;
    this.#maxUnsentBytes = options.maxUnsentReplyBytes ?? Infinity;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? 0;
    this.#report = options.report ?? (() => undefined);
    this.#onBlockedByWait = options.onBlockedByWait ?? (() => undefined);
    this.#maxPushBytes = options.maxPushBytes ?? MAX_SUBSCRIBER_BUFFER_BYTES;
    this.address = options.address ?? null;
    this.#onSubscriberStalled = options.onSubscriberStalled ?? (() => undefined);
    this.#state = this.#checkToken === null ? 'open' : 'authenticating';
    if (this.#state === 'open') this.#opened();
    else {
      this.#admission?.setOnExpired((cause) => {
        if (cause === 'deadline') this.#refuse('no AUTH in time', undefined, 'handshake_timeout');
        else this.#dropForNewcomer();
      });
    }
    if (this.#idleTimeoutMs > 0) this.#armIdle(this.#idleTimeoutMs);
    void conn.closed().then(() => this.#dispose());
  }

  /** True once the connection may send requests to the core. */
  get authenticated(): boolean {
    return this.#state === 'open';
  }

  /**
   * Handles a frame of a connection that is not open yet: a valid AUTH opens
   * it (AUTH_OK), anything else refuses it. Returns true when the frame was
   * consumed here; false for a frame of an open connection (the caller goes on).
   */
  gate(msg: Message): boolean {
    if (this.#state === 'open') return false;
    if (this.#state === 'refused') return true;
    const checkToken = this.#checkToken as (token: string) => boolean;
    if (msg.type === 'AUTH' && checkToken(msg.token)) {
      this.#state = 'open';
      this.#opened();
      this.deliver(this.nextRequest(), { type: 'AUTH_OK' });
      return true;
    }
    if (msg.type === 'AUTH') this.#refuse('token refused', 'Unauthenticated: token refused');
    else this.#refuse(notAuthFirstReason(msg.type));
    return true;
  }

  /** Got through: off the pending count, and frames up to 1 MiB from the client pool. */
  #opened(): void {
    this.#admission?.establish();
    this.conn.setInboundClass('client');
  }

  /** A malformed frame before AUTH: refused like any other wrong first frame. Returns true if so. */
  refuseUnlessOpen(): boolean {
    if (this.#state === 'open') return false;
    if (this.#state === 'authenticating') this.#refuse('malformed first frame');
    return true;
  }

  /**
   * Refuses the connection (ERROR UNAUTHENTICATED, then close). The message
   * tells a client that sent no AUTH what to do, and one whose token was
   * refused just that.
   */
  #refuse(
    reason: string,
    message = `Unauthenticated: send AUTH with a valid token first (${reason})`,
    limit?: 'handshake_timeout',
  ): void {
    this.#state = 'refused';
    this.conn.pause();
    if (limit !== undefined) {
      this.#report({ type: 'connection.limited', port: 'client', limit, remote: this.conn.remote });
    }
    this.#report({ type: 'auth.refused', port: 'client', remote: this.conn.remote, reason });
    this.deliver(this.nextRequest(), {
      type: 'ERROR',
      code: ErrorCode.Unauthenticated,
      message,
    });
    void this.conn.close(`unauthenticated: ${reason}`);
  }

  /**
   * Still authenticating when the pending pool was full and this was the
   * oldest of its address: told LIMIT_EXCEEDED (not a refusal of its token:
   * a client dials again) and closed.
   */
  #dropForNewcomer(): void {
    this.#state = 'refused';
    this.conn.pause();
    this.deliver(this.nextRequest(), {
      type: 'ERROR',
      code: ErrorCode.LimitExceeded,
      message:
        'Limit exceeded: too many connections are still registering or authenticating, ' +
        'and this one had waited longest; try again',
    });
    void this.conn.close('dropped while authenticating to make room for a newer connection');
  }

  /** Numbers the next request (and pauses reading when too many are open). */
  nextRequest(msg?: Message): number {
    const requestId = this.#nextRequestId++;
    this.#lastActivityMs = Date.now();
    if (msg?.type === 'LIST_JOBS') this.#lists.add(requestId);
    const view = msg === undefined ? StateView.ALL : viewOf(msg);
    if (!view.showsAll) this.#views.set(requestId, view);
    if (msg?.type === 'SUBSCRIBE_JOBS') this.#subscriptionView ??= view;
    if (this.#readThisTurn++ === 0) {
      setImmediate(() => {
        this.#readThisTurn = 0;
        this.#checkFlow();
      });
    }
    this.#checkFlow();
    return requestId;
  }

  /** The core holds this request's wait (its reply comes when the job ends or the wait times out). */
  held(requestId: number): void {
    if (requestId < this.#nextReplyId || this.#ready.has(requestId)) return;
    this.#held.add(requestId);
    this.#checkFlow();
  }

  /** Requests received and not yet answered. */
  get inFlight(): number {
    return this.#nextRequestId - this.#nextReplyId;
  }

  /** Reply bytes produced and not yet taken by the peer (staged + in the socket). */
  get unsentBytes(): number {
    return this.#stagedBytes + this.conn.outboundBytes;
  }

  /**
   * A reply was produced (it leaves later, after its commit and in order).
   * Encoding it now tells how much this connection is owed, so reading can
   * stop before more work is done for a peer that does not read.
   */
  staged(requestId: number, msg: ClientReply): void {
    if (!this.conn.isOpen || this.#staged.has(requestId)) return;
    const frame = encodeMessage(this.#shown(requestId, msg));
    this.#staged.set(requestId, { msg, frame });
    this.#stagedBytes += frame.length;
    this.#checkFlow();
  }

  /**
   * A job event for this connection's subscriptions. Sent at once (not in
   * request order: it answers no request). While the peer has more than
   * `maxPushBytes` unread, events are dropped and counted instead; once it
   * has taken everything it is told how many it missed (EVENTS_MISSED) and
   * events flow again. So a subscriber that stops reading costs at most that
   * much memory, and nobody waits for it. The start and the end of such a
   * streak are told to the core (`onSubscriberStalled`): a subscriber whose
   * streak lasts may be dropped to make room for a new one.
   */
  push(msg: JobEvent): void {
    if (!this.conn.isOpen || this.#state !== 'open') return;
    const view = this.#subscriptionView ?? StateView.ALL;
    if (this.#missed > 0 || this.conn.outboundBytes + this.#pushBytes > this.#maxPushBytes) {
      // The first drop of a streak is reported at once, the rest when it ends.
      if (this.#missed++ === 0) {
        this.#report({
          type: 'events.dropped',
          port: 'client',
          remote: this.conn.remote,
          count: 1,
        });
        this.#onSubscriberStalled(true);
      }
      this.#armMissed();
      return;
    }
    const frame = pushFrame(view, msg);
    this.#pushes.push(frame);
    this.#pushBytes += frame.length;
    waitingPushes.add(this);
    pushTimer ??= setTimeout(flushWaitingPushes, PUSH_WINDOW_MS).unref();
  }

  /** Sends the events waiting for the end of the push window, in order, as one write. */
  flushPushes(): void {
    const frames = this.#pushes;
    this.#pushes = [];
    this.#pushBytes = 0;
    waitingPushes.delete(this);
    if (!this.conn.isOpen || frames.length === 0) return;
    // One buffer for a peer that keeps up: the stream's cost is per write.
    // For one that has bytes waiting already, the frames themselves: they
    // will wait too, and a copy would be this subscriber's alone, where the
    // frames are shared by every subscriber of the event (a subscriber that
    // stopped reading holds well under half the memory so).
    if (frames.length === 1 || this.conn.outboundBytes > 0) {
      for (const frame of frames) this.conn.sendFrame(frame);
      return;
    }
    this.conn.sendFrame(Buffer.concat(frames));
  }

  #armMissed(): void {
    if (this.#missedDrainArmed) return;
    this.#missedDrainArmed = true;
    this.conn.onceDrained(() => {
      this.#missedDrainArmed = false;
      if (!this.conn.isOpen || this.#missed === 0) return;
      // The events before the drops go first, then the notice.
      this.flushPushes();
      const missed = this.#missed;
      this.#missed = 0;
      if (missed > 1) {
        const remote = this.conn.remote;
        this.#report({ type: 'events.dropped', port: 'client', remote, count: missed - 1 });
      }
      this.conn.send({ type: 'EVENTS_MISSED', missed });
      this.#onSubscriberStalled(false);
    });
  }

  /** Why reading should stay paused now (with hysteresis for the current reason); null = read. */
  #blockedBy(): PauseReason | null {
    const unsent = this.unsentBytes;
    const was = this.#pausedFor;
    if (unsent > this.#maxUnsentBytes) return 'unsent';
    if (was === 'unsent' && unsent > this.#maxUnsentBytes / 2) return 'unsent';
    const working = this.inFlight - this.#held.size;
    if (working >= MAX_IN_FLIGHT) return 'inFlight';
    if (was === 'inFlight' && working >= MAX_IN_FLIGHT / 2) return 'inFlight';
    if (this.#lists.size >= MAX_LISTS_IN_FLIGHT) return 'lists';
    if (this.#readThisTurn >= MAX_REQUESTS_PER_TURN) return 'turn';
    return null;
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
      this.#send(this.#nextReplyId, next);
      this.#lists.delete(this.#nextReplyId);
      this.#held.delete(this.#nextReplyId);
      this.#views.delete(this.#nextReplyId);
      this.#nextReplyId++;
    }
    if (this.inFlight === 0) this.#lastActivityMs = Date.now();
    this.#checkFlow();
  }

  #send(requestId: number, reply: ClientReply): void {
    const staged = this.#staged.get(requestId);
    if (staged !== undefined) {
      this.#staged.delete(requestId);
      this.#stagedBytes -= staged.frame.length;
      // A fail-stop may replace a staged reply with an error.
      if (staged.msg === reply) {
        this.conn.sendFrame(staged.frame);
        return;
      }
    }
    this.conn.send(this.#shown(requestId, reply));
  }

  /** The reply as the requesting client is shown it (its known job states). */
  #shown(requestId: number, reply: ClientReply): ClientReply {
    const view = this.#views.get(requestId);
    return view === undefined ? reply : view.reply(reply);
  }

  /** Pauses or resumes reading as the in-flight counts and unsent bytes say. */
  #checkFlow(): void {
    if (!this.conn.isOpen || this.#state === 'refused') return;
    const reason = this.#blockedBy();
    if (reason !== null) {
      this.#pause(reason);
      return;
    }
    if (this.#pausedFor === null) return;
    this.#pausedFor = null;
    this.#lastActivityMs = Date.now();
    this.conn.resume();
  }

  #pause(reason: PauseReason): void {
    // Paused for unsent bytes: bytes in the socket are waited for here, each
    // time (a drain may come while replies still wait for their commit);
    // staged replies re-check the flow themselves when they are sent.
    if (reason === 'unsent' && this.conn.outboundBytes > 0) this.#armDrain();
    // A turn's pause ends by itself; the others wait for replies that may be behind a held wait.
    if (reason !== 'turn') this.#askReleaseIfBlocked();
    if (this.#pausedFor === reason) return;
    const wasUnsent = this.#pausedFor === 'unsent';
    this.#pausedFor = reason;
    this.conn.pause();
    if (reason !== 'unsent' || wasUnsent) return;
    this.#report({
      type: 'connection.limited',
      port: 'client',
      limit: 'unsent_replies',
      remote: this.conn.remote,
      bytes: this.unsentBytes,
    });
  }

  #armDrain(): void {
    if (this.#drainArmed) return;
    this.#drainArmed = true;
    this.conn.onceDrained(() => {
      this.#drainArmed = false;
      this.#checkFlow();
    });
  }

  /** Paused behind a held wait: nothing can drain until it is answered, so ask for that (once per head). */
  #askReleaseIfBlocked(): void {
    const head = this.#nextReplyId;
    if (!this.#held.has(head) || this.#releaseAskedFor === head) return;
    this.#releaseAskedFor = head;
    // Not from inside the core's turn that produced this reply: after it.
    queueMicrotask(() => {
      if (this.conn.isOpen) this.#onBlockedByWait();
    });
  }

  #armIdle(delayMs: number): void {
    this.#idleTimer = setTimeout(() => this.#onIdleTimer(), delayMs);
    this.#idleTimer.unref();
  }

  /** Lazy: one timer per connection, re-armed for the rest of the period when there was activity. */
  #onIdleTimer(): void {
    this.#idleTimer = null;
    if (!this.conn.isOpen) return;
    // Waiting for a reply (a long WAIT_JOB) is not idle; not taking the
    // replies it has (paused for unsent bytes, no drain since) is.
    // A subscription is never idle: it waits for events.
    const busy =
      (this.inFlight > 0 && this.#pausedFor !== 'unsent') || this.#subscriptionView !== null;
    const idleMs = Date.now() - this.#lastActivityMs;
    if (!busy && idleMs >= this.#idleTimeoutMs) {
      const remote = this.conn.remote;
      this.#report({ type: 'connection.limited', port: 'client', limit: 'idle_timeout', remote });
      void this.conn.close(`idle for ${idleMs} ms`);
      return;
    }
    this.#armIdle(busy ? this.#idleTimeoutMs : this.#idleTimeoutMs - idleMs);
  }

  #dispose(): void {
    this.#pushes = [];
    this.#pushBytes = 0;
    waitingPushes.delete(this);
    if (this.#idleTimer !== null) clearTimeout(this.#idleTimer);
    this.#idleTimer = null;
    this.#staged.clear();
    this.#stagedBytes = 0;
    this.#lists.clear();
    this.#held.clear();
  }
}

/** The job states a request's client understands (requests without snapshots: all). */
function viewOf(msg: Message): StateView {
  const carriesSnapshots =
    msg.type === 'SUBMIT_JOB' ||
    msg.type === 'GET_JOB_STATUS' ||
    msg.type === 'LIST_JOBS' ||
    msg.type === 'CANCEL_JOB' ||
    msg.type === 'WAIT_JOB' ||
    msg.type === 'SUBSCRIBE_JOBS' ||
    msg.type === 'GET_SCHEDULE' ||
    msg.type === 'TRIGGER_SCHEDULE';
  return carriesSnapshots ? StateView.of(msg.knownStates) : StateView.ALL;
}
