/**
 * Length-prefixed framing: `[4-byte big-endian signed length N][N bytes]`,
 * 1 <= N <= 1 MiB.
 *
 * The decoder is incremental. TCP delivers bytes in arbitrary pieces, so it
 * keeps at most one partial header (4 bytes) and one partial payload (<= 1 MiB)
 * between calls. The payload buffer grows with the bytes that actually arrive
 * (doubling, from {@link INITIAL_PAYLOAD_BYTES}, never past the declared
 * length), so a peer that declares 1 MiB and then stalls costs what it sent,
 * not what it promised; and the declared length is checked before anything is
 * allocated. Whole frames that arrive inside one chunk are returned as views
 * of that chunk without copying.
 *
 * A caller that budgets memory uses {@link FrameDecoder.pushWithin}: before
 * a payload that the current chunk does not complete starts to be held, the
 * decoder asks whether it may hold that many bytes; when told no, it stops
 * there and hands back the unread rest of the chunk (a frame whole within
 * one chunk is never asked about: it costs no copy).
 *
 * Decoder states: `header` (collecting 0..3 prefix bytes), `awaiting` (a
 * length was accepted but holding its payload was refused; the rest is
 * pushed again later), `payload` (a length was accepted and its bytes are
 * being collected), `failed` (a violation was seen; every later call throws
 * again).
 */
import { ProtocolError, ProtocolErrorCode } from './errors.js';

/** Largest legal payload, in bytes (1 MiB). */
export const MAX_FRAME_BYTES = 1_048_576;
/** Size of the length prefix, in bytes. */
export const FRAME_HEADER_BYTES = 4;
/** First allocation for a partial payload, in bytes; it doubles as data arrives. */
export const INITIAL_PAYLOAD_BYTES = 4_096;
/**
 * A partial payload that starts with at least this many bytes in one chunk is
 * kept as a view of that chunk (no copy) until more of it arrives.
 */
const VIEW_PAYLOAD_BYTES = 16_384;

/** How a stream ended, as far as framing can tell. */
export type StreamEnd = 'clean' | 'truncated';

/**
 * Asked before a payload of `declaredBytes` that the current chunk does not
 * complete starts to be held; false = not now.
 */
export type HoldCheck = (declaredBytes: number) => boolean;

/** What {@link FrameDecoder.pushWithin} returns. */
export interface PushResult {
  /** Payloads completed, in order. */
  frames: Buffer[];
  /**
   * Null when the whole chunk was read. Otherwise a hold check said no: these
   * are the unread bytes (a view of the chunk, possibly empty), to be pushed
   * again once holding may go ahead.
   */
  rest: Buffer | null;
}

const ALWAYS: HoldCheck = () => true;

function assertFrameCap(maxFrameBytes: number): void {
  if (!Number.isInteger(maxFrameBytes) || maxFrameBytes < 1 || maxFrameBytes > MAX_FRAME_BYTES) {
    throw new RangeError(`maxFrameBytes must be 1..${MAX_FRAME_BYTES}, got ${maxFrameBytes}`);
  }
}

export class FrameDecoder {
  #maxFrameBytes: number;
  /** Said after a refused length while the cap is lowered (why it is). */
  #capReason = '';
  readonly #header = Buffer.alloc(FRAME_HEADER_BYTES);
  #headerFill = 0;
  /** Bytes received of the partial payload (its capacity may be less than its length). */
  #payload: Buffer | null = null;
  #payloadFill = 0;
  /** Declared length of the partial payload. */
  #payloadLength = 0;
  /** Declared length of a payload whose holding was refused (state `awaiting`); 0 otherwise. */
  #awaitingLength = 0;
  /** Set when a hold check just said no; the push stops there. */
  #refused = false;
  #failure: ProtocolError | null = null;

  /** @param maxFrameBytes largest accepted payload (default and ceiling: 1 MiB). */
  constructor(maxFrameBytes: number = MAX_FRAME_BYTES) {
    assertFrameCap(maxFrameBytes);
    this.#maxFrameBytes = maxFrameBytes;
  }

  /**
   * Changes the largest accepted payload for lengths read from now on (a
   * frame already started keeps its length). `reason`, when given, is added
   * to the refusal of a longer frame.
   */
  setMaxFrameBytes(maxFrameBytes: number, reason = ''): void {
    assertFrameCap(maxFrameBytes);
    this.#maxFrameBytes = maxFrameBytes;
    this.#capReason = reason;
  }

  /**
   * Feeds the next bytes of the stream and returns every payload they complete,
   * in order. Throws {@link ProtocolError} (`PROTOCOL_FRAME_LENGTH`) on a
   * declared length outside 1..max; the decoder is unusable afterwards.
   */
  push(chunk: Uint8Array): Buffer[] {
    return this.pushWithin(chunk, ALWAYS).frames;
  }

  /**
   * {@link push}, asking `mayHold` before a payload this chunk does not
   * complete starts to be held; when it says no, the push stops at that
   * payload's first byte and returns the rest (see {@link PushResult}). The
   * next push (of that rest, then of what follows) asks again.
   */
  pushWithin(chunk: Uint8Array, mayHold: HoldCheck): PushResult {
    if (this.#failure) throw this.#failure;
    const frames: Buffer[] = [];
    const buf = Buffer.isBuffer(chunk)
      ? chunk
      : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let pos = 0;
    while (pos < buf.length) {
      if (this.#payload !== null) {
        pos = this.#readPayload(buf, pos, frames);
      } else if (this.#awaitingLength > 0) {
        pos = this.#startPayload(buf, pos, frames, this.#awaitingLength, mayHold);
      } else {
        pos = this.#readHeader(buf, pos, frames, mayHold);
      }
      if (this.#refused) {
        this.#refused = false;
        return { frames, rest: buf.subarray(pos) };
      }
    }
    return { frames, rest: null };
  }

  /**
   * What an end of stream now would mean: `clean` between frames (including
   * inside the 4-byte prefix), `truncated` inside a payload.
   */
  end(): StreamEnd {
    return this.#payload === null && this.#awaitingLength === 0 ? 'clean' : 'truncated';
  }

  /** Bytes held between calls (a partial header and a partial payload). */
  get bufferedBytes(): number {
    return this.#headerFill + this.#payloadFill;
  }

  /** Bytes currently allocated for a partial payload (0 between frames). */
  get allocatedBytes(): number {
    return this.#payload?.length ?? 0;
  }

  /** Declared length of a payload whose holding was refused and is awaited (0 if none). */
  get awaitingBytes(): number {
    return this.#awaitingLength;
  }

  /** True while a frame has started (some header or payload bytes) and is not complete. */
  get inFrame(): boolean {
    return this.#headerFill > 0 || this.#payload !== null || this.#awaitingLength > 0;
  }

  #readHeader(buf: Buffer, pos: number, frames: Buffer[], mayHold: HoldCheck): number {
    let length: number;
    if (this.#headerFill === 0 && buf.length - pos >= FRAME_HEADER_BYTES) {
      length = buf.readInt32BE(pos);
      pos += FRAME_HEADER_BYTES;
    } else {
      const take = Math.min(FRAME_HEADER_BYTES - this.#headerFill, buf.length - pos);
      buf.copy(this.#header, this.#headerFill, pos, pos + take);
      this.#headerFill += take;
      pos += take;
      if (this.#headerFill < FRAME_HEADER_BYTES) return pos;
      this.#headerFill = 0;
      length = this.#header.readInt32BE(0);
    }
    this.#checkLength(length);
    return this.#startPayload(buf, pos, frames, length, mayHold);
  }

  /** The payload of an accepted length begins at `pos`: whole, held, or (refused) awaited. */
  #startPayload(
    buf: Buffer,
    pos: number,
    frames: Buffer[],
    length: number,
    mayHold: HoldCheck,
  ): number {
    if (buf.length - pos >= length) {
      // The whole payload is in this chunk: hand out a view, no copy.
      this.#awaitingLength = 0;
      frames.push(buf.subarray(pos, pos + length));
      return pos + length;
    }
    if (!mayHold(length)) {
      this.#awaitingLength = length;
      this.#refused = true;
      return pos;
    }
    this.#awaitingLength = 0;
    this.#payloadLength = length;
    const rest = buf.length - pos;
    if (rest >= VIEW_PAYLOAD_BYTES) {
      // A large start of a payload stays a view of its chunk until more comes:
      // a peer that sends it and goes away costs no copy at all.
      this.#payload = buf.subarray(pos);
      this.#payloadFill = rest;
      return buf.length;
    }
    this.#payloadFill = 0;
    this.#payload = Buffer.allocUnsafe(Math.min(length, INITIAL_PAYLOAD_BYTES));
    return pos;
  }

  #readPayload(buf: Buffer, pos: number, frames: Buffer[]): number {
    const take = Math.min(this.#payloadLength - this.#payloadFill, buf.length - pos);
    const payload = this.#reserve(this.#payloadFill + take);
    buf.copy(payload, this.#payloadFill, pos, pos + take);
    this.#payloadFill += take;
    if (this.#payloadFill === this.#payloadLength) {
      frames.push(payload);
      this.#payload = null;
      this.#payloadFill = 0;
      this.#payloadLength = 0;
    }
    return pos + take;
  }

  /**
   * The payload buffer, grown (by doubling, up to the declared length) to hold
   * `needed` bytes; a view of a chunk is copied into a buffer of its own here.
   */
  #reserve(needed: number): Buffer {
    const current = this.#payload as Buffer;
    if (needed <= current.length) return current;
    let size = current.length;
    while (size < needed) size *= 2;
    const grown = Buffer.allocUnsafe(Math.min(size, this.#payloadLength));
    current.copy(grown, 0, 0, this.#payloadFill);
    this.#payload = grown;
    return grown;
  }

  #checkLength(length: number): void {
    if (length >= 1 && length <= this.#maxFrameBytes) return;
    const why = length >= 1 && this.#capReason !== '' ? ` (${this.#capReason})` : '';
    this.#failure = new ProtocolError(
      ProtocolErrorCode.FrameLength,
      `declared frame length ${length} is outside 1..${this.#maxFrameBytes}${why}`,
    );
    throw this.#failure;
  }
}

/** A frame buffer with its length prefix written, or the refusal of a writer. */
function frameFor(length: number): Buffer {
  if (length < 1 || length > MAX_FRAME_BYTES) {
    throw new ProtocolError(
      ProtocolErrorCode.FrameEncode,
      `refusing to write a frame of ${length} bytes (must be 1..${MAX_FRAME_BYTES})`,
    );
  }
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + length);
  frame.writeInt32BE(length, 0);
  return frame;
}

/**
 * Prefixes one payload with its length. Refuses (throws `PROTOCOL_FRAME_ENCODE`)
 * an empty payload or one over 1 MiB: a writer never emits an illegal frame.
 */
export function encodeFrame(payload: Uint8Array): Buffer {
  const frame = frameFor(payload.byteLength);
  frame.set(payload, FRAME_HEADER_BYTES);
  return frame;
}

/**
 * One frame for a JSON text, built in a single buffer (no intermediate copy
 * of the payload). Same refusals as {@link encodeFrame}.
 */
export function encodeTextFrame(json: string): Buffer {
  const frame = frameFor(Buffer.byteLength(json, 'utf8'));
  frame.write(json, FRAME_HEADER_BYTES, 'utf8');
  return frame;
}
