/**
 * Workers that hold many attempts at once, with a real coordinator: a
 * thousand attempts awaiting timers on one worker and two task threads; a
 * handler that holds its shared thread beside awaiting ones while the
 * coordinator judges heartbeats within 1.5 s (nothing lost); an isolated
 * computing task beside shared ones (they are not delayed; its cancel
 * preempts it); a stubborn shared attempt on a single thread, whose twenty
 * neighbours complete on their only attempt; and handlers given in code,
 * which run on this process's own event loop.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, afterEach, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { startWorker, type StartWorkerOptions } from '../../src/worker/start-worker.js';
import type { Worker } from '../../src/worker/worker.js';
import { capturingLogger } from '../helpers/logger.js';
import {
  startCoordinator,
  tempDir,
  testLogger,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const IO_TASKS = fileURLToPath(new URL('../fixtures/io-tasks.js', import.meta.url));

describe('workers that hold many attempts at once', { timeout: 120_000 }, () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  const workers: Worker[] = [];

  before(async () => {
    tc = await startCoordinator({ heartbeatTimeoutMs: 1_500, taskTimeoutMs: 60_000 });
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
    await until(() => tc.coordinator.inspect().workers.length === 0, { what: 'workers gone' });
  });
  after(async () => {
    await client.close();
    await tc.close();
  });

  async function worker(id: string, options: StartWorkerOptions): Promise<Worker> {
    const started = await startWorker({
      coordinatorHost: '127.0.0.1',
      coordinatorPort: tc.coordinator.workerPort,
      workerId: id,
      heartbeatIntervalMs: 100,
      reconnectDelayMs: 50,
      tasks: [IO_TASKS],
      logger: testLogger('worker'),
      ...options,
    });
    workers.push(started);
    await tc.waitForEvent('worker.registered', (e) => e.workerId === id);
    return started;
  }

  /** Submits `count` jobs of one type in batches; their ids in order. */
  async function submitMany(count: number, taskType: string, payload: object): Promise<string[]> {
    const ids: string[] = [];
    for (let from = 0; from < count; from += 500) {
      const n = Math.min(500, count - from);
      const batch = Array.from({ length: n }, () => ({
        taskType,
        payload: { ...payload },
        maxAttempts: 1,
      }));
      ids.push(...(await client.submitMany(batch)));
    }
    return ids;
  }

  async function allCompletedOnce(ids: readonly string[]): Promise<void> {
    for (const jobId of ids) {
      const job = await client.wait(jobId, 30_000);
      assert.deepEqual([job.state, job.attempts], ['COMPLETED', 1], `${jobId}: ${job.error}`);
    }
  }

  it('runs a thousand attempts that await timers on one worker with two task threads', async () => {
    const w = await worker('thousand', { capacity: 1_000, threads: 2 });
    const ids = await submitMany(1_000, 'io.wait', { ms: 500 });
    await until(() => w.runningCount >= 900, { what: 'most attempts held at once' });
    assert.ok(w.threadCount <= 2, `${w.threadCount} task threads`);
    await allCompletedOnce(ids);
  });

  it('keeps heartbeating while a handler holds its shared thread beside awaiting ones', async () => {
    await worker('held', { capacity: 30, threads: 1 });
    const waiting = await submitMany(20, 'io.wait', { ms: 2_000 });
    const holding = await submitMany(1, 'io.hold', { ms: 3_000 });
    await allCompletedOnce([...waiting, ...holding]);
    assert.equal(
      tc.events.filter((e) => e.type === 'worker.lost' && e.workerId === 'held').length,
      0,
      'the worker was never declared lost',
    );
  });

  it('runs an isolated computing task beside shared ones without delaying them, and preempts it on cancel', async () => {
    const w = await worker('beside', { capacity: 10, threads: 1, cancelGraceMs: 200 });
    const [spinning] = await submitMany(1, 'io.spin', {});
    await until(async () => (await client.status(spinning as string)).state === 'RUNNING', {
      what: 'the spinning task to start',
    });
    const startedAt = Date.now();
    const quick = await submitMany(5, 'io.wait', { ms: 50 });
    await allCompletedOnce(quick);
    assert.ok(Date.now() - startedAt < 5_000, 'the shared attempts were not held up');
    const stopped = new Promise((resolve) => w.events.once('stopped', (...args) => resolve(args)));
    await client.cancel(spinning as string);
    const [, , reason, how] = (await stopped) as [string, string, string, string];
    assert.deepEqual([reason, how], ['cancel', 'terminated']);
    assert.equal((await client.status(spinning as string)).state, 'CANCELLED');
  });

  it('requeues the neighbours of a stubborn shared attempt without using their only attempt', async () => {
    const w = await worker('stubborn', { capacity: 30, threads: 1, cancelGraceMs: 100 });
    const neighbours = await submitMany(20, 'io.wait', { ms: 1_500 });
    const [stubborn] = await submitMany(1, 'io.stubborn', {});
    await new Promise<void>((resolve) =>
      w.events.on('started', (jobId) => jobId === stubborn && resolve()),
    );
    await client.cancel(stubborn as string);
    for (const jobId of neighbours) {
      const { job, attempts } = await client.status(jobId, { attempts: true });
      const done = job.state === 'COMPLETED' ? job : await client.wait(jobId, 30_000);
      assert.equal(done.state, 'COMPLETED', `${jobId}: ${done.error}`);
      const history = (await client.status(jobId, { attempts: true })).attempts ?? attempts ?? [];
      assert.ok(
        history.some((a) => String(a.outcome) === 'REQUEUED'),
        'its history says it was requeued',
      );
    }
  });

  it('runs handlers given in code on this event loop, where they see this program', async () => {
    const seen: string[] = [];
    await worker('in-process', {
      capacity: 4,
      handlers: {
        greet: async (payload: { name: string }) => {
          seen.push(payload.name);
          await new Promise((resolve) => setTimeout(resolve, 10));
          return `hello ${payload.name}`;
        },
      },
    });
    const handle = await client.submit({ taskType: 'greet', payload: { name: 'ada' } });
    const job = await client.wait(handle.jobId, 10_000);
    assert.deepEqual([job.state, job.result], ['COMPLETED', 'hello ada']);
    assert.deepEqual(seen, ['ada'], 'the handler ran in this process, on its memory');
  });

  it('logs a handler given in code that holds the event loop, naming its job', async () => {
    const { logger, lines } = capturingLogger();
    await worker('holding-loop', {
      capacity: 2,
      logger,
      handlers: {
        block: () => {
          const end = Date.now() + 1_300;
          while (Date.now() < end) {
            // holding this process's event loop
          }
          return 'done';
        },
      },
    });
    const { jobId } = await client.submit({ taskType: 'block', payload: {} });
    assert.equal((await client.wait(jobId, 10_000)).state, 'COMPLETED');
    const held = await until(
      () => lines.find((l) => String(l['msg']).startsWith("this process's event loop was held")),
      { what: 'the held loop to be logged' },
    );
    assert.deepEqual(held['jobIds'], [jobId]);
  });

  it('keeps 2,500 running attempts across a restart of the coordinator: listed in parts, reattached, none run twice', async () => {
    const dir = tempDir('dtp-many-restart-');
    const databasePath = `${dir.dir}/many.sqlite`;
    let own = await startCoordinator({ databasePath, heartbeatTimeoutMs: 5_000 });
    const ports = {
      workerPort: own.coordinator.workerPort,
      clientPort: own.coordinator.clientPort,
    };
    let c = await DtpClient.connect({ host: '127.0.0.1', port: ports.clientPort });
    const w = await startWorker({
      coordinatorHost: '127.0.0.1',
      coordinatorPort: ports.workerPort,
      workerId: 'holding-many',
      capacity: 3_000,
      threads: 2,
      heartbeatIntervalMs: 100,
      reconnectDelayMs: 50,
      tasks: [IO_TASKS],
      logger: testLogger('worker'),
    });
    try {
      const ids: string[] = [];
      for (let from = 0; from < 2_500; from += 500) {
        const batch = Array.from({ length: 500 }, () => ({
          taskType: 'io.wait',
          payload: { ms: 6_000 },
          maxAttempts: 1,
        }));
        ids.push(...(await c.submitMany(batch)));
      }
      await until(() => w.runningCount === 2_500, { timeoutMs: 20_000, what: 'all running' });
      await c.close();
      await own.close();
      own = await startCoordinator({ databasePath, heartbeatTimeoutMs: 5_000, ...ports });
      c = await DtpClient.connect({ host: '127.0.0.1', port: ports.clientPort });
      for (const jobId of ids) {
        const job = await c.wait(jobId, 30_000);
        assert.deepEqual([job.state, job.attempts], ['COMPLETED', 1], `${jobId}: ${job.error}`);
      }
      assert.ok(
        own.events.some((e) => e.type === 'worker.heldListEnded'),
        'the held list came in parts',
      );
    } finally {
      await w.close();
      await c.close();
      await own.close();
      dir.remove();
    }
  });

  it('isolates a task type its module shares when the operator says so, and preempts it on cancel', async () => {
    // io.hold is shared by its module; `isolate` gives each attempt a thread of its own.
    const w = await worker('isolating', {
      capacity: 4,
      threads: 1,
      cancelGraceMs: 100,
      isolate: ['io.hold', 'SHA256'],
    });
    const started = new Set<string>();
    w.events.on('started', (jobId: string) => started.add(jobId));
    const [holding] = await submitMany(1, 'io.hold', { ms: 60_000 });
    // Its code runs (not merely assigned): a cancel before that would be cooperative.
    await until(() => started.has(holding as string), { what: 'the holding task to start' });
    // The shared thread is free: an awaiting attempt completes beside it.
    await allCompletedOnce(await submitMany(2, 'io.wait', { ms: 20 }));
    assert.equal(w.threadCount, 2, "one shared thread and the isolated attempt's own");
    const stopped = new Promise((resolve) =>
      w.events.on('stopped', (...args) => {
        if (args[0] === holding) resolve(args);
      }),
    );
    await client.cancel(holding as string);
    const [, , reason, how] = (await stopped) as [string, string, string, string];
    assert.deepEqual([reason, how], ['cancel', 'terminated']);
    await allCompletedOnce(await submitMany(3, 'SHA256', { text: 'isolated built-in' }));
  });

  it('refuses to isolate a task type the worker does not run, or one given in code', async () => {
    await assert.rejects(
      startWorker({
        coordinatorPort: tc.coordinator.workerPort,
        logger: testLogger('worker'),
        isolate: ['nope'],
      }),
      /isolate: this worker does not run task "nope"/,
    );
    await assert.rejects(
      startWorker({
        coordinatorPort: tc.coordinator.workerPort,
        logger: testLogger('worker'),
        handlers: { light: () => 'x' },
        isolate: ['light'],
      }),
      /isolate: task "light" is given in code/,
    );
  });

  it('refuses a handler given in code that asks to be isolated', async () => {
    await assert.rejects(
      startWorker({
        coordinatorPort: tc.coordinator.workerPort,
        logger: testLogger('worker'),
        handlers: { heavy: { isolate: true, run: () => 'x' } },
      }),
      /task "heavy" is declared isolate/,
    );
  });
});
