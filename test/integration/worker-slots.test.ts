/**
 * The TypeScript worker's registration above 1,024 slots: `capacity` keeps
 * the v1 range (1024) and `slots` carries the count; its default prefetch
 * stops at 4,096. Against a fake coordinator, and against ours (which lists
 * the worker with its slots).
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { FakeCoordinator } from '../helpers/fake-coordinator.js';
import { RawClient } from '../helpers/raw-peers.js';
import { startCoordinator, startTaskWorker } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('worker: a capacity above 1,024', () => {
  it('registers as capacity 1024 with slots, and a default prefetch of 4,096', async () => {
    const fake = await FakeCoordinator.listen();
    cleanups.push(() => fake.close());
    const worker = await startTaskWorker(fake.port, 'w-many', { capacity: 2000 });
    cleanups.push(() => worker.close());
    const [, register] = await fake.nextRegistration();
    assert.deepEqual([register.capacity, register.slots, register.prefetch], [1024, 2000, 4096]);
  });

  it('sends no slots at 1,024 or below', async () => {
    const fake = await FakeCoordinator.listen();
    cleanups.push(() => fake.close());
    const worker = await startTaskWorker(fake.port, 'w-v1', { capacity: 1024 });
    cleanups.push(() => worker.close());
    const [, register] = await fake.nextRegistration();
    assert.deepEqual(
      [register.capacity, register.slots, register.prefetch],
      [1024, undefined, 4096],
    );
  });

  it('is listed with its slots by our coordinator', async () => {
    const tc = await startCoordinator();
    cleanups.push(() => tc.close());
    const worker = await startTaskWorker(tc.coordinator.workerPort, 'w-many', { capacity: 3000 });
    cleanups.push(() => worker.close());
    const c = await RawClient.connect(tc.coordinator.clientPort);
    cleanups.push(() => c.close());
    const listed = await until(async () => {
      const reply = await c.request({ type: 'LIST_WORKERS' });
      return reply.type === 'WORKER_LIST' && reply.workers.length > 0 ? reply.workers : null;
    });
    assert.deepEqual(
      listed.map((w) => [w.workerId, w.capacity]),
      [['w-many', 3000]],
    );
  });
});
