import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { MemoryStore } from '../../src/store/memory-store.js';
import { RawClient, ScriptedWorker, rawConnection } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

describe('coordinator when a commit fails', () => {
  let tc: TestCoordinator | null = null;
  const peers: { close(): Promise<void> }[] = [];

  afterEach(async () => {
    await Promise.all(peers.splice(0).map((p) => p.close()));
    await tc?.close();
  });

  it('acknowledges nothing it could not store and refuses all later work with a clear error', async () => {
    const store = new MemoryStore();
    tc = await startCoordinator({}, { store });
    const fatal = new Promise<Error>((resolve) => tc?.coordinator.events.once('fatal', resolve));
    const c = await RawClient.connect(tc.coordinator.clientPort);
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, 'disk-w', 1);
    peers.push(c, w);
    const kept = await c.submit('SHA256', { text: 'stored before the disk filled up' });
    w.succeed(await w.assignments.next(), 'hash');
    await c.wait(kept);

    store.failCommits('SQLITE_FULL: database or disk is full');
    const reply = await c.request({
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: 'cannot be stored' },
      maxAttempts: null,
      idempotencyKey: null,
      priority: null,
    });
    assert.equal(reply.type, 'ERROR');
    if (reply.type === 'ERROR') {
      assert.equal(reply.code, 'STORE_FAILED');
      assert.match(reply.message, /disk is full/);
    }
    assert.match((await fatal).message, /disk is full/);
    assert.deepEqual(tc.coordinator.failure?.code, 'STORE_FAILED');
    await w.closed; // workers are sent away: nothing can be assigned durably
    const later = await c.request({ type: 'GET_JOB_STATUS', jobId: kept });
    assert.ok(later.type === 'ERROR' && later.code === 'STORE_FAILED');
    // Nothing that was not committed exists: only the first job is in the store.
    assert.deepEqual(
      store.committedJobs().map((j) => [j.jobId, j.state]),
      [[kept, 'COMPLETED']],
    );
  });

  it('does not send an assignment whose commit failed', async () => {
    const store = new MemoryStore();
    tc = await startCoordinator({}, { store });
    const c = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(c);
    const jobId = await c.submit('SHA256', { text: 'queued' });
    store.failCommits('I/O error');
    // Registering makes the core assign the queued job; that commit fails.
    const { conn, inbox, closed } = await rawConnection(tc.coordinator.workerPort);
    conn.send({ type: 'WORKER_REGISTER', workerId: 'io-w', capacity: 1, taskTypes: null });
    await closed;
    assert.deepEqual(
      inbox.drain().filter((m) => m.type === 'TASK_ASSIGN'),
      [],
    );
    assert.equal(tc.coordinator.failure?.code, 'STORE_FAILED');
    assert.equal(store.committedJobs().find((j) => j.jobId === jobId)?.state, 'QUEUED');
  });
});
