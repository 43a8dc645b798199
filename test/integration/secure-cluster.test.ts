/**
 * Real coordinator, real workers and the client library together: two live
 * workers with one id (the older one is told WORKER_REPLACED and stops, no
 * ping-pong), a worker that reconnects after its own connection died (not
 * affected), and TLS with tokens on both ports (right, wrong token, wrong
 * CA, plain peer on a TLS port).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import { readClientTls } from '../../src/net/tls.js';
import type { DtpError } from '../../src/protocol/errors.js';
import type { Worker } from '../../src/worker/worker.js';
import { testCerts } from '../helpers/certs.js';
import {
  startCoordinator,
  startTaskWorker,
  tempDir,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function coordinator(
  overrides: Parameters<typeof startCoordinator>[0] = {},
): Promise<TestCoordinator> {
  const tc = await startCoordinator(overrides);
  cleanups.push(() => tc.close());
  return tc;
}

async function worker(
  port: number,
  id: string,
  options: Parameters<typeof startTaskWorker>[2] = {},
): Promise<Worker> {
  const w = await startTaskWorker(port, id, options);
  cleanups.push(() => w.close());
  return w;
}

/**
 * A TCP relay that can cut its worker-facing side silently: the worker sees
 * its connection die, the coordinator sees nothing (its side stays open).
 */
class CuttableRelay {
  readonly #server: Server;
  readonly #near: Socket[] = [];
  readonly #far: Socket[] = [];
  port = 0;

  constructor(target: number) {
    this.#server = createServer((near) => {
      const far = connect(target, '127.0.0.1');
      for (const s of [near, far]) s.on('error', () => undefined);
      near.pipe(far);
      far.pipe(near);
      this.#near.push(near);
      this.#far.push(far);
    });
  }

  async listen(): Promise<void> {
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
    this.port = (this.#server.address() as { port: number }).port;
  }

  /** Drops every worker-facing socket; the coordinator-facing ones stay open, silent. */
  cutNearSide(): void {
    for (const near of this.#near.splice(0)) {
      near.unpipe();
      near.destroy();
    }
    for (const far of this.#far) far.unpipe();
  }

  close(): void {
    for (const s of [...this.#near, ...this.#far]) s.destroy();
    this.#server.close();
  }
}

/**
 * Waits until the coordinator has heard `workerId` beat for `forMs` after
 * now: proof that that much time passed with the session alive.
 */
async function heartbeatsFor(tc: TestCoordinator, workerId: string, forMs: number): Promise<void> {
  const client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  try {
    const fromMs = Date.now();
    await until(async () =>
      (await client.workers()).some(
        (w) => w.workerId === workerId && w.lastHeartbeatMillis >= fromMs + forMs,
      ),
    );
  } finally {
    await client.close();
  }
}

describe('worker identity on a real coordinator', () => {
  it('stops the older of two live workers with one id instead of knocking each other out', async () => {
    const tc = await coordinator();
    const older = await worker(tc.coordinator.workerPort, 'twin');
    await once(older.events, 'registered');
    const refused = once(older.events, 'refused');
    const newer = await worker(tc.coordinator.workerPort, 'twin');
    await once(newer.events, 'registered');
    const [err] = (await refused) as [DtpError];
    assert.equal(err.code, 'WORKER_REPLACED');
    await until(() => older.mode === 'closed');
    // Many heartbeat intervals later (the coordinator has seen the newer
    // session beat for 500 ms more): still exactly two registrations in all.
    await heartbeatsFor(tc, 'twin', 500);
    const registrations = tc.events.filter(
      (e) => e.type === 'worker.registered' && e.workerId === 'twin',
    );
    assert.equal(registrations.length, 2);
    assert.equal(newer.registered, true);
  });

  it('leaves a worker alone that reconnects after its own connection died', async () => {
    // A long heartbeat timeout: the coordinator does not notice the dead link by itself.
    const tc = await coordinator({ heartbeatTimeoutMs: 60_000 });
    const relay = new CuttableRelay(tc.coordinator.workerPort);
    await relay.listen();
    cleanups.push(() => relay.close());
    const w = await worker(relay.port, 'phoenix');
    await once(w.events, 'registered');
    let refused: DtpError | null = null;
    w.events.on('refused', (e) => (refused = e));
    relay.cutNearSide();
    await once(w.events, 'disconnected');
    await once(w.events, 'registered');
    await tc.waitForEvent('worker.lost', (e) => e.workerId === 'phoenix');
    await heartbeatsFor(tc, 'phoenix', 300); // its new session lives on, unrefused
    assert.equal(refused, null);
    assert.equal(w.registered, true);
    assert.deepEqual(
      tc.coordinator.inspect().workers.map((x) => x.workerId),
      ['phoenix'],
    );
  });
});

const certs = testCerts();

describe(
  'TLS and tokens end to end',
  { skip: certs === null ? 'openssl is not installed' : false },
  () => {
    const CLIENT_TOKEN = 'client-token-abcdef0123456789';
    const WORKER_TOKEN = 'worker-token-0123456789abcdef';

    async function secured(): Promise<TestCoordinator> {
      const c = certs!;
      const { dir, remove } = tempDir();
      cleanups.push(remove);
      writeFileSync(join(dir, 'clients'), `${CLIENT_TOKEN}\n`);
      writeFileSync(join(dir, 'workers'), `${WORKER_TOKEN}\n`);
      return coordinator({
        security: {
          tls: { certFile: c.serverPem, keyFile: c.serverKey },
          clientTokenFile: join(dir, 'clients'),
          workerTokenFile: join(dir, 'workers'),
        },
      });
    }

    it('runs a job with TLS and tokens on both ports', async () => {
      const tc = await secured();
      const tls = readClientTls({ caFile: certs!.caPem });
      const w = await worker(tc.coordinator.workerPort, 'w-tls', { tls, authToken: WORKER_TOKEN });
      await once(w.events, 'registered');
      const client = await DtpClient.connect({
        host: '127.0.0.1',
        port: tc.coordinator.clientPort,
        tls,
        token: CLIENT_TOKEN,
      });
      cleanups.push(() => client.close());
      const { jobId } = await client.submit({ taskType: 'SHA256', payload: { text: 'abc' } });
      const job = await client.wait(jobId, 10_000);
      assert.equal(job.state, 'COMPLETED');
      assert.equal(job.result, 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    });

    it('refuses a worker with a wrong token, a wrong CA, or no TLS: each stops with a reason', async () => {
      const tc = await secured();
      const port = tc.coordinator.workerPort;
      const cases: [Parameters<typeof startTaskWorker>[2], string][] = [
        [{ tls: readClientTls({ caFile: certs!.caPem }), authToken: 'nope' }, 'UNAUTHENTICATED'],
        [
          { tls: readClientTls({ caFile: certs!.otherCaPem }), authToken: WORKER_TOKEN },
          'TLS_FAILED',
        ],
        [{ authToken: WORKER_TOKEN }, 'TLS_REQUIRED'],
      ];
      for (const [options, code] of cases) {
        const w = await worker(port, `w-${code}`, options);
        const [err] = (await once(w.events, 'refused')) as [DtpError];
        assert.equal(err.code, code);
        await until(() => w.mode === 'closed');
      }
      assert.deepEqual(tc.coordinator.inspect().workers, []);
    });

    it('fails a client with a wrong token, without a token, or without TLS', async () => {
      const tc = await secured();
      const host = '127.0.0.1';
      const port = tc.coordinator.clientPort;
      const tls = readClientTls({ caFile: certs!.caPem });
      await assert.rejects(DtpClient.connect({ host, port, tls, token: 'wrong' }), {
        code: 'UNAUTHENTICATED',
      });
      const noToken = await DtpClient.connect({ host, port, tls });
      cleanups.push(() => noToken.close());
      await assert.rejects(noToken.workers(), { code: 'UNAUTHENTICATED' });
      const plain = await DtpClient.connect({ host, port, token: CLIENT_TOKEN }).catch(
        (e: unknown) => e,
      );
      assert.equal((plain as DtpError).code, 'TLS_REQUIRED');
      await assert.rejects(
        DtpClient.connect({ host, port, tls: readClientTls({ caFile: certs!.otherCaPem }) }),
        { code: 'TLS_FAILED' },
      );
    });

    it('fails with "does not support authentication" when AUTH is not understood', async () => {
      // A coordinator that closes on AUTH stands for a peer without the extension.
      const server = createServer((socket) => socket.destroy());
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      cleanups.push(() => void server.close());
      const port = (server.address() as { port: number }).port;
      await assert.rejects(DtpClient.connect({ host: '127.0.0.1', port, token: 'x' }), (err) => {
        assert.equal((err as DtpError).code, 'AUTH_UNSUPPORTED');
        assert.match((err as Error).message, /coordinator does not support authentication/);
        return true;
      });
    });
  },
);
