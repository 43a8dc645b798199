/**
 * Prefetch between a real coordinator and real workers: a worker of short
 * tasks that asks for it holds more leases than its capacity once its
 * results come fast, never more than capacity + prefetch, and every job
 * completes once; a worker started with prefetch 0 never holds more than
 * its capacity. LIST_WORKERS reports the queued attempts.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { Worker } from '../../src/worker/worker.js';
import { RawClient } from '../helpers/raw-peers.js';
import {
  startCoordinator,
  startTaskWorker,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const JOBS = 300;

describe('prefetch with real workers', { timeout: 120_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** Runs JOBS short jobs on one worker; returns the most leases it held at once. */
  async function runBatch(prefetch: number): Promise<{ most: number; tc: TestCoordinator }> {
    const tc = await startCoordinator();
    cleanups.push(() => tc.close());
    const c = await RawClient.connect(tc.coordinator.clientPort);
    cleanups.push(() => c.close());
    // A backlog first, so that the worker always has more to take than its slots.
    for (let i = 0; i < JOBS; i++) await c.submit('SHA256', { text: `job ${i}` });
    let most = 0;
    tc.coordinator.events.on('event', (event) => {
      if (event.type !== 'job.assigned') return;
      const held = tc.coordinator.inspect().workers[0]?.running.length ?? 0;
      most = Math.max(most, held);
    });
    const w: Worker = await startTaskWorker(tc.coordinator.workerPort, 'w-prefetch', {
      capacity: 2,
      prefetch,
    });
    cleanups.push(() => w.close());
    await until(() => tc.events.filter((e) => e.type === 'job.completed').length === JOBS, {
      timeoutMs: 60_000,
      what: `${JOBS} jobs to complete`,
    });
    const completed = tc.events.filter((e) => e.type === 'job.completed');
    assert.equal(new Set(completed.map((e) => (e as { jobId: string }).jobId)).size, JOBS);
    return { most, tc };
  }

  it('lets a worker of short tasks hold up to capacity + prefetch leases', async () => {
    const { most } = await runBatch(4);
    assert.ok(most > 2, `the window never opened (at most ${most} leases)`);
    assert.ok(most <= 6, `held ${most} leases with capacity 2 + prefetch 4`);
  });

  it('never goes beyond capacity for a worker started with prefetch 0', async () => {
    const { most, tc } = await runBatch(0);
    assert.equal(most, 2);
    const list = await RawClient.connect(tc.coordinator.clientPort);
    cleanups.push(() => list.close());
    const reply = await list.request({ type: 'LIST_WORKERS' });
    assert.ok(reply.type === 'WORKER_LIST');
    assert.equal(reply.workers[0]?.queuedTasks, undefined, 'no queue asked, none reported');
  });
});
