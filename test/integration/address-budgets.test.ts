/**
 * Budgets per address against a real coordinator: one address floods it
 * with subscriptions, pending waits or live streams (from 127.0.0.2, a
 * flood-peer process or this process; 127.0.0.0/8 is all loopback), and a
 * client from 127.0.0.1 still gets its `watch`, its `events`, its held
 * `WAIT_JOB` and its live stream. And a subscriber that stopped reading is
 * dropped to make room for one that reads, instead of the reader being refused.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { DtpClient, type WatchEvent } from '../../src/client/index.js';
import { encodeMessage } from '../../src/protocol/codec.js';
import {
  MAX_HTTP_STREAMS,
  MAX_SUBSCRIPTIONS,
  MAX_SUBSCRIPTIONS_PER_CONNECTION,
} from '../../src/protocol/limits.js';
import { Flood } from '../helpers/flood.js';
import type { FloodPlan } from '../helpers/flood-peer.js';
import { EventStream } from '../helpers/http-api.js';
import { openSocket } from '../helpers/raw-http.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';
const FLOOD_FROM = '127.0.0.2';

describe('budgets per address', { timeout: 120_000 }, () => {
  const stops: (() => unknown)[] = [];
  after(async () => {
    for (const stop of stops.reverse()) await stop();
  });

  async function coordinator(
    overrides: Parameters<typeof startCoordinator>[0] = {},
  ): Promise<TestCoordinator> {
    const tc = await startCoordinator({ heartbeatTimeoutMs: 5_000, ...overrides });
    stops.push(() => tc.close());
    return tc;
  }

  async function client(tc: TestCoordinator): Promise<DtpClient> {
    const c = await DtpClient.connect({ host: HOST, port: tc.coordinator.clientPort });
    stops.push(() => c.close());
    return c;
  }

  function flood(tc: TestCoordinator, plan: Omit<FloodPlan, 'port' | 'host' | 'holdMs'>): Flood {
    const f = Flood.start({
      port: tc.coordinator.clientPort,
      host: HOST,
      localAddress: FLOOD_FROM,
      holdMs: 100_000,
      ...plan,
    });
    stops.push(() => f.stop());
    return f;
  }

  it('serves watch and events from another address while one address subscribes on 1,024 connections', async () => {
    const tc = await coordinator();
    const f = flood(tc, { mode: 'subscribe', count: MAX_SUBSCRIPTIONS });
    const perAddress = tc.options.maxSubscriptionsPerAddress;
    await f.until((s) => s.written === MAX_SUBSCRIPTIONS, 'every flood connection to subscribe');
    await until(() => tc.coordinator.inspect().subscriptions === perAddress, {
      what: `the flood to hold its address's ${perAddress}`,
      timeoutMs: 30_000,
    });
    const c = await client(tc);
    const seen: WatchEvent[] = [];
    const controller = new AbortController();
    const reading = (async () => {
      for await (const item of c.events({}, { signal: controller.signal })) seen.push(item);
    })();
    await until(() => tc.coordinator.inspect().subscriptions === perAddress + 1, {
      what: 'the events subscription',
    });
    const { jobId } = await c.submit({ taskType: 'SLEEP', payload: { durationMillis: 10 } });
    const watched: WatchEvent[] = [];
    const watching = (async () => {
      for await (const item of c.watch(jobId)) watched.push(item);
    })();
    await until(() => watched.length > 0, { what: 'the watch to start' });
    await c.cancel(jobId);
    await watching;
    assert.deepEqual(
      watched.map((w) => [w.event, w.job.state]),
      [
        ['current', 'QUEUED'],
        ['state', 'CANCELLED'],
      ],
    );
    await until(() => seen.some((i) => i.job.jobId === jobId && i.job.state === 'CANCELLED'), {
      what: 'the cancel as an event',
    });
    controller.abort();
    await reading;
    assert.ok(tc.coordinator.inspect().subscriptions <= perAddress + 1);
    await f.stop();
  });

  it('holds a wait from another address while one address holds all it may', async () => {
    const tc = await coordinator({ maxWaitsPerAddress: 2_000, maxWaits: 3_000 });
    const c = await client(tc);
    const { jobId } = await c.submit({ taskType: 'SLEEP', payload: { durationMillis: 10 } });
    const f = flood(tc, {
      mode: 'waits',
      count: 10,
      waits: 500,
      jobIds: [jobId],
      waitTimeoutMs: 3_600_000,
    });
    await f.until((s) => s.written === 10, 'the flood to send its waits');
    await until(() => tc.coordinator.inspect().pendingWaits === 2_000, {
      what: 'the flood to hold its address budget',
    });
    const waiting = c.wait(jobId, 30_000);
    await until(() => tc.coordinator.inspect().pendingWaits === 2_001, {
      what: "the other address's wait to be held",
    });
    await c.cancel(jobId);
    assert.equal((await waiting).state, 'CANCELLED');
    await f.stop();
  });

  it('drops a subscriber that stopped reading to make room for one that reads', async () => {
    const stallMs = 300;
    const tc = await coordinator({
      maxSubscriptionsPerAddress: MAX_SUBSCRIPTIONS_PER_CONNECTION,
      subscriberStallMs: stallMs,
      metricsPort: 0,
    });
    const metrics = async (): Promise<string> =>
      (await fetch(`http://${HOST}:${tc.coordinator.httpPort}/metrics`)).text();
    const stalled = await stalledSubscriber(tc.coordinator.clientPort);
    let stalledClosed = false;
    stalled.on('close', () => (stalledClosed = true));
    stops.push(() => stalled.destroy());
    const c = await client(tc);
    const seen: WatchEvent[] = [];
    const controller = new AbortController();
    /**
     * Job events (each reaches it 16 times) until it leaves more unread than
     * it may; then it stays behind as long as it does not read, with or
     * without more events. Returns once it has been behind for twice the
     * stall time, as the coordinator and its metric say; floods again when
     * the stall ended meanwhile (the kernel's buffers took what waited).
     */
    const stall = async (): Promise<void> => {
      for (let round = 0; round < 10; round++) {
        const deadlineMs = performance.now() + 10_000;
        for (let i = 0; i < 20_000 && tc.coordinator.inspect().stalledSubscribers === 0; i++) {
          assert.ok(performance.now() < deadlineMs, 'the subscriber never fell behind');
          await c.submitMany(
            Array.from({ length: 5 }, () => ({
              taskType: 'SLEEP',
              payload: { durationMillis: 1 },
            })),
          );
        }
        const behindSinceMs = performance.now();
        const seen = await until(
          async () => {
            if (tc.coordinator.inspect().stalledSubscribers === 0) return 'caught up';
            if (performance.now() - behindSinceMs <= 2 * stallMs) return null;
            return /^dtp_event_subscribers_stalled 1$/m.test(await metrics()) ? 'behind' : null;
          },
          { what: 'the subscriber to stay behind for twice the stall time' },
        );
        if (seen === 'behind') return;
      }
      assert.fail('the subscriber never fell behind for good');
    };
    /**
     * Subscribes from the same address: true once the coordinator holds the
     * new subscription, false when it refused it because no subscriber has
     * left its events unread for the stall time. The kernel's buffers of a
     * paused reader may grow and take what was waiting, which ends a stall
     * between two of the loop's looks at it.
     */
    const subscribe = async (): Promise<{ held: boolean; reading: Promise<void> }> => {
      let refused = false;
      const reading = (async () => {
        for await (const item of c.events({}, { signal: controller.signal })) seen.push(item);
      })().catch((error: unknown) => {
        if ((error as { code?: unknown }).code !== 'TOO_MANY_SUBSCRIPTIONS') throw error;
        refused = true;
      });
      // The stalled subscriber's 16 go before the new one is held.
      await until(() => refused || tc.coordinator.inspect().subscriptions === 1, {
        what: 'the subscription to be held or refused',
      });
      return { held: !refused, reading };
    };
    let opened: { held: boolean; reading: Promise<void> } = {
      held: false,
      reading: Promise.resolve(),
    };
    for (let tries = 0; tries < 10 && !opened.held; tries++) {
      await stall();
      opened = await subscribe();
    }
    assert.ok(opened.held, 'the subscription was refused ten times');
    const { reading } = opened;
    const dropped = await tc.waitForEvent('subscriber.dropped');
    assert.equal(dropped.address, HOST);
    assert.ok(dropped.stalledMs >= stallMs, `stalled ${dropped.stalledMs} ms`);
    // A paused socket does not see its end: read on (and throw away) to see it.
    stalled.on('data', () => undefined);
    stalled.resume();
    await until(() => stalledClosed, { what: 'the stalled subscriber to be closed' });
    const { jobId } = await c.submit({ taskType: 'SLEEP', payload: { durationMillis: 10 } });
    await until(() => seen.some((i) => i.job.jobId === jobId), { what: "the reader's event" });
    controller.abort();
    await reading;
    assert.match(await metrics(), /^dtp_subscribers_dropped_total\{budget="address"\} 1$/m);
  });

  it('serves a live stream from another address while one address opens every one it can', async () => {
    const tc = await coordinator({ metricsPort: 0 });
    const port = tc.coordinator.httpPort as number;
    const statuses: string[] = [];
    for (let i = 0; i < MAX_HTTP_STREAMS; i++) {
      const socket = await openSocket(port, { localAddress: FLOOD_FROM });
      stops.push(() => socket.destroy());
      socket.on('error', () => undefined);
      socket.write(`GET /api/events HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`);
      const [first] = (await once(socket, 'data')) as [Buffer];
      statuses.push(first.toString('latin1').split('\r\n')[0] ?? '');
    }
    const perAddress = tc.options.maxHttpStreamsPerAddress;
    assert.equal(statuses.filter((s) => s.includes(' 200 ')).length, perAddress);
    assert.equal(statuses.filter((s) => s.includes(' 503 ')).length, MAX_HTTP_STREAMS - perAddress);
    const stream = new EventStream(port);
    stops.push(() => stream.close());
    assert.equal(await stream.status, 200);
    await stream.next((e) => e.event === 'overview');
  });
});

/**
 * A raw connection from 127.0.0.1 holding 16 subscriptions to every job,
 * that reads nothing once they are in place (each event reaches it 16 times,
 * so it falls behind quickly).
 */
async function stalledSubscriber(port: number): Promise<Socket> {
  const socket = connect({ host: HOST, port });
  await once(socket, 'connect');
  socket.on('error', () => undefined);
  const one = encodeMessage({ type: 'SUBSCRIBE_JOBS', filter: {} });
  socket.write(Buffer.concat(Array<Buffer>(MAX_SUBSCRIPTIONS_PER_CONNECTION).fill(one)));
  const repliesBytes =
    MAX_SUBSCRIPTIONS_PER_CONNECTION * encodeMessage({ type: 'SUBSCRIBED' }).length;
  let received = 0;
  await new Promise<void>((resolve) => {
    const onData = (d: Buffer): void => {
      received += d.length;
      // Reading stops once every SUBSCRIBED came.
      if (received < repliesBytes) return;
      socket.off('data', onData);
      socket.pause();
      resolve();
    };
    socket.on('data', onData);
  });
  return socket;
}
