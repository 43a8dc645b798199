/**
 * Workers and clients that dial the wrong kind of port, and what a refused
 * token says, against a real coordinator and against a strict v1 peer
 * (whose answers carry no codes):
 *
 * - a worker on a client port stops (WRONG_PORT) instead of registering
 *   again forever, with and without client tokens;
 * - a client on a worker port fails with WRONG_PORT, with and without a token;
 * - a refused client token says "token refused", a missing one tells the
 *   CLI user how to give one; the worker port says the same for worker tokens.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { runClientCli } from '../../src/cli/client-cli.js';
import { DtpClient } from '../../src/client/client.js';
import { AuthError, WrongPortError } from '../../src/client/errors.js';
import type { DtpError } from '../../src/protocol/errors.js';
import { Worker } from '../../src/worker/worker.js';
import { rawConnection } from '../helpers/raw-peers.js';
import { StrictV1Coordinator } from '../helpers/strict-v1.js';
import {
  startCoordinator,
  tempDir,
  testLogger,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';

const HOST = '127.0.0.1';
/** A test that would hang (a worker registering forever) fails instead. */
const BOUNDED = { timeout: 15_000 };
const CLIENT_TOKEN = 'client-token-31a9f0c2d4b6e8a1c3e5f7';
const WORKER_TOKEN = 'worker-token-8c6a4e2f0d1b3a5c7e9f11';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (let fn = cleanups.pop(); fn !== undefined; fn = cleanups.pop()) await fn();
});

async function coordinator(tokens: { client?: boolean; worker?: boolean } = {}) {
  const temp = tempDir();
  cleanups.push(temp.remove);
  const file = (name: string, token: string): string => {
    const path = join(temp.dir, name);
    writeFileSync(path, `${token}\n`, { mode: 0o600 });
    return path;
  };
  const tc: TestCoordinator = await startCoordinator({
    security: {
      clientTokenFile: tokens.client === true ? file('client', CLIENT_TOKEN) : null,
      workerTokenFile: tokens.worker === true ? file('worker', WORKER_TOKEN) : null,
    },
  });
  cleanups.push(() => tc.close());
  return tc.coordinator;
}

async function v1(): Promise<StrictV1Coordinator> {
  const fake = await StrictV1Coordinator.start();
  cleanups.push(() => fake.close());
  return fake;
}

/** A worker dialling `port`; resolves with the error it was refused with. */
async function refusedWorker(port: number, authToken?: string): Promise<DtpError> {
  const worker = Worker.start({
    coordinatorHost: HOST,
    coordinatorPort: port,
    workerId: 'misdirected',
    capacity: 1,
    heartbeatIntervalMs: 50,
    reconnectDelayMs: 50,
    logger: testLogger('worker'),
    ...(authToken === undefined ? {} : { authToken }),
  });
  cleanups.push(() => worker.close());
  const [err] = (await once(worker.events, 'refused')) as [DtpError];
  await worker.close();
  return err;
}

function assertWorkerOnClientPort(err: DtpError, port: number): void {
  assert.equal(err.code, 'WRONG_PORT');
  assert.equal(
    err.message,
    `port ${port} is a coordinator's client port; workers connect to its worker port (default 7070)`,
  );
}

function isClientOnWorkerPort(port: number) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof WrongPortError, String(err));
    assert.equal(err.code, 'WRONG_PORT');
    assert.equal(
      err.message,
      `port ${port} is a coordinator's worker port; clients connect to its client port (default 7071)`,
    );
    return true;
  };
}

describe('a worker on a client port', () => {
  it('stops with WRONG_PORT instead of registering again (dtp, no tokens)', BOUNDED, async () => {
    const c = await coordinator();
    assertWorkerOnClientPort(await refusedWorker(c.clientPort), c.clientPort);
  });

  it('stops with WRONG_PORT when the client port wants a token first', BOUNDED, async () => {
    const c = await coordinator({ client: true });
    assertWorkerOnClientPort(await refusedWorker(c.clientPort), c.clientPort);
  });

  it('stops with WRONG_PORT on a v1 coordinator, which sends no codes', BOUNDED, async () => {
    const fake = await v1();
    assertWorkerOnClientPort(await refusedWorker(fake.clientPort), fake.clientPort);
  });
});

describe('a client on a worker port', () => {
  it('fails with WRONG_PORT (dtp, no token)', BOUNDED, async () => {
    const c = await coordinator();
    const client = await DtpClient.connect({ host: HOST, port: c.workerPort });
    cleanups.push(() => client.close());
    await assert.rejects(client.workers(), isClientOnWorkerPort(c.workerPort));
  });

  it('fails with WRONG_PORT when it authenticates first', BOUNDED, async () => {
    const c = await coordinator({ client: true, worker: true });
    await assert.rejects(
      DtpClient.connect({ host: HOST, port: c.workerPort, token: CLIENT_TOKEN }),
      isClientOnWorkerPort(c.workerPort),
    );
  });

  it('fails with WRONG_PORT on a v1 coordinator', BOUNDED, async () => {
    const fake = await v1();
    const client = await DtpClient.connect({ host: HOST, port: fake.workerPort });
    cleanups.push(() => client.close());
    await assert.rejects(client.status('some-job'), isClientOnWorkerPort(fake.workerPort));
  });

  it(
    'is told so by the worker port itself, for peers that do not know the rule',
    BOUNDED,
    async () => {
      const c = await coordinator();
      const { conn, inbox } = await rawConnection(c.workerPort);
      cleanups.push(() => conn.destroy());
      conn.send({ type: 'LIST_WORKERS' });
      const reply = await inbox.next(5_000);
      assert.equal(reply.type, 'ERROR');
      assert.match(
        reply.type === 'ERROR' ? reply.message : '',
        /unexpected LIST_WORKERS \(a client request: this is the worker port; clients connect to the client port\); the first message must be WORKER_REGISTER/,
      );
    },
  );
});

describe('refused tokens', () => {
  async function cli(port: number, env: NodeJS.ProcessEnv) {
    let stdout = '';
    let stderr = '';
    const code = await runClientCli(['workers', '--host', HOST, '--port', String(port)], {
      stdout: (text) => (stdout += text),
      stderr: (text) => (stderr += text),
      env,
      color: false,
      interactive: false,
    });
    return { code, stdout, stderr };
  }

  it('tells a client whose token was refused just that', BOUNDED, async () => {
    const c = await coordinator({ client: true });
    await assert.rejects(
      DtpClient.connect({ host: HOST, port: c.clientPort, token: 'not-the-token' }),
      (err: unknown) => {
        assert.ok(err instanceof AuthError);
        assert.equal(err.code, 'UNAUTHENTICATED');
        assert.equal(err.message, 'Unauthenticated: token refused');
        return true;
      },
    );
    const refused = await cli(c.clientPort, { DTP_TOKEN: 'not-the-token' });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /token refused/);
    assert.doesNotMatch(refused.stderr, /send AUTH|--token-file/);
  });

  it('tells a CLI user who gave no token how to give one', BOUNDED, async () => {
    const c = await coordinator({ client: true });
    const missing = await cli(c.clientPort, {});
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /Unauthenticated/);
    assert.match(missing.stderr, /give it with --token-file <file> or DTP_TOKEN/);
    const ok = await cli(c.clientPort, { DTP_TOKEN: CLIENT_TOKEN });
    assert.equal(ok.code, 0, ok.stderr);
  });

  it('says which for a worker token: refused, or none sent', BOUNDED, async () => {
    const c = await coordinator({ worker: true });
    const wrong = await refusedWorker(c.workerPort, 'not-the-worker-token');
    assert.equal(wrong.code, 'UNAUTHENTICATED');
    assert.equal(wrong.message, 'Unauthenticated: worker token refused');
    const none = await refusedWorker(c.workerPort);
    assert.equal(none.code, 'UNAUTHENTICATED');
    assert.match(none.message, /needs a worker token \(WORKER_REGISTER carried no authToken\)/);
  });
});
