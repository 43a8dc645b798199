/**
 * One TCP connection speaking framed protocol messages.
 *
 * Bytes -> {@link FrameDecoder} -> {@link decodeMessage} -> `onMessage`. The
 * first framing or envelope violation is reported once through
 * `onProtocolError`; reading stops there and the owner decides what to send
 * before closing (for a readable frame with a bad enum value the owner may
 * choose to keep reading).
 *
 * Lifetime: `open` -> `closing` (graceful {@link FramedConnection.close}:
 * queued frames are flushed, then FIN) -> `closed`; or straight to `closed`
 * through {@link FramedConnection.destroy}. Both are idempotent, and `onClose`
 * runs exactly once with the reason.
 *
 * Memory per connection is bounded: at most one partial frame inbound (the
 * decoder's cap, growing only with the bytes that arrive) and
 * `maxOutboundBytes` of unsent frames outbound. A peer that does not read its
 * replies is cut off (`overflow`) instead of growing the process.
 *
 * With a shared {@link InboundBudget}, a frame spread over several reads is
 * held only once the budget has reserved its declared length for this
 * connection's class and address; until then the connection waits, reading
 * paused, with the rest of its last read kept (back-pressure on that peer
 * alone: other connections go on). Before it authenticates (class `pending`)
 * a connection may send frames of at most {@link PENDING_MAX_FRAME_BYTES};
 * its owner moves it to its class with {@link FramedConnection.setInboundClass}.
 *
 * Time is bounded too: a frame whose first byte has arrived must be complete
 * within `frameTimeoutMs` (a peer trickling a byte now and then cannot hold a
 * half-sent frame forever; the clock runs while it waits for the budget). A
 * breach stops reading and goes to `onLimit` (default: destroy).
 *
 * {@link FramedConnection.pause} is real backpressure: from that moment no
 * message is delivered, not even the rest of a chunk already read (those
 * frames are held, undecoded, and delivered on {@link FramedConnection.resume}).
 */
import type { Socket } from 'node:net';
import { decodeMessage, encodeMessage, messageToJson } from '../protocol/codec.js';
import { ProtocolError, ProtocolErrorCode, describeError } from '../protocol/errors.js';
import {
  FrameDecoder,
  MAX_FRAME_BYTES,
  encodeTextFrame,
  type PushResult,
} from '../protocol/framing.js';
import type { Message } from '../protocol/messages.js';
import { batchTexts, type BatchWrapper } from './frame-batch.js';
import {
  PENDING_MAX_FRAME_BYTES,
  type InboundAccount,
  type InboundBudget,
  type InboundClass,
} from './inbound-budget.js';

/** Why a connection ended. */
export type CloseReason =
  | { kind: 'eof' }
  | { kind: 'truncated' }
  | { kind: 'error'; message: string }
  | { kind: 'local'; message: string }
  | { kind: 'overflow'; bytes: number }
  | { kind: 'limit'; limit: InboundLimit; message: string };

/** Inbound bounds a connection enforces itself by closing. */
export type InboundLimit = 'frame_timeout';

/** A breach of an inbound bound, as reported to `onLimit`. */
export interface LimitBreach {
  limit: InboundLimit;
  /** For people: what was exceeded, with the numbers. */
  message: string;
}

export interface ConnectionHandlers {
  onMessage(msg: Message): void;
  /** The peer broke the protocol; no more messages will be delivered. */
  /**
   * A frame broke the framing or envelope rules. Reading stops, unless the
   * owner returns `'continue'` for a frame whose envelope was readable
   * (`PROTOCOL_BAD_VALUE`): then the next frames are still delivered.
   */
  onProtocolError(err: ProtocolError): void | 'continue';
  onClose(reason: CloseReason): void;
  /**
   * An inbound bound was breached; reading has stopped. The owner may send a
   * last frame and close; without this handler the connection is destroyed.
   */
  onLimit?(breach: LimitBreach): void;
}

export interface ConnectionOptions {
  /** Unsent bytes allowed before the peer counts as a slow reader (default 16 MiB). */
  maxOutboundBytes?: number;
  /** Time a started frame has to arrive whole, in ms (default 0 = no limit). */
  frameTimeoutMs?: number;
  /**
   * When queued frames leave (default `tick`): `tick` = once the current
   * callback and its microtasks are done; `turn` = at the end of this
   * event-loop turn, so frames produced by several callbacks of one turn (a
   * worker's results arriving from several task threads) leave in one
   * system call. Both keep the order of sends.
   */
  coalesce?: 'tick' | 'turn';
  /** Shared bound on bytes held in partial frames, and this connection's class in it (default: none). */
  inbound?: {
    budget: InboundBudget;
    inboundClass: InboundClass;
    /** Told each time the connection starts waiting for room (metrics, logs). */
    onWait?: (remote: string) => void;
  };
}

export const DEFAULT_MAX_OUTBOUND_BYTES = 16 * 1024 * 1024;

let nextConnectionId = 1;

/** A human description of a close reason, for logs and error messages. */
export function describeCloseReason(reason: CloseReason): string {
  switch (reason.kind) {
    case 'eof':
      return 'connection closed';
    case 'truncated':
      return 'connection closed in the middle of a frame';
    case 'error':
      return `connection error: ${reason.message}`;
    case 'local':
      return reason.message;
    case 'overflow':
      return `peer stopped reading (${reason.bytes} bytes unsent)`;
    case 'limit':
      return reason.message;
  }
}

export class FramedConnection {
  /** Process-unique id, for logs and for routing replies. */
  readonly id: number;
  readonly remote: string;
  readonly #socket: Socket;
  readonly #decoder = new FrameDecoder();
  readonly #handlers: ConnectionHandlers;
  readonly #maxOutboundBytes: number;
  readonly #frameTimeoutMs: number;
  readonly #account: InboundAccount | null;
  readonly #onInboundWait: (remote: string) => void;
  /** The unread rest of a read, kept while waiting for the budget (null when not waiting). */
  #stalled: Buffer | null = null;
  /** The declared length the last refused hold asked for. */
  #wantedBytes = 0;
  #frameTimer: NodeJS.Timeout | null = null;
  /** Frames written to the socket whose write has not completed yet. */
  #unflushed = 0;
  /** Told when #unflushed reaches 0 (see onceDrained). */
  #drainWaiters: (() => void)[] = [];
  /** Paused by the owner: frames are held, not delivered. */
  #paused = false;
  /** Complete payloads read while paused, delivered in order on resume. */
  #held: Buffer[] = [];
  /** A delivery loop is running (handlers may pause and resume from inside it). */
  #delivering = false;
  #reading = true;
  #corked = false;
  /** Messages of this type are gathered into batch frames (null: none are). */
  #batching: BatchWrapper | null = null;
  /** The gathered messages' JSON texts and their UTF-8 lengths, until the uncork. */
  #batchTexts: string[] = [];
  #batchBytes: number[] = [];
  #batchTotal = 0;
  readonly #coalesce: 'tick' | 'turn';
  #notified = false;
  #closeReason: CloseReason | null = null;
  #closed: Promise<void>;
  #resolveClosed!: () => void;

  constructor(socket: Socket, handlers: ConnectionHandlers, options: ConnectionOptions = {}) {
    this.id = nextConnectionId++;
    this.#socket = socket;
    this.#handlers = handlers;
    this.#maxOutboundBytes = options.maxOutboundBytes ?? DEFAULT_MAX_OUTBOUND_BYTES;
    this.#frameTimeoutMs = options.frameTimeoutMs ?? 0;
    this.#coalesce = options.coalesce ?? 'tick';
    const inbound = options.inbound;
    this.#account =
      inbound?.budget.account(socket.remoteAddress ?? '?', inbound.inboundClass) ?? null;
    this.#onInboundWait = inbound?.onWait ?? (() => undefined);
    if (inbound !== undefined) this.#capFrames(inbound.inboundClass);
    this.remote = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
    this.#closed = new Promise((resolve) => (this.#resolveClosed = resolve));
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('end', () => {
      this.#end(this.#decoder.end() === 'clean' ? { kind: 'eof' } : { kind: 'truncated' }, 'none');
    });
    socket.on('error', (err) =>
      this.#end({ kind: 'error', message: describeError(err) }, 'destroy'),
    );
    socket.on('close', () => {
      this.#end({ kind: 'eof' }, 'none');
      this.#resolveClosed();
    });
  }

  /**
   * The connection authenticated or registered (or was found to be the other
   * kind): its budget class changes, and with it the largest frame it may send.
   */
  setInboundClass(inboundClass: InboundClass): void {
    if (this.#account === null) return;
    this.#account.reclassify(inboundClass);
    this.#capFrames(inboundClass);
  }

  #capFrames(inboundClass: InboundClass): void {
    if (inboundClass === 'pending') {
      this.#decoder.setMaxFrameBytes(
        PENDING_MAX_FRAME_BYTES,
        `at most ${PENDING_MAX_FRAME_BYTES} bytes before authentication or registration`,
      );
    } else this.#decoder.setMaxFrameBytes(MAX_FRAME_BYTES);
  }

  /** True while reading waits for room in the inbound budget. */
  get waitingForBudget(): boolean {
    return this.#stalled !== null;
  }

  /** True until the connection is closing or closed. */
  get isOpen(): boolean {
    return this.#closeReason === null;
  }

  /** Resolves once the socket is fully closed. */
  closed(): Promise<void> {
    return this.#closed;
  }

  /** Unsent outbound bytes. */
  get outboundBytes(): number {
    return this.#socket.writableLength;
  }

  /**
   * Queues one message. Returns false (and sends nothing) if the connection is
   * no longer open. Frames queued together leave in one system call (see
   * `coalesce`); messages of the batched type (see {@link batchMessages})
   * queued together leave in as few frames as the frame limit allows.
   */
  send(msg: Message): boolean {
    const batching = this.#batching;
    if (batching !== null && msg.type === batching.type) return this.#gather(messageToJson(msg));
    return this.sendFrame(encodeMessage(msg));
  }

  /**
   * From now on, messages of `wrapper.type` queued in one coalescing turn
   * leave together in batch frames (the peer said it takes them); null ends
   * it. Order with every other message is kept: another message queued
   * after some of them sends those first.
   */
  batchMessages(wrapper: BatchWrapper | null): void {
    this.#flushBatch();
    this.#batching = wrapper;
  }

  /** Queues one ready-made frame (see {@link send}). */
  sendFrame(frame: Buffer): boolean {
    if (!this.isOpen) return false;
    this.#flushBatch();
    return this.#write(frame);
  }

  #write(frame: Buffer): boolean {
    const queued = this.#socket.writableLength + this.#batchTotal + frame.length;
    if (queued > this.#maxOutboundBytes) {
      this.#end({ kind: 'overflow', bytes: queued }, 'destroy');
      return false;
    }
    this.#corkForTurn();
    this.#unflushed++;
    this.#socket.write(frame, this.#onFlushed);
    return true;
  }

  /** One message of the batched type, held until the uncork. */
  #gather(text: string): boolean {
    if (!this.isOpen) return false;
    const bytes = Buffer.byteLength(text, 'utf8');
    // The same refusal a frame of its own would get, at once (the sender reports it).
    if (bytes > MAX_FRAME_BYTES) encodeTextFrame(text);
    const queued = this.#socket.writableLength + this.#batchTotal + bytes;
    if (queued > this.#maxOutboundBytes) {
      this.#end({ kind: 'overflow', bytes: queued }, 'destroy');
      return false;
    }
    this.#corkForTurn();
    // The held batch counts as one unflushed write until it is written.
    if (this.#batchTexts.length === 0) this.#unflushed++;
    this.#batchTexts.push(text);
    this.#batchBytes.push(bytes);
    this.#batchTotal += bytes;
    return true;
  }

  /** Writes the held messages of the batched type, in as few frames as fit. */
  #flushBatch(): void {
    const texts = this.#batchTexts;
    if (texts.length === 0) return;
    const wrapper = this.#batching as BatchWrapper;
    const frames = batchTexts(texts, this.#batchBytes, wrapper);
    this.#dropBatch();
    for (const text of frames) this.#write(encodeTextFrame(text));
    this.#onFlushed();
  }

  /** Forgets the held messages (the connection is going away, or they were written). */
  #dropBatch(): void {
    this.#batchTexts = [];
    this.#batchBytes = [];
    this.#batchTotal = 0;
  }

  #corkForTurn(): void {
    if (this.#corked) return;
    this.#corked = true;
    this.#socket.cork();
    if (this.#coalesce === 'turn') setImmediate(this.#uncork);
    else process.nextTick(this.#uncork);
  }

  readonly #uncork = (): void => {
    if (this.isOpen) this.#flushBatch();
    this.#corked = false;
    this.#socket.uncork();
  };

  /**
   * Calls `onDrained` once every frame queued so far has been handed to the
   * kernel (at once, in a microtask, when none is waiting). Counted per
   * write, not from the socket's 'drain' event, which comes only after a
   * write that found the buffer full.
   */
  onceDrained(onDrained: () => void): void {
    if (this.#unflushed === 0) queueMicrotask(onDrained);
    else this.#drainWaiters.push(onDrained);
  }

  /** One queued frame reached the kernel (or the socket went away). */
  readonly #onFlushed = (): void => {
    if (--this.#unflushed > 0 || this.#drainWaiters.length === 0) return;
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const waiter of waiters) waiter();
  };

  /** True while paused by the owner. */
  get paused(): boolean {
    return this.#paused;
  }

  /**
   * Stops delivering messages until {@link resume} (inbound backpressure),
   * at once: frames of a chunk already read are held. Idempotent.
   */
  pause(): void {
    if (this.#paused) return;
    this.#paused = true;
    this.#socket.pause();
    // The peer cannot finish a frame while we do not read it.
    this.#clearFrameTimer();
  }

  /** Delivers the held frames, then reads on. Idempotent. */
  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#deliver();
    if (this.#paused || !this.#reading) return;
    if (this.#stalled === null) this.#socket.resume();
    if (this.#decoder.inFrame) this.#startFrameTimer();
  }

  /** Closes the socket after this many ms without inbound data (0 = never). */
  setIdleTimeout(ms: number, onIdle: () => void): void {
    this.#socket.setTimeout(ms);
    this.#socket.removeAllListeners('timeout');
    if (ms > 0) this.#socket.once('timeout', onIdle);
  }

  /**
   * Graceful: flush what is queued, then close. Idempotent.
   *
   * With `drainInbound`, only the sending side closes at once: frames the peer
   * still sends are delivered until it closes too (or 5 s pass), and
   * `onClose` runs at that real end. The coordinator uses this for a worker it
   * declared lost, so a late result on the way is still seen (and rejected).
   */
  close(message = 'closed locally', options: { drainInbound?: boolean } = {}): Promise<void> {
    this.#end({ kind: 'local', message }, options.drainInbound === true ? 'half' : 'end');
    return this.#closed;
  }

  /** Abrupt: drop queued frames and close now. Idempotent. */
  destroy(message = 'destroyed locally'): Promise<void> {
    this.#end({ kind: 'local', message }, 'destroy');
    return this.#closed;
  }

  #onData(chunk: Buffer): void {
    if (!this.#reading) return;
    if (this.#stalled !== null) {
      // A read that came anyway (the socket was resumed to see a close): kept
      // with the rest, and reading paused again.
      this.#socket.pause();
      this.#stalled = Buffer.concat([this.#stalled, chunk]);
      return;
    }
    this.#feed(chunk);
  }

  /** Decodes a read within the budget; a refused hold makes the connection wait. */
  #feed(chunk: Buffer): void {
    let result: PushResult;
    try {
      result = this.#decoder.pushWithin(chunk, this.#mayHold);
    } catch (err) {
      this.#protocolError(err);
      return;
    }
    if (result.rest !== null) this.#waitForBudget(result.rest);
    else if (this.#decoder.allocatedBytes === 0 && this.#decoder.awaitingBytes === 0) {
      this.#account?.release();
    }
    this.#trackFrameTime(result.frames.length > 0);
    for (const payload of result.frames) this.#held.push(payload);
    this.#deliver();
  }

  /** Asked by the decoder before it holds a partial payload: reserve its declared length. */
  readonly #mayHold = (declaredBytes: number): boolean => {
    if (this.#account === null || this.#account.reserve(declaredBytes)) return true;
    this.#wantedBytes = declaredBytes;
    return false;
  };

  /** No room for the next frame: stop reading this peer until the budget grants it. */
  #waitForBudget(rest: Buffer): void {
    const account = this.#account as InboundAccount;
    this.#stalled = rest;
    this.#socket.pause();
    account.wait(this.#wantedBytes, () => this.#onBudgetGranted());
    this.#onInboundWait(this.remote);
  }

  #onBudgetGranted(): void {
    const rest = this.#stalled;
    this.#stalled = null;
    if (rest === null || !this.#reading) return;
    if (rest.length > 0) this.#feed(rest);
    if (this.#stalled === null && !this.#paused && this.#reading) this.#socket.resume();
  }

  /**
   * Delivers held frames in order until paused or stopped. Not re-entered: a
   * resume() from inside a handler lets the running loop carry on instead.
   */
  #deliver(): void {
    if (this.#delivering) return;
    this.#delivering = true;
    let next = 0;
    try {
      while (next < this.#held.length && !this.#paused && this.#reading) {
        const payload = this.#held[next++] as Buffer;
        let msg: Message;
        try {
          msg = decodeMessage(payload);
        } catch (err) {
          if (this.#protocolError(err)) continue;
          break;
        }
        this.#handlers.onMessage(msg);
      }
    } finally {
      this.#delivering = false;
      this.#held = this.#reading ? this.#held.slice(next) : [];
    }
  }

  /** Starts the frame deadline when a frame begins; clears it between frames. */
  #trackFrameTime(completedSome: boolean): void {
    if (this.#frameTimeoutMs <= 0) return;
    if (!this.#decoder.inFrame) this.#clearFrameTimer();
    else if (completedSome || this.#frameTimer === null) this.#startFrameTimer();
  }

  #startFrameTimer(): void {
    if (this.#frameTimeoutMs <= 0) return;
    this.#clearFrameTimer();
    const timeoutMs = this.#frameTimeoutMs;
    this.#frameTimer = setTimeout(() => {
      this.#frameTimer = null;
      this.#limit({
        limit: 'frame_timeout',
        message: `frame not completed within ${timeoutMs} ms`,
      });
    }, timeoutMs);
    this.#frameTimer.unref();
  }

  #clearFrameTimer(): void {
    if (this.#frameTimer === null) return;
    clearTimeout(this.#frameTimer);
    this.#frameTimer = null;
  }

  /** Stops reading after a breach and lets the owner react (default: destroy). */
  #limit(breach: LimitBreach): void {
    if (!this.#reading) return;
    this.#stopAfterViolation();
    this.#releaseBudget();
    if (this.#handlers.onLimit !== undefined) this.#handlers.onLimit(breach);
    else this.#end({ kind: 'limit', ...breach }, 'destroy');
  }

  /** Gives back the reservation and any wait; reading has stopped for good. */
  #releaseBudget(): void {
    this.#stalled = null;
    this.#account?.close();
  }

  /** Reports a violation; true when the owner chose to keep reading. */
  #protocolError(err: unknown): boolean {
    const protocolErr =
      err instanceof ProtocolError
        ? err
        : new ProtocolError(ProtocolErrorCode.MalformedJson, describeError(err), { cause: err });
    if (protocolErr.code === ProtocolErrorCode.BadValue) {
      if (this.#handlers.onProtocolError(protocolErr) === 'continue') return true;
      this.#stopAfterViolation();
      return false;
    }
    this.#stopAfterViolation();
    this.#handlers.onProtocolError(protocolErr);
    return false;
  }

  #stopAfterViolation(): void {
    this.#reading = false;
    this.#socket.pause();
    this.#clearFrameTimer();
  }

  /**
   * The one place a connection ends: records the first reason, stops reading,
   * ends or destroys the socket as asked, and tells the owner exactly once.
   */
  #end(reason: CloseReason, how: 'none' | 'half' | 'end' | 'destroy'): void {
    const first = this.#closeReason === null;
    if (first) this.#closeReason = reason;
    if (how !== 'half') {
      this.#reading = false;
      this.#held = [];
      this.#clearFrameTimer();
    }
    if (how !== 'half') this.#releaseBudget();
    if (this.#batchTexts.length > 0) {
      // Graceful: what was queued leaves before the FIN; otherwise it is dropped.
      if (first && (how === 'end' || how === 'half') && !this.#socket.destroyed) {
        this.#flushBatch();
      } else {
        this.#dropBatch();
        this.#onFlushed();
      }
    }
    if (how === 'destroy') {
      this.#socket.destroy();
    } else if ((how === 'end' || how === 'half') && first && !this.#socket.destroyed) {
      // A paused socket (after a protocol error, or paused by the owner) never
      // sees the peer's FIN, so close() would wait for the timer below.
      if (this.#paused) {
        this.#paused = false;
        if (how === 'half') process.nextTick(() => this.#deliver());
      }
      this.#socket.resume();
      this.#socket.end();
      // A peer that never reads could keep the socket half-open forever.
      const timer = setTimeout(() => this.#socket.destroy(), 5_000);
      timer.unref();
      this.#socket.once('close', () => clearTimeout(timer));
    }
    if (how === 'half' && !this.#socket.destroyed) return; // told at the real end
    if (!this.#notified) {
      this.#notified = true;
      this.#handlers.onClose(this.#closeReason ?? reason);
    }
  }
}
