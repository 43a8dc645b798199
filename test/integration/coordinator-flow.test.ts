/**
 * Flow control on the client port: a client that pipelines heavy requests
 * and never reads its replies gets its reading stopped (at once, mid-chunk)
 * with a bounded amount of replies owed, others keep being served, and the
 * stalled connection is closed once idle; a client that reads is never held
 * back; idle connections are closed, waiting ones are not.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import type { NetEvent } from '../../src/net/net-events.js';
import { encodeMessage } from '../../src/protocol/codec.js';
import { MAX_FRAME_BYTES } from '../../src/protocol/framing.js';
import { RawClient } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const MAX_UNSENT = 1024 * 1024;
const IDLE_MS = 1_500;

describe('client port flow control', () => {
  let tc: TestCoordinator;
  let c: RawClient;
  const net: NetEvent[] = [];

  before(async () => {
    tc = await startCoordinator({
      maxActiveJobs: 100_000,
      netLimits: { clientIdleTimeoutMs: IDLE_MS, maxUnsentReplyBytes: MAX_UNSENT },
    });
    tc.coordinator.events.on('net', (e) => net.push(e));
    c = await RawClient.connect(tc.coordinator.clientPort);
    // Enough queued jobs that one LIST_JOBS limit 10000 fills most of a frame.
    const text = 'x'.repeat(200);
    for (let sent = 0; sent < 3_000; sent += 500) {
      for (let i = 0; i < 500; i++) {
        c.conn.send({
          type: 'SUBMIT_JOB',
          taskType: 'SHA256',
          payload: { text },
          maxAttempts: null,
          idempotencyKey: null,
          priority: null,
        });
      }
      for (let i = 0; i < 500; i++) await c.inbox.next();
    }
  });
  after(async () => {
    await c.close();
    await tc.close();
  });

  it('stops reading a client that pipelines LIST_JOBS without reading, and closes it once idle', async () => {
    const storm: Socket[] = [];
    const list = encodeMessage({ type: 'LIST_JOBS', limit: 10_000, state: null, cursor: null });
    for (let i = 0; i < 10; i++) {
      const socket = connect(tc.coordinator.clientPort, '127.0.0.1');
      socket.on('error', () => undefined);
      await once(socket, 'connect');
      socket.pause(); // never reads a reply
      socket.write(Buffer.concat(Array.from({ length: 40 }, () => list)));
      storm.push(socket);
    }
    const pausedEvents = (): NetEvent[] =>
      net.filter((e) => e.type === 'connection.limited' && e.limit === 'unsent_replies');
    await until(() => pausedEvents().length >= 10, {
      timeoutMs: 30_000,
      what: 'every storm connection to be paused',
    });
    const paused = pausedEvents();
    for (const event of paused) {
      const bytes = event.type === 'connection.limited' ? (event.bytes ?? 0) : 0;
      // At most the bound plus the one reply that crossed it.
      assert.ok(bytes <= MAX_UNSENT + MAX_FRAME_BYTES + 8, `owed ${bytes} bytes`);
    }
    // Everyone else is served while they stall.
    const bystander = await RawClient.connect(tc.coordinator.clientPort);
    const reply = await bystander.request({ type: 'LIST_WORKERS' });
    assert.equal(reply.type, 'WORKER_LIST');
    await bystander.close();
    // The stalled ones are closed once idle (they never read, so they cannot see it).
    await until(
      () =>
        net.filter((e) => e.type === 'connection.limited' && e.limit === 'idle_timeout').length >=
        10,
      { timeoutMs: 10_000, what: 'the idle timeout to close the stalled connections' },
    );
    for (const socket of storm) socket.destroy();
  });

  it('answers every one of thousands of pipelined requests when the client reads', async () => {
    const reader = await RawClient.connect(tc.coordinator.clientPort);
    const before = net.length;
    for (let i = 0; i < 5_000; i++) reader.conn.send({ type: 'LIST_WORKERS' });
    for (let i = 0; i < 5_000; i++) assert.equal((await reader.inbox.next()).type, 'WORKER_LIST');
    assert.deepEqual(
      net.slice(before).filter((e) => e.type === 'connection.limited'),
      [],
      'no bound bit',
    );
    await reader.close();
  });

  it('holds 20,000 pending waits over 16 connections without any bound biting', async () => {
    // The shared client sits idle through this test, and its idle close must
    // not count here: close it now (the after hook's close is then a no-op).
    await c.close();
    const before = net.length;
    const own = await RawClient.connect(tc.coordinator.clientPort);
    // More jobs, so that every wait is on an active job of its own.
    const jobIds: string[] = [];
    for (let sent = 0; sent < 17_000; sent += 1_000) {
      for (let i = 0; i < 1_000; i++) {
        own.conn.send({
          type: 'SUBMIT_JOB',
          taskType: 'SLEEP',
          payload: { durationMillis: 1 },
          maxAttempts: null,
          idempotencyKey: null,
          priority: null,
        });
      }
      for (let i = 0; i < 1_000; i++) {
        const reply = await own.inbox.next();
        assert.equal(reply.type, 'JOB_SUBMITTED');
        if (reply.type === 'JOB_SUBMITTED') jobIds.push(reply.jobId);
      }
    }
    const listed = await own.request({
      type: 'LIST_JOBS',
      limit: 3_000,
      state: 'QUEUED',
      cursor: null,
    });
    if (listed.type === 'JOB_LIST') jobIds.push(...listed.jobs.map((j) => j.jobId));
    // This connection has nothing in flight while the waits are set up, and an
    // idle close of it is right: close it ourselves, and clean up on another.
    await own.close();
    const waiters = await Promise.all(
      Array.from({ length: 16 }, () => RawClient.connect(tc.coordinator.clientPort)),
    );
    for (let i = 0; i < 20_000; i++) {
      const jobId = jobIds[i % jobIds.length] as string;
      (waiters[i % 16] as RawClient).conn.send({ type: 'WAIT_JOB', jobId, timeoutMillis: 60_000 });
    }
    await until(() => tc.coordinator.inspect().pendingWaits === 20_000, {
      timeoutMs: 30_000,
      what: '20,000 pending waits',
    });
    assert.deepEqual(
      net.slice(before).filter((e) => e.type === 'connection.limited'),
      [],
    );
    await Promise.all(waiters.map((w) => w.close()));
    await until(() => tc.coordinator.inspect().pendingWaits === 0, { what: 'the waits dropped' });
    const cleanup = await RawClient.connect(tc.coordinator.clientPort);
    for (const jobId of jobIds) cleanup.conn.send({ type: 'CANCEL_JOB', jobId });
    for (let i = 0; i < jobIds.length; i++) await cleanup.inbox.next();
    await cleanup.close();
  });

  it('closes a connection with nothing in flight after the idle timeout, not one that waits', async () => {
    const idle = await RawClient.connect(tc.coordinator.clientPort);
    const waiting = await RawClient.connect(tc.coordinator.clientPort);
    const jobId = await waiting.submit('SLEEP', { durationMillis: 1 });
    const answered = waiting.request(
      { type: 'WAIT_JOB', jobId, timeoutMillis: IDLE_MS * 2 },
      IDLE_MS * 4,
    );
    await idle.conn.closed();
    assert.equal(waiting.conn.isOpen, true, 'a connection waiting for a reply is not idle');
    const reply = await answered;
    assert.equal(reply.type, 'JOB_STATUS');
    await waiting.close();
  });
});
