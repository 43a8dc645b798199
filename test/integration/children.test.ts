/**
 * Child jobs end to end, in-process: a handler's `ctx.enqueue` makes jobs
 * that name their parent, a retried attempt gets the children of the first
 * (no duplicates), the parent's status lists them, a refused call fails in
 * the handler only, and the dedupe holds across a restart of a coordinator
 * on SQLite.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import {
  startCoordinator,
  startTaskWorker,
  tempDir,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';
import { FakeCoordinator } from '../helpers/fake-coordinator.js';

async function childrenOf(client: DtpClient, parent: string): Promise<JobSnapshot[]> {
  const children: JobSnapshot[] = [];
  for await (const job of client.list()) if (job.parentJobId === parent) children.push(job);
  return children;
}

describe('child jobs, end to end', { timeout: 60_000 }, () => {
  it('makes exactly two children across a failed and a successful attempt', async () => {
    const tc = await startCoordinator();
    const client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    const worker = await startTaskWorker(tc.coordinator.workerPort, 'w-children', { capacity: 2 });
    try {
      const { jobId } = await client.submit({
        taskType: 'children.spawn',
        payload: { text: 'abc' },
        maxAttempts: 2,
      });
      const done = await client.wait(jobId, 10_000);
      assert.equal(done.state, 'COMPLETED', done.error ?? '');
      assert.equal(done.attempts, 2);
      const ids = JSON.parse(done.result ?? '{}') as { keyed: string; unkeyed: string };
      const status = await client.status(jobId);
      assert.deepEqual(status.children, [ids.keyed, ids.unkeyed]);
      const children = await childrenOf(client, jobId);
      assert.equal(children.length, 2, 'no child was made twice');
      for (const id of [ids.keyed, ids.unkeyed]) {
        const child = await client.wait(id, 10_000);
        assert.equal(child.parentJobId, jobId);
        assert.equal(child.state, 'COMPLETED');
      }
      assert.equal((await client.status(ids.keyed)).result, 'cba');
      assert.equal((await client.status(ids.unkeyed)).result, '!cba');
      assert.equal(tc.events.filter((e) => e.type === 'worker.lost').length, 0);
    } finally {
      await worker.close();
      await client.close();
      await tc.close();
    }
  });

  it('fails a refused call in the handler only, with its code', async () => {
    const tc = await startCoordinator();
    const client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    const worker = await startTaskWorker(tc.coordinator.workerPort, 'w-refused');
    try {
      const { jobId } = await client.submit({ taskType: 'children.refused', payload: {} });
      const done = await client.wait(jobId, 10_000);
      assert.equal(done.state, 'COMPLETED');
      assert.match(done.result ?? '', /^INVALID_TASK_TYPE: /);
      assert.equal((await client.status(jobId)).children, undefined);
      // The session went on: the same worker takes the next job.
      const next = await client.submit({ taskType: 'reverse', payload: { text: 'ok' } });
      assert.equal((await client.wait(next.jobId, 10_000)).result, 'ko');
      assert.equal(tc.events.filter((e) => e.type === 'worker.lost').length, 0);
    } finally {
      await worker.close();
      await client.close();
      await tc.close();
    }
  });

  describe('against a coordinator that speaks raw protocol', () => {
    it('rejects ctx.enqueue with UNSUPPORTED_FEATURE when children is not offered', async () => {
      const fake = await FakeCoordinator.listen();
      const worker = await startTaskWorker(fake.port, 'w-no-children');
      try {
        const session = await fake.acceptNext(['drain']);
        const attemptId = session.assign('j-1', 'children.refused', { taskType: 'reverse' });
        const result = await session.resultFor(attemptId);
        assert.match(result.result ?? '', /^UNSUPPORTED_FEATURE: .*children/);
        assert.equal(session.all('ENQUEUE_CHILD').length, 0);
      } finally {
        await worker.close();
        await fake.close();
      }
    });

    it('sends ENQUEUE_CHILD with the ids and key, and a refusal fails that call only', async () => {
      const fake = await FakeCoordinator.listen();
      const worker = await startTaskWorker(fake.port, 'w-call');
      try {
        const session = await fake.acceptNext(['children']);
        const attemptId = session.assign('j-1', 'children.refused', {
          taskType: 'reverse',
          key: 'x',
        });
        const call = await session.waitFor('ENQUEUE_CHILD');
        assert.equal(call.workerId, 'w-call');
        assert.equal(call.jobId, 'j-1');
        assert.equal(call.attemptId, attemptId);
        assert.equal(call.key, 'k:x');
        assert.equal(call.taskType, 'reverse');
        assert.ok(Number.isSafeInteger(call.requestId) && call.requestId > 0);
        session.send({
          type: 'ERROR',
          code: 'STALE_ATTEMPT',
          message: 'not the current lease',
          requestId: call.requestId,
        });
        const result = await session.resultFor(attemptId);
        assert.equal(result.result, 'STALE_ATTEMPT: not the current lease');
        assert.equal(session.closed, false, 'the session goes on');
        assert.equal(worker.registered, true);
      } finally {
        await worker.close();
        await fake.close();
      }
    });
  });

  describe('across a restart (SQLite)', () => {
    const temp = tempDir('dtp-children-');
    after(() => temp.remove());

    it('gives the interrupted parent the child its first attempt made', async () => {
      const databasePath = `${temp.dir}/children.sqlite`;
      let tc: TestCoordinator = await startCoordinator({ databasePath });
      const ports = {
        workerPort: tc.coordinator.workerPort,
        clientPort: tc.coordinator.clientPort,
      };
      let client = await DtpClient.connect({ host: '127.0.0.1', port: ports.clientPort });
      let worker = await startTaskWorker(ports.workerPort, 'w-restart', { capacity: 2 });
      try {
        const { jobId } = await client.submit({
          taskType: 'children.hold',
          payload: { ms: 60_000 },
          maxAttempts: 3,
        });
        const first = await until(async () => (await client.status(jobId)).children ?? null, {
          what: 'the first child',
          timeoutMs: 10_000,
        });
        assert.equal(first.length, 1);
        await client.close();
        await tc.close();
        // The worker goes too, so its attempt is not reattached: the restart interrupts it.
        await worker.close();
        tc = await startCoordinator({ databasePath, ...ports });
        worker = await startTaskWorker(ports.workerPort, 'w-after', { capacity: 2 });
        client = await DtpClient.connect({ host: '127.0.0.1', port: ports.clientPort });
        const done = await client.wait(jobId, 20_000);
        assert.equal(done.state, 'COMPLETED', done.error ?? '');
        assert.equal(done.attempts, 2, 'the restart interrupted the first attempt');
        assert.equal(done.result, first[0]);
        const status = await client.status(jobId);
        assert.deepEqual(status.children, first);
        assert.equal((await childrenOf(client, jobId)).length, 1);
        assert.equal((await client.status(first[0] as string)).parentJobId, jobId);
      } finally {
        await worker.close();
        await client.close();
        await tc.close();
      }
    });
  });
});
