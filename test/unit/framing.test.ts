/**
 * The frame decoder and encoder: `[4-byte big-endian signed length N][N bytes]`,
 * 1 <= N <= 1 MiB, reassembled from arbitrary TCP chunks.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ProtocolError, ProtocolErrorCode } from '../../src/protocol/errors.js';
import {
  FRAME_HEADER_BYTES,
  FrameDecoder,
  MAX_FRAME_BYTES,
  encodeFrame,
} from '../../src/protocol/framing.js';

/** Fixed seeds keep property runs reproducible; a failure report prints its own seed. */
const SEED_ROUND_TRIP = 0x5eed_0001;
const SEED_GARBAGE = 0x5eed_0002;
const SEED_HOLD = 0x5eed_0003;

function bytes(text: string): Buffer {
  return Buffer.from(text, 'utf8');
}

/** A 4-byte header declaring `length` (any int32, legal or not). */
function header(length: number): Buffer {
  const h = Buffer.alloc(FRAME_HEADER_BYTES);
  h.writeInt32BE(length, 0);
  return h;
}

/** A payload of `size` bytes with a position-dependent pattern (not all zeros). */
function patterned(size: number, salt: number): Buffer {
  const b = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i++) b[i] = (i * 31 + salt) & 0xff;
  return b;
}

/** Feeds `chunks` in order and returns every payload, copied (views may alias). */
function decodeAll(decoder: FrameDecoder, chunks: readonly Uint8Array[]): Buffer[] {
  const out: Buffer[] = [];
  for (const chunk of chunks) {
    for (const payload of decoder.push(chunk)) out.push(Buffer.from(payload));
  }
  return out;
}

/** Cuts `stream` at the given offsets (any order, duplicates allowed). */
function cut(stream: Buffer, offsets: readonly number[]): Buffer[] {
  const points = [...new Set(offsets.map((o) => o % (stream.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let start = 0;
  for (const p of [...points, stream.length]) {
    chunks.push(stream.subarray(start, p));
    start = p;
  }
  return chunks;
}

function assertFrameLengthError(err: unknown, length: number): true {
  assert.ok(err instanceof ProtocolError, `expected a ProtocolError, got ${String(err)}`);
  assert.equal(err.code, ProtocolErrorCode.FrameLength);
  const numbers: string[] = err.message.match(/-?\d+/g) ?? [];
  assert.ok(numbers.includes(String(length)), `message names ${length}: ${err.message}`);
  return true;
}

describe('encodeFrame', () => {
  it('prefixes the payload with its big-endian length when the payload is legal', () => {
    const frame = encodeFrame(bytes('{"type":"X"}'));
    assert.equal(frame.readInt32BE(0), 12);
    assert.equal(frame.subarray(FRAME_HEADER_BYTES).toString('utf8'), '{"type":"X"}');
  });

  it('accepts a Uint8Array that is a view into a larger buffer', () => {
    const backing = new Uint8Array([9, 9, 1, 2, 3, 9]);
    const frame = encodeFrame(backing.subarray(2, 5));
    assert.deepEqual([...frame], [0, 0, 0, 3, 1, 2, 3]);
  });

  it('refuses with PROTOCOL_FRAME_ENCODE when the payload is empty', () => {
    assert.throws(
      () => encodeFrame(Buffer.alloc(0)),
      (err: unknown) => err instanceof ProtocolError && err.code === ProtocolErrorCode.FrameEncode,
    );
  });

  it('refuses with PROTOCOL_FRAME_ENCODE when the payload is 1 MiB + 1', () => {
    assert.throws(
      () => encodeFrame(Buffer.alloc(MAX_FRAME_BYTES + 1)),
      (err: unknown) =>
        err instanceof ProtocolError &&
        err.code === ProtocolErrorCode.FrameEncode &&
        err.message.includes(String(MAX_FRAME_BYTES + 1)),
    );
  });

  it('encodes a payload of exactly 1 MiB', () => {
    const frame = encodeFrame(Buffer.alloc(MAX_FRAME_BYTES, 7));
    assert.equal(frame.length, MAX_FRAME_BYTES + FRAME_HEADER_BYTES);
    assert.equal(frame.readInt32BE(0), MAX_FRAME_BYTES);
  });
});

describe('FrameDecoder', () => {
  it('round-trips one frame when it arrives in one chunk', () => {
    const decoder = new FrameDecoder();
    const payloads = decodeAll(decoder, [encodeFrame(bytes('hello'))]);
    assert.deepEqual(payloads, [bytes('hello')]);
    assert.equal(decoder.end(), 'clean');
    assert.equal(decoder.bufferedBytes, 0);
    assert.equal(decoder.allocatedBytes, 0);
  });

  it('accepts a plain Uint8Array chunk that is a view into a larger buffer', () => {
    const frame = encodeFrame(bytes('abc'));
    const backing = new Uint8Array(frame.length + 6);
    backing.set(frame, 3);
    const decoder = new FrameDecoder();
    const out = decodeAll(decoder, [backing.subarray(3, 3 + frame.length)]);
    assert.deepEqual(out, [bytes('abc')]);
  });

  it('delivers a frame once when it arrives one byte at a time', () => {
    const frame = encodeFrame(bytes('{"type":"HEARTBEAT","workerId":"w-1"}'));
    const decoder = new FrameDecoder();
    const seen: Buffer[] = [];
    for (let i = 0; i < frame.length; i++) {
      const out = decodeAll(decoder, [frame.subarray(i, i + 1)]);
      if (i < frame.length - 1) assert.deepEqual(out, [], `nothing before the last byte (at ${i})`);
      seen.push(...out);
    }
    assert.deepEqual(seen, [frame.subarray(FRAME_HEADER_BYTES)]);
    assert.equal(decoder.end(), 'clean');
  });

  it('returns every frame in order when many frames arrive in one chunk', () => {
    const payloads = Array.from({ length: 50 }, (_, i) => bytes(`frame-${i}-${'x'.repeat(i)}`));
    const stream = Buffer.concat(payloads.map((p) => encodeFrame(p)));
    const decoder = new FrameDecoder();
    assert.deepEqual(decodeAll(decoder, [stream]), payloads);
    assert.equal(decoder.bufferedBytes, 0);
  });

  it('ignores empty chunks', () => {
    const decoder = new FrameDecoder();
    const frame = encodeFrame(bytes('ab'));
    const out = decodeAll(decoder, [
      Buffer.alloc(0),
      frame.subarray(0, 2),
      Buffer.alloc(0),
      frame.subarray(2),
      Buffer.alloc(0),
    ]);
    assert.deepEqual(out, [bytes('ab')]);
  });

  it('reassembles the frames when the stream is split in two at every offset', () => {
    const payloads = [bytes('a'), bytes('{"k":"vv"}'), bytes('xyz'), Buffer.from([0, 255, 0])];
    const stream = Buffer.concat(payloads.map((p) => encodeFrame(p)));
    for (let i = 0; i <= stream.length; i++) {
      const decoder = new FrameDecoder();
      const out = decodeAll(decoder, [stream.subarray(0, i), stream.subarray(i)]);
      assert.deepEqual(out, payloads, `split at ${i}`);
      assert.equal(decoder.end(), 'clean');
    }
  });

  it('reassembles the frames when the stream is split in three at every pair of offsets', () => {
    const payloads = [bytes('one'), bytes('two!'), bytes('3')];
    const stream = Buffer.concat(payloads.map((p) => encodeFrame(p)));
    for (let i = 0; i <= stream.length; i++) {
      for (let j = i; j <= stream.length; j++) {
        const decoder = new FrameDecoder();
        const chunks = [stream.subarray(0, i), stream.subarray(i, j), stream.subarray(j)];
        assert.deepEqual(decodeAll(decoder, chunks), payloads, `split at ${i}, ${j}`);
      }
    }
  });

  it('accepts a payload of exactly 1 MiB whether whole or in 64 KiB chunks', () => {
    const payload = patterned(MAX_FRAME_BYTES, 3);
    const frame = encodeFrame(payload);
    assert.deepEqual(decodeAll(new FrameDecoder(), [frame]), [payload]);

    const decoder = new FrameDecoder();
    const chunks: Buffer[] = [];
    for (let i = 0; i < frame.length; i += 65_536) chunks.push(frame.subarray(i, i + 65_536));
    assert.deepEqual(decodeAll(decoder, chunks), [payload]);
  });

  it('reports what it holds while a large frame is partial', () => {
    const decoder = new FrameDecoder();
    const frame = encodeFrame(patterned(1000, 1));
    decoder.push(frame.subarray(0, 2));
    assert.equal(decoder.bufferedBytes, 2);
    assert.equal(decoder.allocatedBytes, 0);
    decoder.push(frame.subarray(2, 10));
    assert.ok(decoder.allocatedBytes >= 6 && decoder.allocatedBytes <= 1000);
    assert.equal(decoder.bufferedBytes, 6);
    decoder.push(frame.subarray(10));
    assert.equal(decoder.allocatedBytes, 0);
    assert.equal(decoder.bufferedBytes, 0);
  });

  it('grows its buffer with the data when a peer declares 1 MiB and sends a trickle', () => {
    const decoder = new FrameDecoder();
    const frame = encodeFrame(patterned(MAX_FRAME_BYTES, 7));
    decoder.push(frame.subarray(0, 4 + 100));
    assert.ok(decoder.allocatedBytes <= 4_096, `allocated ${decoder.allocatedBytes} for 100 bytes`);
    let pos = 104;
    const step = 50_000;
    for (; pos + step < frame.length; pos += step) {
      assert.deepEqual(decoder.push(frame.subarray(pos, pos + step)), []);
      const held = pos + step - 4;
      assert.ok(decoder.allocatedBytes >= held);
      assert.ok(decoder.allocatedBytes <= Math.max(4_096, 2 * held), `${decoder.allocatedBytes}`);
    }
    assert.deepEqual(decoder.push(frame.subarray(pos)), [frame.subarray(4)]);
    assert.equal(decoder.allocatedBytes, 0);
  });

  for (const length of [0, -5, MAX_FRAME_BYTES + 1, 0x7fffffff, -0x80000000]) {
    it(`rejects with PROTOCOL_FRAME_LENGTH naming the length when it declares ${length}`, () => {
      const decoder = new FrameDecoder();
      assert.throws(
        () => decoder.push(header(length)),
        (err) => assertFrameLengthError(err, length),
      );
      assert.equal(decoder.allocatedBytes, 0);
    });
  }

  it('rejects a bad length when its header arrives one byte at a time', () => {
    const decoder = new FrameDecoder();
    const h = header(MAX_FRAME_BYTES + 1);
    for (let i = 0; i < 3; i++) assert.deepEqual(decoder.push(h.subarray(i, i + 1)), []);
    assert.throws(
      () => decoder.push(h.subarray(3)),
      (err) => assertFrameLengthError(err, MAX_FRAME_BYTES + 1),
    );
  });

  it('returns no frame after the bad header when good frames precede it in the same chunk', () => {
    const decoder = new FrameDecoder();
    const stream = Buffer.concat([encodeFrame(bytes('ok')), header(0), encodeFrame(bytes('no'))]);
    assert.throws(
      () => decoder.push(stream),
      (err) => assertFrameLengthError(err, 0),
    );
  });

  it('stays failed and keeps throwing the same error when fed more bytes after an error', () => {
    const decoder = new FrameDecoder();
    let first: unknown;
    try {
      decoder.push(header(-5));
    } catch (err) {
      first = err;
    }
    assertFrameLengthError(first, -5);
    for (const next of [encodeFrame(bytes('fine')), Buffer.alloc(0), Buffer.from([1])]) {
      assert.throws(
        () => decoder.push(next),
        (err) => err === first,
      );
    }
  });

  it('says clean when the stream ends between frames or inside the 4-byte header', () => {
    const frame = encodeFrame(bytes('payload'));
    for (let i = 0; i < FRAME_HEADER_BYTES; i++) {
      const decoder = new FrameDecoder();
      decodeAll(decoder, [frame, frame.subarray(0, i)]);
      assert.equal(decoder.end(), 'clean', `after ${i} header bytes`);
    }
  });

  it('says truncated when the stream ends inside a payload', () => {
    const frame = encodeFrame(bytes('payload'));
    for (let i = FRAME_HEADER_BYTES; i < frame.length; i++) {
      const decoder = new FrameDecoder();
      decodeAll(decoder, [frame.subarray(0, i)]);
      // A header whose payload has not started yet already commits to a payload.
      assert.equal(decoder.end(), 'truncated', `after ${i} bytes`);
    }
  });

  it('honours a smaller cap when constructed with one', () => {
    const decoder = new FrameDecoder(10);
    assert.deepEqual(decodeAll(decoder, [encodeFrame(patterned(10, 0))]), [patterned(10, 0)]);
    assert.throws(
      () => decoder.push(header(11)),
      (err) => assertFrameLengthError(err, 11),
    );
  });

  it('refuses a cap outside 1..1 MiB when constructed', () => {
    for (const cap of [0, -1, 1.5, MAX_FRAME_BYTES + 1, Number.NaN]) {
      assert.throws(() => new FrameDecoder(cap), RangeError);
    }
  });
});

/** Mostly small payloads, now and then a big one (up to the 1 MiB cap). */
const payloadArb: fc.Arbitrary<Uint8Array> = fc.oneof(
  { arbitrary: fc.uint8Array({ minLength: 1, maxLength: 5_000 }), weight: 30 },
  {
    arbitrary: fc
      .record({ size: fc.integer({ min: 5_000, max: MAX_FRAME_BYTES }), salt: fc.nat(255) })
      .map(({ size, salt }) => patterned(size, salt)),
    weight: 1,
  },
);

/** One segment of a hostile stream. */
const garbageSegmentArb: fc.Arbitrary<Buffer> = fc.oneof(
  fc.uint8Array({ minLength: 1, maxLength: 64 }).map((b) => Buffer.from(b)),
  // A plausible header (legal or not) followed by a few bytes of its payload.
  fc
    .tuple(
      fc.oneof(
        fc.integer({ min: 1, max: MAX_FRAME_BYTES }),
        fc.integer({ min: -0x80000000, max: 0x7fffffff }),
        fc.constantFrom(0, -1, MAX_FRAME_BYTES, MAX_FRAME_BYTES + 1),
      ),
      fc.uint8Array({ maxLength: 64 }),
    )
    .map(([length, rest]) => Buffer.concat([header(length), rest])),
  // A complete legal frame.
  fc.uint8Array({ minLength: 1, maxLength: 64 }).map((b) => encodeFrame(b)),
);

describe('FrameDecoder properties', () => {
  it('decodes exactly the payloads when random frames are cut at random chunk boundaries', () => {
    fc.assert(
      fc.property(
        fc.array(payloadArb, { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 40 }),
        (payloads, offsets) => {
          const stream = Buffer.concat(payloads.map((p) => encodeFrame(p)));
          const decoder = new FrameDecoder();
          const out = decodeAll(decoder, cut(stream, offsets));
          assert.equal(out.length, payloads.length);
          out.forEach((p, i) => assert.ok(p.equals(payloads[i] as Uint8Array), `payload ${i}`));
          assert.equal(decoder.end(), 'clean');
          assert.equal(decoder.bufferedBytes, 0);
          assert.equal(decoder.allocatedBytes, 0);
        },
      ),
      { seed: SEED_ROUND_TRIP, numRuns: 300 },
    );
  });

  it('throws only ProtocolError and stays within 1 MiB when fed random garbage', () => {
    fc.assert(
      fc.property(
        fc.array(garbageSegmentArb, { minLength: 1, maxLength: 20 }),
        fc.array(fc.nat(), { maxLength: 20 }),
        (segments, offsets) => {
          const decoder = new FrameDecoder();
          let failure: unknown = null;
          for (const chunk of cut(Buffer.concat(segments), offsets)) {
            try {
              for (const p of decoder.push(chunk)) {
                assert.ok(p.length >= 1 && p.length <= MAX_FRAME_BYTES);
              }
            } catch (err) {
              assert.ok(err instanceof ProtocolError, `unexpected ${String(err)}`);
              assert.equal(err.code, ProtocolErrorCode.FrameLength);
              if (failure !== null) assert.equal(err, failure, 'a failed decoder keeps its error');
              failure = err;
            }
            assert.ok(decoder.allocatedBytes <= MAX_FRAME_BYTES);
            assert.ok(decoder.bufferedBytes <= MAX_FRAME_BYTES + FRAME_HEADER_BYTES);
          }
        },
      ),
      { seed: SEED_GARBAGE, numRuns: 400 },
    );
  });

  it('decodes exactly the payloads when hold checks refuse at random and the rest is pushed again', () => {
    fc.assert(
      fc.property(
        fc.array(payloadArb, { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 40 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 30 }),
        (payloads, offsets, answers) => {
          const stream = Buffer.concat(payloads.map((p) => encodeFrame(p)));
          const decoder = new FrameDecoder();
          let asked = 0;
          const asks: number[] = [];
          const mayHold = (declaredBytes: number): boolean => {
            asks.push(declaredBytes);
            return answers[asked++ % answers.length] === true || asked % 7 === 0;
          };
          const out: Buffer[] = [];
          for (const chunk of cut(stream, offsets)) {
            let next: Buffer | null = chunk;
            for (let tries = 0; next !== null && tries < 1_000; tries++) {
              const { frames, rest } = decoder.pushWithin(next, mayHold);
              for (const p of frames) out.push(Buffer.from(p));
              // A refused hold holds nothing: only a partial header at most.
              if (rest !== null) assert.equal(decoder.allocatedBytes, 0);
              next = rest === null || rest.length === 0 ? null : rest;
            }
            assert.equal(next, null, 'the rest went in eventually');
          }
          assert.equal(out.length, payloads.length);
          out.forEach((p, i) => assert.ok(p.equals(payloads[i] as Uint8Array), `payload ${i}`));
          for (const n of asks)
            assert.ok(
              payloads.some((p) => p.length === n),
              `asked ${n}`,
            );
          assert.equal(decoder.awaitingBytes, 0);
          assert.equal(decoder.end(), 'clean');
        },
      ),
      { seed: SEED_HOLD, numRuns: 300 },
    );
  });
});

describe('FrameDecoder hold checks', () => {
  it('asks nothing for a frame that arrives whole, and refuses to start one it may not hold', () => {
    const decoder = new FrameDecoder();
    const asked: number[] = [];
    const no = (n: number): boolean => (asked.push(n), false);
    const whole = encodeFrame(bytes('whole'));
    const big = encodeFrame(patterned(50_000, 3));
    const { frames, rest } = decoder.pushWithin(Buffer.concat([whole, big.subarray(0, 1_000)]), no);
    assert.deepEqual(frames.map(String), ['whole']);
    assert.deepEqual(asked, [50_000]);
    assert.ok(rest !== null);
    assert.equal(rest.length, 1_000 - FRAME_HEADER_BYTES, 'the rest starts at the payload');
    assert.equal(decoder.awaitingBytes, 50_000);
    assert.equal(decoder.inFrame, true);
    assert.equal(decoder.end(), 'truncated');
    // Once the rest and the remainder are there together, no hold is needed at all.
    const again = decoder.pushWithin(Buffer.concat([rest, big.subarray(1_000)]), no);
    assert.equal(again.rest, null);
    assert.ok(again.frames[0]?.equals(patterned(50_000, 3)));
    assert.deepEqual(asked, [50_000]);
  });

  it('applies a lowered cap to the next length read, with its reason', () => {
    const decoder = new FrameDecoder();
    decoder.setMaxFrameBytes(1_000, 'too early');
    assert.deepEqual(decoder.push(encodeFrame(patterned(1_000, 1))).length, 1);
    assert.throws(
      () => decoder.push(header(1_001)),
      (err: unknown) =>
        err instanceof ProtocolError &&
        err.message === 'declared frame length 1001 is outside 1..1000 (too early)',
    );
  });
});
