import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { runBench } from '../../src/cli/bench.js';
import type { BenchPlan, BenchProgress, BenchRunReport } from '../../src/cli/bench.js';
import { DtpClient } from '../../src/client/client.js';
import { TransportError } from '../../src/client/errors.js';
import { silentLogger } from '../helpers/logger.js';
import { Worker } from '../../src/worker/worker.js';
import { startCoordinator } from '../helpers/test-coordinator.js';
import type { TestCoordinator } from '../helpers/test-coordinator.js';

const HOST = '127.0.0.1';

function plan(port: number, overrides: Partial<BenchPlan> = {}): BenchPlan {
  return {
    host: HOST,
    port,
    jobs: 20,
    concurrency: 2,
    warmup: 0,
    task: 'sha256',
    sleepMillis: 0,
    primeLimit: 100,
    waitTimeoutMs: 30_000,
    ...overrides,
  };
}

function assertNumericSummaries(report: BenchRunReport): void {
  for (const summary of [report.submitAckMillis, report.endToEndMillis]) {
    for (const value of [summary.p50, summary.p95, summary.p99, summary.max]) {
      assert.ok(Number.isFinite(value) && value >= 0, `latency ${value} should be a number >= 0`);
    }
    assert.ok(
      summary.p50 <= summary.p95 && summary.p95 <= summary.p99 && summary.p99 <= summary.max,
    );
  }
}

describe('bench', () => {
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function coordinator(maxActiveJobs?: number): Promise<TestCoordinator> {
    const tc = await startCoordinator(maxActiveJobs === undefined ? {} : { maxActiveJobs });
    cleanups.push(() => tc.close());
    return tc;
  }

  async function worker(tc: TestCoordinator): Promise<void> {
    const w = Worker.start({
      coordinatorHost: HOST,
      coordinatorPort: tc.coordinator.workerPort,
      workerId: 'bench-worker',
      capacity: 4,
      heartbeatIntervalMs: 50,
      reconnectDelayMs: 30,
      logger: silentLogger(),
    });
    cleanups.push(() => w.close());
    await tc.waitForEvent('worker.registered', (e) => e.workerId === 'bench-worker');
  }

  function submissions(tc: TestCoordinator): { accepted: number; rejected: number } {
    return {
      accepted: tc.events.filter((e) => e.type === 'job.submitted').length,
      rejected: tc.events.filter((e) => e.type === 'job.rejected').length,
    };
  }

  it('completes every job when a worker keeps up', async () => {
    const tc = await coordinator();
    await worker(tc);
    const progress: BenchProgress[] = [];
    const report = await runBench(plan(tc.coordinator.clientPort), {
      onProgress: (p) => progress.push(p),
    });
    const { jobs, accepted, rejected, completed, failed } = report;
    assert.deepEqual(
      { jobs, accepted, rejected, completed, failed },
      {
        jobs: 20,
        accepted: 20,
        rejected: 0,
        completed: 20,
        failed: 0,
      },
    );
    assert.deepEqual([report.submitAckSamples, report.endToEndSamples], [20, 20]);
    assertNumericSummaries(report);
    assert.ok(report.endToEndMillis.max >= report.submitAckMillis.p50);
    assert.ok(report.elapsedMillis > 0 && report.throughputJobsPerSec > 0);
    assert.equal(report.connections, 2);
    assert.deepEqual(
      progress.map((p) => p.done),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    assert.deepEqual(submissions(tc), { accepted: 20, rejected: 0 });
  });

  it('spreads the jobs round-robin over --queues queues', async () => {
    const tc = await coordinator();
    await worker(tc);
    const report = await runBench(plan(tc.coordinator.clientPort, { jobs: 9, queues: 3 }));
    assert.equal(report.completed, 9);
    const client = await DtpClient.connect({ host: HOST, port: tc.coordinator.clientPort });
    cleanups.push(() => client.close());
    const queues = await client.queues.list();
    const counts = Object.fromEntries(
      queues.filter((q) => q.name.startsWith('bench-')).map((q) => [q.name, q.counts.COMPLETED]),
    );
    assert.deepEqual(counts, { 'bench-0': 3, 'bench-1': 3, 'bench-2': 3 });
  });

  it('runs warmup jobs first and leaves them out of the report', async () => {
    const tc = await coordinator();
    await worker(tc);
    const phases: string[] = [];
    const report = await runBench(plan(tc.coordinator.clientPort, { jobs: 4, warmup: 3 }), {
      onProgress: (p) => phases.push(p.phase),
    });
    assert.deepEqual([report.jobs, report.completed, report.warmup], [4, 4, 3]);
    assert.deepEqual(phases, [
      'warmup',
      'warmup',
      'warmup',
      'measure',
      'measure',
      'measure',
      'measure',
    ]);
    assert.equal(submissions(tc).accepted, 7);
  });

  it('counts rejections without retrying them when admission control sheds load', async () => {
    // No worker: the first two jobs stay active, so every later submission is refused.
    const tc = await coordinator(2);
    const report = await runBench(
      plan(tc.coordinator.clientPort, { jobs: 8, concurrency: 4, waitTimeoutMs: 100 }),
    );
    assert.deepEqual(
      [report.jobs, report.accepted, report.rejected, report.completed, report.failed],
      [8, 2, 6, 0, 2],
    );
    assert.deepEqual([report.timedOut, report.errors], [2, 0]);
    assert.deepEqual([report.submitAckSamples, report.endToEndSamples], [2, 0]);
    assertNumericSummaries(report);
    assert.deepEqual(report.endToEndMillis, { p50: 0, p95: 0, p99: 0, max: 0 });
    // Exactly one SUBMIT_JOB per job: 2 admitted + 6 refused, none sent again.
    assert.deepEqual(submissions(tc), { accepted: 2, rejected: 6 });
  });

  it('counts an ERROR reply to a submission as a failed job and goes on', async () => {
    const tc = await coordinator();
    await worker(tc);
    // A prime-count limit the coordinator refuses as an invalid payload.
    const report = await runBench(
      plan(tc.coordinator.clientPort, { jobs: 3, task: 'prime-count', primeLimit: 1 }),
    );
    assert.deepEqual(
      [report.jobs, report.accepted, report.rejected, report.failed, report.errors],
      [3, 0, 0, 3, 3],
    );
  });

  it('fails with CONNECT_FAILED when the coordinator is not there', async () => {
    const tc = await startCoordinator();
    const port = tc.coordinator.clientPort;
    await tc.close();
    await assert.rejects(
      runBench(plan(port)),
      (err: unknown) => err instanceof TransportError && err.code === 'CONNECT_FAILED',
    );
  });

  it('stops every lane and rethrows when a connection breaks mid-run', async () => {
    const tc = await coordinator();
    const opened: DtpClient[] = [];
    const run = runBench(plan(tc.coordinator.clientPort, { jobs: 50, waitTimeoutMs: 60_000 }), {
      connect: async (host, port) => {
        const client = await DtpClient.connect({ host, port });
        opened.push(client);
        return client;
      },
      onProgress: () => undefined,
    });
    // Handled at once: the run may fail while the coordinator is still closing.
    const failure = run.then(
      () => null,
      (err: unknown) => err,
    );
    // No worker: both lanes sit in WAIT_JOB until the coordinator goes away.
    await tc.waitForEvent('job.submitted', () => submissions(tc).accepted >= 2);
    await tc.close();
    assert.ok((await failure) instanceof TransportError);
    assert.equal(opened.length, 2);
  });
});
