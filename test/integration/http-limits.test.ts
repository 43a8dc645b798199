/**
 * The HTTP port's bounds against a real coordinator, with floods from this
 * process on loopback addresses of their own (127.0.0.0/8 is all loopback):
 *
 * - 300 idle connections from one address hold at most that address's share
 *   and `/healthz` answers from that address and from another; idle floods
 *   from five addresses past the port's total do not lock out a sixth;
 * - slowloris connections (a header byte every 50 ms, reconnecting) are
 *   closed at the header deadline, and `/healthz` answers throughout;
 * - a request whose body stalls is answered 408 and closed at the request
 *   timeout, and stalled bodies do not take the API's places in progress.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { readFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { MAX_API_IN_FLIGHT } from '../../src/http/dashboard.js';
import { HTTP_LIMITS, type HttpLimits } from '../../src/http/http-server.js';
import { testCerts } from '../helpers/certs.js';
import { HttpFlood } from '../helpers/http-flood.js';
import { healthz, openSocket, rawHttp } from '../helpers/raw-http.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const PROBE = '127.0.0.1';
const OTHER = '127.0.0.9';

describe('HTTP port bounds', () => {
  const stops: (() => unknown)[] = [];
  after(async () => {
    for (const stop of stops.reverse()) await stop();
  });

  async function coordinator(
    limits: Partial<HttpLimits> = {},
    overrides: Parameters<typeof startCoordinator>[0] = {},
  ): Promise<number> {
    const tc: TestCoordinator = await startCoordinator(
      { metricsPort: 0, heartbeatTimeoutMs: 5_000, ...overrides },
      { httpLimits: limits },
    );
    stops.push(() => tc.close());
    return tc.coordinator.httpPort as number;
  }

  function flood(plan: Parameters<typeof HttpFlood.start>[0]): HttpFlood {
    const f = HttpFlood.start(plan);
    stops.push(() => f.stop());
    return f;
  }

  async function probes(port: number, from: string[], rounds: number): Promise<(number | null)[]> {
    const statuses: (number | null)[] = [];
    for (let i = 0; i < rounds; i++) {
      for (const localAddress of from) statuses.push(await healthz(port, { localAddress }));
    }
    return statuses;
  }

  it('answers /healthz from the flooding address and another while one address holds 300 idle connections', async () => {
    const port = await coordinator();
    const f = flood({ port, localAddress: PROBE, mode: 'idle', count: 300 });
    await until(
      () => f.stats.opened === 300 && f.stats.open <= HTTP_LIMITS.maxConnectionsPerAddress,
      {
        what: `the flood to be cut to ${HTTP_LIMITS.maxConnectionsPerAddress}`,
      },
    );
    assert.deepEqual(await probes(port, [PROBE, OTHER], 5), Array(10).fill(200));
    f.stop();
  });

  it('answers /healthz while five addresses hold more idle connections than the port allows', async () => {
    const port = await coordinator({ maxConnections: 40, maxConnectionsPerAddress: 10 });
    const floods = [2, 3, 4, 5, 6].map((n) =>
      flood({ port, localAddress: `127.0.0.${n}`, mode: 'idle', count: 12 }),
    );
    await until(() => floods.every((f) => f.stats.opened === 12), { what: 'the floods to open' });
    await until(() => floods.reduce((sum, f) => sum + f.stats.open, 0) <= 40, {
      what: 'the floods to be cut to the port total',
    });
    assert.deepEqual(await probes(port, [PROBE, '127.0.0.2'], 5), Array(10).fill(200));
    for (const f of floods) f.stop();
  });

  it('closes slowloris connections at the header deadline and answers /healthz throughout', async () => {
    const headersTimeoutMs = 400;
    const port = await coordinator({ headersTimeoutMs });
    const f = flood({
      port,
      localAddress: PROBE,
      mode: 'slowloris',
      count: 40,
      intervalMs: 50,
      reconnect: true,
      maxOpens: 400,
    });
    await until(() => f.stats.closedByServer >= 40, {
      timeoutMs: 10_000,
      what: 'the first round of slowloris connections to be closed',
    });
    const statuses = await probes(port, [PROBE, OTHER], 10);
    f.stop();
    assert.deepEqual(statuses, Array(20).fill(200));
    const longest = Math.max(...f.stats.lifetimesMs);
    // The deadline, plus Node's check interval (a quarter of it), plus slack for a loaded machine.
    assert.ok(longest < headersTimeoutMs + 1_500, `a slowloris connection lived ${longest} ms`);
    assert.ok(Math.min(...f.stats.lifetimesMs) >= headersTimeoutMs - 50);
  });

  it('answers 408 and closes a request whose body stalls, at the request timeout', async () => {
    const requestTimeoutMs = 600;
    const port = await coordinator({ requestTimeoutMs });
    const started = performance.now();
    const reply = await rawHttp(
      port,
      'POST /api/purge HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"st',
      { end: false, timeoutMs: 5_000 },
    );
    const heldMs = performance.now() - started;
    assert.equal(reply.closed, true, `held for ${heldMs} ms`);
    assert.equal(reply.status, 408, reply.text);
    assert.ok(heldMs >= requestTimeoutMs - 50 && heldMs < requestTimeoutMs + 2_000, `${heldMs} ms`);
    assert.equal(await healthz(port), 200);
  });

  it('keeps the API answering while stalled bodies wait on more connections than it has places', async () => {
    const port = await coordinator({ requestTimeoutMs: 60_000 });
    const stalled = [];
    for (let i = 0; i < MAX_API_IN_FLIGHT + 4; i++) {
      const socket = await openSocket(port, { localAddress: `127.0.1.${1 + (i % 8)}` });
      socket.on('error', () => undefined);
      socket.write(
        'POST /api/purge HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{',
      );
      stalled.push(socket);
      stops.push(() => socket.destroy());
    }
    const reply = await rawHttp(port, 'GET /api/overview HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    assert.equal(reply.status, 200, reply.text.slice(0, 300));
    for (const socket of stalled) socket.destroy();
  });

  const certs = testCerts();
  it(
    'over TLS, keeps a live stream and answers /healthz while idle connections flood its address',
    { skip: certs === null ? 'openssl is not installed' : false },
    async () => {
      const c = certs!;
      const tls = { certFile: c.serverPem, keyFile: c.serverKey };
      const port = await coordinator({ maxConnectionsPerAddress: 8 }, { security: { tls } });
      const ca = readFileSync(c.caPem);
      const get = (path: string): Promise<IncomingMessage> =>
        new Promise((resolve, reject) => {
          const req = httpsRequest({ host: PROBE, port, path, ca, agent: false }, resolve);
          req.on('error', reject);
          req.end();
        });
      const stream = await get('/api/events');
      assert.equal(stream.statusCode, 200);
      let streamClosed = false;
      stream.on('close', () => (streamClosed = true));
      stream.resume();
      const f = flood({ port, localAddress: PROBE, mode: 'idle', count: 30 });
      await until(() => f.stats.opened === 30 && f.stats.open <= 8, {
        what: 'the flood to be cut to 8',
      });
      for (let i = 0; i < 5; i++) {
        const res = await get('/healthz');
        res.resume();
        await once(res, 'end');
        assert.equal(res.statusCode, 200);
      }
      assert.equal(streamClosed, false, 'the live stream (busy) was closed for the flood');
      stream.destroy();
      f.stop();
    },
  );
});
