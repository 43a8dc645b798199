/**
 * Several attempts in one frame each way (feature `batches`) between a real
 * coordinator and raw or real workers: a worker that asks gets a turn's
 * assignments in TASK_ASSIGNS and may answer in TASK_RESULTS; a worker that
 * does not ask (a v1 worker) gets one TASK_ASSIGN a frame; a batch larger
 * than the frame limit leaves in several frames; a worker that dies with a
 * batch half answered loses only what it had not answered; a real worker
 * sends its results of one turn in one TASK_RESULTS where it is offered and
 * one TASK_RESULT a frame to a coordinator that does not offer it.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { TaskAssign, TaskResult } from '../../src/protocol/messages.js';
import { FakeCoordinator } from '../helpers/fake-coordinator.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, startTaskWorker } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

describe('batched frames', { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A coordinator with `count` SHA256 jobs queued and no worker yet; returns the client and ids. */
  async function backlog(
    count: number,
    payloadOf: (i: number) => Record<string, unknown> = (i) => ({ text: `job ${i}` }),
    taskType = 'SHA256',
  ): Promise<{ port: number; client: RawClient; ids: string[] }> {
    const tc = await startCoordinator();
    cleanups.push(() => tc.close());
    const client = await RawClient.connect(tc.coordinator.clientPort);
    cleanups.push(() => client.close());
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push(await client.submit(taskType, payloadOf(i)));
    return { port: tc.coordinator.workerPort, client, ids };
  }

  async function takeAll(worker: ScriptedWorker, count: number): Promise<TaskAssign[]> {
    const out: TaskAssign[] = [];
    for (let i = 0; i < count; i++) out.push(await worker.assignments.next());
    return out;
  }

  function results(worker: ScriptedWorker, assigns: readonly TaskAssign[]): TaskResult[] {
    return assigns.map((a) => worker.result(a, true, `done ${a.jobId}`));
  }

  it('gives a worker that asks a turn of assignments in one TASK_ASSIGNS, and takes TASK_RESULTS back', async () => {
    const { port, client, ids } = await backlog(6);
    const worker = await ScriptedWorker.register(port, 'w-batch', 6, {
      extensions: { batches: true },
    });
    cleanups.push(() => worker.close());
    assert.ok(worker.features.includes('batches'), 'the coordinator offers batches');
    const assigns = await takeAll(worker, 6);
    assert.deepEqual(new Set(assigns.map((a) => a.jobId)), new Set(ids));
    assert.ok(
      worker.assignFrames.some((n) => n > 1),
      `six queued jobs to a free worker came one a frame: ${JSON.stringify(worker.assignFrames)}`,
    );
    worker.send({ type: 'TASK_RESULTS', workerId: 'w-batch', results: results(worker, assigns) });
    for (const id of ids) {
      const job = await client.wait(id);
      assert.equal(job.state, 'COMPLETED');
      assert.equal(job.result, `done ${id}`);
    }
  });

  it('gives a worker that does not ask one TASK_ASSIGN a frame', async () => {
    const { port, client, ids } = await backlog(6);
    const worker = await ScriptedWorker.register(port, 'w-v1', 6);
    cleanups.push(() => worker.close());
    const assigns = await takeAll(worker, 6);
    assert.deepEqual(worker.assignFrames, [1, 1, 1, 1, 1, 1]);
    for (const assign of assigns) worker.succeed(assign, 'ok');
    for (const id of ids) assert.equal((await client.wait(id)).state, 'COMPLETED');
  });

  it('splits a batch that would pass the frame limit into several frames', async () => {
    // Three payloads of 400 KB: any two together are within 1 MiB, all three are not.
    const big = 'x'.repeat(400_000);
    const { port, ids } = await backlog(3, (i) => ({ blob: `${i}${big}` }), 'blob');
    const worker = await ScriptedWorker.register(port, 'w-big', 3, {
      taskTypes: ['blob'],
      extensions: { batches: true },
    });
    cleanups.push(() => worker.close());
    const assigns = await takeAll(worker, 3);
    assert.deepEqual(new Set(assigns.map((a) => a.jobId)), new Set(ids));
    assert.ok(
      worker.assignFrames.length >= 2,
      `one frame for 1.2 MB: ${JSON.stringify(worker.assignFrames)}`,
    );
    assert.ok(
      assigns.every((a) => (a.payload.blob as string).length === big.length + 1),
      'every payload arrives whole',
    );
  });

  it('keeps what a worker answered before it died with a batch half answered, and runs the rest again', async () => {
    const { port, client, ids } = await backlog(6);
    const first = await ScriptedWorker.register(port, 'w-dies', 6, {
      extensions: { batches: true },
    });
    const assigns = await takeAll(first, 6);
    const answered = assigns.slice(0, 3);
    first.send({ type: 'TASK_RESULTS', workerId: 'w-dies', results: results(first, answered) });
    for (const a of answered) assert.equal((await client.wait(a.jobId)).state, 'COMPLETED');
    await first.close(); // dies holding the other three
    const second = await ScriptedWorker.register(port, 'w-heir', 6, {
      extensions: { batches: true },
    });
    cleanups.push(() => second.close());
    const again = await takeAll(second, 3);
    const rest = new Set(assigns.slice(3).map((a) => a.jobId));
    assert.deepEqual(new Set(again.map((a) => a.jobId)), rest);
    assert.ok(
      again.every((a) => a.attemptNumber === 2),
      'a lost attempt counts',
    );
    second.send({ type: 'TASK_RESULTS', workerId: 'w-heir', results: results(second, again) });
    for (const id of ids) {
      const job = await client.wait(id);
      assert.equal(job.state, 'COMPLETED');
      assert.equal(job.attempts, rest.has(id) ? 2 : 1);
    }
  });

  it('loses the session of a worker whose TASK_RESULTS carries a result of another worker', async () => {
    const { port, client, ids } = await backlog(2);
    const worker = await ScriptedWorker.register(port, 'w-liar', 2, {
      extensions: { batches: true },
    });
    cleanups.push(() => worker.close());
    const assigns = await takeAll(worker, 2);
    const [own, other] = results(worker, assigns) as [TaskResult, TaskResult];
    worker.send({
      type: 'TASK_RESULTS',
      workerId: 'w-liar',
      results: [own, { ...other, workerId: 'someone-else' }],
    });
    await worker.closed;
    assert.equal((await client.wait(own.jobId)).state, 'COMPLETED');
    const lost = await client.status(other.jobId);
    assert.notEqual(lost.state, 'COMPLETED', 'the foreign result counted for nothing');
    assert.ok(ids.includes(other.jobId));
  });

  it('has a real worker send a turn of results in TASK_RESULTS only where offered', async () => {
    for (const offered of [['batches'], []]) {
      const fake = await FakeCoordinator.listen();
      cleanups.push(() => fake.close());
      const worker = await startTaskWorker(fake.port, `w-real-${offered.length}`, {
        capacity: 8,
      });
      cleanups.push(() => worker.close());
      const [session, register] = await fake.nextRegistration();
      assert.equal(register.batches, true, 'a real worker asks for batches');
      session.send({ type: 'WORKER_REGISTERED', workerId: register.workerId, features: offered });
      for (let i = 0; i < 8; i++) session.assign(`job-${i}`, 'SHA256', { text: `t${i}` });
      await until(() => session.results().length === 8, { what: 'eight results' });
      const batches = session.all('TASK_RESULTS');
      if (offered.length === 0) assert.equal(batches.length, 0, 'TASK_RESULTS to a v1 coordinator');
      else assert.ok(batches.length > 0, 'eight results of short tasks, none batched');
      assert.ok(session.results().every((r) => r.success));
      await worker.close();
    }
  });
});
