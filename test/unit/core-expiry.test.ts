/**
 * Expiry in the core (expiry.ts): a job not started by its
 * `expiresAtMillis` ends CANCELLED, `EXPIRED: …`, `expired: true`, whether it
 * was queued, scheduled, waiting or between retries; a running attempt is
 * never stopped, but the job expires if that attempt ends without ending it;
 * dependents treat it as a cancelled parent; the wake-up names its time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CoreHarness, START_MS, effectsOf, expectReply } from '../helpers/core-harness.js';

function assertExpired(h: CoreHarness, jobId: string): void {
  const job = h.status(jobId);
  assert.equal(job.state, 'CANCELLED');
  assert.match(job.error ?? '', /^EXPIRED: not started by /);
  assert.equal(job.expired, true);
}

describe('core: expiry', () => {
  it('a queued job nobody took by its expiry is cancelled, expired', () => {
    const h = new CoreHarness();
    const jobId = h.submit({ expiresAtMillis: START_MS + 1_000 });
    const wake = effectsOf(h.last, 'wakeAt').at(-1);
    assert.equal(wake?.atMs, START_MS + 1_000, 'the wake-up names the expiry');
    assert.equal(h.status(jobId).expiresAtMillis, START_MS + 1_000);
    h.tick(999);
    assert.equal(h.status(jobId).state, 'QUEUED');
    h.tick(1);
    assertExpired(h, jobId);
    assert.deepEqual(
      h.events('job.expired').map((e) => [e.jobId, e.from]),
      [[jobId, 'QUEUED']],
    );
    // A worker that comes now gets nothing.
    h.register('w1', 1);
    assert.equal(h.assignmentsOf(jobId).length, 0);
  });

  it('no attempt starts after the expiry, even before the timed input that expires it', () => {
    const h = new CoreHarness();
    const jobId = h.submit({ expiresAtMillis: START_MS + 10 });
    h.clock += 10;
    h.register('w1', 1); // a worker's input, not a timed one
    assert.equal(h.assignmentsOf(jobId).length, 0);
    assertExpired(h, jobId);
  });

  it('a running attempt is not stopped; a retry after the expiry is not made', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ expiresAtMillis: START_MS + 1_000, maxAttempts: 3 });
    assert.equal(h.status(jobId).state, 'RUNNING');
    h.tick(2_000);
    assert.equal(h.status(jobId).state, 'RUNNING', 'running attempts go on');
    h.result(jobId, { success: false, error: 'boom' });
    assertExpired(h, jobId);
    assert.equal(h.status(jobId).attempts, 1);
  });

  it('a running attempt that completes after the expiry completes the job', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ expiresAtMillis: START_MS + 1_000 });
    h.tick(2_000);
    h.result(jobId);
    assert.equal(h.status(jobId).state, 'COMPLETED');
    assert.equal(h.status(jobId).expired, undefined);
  });

  it('expires between retries', () => {
    const h = new CoreHarness({ config: { retryBaseDelayMs: 5_000, retryMaxDelayMs: 5_000 } });
    h.register('w1', 1);
    const jobId = h.submit({ expiresAtMillis: START_MS + 1_000, maxAttempts: 3 });
    h.result(jobId, { success: false, error: 'boom' });
    assert.equal(h.status(jobId).state, 'RETRY_WAIT');
    h.tick(1_000);
    assertExpired(h, jobId);
  });

  it('a delayed job expires if it was not started; its dependents are cancelled as by a cancelled parent', () => {
    const h = new CoreHarness();
    const parent = h.submit({ runAtMillis: START_MS + 500, expiresAtMillis: START_MS + 1_000 });
    const child = h.submit({ dependsOn: [parent] });
    const runAnyway = h.submit({ dependsOn: [parent], onParentFailure: 'run' });
    h.tick(500); // due, but no worker
    h.tick(500);
    assertExpired(h, parent);
    assert.equal(h.status(child).state, 'CANCELLED');
    assert.notEqual(h.status(runAnyway).state, 'CANCELLED');
  });

  it('a waiting job (its parent still open) expires', () => {
    const h = new CoreHarness();
    const parent = h.submit({});
    const child = h.submit({ dependsOn: [parent], expiresAtMillis: START_MS + 100 });
    h.tick(100);
    assertExpired(h, child);
    assert.equal(h.status(parent).state, 'QUEUED');
  });

  it('refuses an expiry that has passed or comes before the run time', () => {
    const h = new CoreHarness();
    const past = expectReply(h.submitRequest({ expiresAtMillis: START_MS }), 'ERROR');
    assert.match(past.message, /expiresAtMillis .* has passed/);
    const early = expectReply(
      h.submitRequest({ runAtMillis: START_MS + 100, expiresAtMillis: START_MS + 50 }),
      'ERROR',
    );
    assert.match(early.message, /after the job's run time/);
    assert.equal(h.core.activeCount, 0);
  });

  it('expiries survive a restart, a far delayed job included', () => {
    const h = new CoreHarness({
      config: { scheduledWindow: { windowMs: 1_000, limit: 10, marginMs: 100 } },
    });
    const queued = h.submit({ expiresAtMillis: START_MS + 5_000 });
    const far = h.submit({
      runAtMillis: START_MS + 60_000,
      expiresAtMillis: START_MS + 70_000,
    });
    h.restart();
    h.tick(5_000);
    assertExpired(h, queued);
    for (let t = 0; t < 70; t++) h.tick(1_000);
    assertExpired(h, far);
  });

  it('a rerun clears the expiry', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ expiresAtMillis: START_MS + 1_000, maxAttempts: 1 });
    h.result(jobId, { success: false, error: 'boom' });
    assert.equal(h.status(jobId).state, 'FAILED');
    h.tick(2_000);
    expectReply(
      h.request({ type: 'RERUN_JOBS', queue: 'default', state: 'FAILED', limit: 10 }),
      'JOBS_RERUN',
    );
    assert.equal(h.status(jobId).state, 'RUNNING');
  });
});
