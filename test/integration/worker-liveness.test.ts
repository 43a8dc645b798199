/**
 * The worker's side of identity, tokens and coordinator liveness, against a
 * fake coordinator: it asks for heartbeat acknowledgements and sends its
 * token; a coordinator that confirmed acks and then goes silent is dropped
 * and redialled (its tasks become orphans); one that did not confirm is
 * never judged by silence; a refusal (WORKER_REPLACED, UNAUTHENTICATED,
 * TLS_REQUIRED) stops the worker instead of a reconnect loop, while other
 * errors still lead to a reconnect.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { afterEach, describe, it } from 'node:test';
import type { DtpError } from '../../src/protocol/errors.js';
import type { Worker } from '../../src/worker/worker.js';
import { FakeCoordinator, type FakeSession } from '../helpers/fake-coordinator.js';
import { startTaskWorker } from '../helpers/test-coordinator.js';
import { capturingLogger } from '../helpers/logger.js';
import { until } from '../helpers/until.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setUp(
  options: Parameters<typeof startTaskWorker>[2] = {},
): Promise<{ fake: FakeCoordinator; w: Worker }> {
  const fake = await FakeCoordinator.listen();
  cleanups.push(() => fake.close());
  const w = await startTaskWorker(fake.port, 'w-live', options);
  cleanups.push(() => w.close());
  return { fake, w };
}

/** Answers every HEARTBEAT of the session with HEARTBEAT_ACK. */
function ackHeartbeats(session: FakeSession): () => void {
  let acked = 0;
  const timer = setInterval(() => {
    for (const hb of session.all('HEARTBEAT').slice(acked)) {
      session.send({ type: 'HEARTBEAT_ACK', workerId: hb.workerId });
      acked++;
    }
  }, 10);
  cleanups.push(() => clearInterval(timer));
  return () => clearInterval(timer);
}

describe('worker: registration extensions', () => {
  it('asks for heartbeat acknowledgements, and sends its token only when it has one', async () => {
    const { fake } = await setUp();
    const [, plain] = await fake.nextRegistration();
    assert.equal(plain.heartbeatAck, true);
    assert.equal(plain.authToken, undefined);
    const { fake: other } = await setUp({ authToken: 'worker-secret-123456' });
    const [, withToken] = await other.nextRegistration();
    assert.equal(withToken.authToken, 'worker-secret-123456');
  });
});

describe('worker: coordinator liveness', () => {
  it('drops a coordinator that confirmed heartbeatAck and then went silent, and redials', async () => {
    const { fake, w } = await setUp({ coordinatorTimeoutMs: 300 });
    const first = await fake.acceptNext(['heartbeatAck']);
    const stopAcks = ackHeartbeats(first);
    await once(w.events, 'registered');
    const started = once(w.events, 'started');
    first.assign('job-orphan', 'polite', {});
    await started;
    const abandoned = once(w.events, 'abandoned');
    stopAcks(); // the coordinator freezes: nothing more comes
    const [reason] = (await once(w.events, 'disconnected')) as [string];
    assert.match(reason, /coordinator silent/);
    const second = await fake.acceptNext(['heartbeatAck']);
    ackHeartbeats(second);
    await once(w.events, 'registered');
    // The task of the dead connection is an orphan, dropped once registered again.
    await abandoned;
    assert.equal(w.runningCount, 0);
  });

  it('stays connected while acknowledgements keep coming', async () => {
    const { fake, w } = await setUp({ coordinatorTimeoutMs: 200 });
    const session = await fake.acceptNext(['heartbeatAck']);
    ackHeartbeats(session);
    await until(() => session.all('HEARTBEAT').length >= 20, { what: '20 heartbeats' });
    assert.equal(w.registered, true);
    assert.equal(fake.sessions.length, 1);
  });

  it('never judges by silence a coordinator that did not offer heartbeatAck', async () => {
    const { fake, w } = await setUp({ coordinatorTimeoutMs: 150 });
    const session = await fake.acceptNext([]);
    await until(() => session.all('HEARTBEAT').length >= 20, { what: '20 heartbeats' });
    assert.equal(w.registered, true);
    assert.equal(fake.sessions.length, 1);
  });
});

describe('worker: orphans of a lost connection', () => {
  /** A session that runs one `polite` task, then loses its connection; returns the lease. */
  async function orphanOne(fake: FakeCoordinator, w: Worker, ms: number): Promise<string> {
    const first = await fake.acceptNext(['heartbeatAck', 'reattach']);
    await once(w.events, 'registered');
    const started = once(w.events, 'started');
    const attemptId = first.assign('job-orphan', 'polite', { ms });
    await started;
    const disconnected = once(w.events, 'disconnected');
    await first.connection.destroy('dropped by test');
    await disconnected;
    return attemptId;
  }

  it('lists them when it registers again, and a reattach coordinator gets their results', async () => {
    const { fake, w } = await setUp();
    // Long enough to be still running when the worker registers again, on a loaded machine too.
    const attemptId = await orphanOne(fake, w, 2_000);
    const [second, register] = await fake.nextRegistration();
    assert.deepEqual(register.heldAttempts, [{ jobId: 'job-orphan', attemptId }]);
    second.send({ type: 'WORKER_REGISTERED', workerId: 'w-live', features: ['reattach'] });
    const result = await second.resultFor(attemptId);
    assert.deepEqual([result.success, result.result], [true, 'finished']);
  });

  it('keeps them running for a reattach coordinator, which may still cancel them', async () => {
    const { fake, w } = await setUp();
    let abandoned = 0;
    w.events.on('abandoned', () => abandoned++);
    const attemptId = await orphanOne(fake, w, 60_000);
    const second = await fake.acceptNext(['heartbeatAck', 'reattach']);
    await once(w.events, 'registered');
    assert.deepEqual([w.runningCount, abandoned], [1, 0], 'carried over, not abandoned');
    const cancelled = once(w.events, 'cancelled');
    second.send({ type: 'TASK_CANCEL', jobId: 'job-orphan', attemptId });
    await cancelled;
    assert.equal(w.runningCount, 0);
    assert.deepEqual(second.results(), []);
  });

  it('abandons them when the coordinator does not offer reattach', async () => {
    const { fake, w } = await setUp();
    await orphanOne(fake, w, 60_000);
    const abandoned = once(w.events, 'abandoned');
    await fake.acceptNext(['heartbeatAck']);
    await abandoned;
    assert.equal(w.runningCount, 0);
  });
});

describe('worker: refusals', () => {
  for (const code of ['WORKER_REPLACED', 'UNAUTHENTICATED', 'TLS_REQUIRED']) {
    it(`stops for good on ERROR ${code} instead of registering again`, async () => {
      const { fake, w } = await setUp();
      const session = await fake.acceptNext(['heartbeatAck']);
      await once(w.events, 'registered');
      const refused = once(w.events, 'refused');
      session.send({ type: 'ERROR', code, message: `${code}: refused by the test` });
      const [err] = (await refused) as [DtpError];
      assert.equal(err.code, code);
      assert.match(err.message, /refused by the test/);
      await until(() => w.mode === 'closed', { what: 'the worker to close' });
      // close() resolves once the connect loop has ended: any redial would have come before.
      await w.close();
      assert.equal(fake.sessions.length, 1, 'no second connection');
    });
  }

  it('logs a long ERROR message of the coordinator cut, and dials again', async () => {
    const { logger, lines } = capturingLogger();
    const { fake } = await setUp({ logger });
    const session = await fake.acceptNext(['heartbeatAck']);
    session.send({ type: 'ERROR', code: 'INTERNAL_ERROR', message: 'x'.repeat(900_000) });
    await fake.nextRegistration();
    const logged = lines.find((l) => l['msg'] === 'error from coordinator');
    const message = String(logged?.['message']);
    assert.ok(message.length < 9_000, `logged ${message.length} characters`);
    assert.match(message, /\.\.\. \(truncated\)$/);
  });

  it('refuses during registration too (a wrong token)', async () => {
    const { fake, w } = await setUp({ authToken: 'wrong' });
    const [session] = await fake.nextRegistration();
    const refused = once(w.events, 'refused');
    session.send({ type: 'ERROR', code: 'UNAUTHENTICATED', message: 'Unauthenticated: no' });
    const [err] = (await refused) as [DtpError];
    assert.equal(err.code, 'UNAUTHENTICATED');
    await until(() => w.mode === 'closed');
  });

  it('reconnects after an ERROR that is not a refusal', async () => {
    const { fake, w } = await setUp();
    const session = await fake.acceptNext([]);
    await once(w.events, 'registered');
    session.send({ type: 'ERROR', code: 'NOT_REGISTERED', message: 'something else' });
    await fake.acceptNext([]);
    await once(w.events, 'registered');
    assert.notEqual(w.mode, 'closed');
  });
});
