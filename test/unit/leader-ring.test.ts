import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  AddressError,
  formatHostPort,
  parseAddressList,
  parseHostPort,
} from '../../src/net/address.js';
import { isSafeToRepeat } from '../../src/client/leader-connection.js';
import type { JsonObject } from '../../src/protocol/messages.js';
import { LeaderFollower, type TryOutcome } from '../../src/net/leader-follower.js';
import { LeaderRing } from '../../src/net/leader-ring.js';

describe('addresses', () => {
  it('parses host, host:port and IPv6 literals with a default port', () => {
    assert.deepEqual(parseHostPort('a', 7071), { host: 'a', port: 7071 });
    assert.deepEqual(parseHostPort(' a:1 ', 7071), { host: 'a', port: 1 });
    assert.deepEqual(parseHostPort('[::1]:9', 7071), { host: '::1', port: 9 });
    assert.deepEqual(parseHostPort('[::1]', 7071), { host: '::1', port: 7071 });
    assert.deepEqual(parseHostPort('::1', 7071), { host: '::1', port: 7071 });
    assert.equal(formatHostPort({ host: '::1', port: 9 }), '[::1]:9');
  });

  it('parses lists in order without duplicates, and refuses bad ports and empty lists', () => {
    assert.deepEqual(parseAddressList('h1:1,h2, h1:1,,h3:3', 7), [
      { host: 'h1', port: 1 },
      { host: 'h2', port: 7 },
      { host: 'h3', port: 3 },
    ]);
    assert.throws(() => parseAddressList('h:0', 7), AddressError);
    assert.throws(() => parseAddressList('h:x', 7), AddressError);
    assert.throws(() => parseAddressList(' , ', 7), AddressError);
  });
});

describe('LeaderRing', () => {
  const a = { host: 'a', port: 1 };
  const b = { host: 'b', port: 2 };
  const c = { host: 'c', port: 3 };

  it('walks the list on failures and pauses only after a whole round', () => {
    const ring = new LeaderRing([a, b, c]);
    assert.deepEqual(ring.next(), a);
    ring.failed();
    assert.equal(ring.shouldPause(), false);
    assert.deepEqual(ring.next(), b);
    ring.notLeader(null, 9);
    assert.equal(ring.shouldPause(), false);
    assert.deepEqual(ring.next(), c);
    ring.failed();
    assert.equal(ring.shouldPause(), true);
    assert.deepEqual(ring.next(), a);
  });

  it('dials the leader a standby named next, and stays with it once it served', () => {
    const ring = new LeaderRing([a, b, c]);
    assert.deepEqual(ring.next(), a);
    ring.notLeader('c:3', 9);
    assert.equal(ring.shouldPause(), false);
    assert.deepEqual(ring.next(), c);
    ring.succeeded();
    // the connection ends later: pause, then the same coordinator first
    assert.equal(ring.shouldPause(), true);
    assert.deepEqual(ring.next(), c);
  });

  it('goes back to the list when a named leader cannot be reached, and ignores an unparsable name', () => {
    const ring = new LeaderRing([a, b]);
    ring.next();
    ring.notLeader('elsewhere:5', 9);
    assert.deepEqual(ring.next(), { host: 'elsewhere', port: 5 });
    ring.failed();
    assert.deepEqual(ring.next(), b);
    ring.notLeader('host:99999', 9);
    assert.deepEqual(ring.next(), a);
  });

  it('follows a named leader only when its host is a plain host name or IP address', () => {
    const ring = new LeaderRing([a]);
    for (const leader of ['x\u0000y', 'a b', 'a'.repeat(64), '\ud800', 'x'.repeat(400)]) {
      ring.next();
      ring.notLeader(leader, 9);
      assert.deepEqual(ring.next(), a, JSON.stringify(leader.slice(0, 20)));
    }
    for (const [leader, host] of [
      ['coord-2.example.com:7070', 'coord-2.example.com'],
      ['10.0.0.7', '10.0.0.7'],
      ['[fe80::1]:7070', 'fe80::1'],
    ] as const) {
      ring.notLeader(leader, 7070);
      assert.deepEqual(ring.next(), { host, port: 7070 });
    }
  });
});

describe('LeaderFollower', () => {
  const addresses = parseAddressList('a:1,b:2,c:3', 7);
  const fast = { pause: { firstMs: 1, longestMs: 2 } };

  /** Runs follow() with `answers` in turn; returns the addresses tried and the outcome. */
  async function follow(answers: TryOutcome<string>[], options = {}) {
    const follower = new LeaderFollower(addresses, 7);
    const tried: string[] = [];
    const outcome = await follower.follow(
      (address) => {
        tried.push(formatHostPort(address));
        return Promise.resolve(answers.shift() ?? { kind: 'served', value: 'ok' });
      },
      { ...fast, ...options },
    );
    return { tried, outcome, follower };
  }

  it('moves on after each miss, follows a named leader at once, and stops where one serves', async () => {
    const failed = { kind: 'failed', error: null } as const;
    const { tried, outcome, follower } = await follow([
      failed,
      { kind: 'notLeader', leader: 'c:3', error: null },
      failed,
      failed,
    ]);
    assert.deepEqual(tried, ['a:1', 'b:2', 'c:3', 'c:3', 'a:1']);
    assert.deepEqual(outcome, { kind: 'served', value: 'ok' });
    assert.equal(follower.address, 'a:1');
  });

  it('gives up when retry says so or the deadline passed, with the last miss', async () => {
    const miss = { kind: 'failed', error: 'e' } as const;
    const once = await follow([miss], { retry: () => false });
    assert.deepEqual([once.tried, once.outcome], [['a:1'], miss]);
    const late = await follow([miss, miss], { deadlineMs: performance.now() - 1 });
    assert.deepEqual([late.tried, late.outcome], [['a:1'], miss]);
  });
});

describe('isSafeToRepeat', () => {
  const submit = (idempotencyKey: string | null) =>
    ({
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: 'x' },
      maxAttempts: null,
      idempotencyKey,
      priority: null,
    }) as const;

  it('repeats reads, waits and keyed submissions, never a submission without a key', () => {
    assert.equal(isSafeToRepeat(submit('k')), true);
    assert.equal(isSafeToRepeat(submit(null)), false);
    assert.equal(isSafeToRepeat(submit('')), false);
    assert.equal(isSafeToRepeat({ type: 'GET_JOB_STATUS', jobId: 'j' }), true);
    assert.equal(isSafeToRepeat({ type: 'WAIT_JOB', jobId: 'j', timeoutMillis: 5 }), true);
    assert.equal(isSafeToRepeat({ type: 'LIST_WORKERS' }), true);
  });

  it('repeats a batch only when every job of it has a key', () => {
    const job = (key?: string): JsonObject =>
      key === undefined
        ? { taskType: 'SHA256', payload: {} }
        : { taskType: 'SHA256', payload: {}, idempotencyKey: key };
    const batch = (...jobs: JsonObject[]) => ({ type: 'SUBMIT_JOBS' as const, jobs });
    assert.equal(isSafeToRepeat(batch(job('a'), job('b'))), true);
    assert.equal(isSafeToRepeat(batch(job('a'), job())), false);
    assert.equal(isSafeToRepeat(batch(job('a'), job(''))), false);
  });

  it('repeats a flow only when every job of it has a key', () => {
    const job = (ref: string, idempotencyKey?: string) => ({
      ref,
      taskType: 'SHA256',
      payload: {},
      ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
    });
    const flow = (...jobs: ReturnType<typeof job>[]) => ({ type: 'SUBMIT_FLOW' as const, jobs });
    assert.equal(isSafeToRepeat(flow(job('a', 'ka'), job('b', 'kb'))), true);
    assert.equal(isSafeToRepeat(flow(job('a', 'ka'), job('b'))), false);
    assert.equal(isSafeToRepeat(flow(job('a', ''))), false);
  });
});
