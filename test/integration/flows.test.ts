/**
 * Dependencies and flows end to end, in-process: a real coordinator, a real
 * worker loading the fixture task module, and the client library. Parents'
 * results reach the handler as `ctx.parents`; a failed parent cancels its
 * dependents; a flow runs in dependency order; a WAITING job survives a
 * restart of the coordinator on its SQLite file; a coordinator without
 * flows is reported as such; a flow's job may be delayed.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  DtpClient,
  FeatureUnsupportedError,
  RemoteError,
  UnsupportedFeatureError,
  type FlowJobSpec,
} from '../../src/client/index.js';
import type { Worker } from '../../src/worker/worker.js';
import { StrictV1Coordinator } from '../helpers/strict-v1.js';
import { until } from '../helpers/until.js';
import {
  startCoordinator,
  startTaskWorker,
  tempDir,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';

async function connect(tc: TestCoordinator): Promise<DtpClient> {
  return DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
}

describe('dependencies and flows, end to end', { timeout: 120_000 }, () => {
  const closers: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  async function cluster(databasePath = ':memory:') {
    const tc = await startCoordinator({ databasePath });
    const client = await connect(tc);
    closers.push(
      () => tc.close(),
      () => client.close(),
    );
    return { tc, client };
  }

  async function worker(tc: TestCoordinator, id: string): Promise<Worker> {
    const w = await startTaskWorker(tc.coordinator.workerPort, id, { capacity: 4 });
    closers.push(() => w.close());
    return w;
  }

  it('gives the handler its parents results, decoded as job.result() would', async () => {
    const { tc, client } = await cluster();
    await worker(tc, 'w1');
    const sum = await client.submit({ taskType: 'stats.sum', payload: { values: [1, 2] } });
    const sha = await client.submit({ taskType: 'SHA256', payload: { text: 'abc' } });
    const child = await client.submit({
      taskType: 'parents.echo',
      payload: {},
      dependsOn: [sum.jobId, sha.jobId],
    });
    const done = await client.wait(child.jobId, 20_000);
    assert.equal(done.state, 'COMPLETED', done.error ?? '');
    assert.deepEqual(JSON.parse(done.result ?? ''), [
      {
        jobId: sum.jobId,
        taskType: 'stats.sum',
        state: 'COMPLETED',
        result: { n: 2, sum: 3, attempt: 1 },
      },
      {
        jobId: sha.jobId,
        taskType: 'SHA256',
        state: 'COMPLETED',
        result: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
      },
    ]);
    assert.deepEqual(done.dependsOn, [sum.jobId, sha.jobId]);
  });

  it('cancels the dependents of a failed parent, naming it', async () => {
    const { tc, client } = await cluster();
    await worker(tc, 'w1');
    const parent = await client.submit({ taskType: 'refuse', payload: {} });
    const child = await client.submit({
      taskType: 'parents.echo',
      payload: {},
      dependsOn: [parent.jobId],
    });
    const done = await client.wait(child.jobId, 20_000);
    assert.equal(done.state, 'CANCELLED');
    assert.match(done.error ?? '', new RegExp(`parent job ${parent.jobId} ended FAILED`));
  });

  it('runs a submitted flow in dependency order', async () => {
    const { tc, client } = await cluster();
    await worker(tc, 'w1');
    const { jobs } = await client.submitFlow({
      jobs: [
        { ref: 'publish', taskType: 'parents.echo', payload: {}, dependsOn: ['a', 'b'] },
        { ref: 'a', taskType: 'SHA256', payload: { text: 'a' } },
        { ref: 'b', taskType: 'SHA256', payload: { text: 'b' } },
      ],
    });
    assert.deepEqual(Object.keys(jobs).sort(), ['a', 'b', 'publish']);
    const publish = await client.wait(jobs.publish as string, 20_000);
    assert.equal(publish.state, 'COMPLETED');
    const parents = JSON.parse(publish.result ?? '') as { jobId: string }[];
    assert.deepEqual(
      parents.map((p) => p.jobId),
      [jobs.a, jobs.b],
    );
    for (const ref of ['a', 'b']) {
      const parent = await client.status(jobs[ref] as string);
      assert.ok((publish.startedAtMillis ?? 0) >= (parent.finishedAtMillis ?? Infinity));
    }
    await assert.rejects(
      client.submitFlow({
        jobs: [{ ref: 'x', taskType: 'SHA256', payload: { text: 'x' }, dependsOn: ['x'] }],
      }),
      (err: unknown) => err instanceof RemoteError && err.code === 'FLOW_CYCLE',
    );
  });

  it('holds a delayed job of a flow until its runAtMillis, after its parent', async () => {
    const { tc, client } = await cluster();
    await worker(tc, 'w1');
    const runAtMillis = Date.now() + 600;
    const { jobs } = await client.submitFlow({
      jobs: [
        { ref: 'late', taskType: 'SHA256', payload: { text: 'l' }, dependsOn: ['a'], runAtMillis },
        { ref: 'a', taskType: 'SHA256', payload: { text: 'a' } },
      ],
    });
    const late = await client.status(jobs.late as string);
    assert.equal(late.runAtMillis, runAtMillis);
    assert.ok(late.state === 'WAITING' || late.state === 'SCHEDULED', late.state);
    const done = await client.wait(jobs.late as string, 20_000);
    assert.equal(done.state, 'COMPLETED');
    assert.ok((done.startedAtMillis ?? 0) >= runAtMillis, 'not started before its time');
    await assert.rejects(
      client.submitFlow({
        jobs: [{ ref: 'x', taskType: 'SHA256', payload: { text: 'x' }, runAtMillis: -1 }],
      }),
      RangeError,
    );
  });

  it('puts each job of a flow in the queue and group it names', async () => {
    const { tc, client } = await cluster();
    await worker(tc, 'w1');
    await client.queues.pause('reports');
    const { jobs } = await client.submitFlow({
      jobs: [
        { ref: 'a', taskType: 'SHA256', payload: { text: 'a' } },
        {
          ref: 'report',
          taskType: 'SHA256',
          payload: { text: 'r' },
          dependsOn: ['a'],
          queue: 'reports',
          groupKey: 'tenant-1',
        },
      ],
    });
    assert.equal((await client.wait(jobs.a as string, 20_000)).state, 'COMPLETED');
    const held = await client.status(jobs.report as string);
    assert.equal(held.queue, 'reports');
    assert.equal(held.groupKey, 'tenant-1');
    // Released by its parent into a paused queue: it waits there.
    await until(async () => (await client.status(jobs.report as string)).state === 'QUEUED', {
      timeoutMs: 10_000,
    });
    await client.queues.resume('reports');
    assert.equal((await client.wait(jobs.report as string, 20_000)).state, 'COMPLETED');
  });

  it('keeps a WAITING job and its finished parent across a restart on the same file', async () => {
    const dir = tempDir();
    closers.push(() => Promise.resolve(dir.remove()));
    const databasePath = join(dir.dir, 'coordinator.db');
    const first = await startCoordinator({ databasePath });
    const early = await connect(first);
    const w = await startTaskWorker(first.coordinator.workerPort, 'w-early', { capacity: 1 });
    const done = await early.submit({ taskType: 'SHA256', payload: { text: 'abc' } });
    assert.equal((await early.wait(done.jobId, 20_000)).state, 'COMPLETED');
    await w.close();
    const open = await early.submit({ taskType: 'SHA256', payload: { text: 'later' } });
    const child = await early.submit({
      taskType: 'parents.echo',
      payload: {},
      dependsOn: [done.jobId, open.jobId],
    });
    assert.equal((await early.status(child.jobId)).state, 'WAITING');
    await early.close();
    await first.close();

    const { tc, client } = await cluster(databasePath);
    assert.equal((await client.status(child.jobId)).state, 'WAITING');
    await worker(tc, 'w-late');
    const finished = await client.wait(child.jobId, 20_000);
    assert.equal(finished.state, 'COMPLETED', finished.error ?? '');
    const parents = JSON.parse(finished.result ?? '') as { jobId: string; result: unknown }[];
    assert.deepEqual(
      parents.map((p) => [p.jobId, typeof p.result]),
      [
        [done.jobId, 'string'],
        [open.jobId, 'string'],
      ],
    );
  });

  it('gives a resubmitted keyed flow its existing jobs, on SQLite after they ended', async () => {
    const dir = tempDir();
    closers.push(() => Promise.resolve(dir.remove()));
    const { tc, client } = await cluster(join(dir.dir, 'coordinator.db'));
    await worker(tc, 'w-keys');
    const jobs: FlowJobSpec[] = [
      { ref: 'a', taskType: 'SHA256', payload: { text: 'a' }, idempotencyKey: 'order-7/a' },
      {
        ref: 'b',
        taskType: 'parents.echo',
        payload: {},
        dependsOn: ['a'],
        idempotencyKey: 'order-7/b',
      },
    ];
    const first = await client.submitFlow({ jobs });
    const b = first.jobs.b as string;
    assert.equal((await client.wait(b, 20_000)).state, 'COMPLETED');
    const again = await client.submitFlow({ jobs });
    assert.deepEqual(again.jobs, first.jobs);
    const page = await client.listPage({ limit: 10 });
    assert.equal(page.jobs.length, 2, 'nothing new');
    // One key used with another payload: the whole flow is refused.
    await assert.rejects(
      client.submitFlow({
        jobs: [
          { ref: 'new', taskType: 'SHA256', payload: { text: 'new' } },
          { ref: 'a', taskType: 'SHA256', payload: { text: 'other' }, idempotencyKey: 'order-7/a' },
        ],
      }),
      (err: unknown) => err instanceof RemoteError && err.code === 'IDEMPOTENCY_CONFLICT',
    );
    assert.equal((await client.listPage({ limit: 10 })).jobs.length, 2);
  });

  it('says plainly that a coordinator without flows does not support them', async () => {
    const v1 = await StrictV1Coordinator.start();
    closers.push(() => v1.close());
    const client = await DtpClient.connect({ host: '127.0.0.1', port: v1.clientPort });
    closers.push(() => client.close());
    await assert.rejects(
      client.submitFlow({ jobs: [{ ref: 'a', taskType: 'SHA256', payload: { text: 'a' } }] }),
      (err: unknown) =>
        err instanceof FeatureUnsupportedError && /does not support flows/.test(err.message),
    );
    // A v1 coordinator would ignore dependsOn and run the job at once: nothing is sent.
    const parent = await client.submit('SHA256', { text: 'parent' });
    await assert.rejects(
      client.submit('SHA256', { text: 'child' }, { dependsOn: [parent.jobId] }),
      (err: unknown) =>
        err instanceof UnsupportedFeatureError &&
        /does not support dependencies between jobs/.test(err.message),
    );
    assert.deepEqual(
      v1.typesSeen('client').filter((type) => type === 'SUBMIT_JOB'),
      ['SUBMIT_JOB'],
      'only the parent was submitted',
    );
  });
});
