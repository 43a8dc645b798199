/**
 * A worker connection whose last frames and end-of-stream arrive together,
 * against a real coordinator: its frames still count (the result is
 * accepted), but nothing is assigned to it any more, and a registration read
 * together with its end registers nobody. The job waiting meanwhile keeps
 * all of its attempts and runs on the next worker.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { RawClient, rawConnection, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

describe('a worker connection whose end arrives with its last frames', () => {
  let tc: TestCoordinator;
  let client: RawClient;
  const peers: { close(): Promise<void> }[] = [];

  beforeEach(async () => {
    tc = await startCoordinator({ taskTimeoutMs: 60_000 });
    client = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(client);
  });
  afterEach(async () => {
    await Promise.all(peers.splice(0).map((p) => p.close()));
    await tc.close();
  });

  /** The waiting job ran once, on `healthy`, after `lost` was lost. */
  async function runsOnTheNextWorker(jobId: string): Promise<void> {
    const healthy = await ScriptedWorker.register(tc.coordinator.workerPort, 'healthy', 1);
    peers.push(healthy);
    const assign = await healthy.assignments.next();
    assert.deepEqual([assign.jobId, assign.attemptNumber], [jobId, 1]);
    healthy.succeed(assign, 'done');
    const job = await client.wait(jobId);
    assert.deepEqual([job.state, job.attempts], ['COMPLETED', 1]);
  }

  it('accepts the last result but assigns nothing to a connection that closed right after it', async () => {
    const leaving = await ScriptedWorker.register(tc.coordinator.workerPort, 'leaving', 1);
    const first = await client.submit('SLEEP', { durationMillis: 1 }, { maxAttempts: 1 });
    const assign = await leaving.assignments.next();
    const waiting = await client.submit('SLEEP', { durationMillis: 1 }, { maxAttempts: 1 });
    // The result frees the slot; the end follows in the same write.
    leaving.succeed(assign, 'the last one');
    const closing = leaving.conn.close('worker done');
    await tc.waitForEvent('worker.lost', (e) => e.workerId === 'leaving');
    await closing;
    const done = await client.status(first);
    assert.deepEqual([done.state, done.result], ['COMPLETED', 'the last one']);
    const still = await client.status(waiting);
    assert.deepEqual([still.state, still.attempts], ['QUEUED', 0], JSON.stringify(still));
    await runsOnTheNextWorker(waiting);
  });

  it('registers nobody from a registration that arrives together with the end', async () => {
    const waiting = await client.submit('SLEEP', { durationMillis: 1 }, { maxAttempts: 1 });
    const gone = await rawConnection(tc.coordinator.workerPort);
    gone.conn.send({ type: 'WORKER_REGISTER', workerId: 'gone', capacity: 1, taskTypes: null });
    void gone.conn.close('gave up waiting');
    const refused = await tc.waitForEvent('worker.rejected', (e) => e.connId > 0);
    assert.equal(refused.reason, 'connection ended before it registered');
    await gone.closed;
    assert.deepEqual(
      tc.events.filter((e) => e.type === 'worker.registered'),
      [],
    );
    const still = await client.status(waiting);
    assert.deepEqual([still.state, still.attempts], ['QUEUED', 0], JSON.stringify(still));
    await runsOnTheNextWorker(waiting);
  });
});
