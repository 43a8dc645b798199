/**
 * The budgets of the HTTP port's live streams (`/api/events`, live.ts): at
 * most so many from one address (`::ffff:` forms counted with their IPv4
 * address) and in all, refused with 503 LIMIT_EXCEEDED; and a stream whose
 * output has waited unsent for the stall time is closed to make room for a
 * newcomer before the newcomer is refused. Responses are stand-ins whose
 * unsent bytes the test sets; the clock of the stall rule is injected, the
 * streams' own timer is real (the test waits for its messages).
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterEach, describe, it } from 'node:test';
import { LiveStreams, type LiveLimits } from '../../src/http/live.js';
import { HttpError } from '../../src/http/responses.js';
import { until } from '../helpers/until.js';

const STALL_MS = 10_000;

/** A response that records what is written and lets the test say how much waits unsent. */
class FakeResponse extends EventEmitter {
  writableLength = 0;
  readonly writes: string[] = [];
  destroyed = false;

  writeHead(): this {
    return this;
  }

  write(text: string): boolean {
    this.writes.push(text);
    return true;
  }

  destroy(): this {
    this.destroyed = true;
    this.emit('close');
    return this;
  }

  end(): this {
    this.emit('close');
    return this;
  }
}

function fakeRequest(address: string): IncomingMessage {
  return Object.assign(new EventEmitter(), { socket: { remoteAddress: address } }) as never;
}

describe('live streams: budgets', () => {
  let clockMs = 0;
  let live: LiveStreams | null = null;
  afterEach(() => live?.close());

  function streams(limits: Partial<LiveLimits>): LiveStreams {
    clockMs = 0;
    live = new LiveStreams(
      { overview: () => Promise.resolve({}), workers: () => Promise.resolve([]) },
      { stallMs: STALL_MS, ...limits },
      () => clockMs,
    );
    return live;
  }

  function open(l: LiveStreams, address: string): FakeResponse {
    const res = new FakeResponse();
    l.open(fakeRequest(address), res as unknown as ServerResponse);
    return res;
  }

  function refused(l: LiveStreams, address: string, message: RegExp): void {
    assert.throws(
      () => open(l, address),
      (err: unknown) =>
        err instanceof HttpError &&
        err.status === 503 &&
        err.code === 'LIMIT_EXCEEDED' &&
        message.test(err.message),
    );
  }

  it('refuses an address past its budget, counting ::ffff: forms as the IPv4 address', () => {
    const l = streams({ maxStreamsPerAddress: 2 });
    open(l, '127.0.0.1');
    open(l, '::ffff:127.0.0.1');
    refused(l, '127.0.0.1', /at most 2 live streams from one address/);
    open(l, '127.0.0.2');
    assert.equal(l.countFor('127.0.0.1'), 2);
    assert.equal(l.size, 3);
  });

  it('refuses past the total when no stream has stalled', () => {
    const l = streams({ maxStreams: 3, maxStreamsPerAddress: 2 });
    open(l, '127.0.0.1');
    open(l, '127.0.0.1');
    const other = open(l, '127.0.0.2');
    refused(l, '127.0.0.3', /at most 3 live streams are open/);
    other.emit('close');
    open(l, '127.0.0.3');
  });

  it('closes the stream of the address whose output has waited longest, once past the stall time', async () => {
    const l = streams({ maxStreamsPerAddress: 2 });
    const reading = open(l, '127.0.0.1');
    const stalled = open(l, '127.0.0.1');
    const elsewhere = open(l, '127.0.0.2');
    stalled.writableLength = 4_096;
    elsewhere.writableLength = 4_096; // another address: never closed for this one's budget
    // A message went out after the bytes were seen waiting: the stall is noted.
    await until(() => stalled.writes.length >= 3, { what: 'a message after the first' });
    clockMs += STALL_MS - 1;
    refused(l, '127.0.0.1', /none of them has stopped reading/);
    clockMs += 1;
    const newcomer = open(l, '127.0.0.1');
    assert.equal(stalled.destroyed, true);
    assert.equal(reading.destroyed, false);
    assert.equal(elsewhere.destroyed, false);
    assert.equal(newcomer.destroyed, false);
    assert.equal(l.countFor('127.0.0.1'), 2);
  });

  it('keeps a stream whose reader caught up', async () => {
    const l = streams({ maxStreams: 1 });
    const slow = open(l, '127.0.0.1');
    slow.writableLength = 4_096;
    await until(() => slow.writes.length >= 3, { what: 'a message after the first' });
    slow.writableLength = 0;
    const seen = slow.writes.length;
    await until(() => slow.writes.length > seen, { what: 'the next message' });
    clockMs += STALL_MS;
    refused(l, '127.0.0.2', /at most 1 live streams are open/);
    assert.equal(slow.destroyed, false);
  });
});
