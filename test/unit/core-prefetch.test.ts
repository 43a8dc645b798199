/**
 * Prefetch in the core: a worker that asks for it is handed attempts beyond
 * its capacity only while its results come quickly, never beyond capacity +
 * prefetch, and the window closes again when attempts get slow or stop
 * coming. LIST_WORKERS keeps `activeTasks` within capacity and reports the
 * rest as `queuedTasks`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PREFETCH_CLOSE_MS, PREFETCH_OPEN_MS } from '../../src/coordinator/core/worker-registry.js';
import { CoreHarness, effectsOf, expectReply, messagesOf } from '../helpers/core-harness.js';

function leasesOf(h: CoreHarness, workerId: string): number {
  return h.running().get(workerId)?.length ?? 0;
}

function workerRow(h: CoreHarness, workerId: string) {
  const list = expectReply(h.request({ type: 'LIST_WORKERS' }), 'WORKER_LIST').workers;
  const row = list.find((w) => w.workerId === workerId);
  assert.ok(row !== undefined, `${workerId} is not listed`);
  return row;
}

/** Completes one running job of the worker, `gapMs` after the previous result. */
function completeOne(h: CoreHarness, workerId: string, gapMs: number): void {
  const jobId = h.running().get(workerId)?.[0];
  assert.ok(jobId !== undefined, `${workerId} runs nothing`);
  h.clock += gapMs;
  h.result(jobId);
}

/** Two results 1 ms apart: the worker's slots look quick, so its window opens. */
function quickResults(h: CoreHarness, workerId: string): void {
  completeOne(h, workerId, 1);
  completeOne(h, workerId, 1);
}

describe('core: prefetch', () => {
  it('assigns no more than capacity until results show short attempts, then up to capacity + prefetch', () => {
    const h = new CoreHarness();
    h.register('w1', 2, null, { prefetch: 4 });
    for (let i = 0; i < 20; i++) h.submit();
    assert.equal(leasesOf(h, 'w1'), 2, 'a fresh worker gets its capacity only');
    completeOne(h, 'w1', 1); // the first result only starts the clock
    assert.equal(leasesOf(h, 'w1'), 2);
    completeOne(h, 'w1', 1); // 1 ms apart x capacity 2: a slot takes about 2 ms
    assert.equal(leasesOf(h, 'w1'), 6, 'capacity 2 + prefetch 4');
    assert.equal(h.core.inspect().freeSlots, 0);
    const row = workerRow(h, 'w1');
    assert.equal(row.activeTasks, 2, 'activeTasks never exceeds capacity');
    assert.equal(row.queuedTasks, 4);
    assert.equal(row.runningJobs?.length, 6);
  });

  it('never assigns beyond capacity to a worker that did not ask, however fast it is', () => {
    const h = new CoreHarness();
    h.register('w1', 2);
    for (let i = 0; i < 10; i++) h.submit();
    for (let i = 0; i < 5; i++) {
      completeOne(h, 'w1', 1);
      assert.equal(leasesOf(h, 'w1'), 2);
    }
    assert.equal(workerRow(h, 'w1').queuedTasks, undefined);
  });

  it('closes the window when attempts get slow, and assigns again only below capacity', () => {
    const h = new CoreHarness();
    h.register('w1', 1, null, { prefetch: 1 });
    for (let i = 0; i < 40; i++) h.submit();
    quickResults(h, 'w1');
    assert.equal(leasesOf(h, 'w1'), 2, 'open: capacity 1 + prefetch 1');
    // Slow results pull the smoothed slot time past the closing bound.
    let results = 0;
    while (h.core.inspect().workers[0]?.prefetching === true) {
      completeOne(h, 'w1', 4 * PREFETCH_CLOSE_MS);
      assert.ok(++results < 20, 'the window never closed');
    }
    // The result that closed it was not replaced: the worker is at capacity.
    assert.equal(leasesOf(h, 'w1'), 1);
    assert.equal(h.core.inspect().freeSlots, 0);
    completeOne(h, 'w1', 4 * PREFETCH_CLOSE_MS);
    assert.equal(leasesOf(h, 'w1'), 1, 'refilled to capacity only');
  });

  it('closes the window when no result came for the closing time', () => {
    const h = new CoreHarness();
    h.register('w1', 1, null, { prefetch: 2 });
    for (let i = 0; i < 10; i++) h.submit();
    quickResults(h, 'w1');
    assert.equal(leasesOf(h, 'w1'), 3);
    h.heartbeat('w1');
    h.tick(PREFETCH_CLOSE_MS + 1);
    assert.equal(h.core.inspect().workers[0]?.prefetching, false);
    // Results now come slowly: the smoothed estimate restarts and the window stays shut.
    completeOne(h, 'w1', PREFETCH_CLOSE_MS + 1);
    assert.equal(leasesOf(h, 'w1'), 2, 'two leases left, none added');
    assert.ok(PREFETCH_OPEN_MS < PREFETCH_CLOSE_MS);
  });

  it('loses a prefetching worker that went silent without touching its window afterwards', () => {
    const h = new CoreHarness({ config: { heartbeatTimeoutMs: 1_000 } });
    h.register('w1', 1, null, { prefetch: 2 });
    for (let i = 0; i < 6; i++) h.submit();
    quickResults(h, 'w1');
    assert.equal(leasesOf(h, 'w1'), 3);
    const effects = h.tick(5_000); // silent for longer than the timeout, and than the closing time
    assert.equal(h.events('worker.lost', effects).length, 1);
    assert.equal(h.core.inspect().workers.length, 0);
    assert.equal(h.core.inspect().freeSlots, 0);
    h.register('w2', 1);
    assert.equal(leasesOf(h, 'w2'), 1, 'its jobs went back to the queue');
  });

  it('prefers a worker with an idle slot over filling another one’s prefetch', () => {
    const h = new CoreHarness();
    h.register('a', 1, null, { prefetch: 4 });
    for (let i = 0; i < 3; i++) h.submit();
    quickResults(h, 'a');
    assert.equal(leasesOf(h, 'a'), 1, 'only one job was left');
    h.register('b', 1);
    const jobId = h.submit();
    assert.equal(h.assignmentOf(jobId).workerId, 'b');
  });

  it('refuses a registration whose prefetch is negative or above 4 x capacity', () => {
    for (const prefetch of [-1, 9]) {
      const h = new CoreHarness();
      const connId = h.register('w1', 2, null, { prefetch });
      const errors = messagesOf(h.last, 'ERROR', connId);
      assert.equal(errors.length, 1);
      assert.match(errors[0]?.message ?? '', /prefetch must be 0\.\.8/);
      assert.equal(effectsOf(h.last, 'close').length, 1);
    }
  });
});
