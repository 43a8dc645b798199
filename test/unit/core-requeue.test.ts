/**
 * Attempts a worker requeues (feature `requeue`): `TASK_RESULT.requeue`
 * ends the attempt REQUEUED and queues the job at once, without counting the
 * attempt toward maxAttempts, for the first 10 such attempts of a job; an
 * 11th counts like a failed attempt (back-off, FAILED when it was the last).
 * The snapshot counts them apart (`requeues`), across restarts and re-runs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_FREE_REQUEUES } from '../../src/protocol/limits.js';
import { CoreHarness, eventsOf, expectReply, rerunWithOneMore } from '../helpers/core-harness.js';

const CUT_OFF = 'its task thread was ended for another attempt';

function requeue(h: CoreHarness, jobId: string, error = CUT_OFF) {
  return h.result(jobId, { success: false, error, requeue: true });
}

function drain(h: CoreHarness, workerId: string): void {
  h.handle({
    kind: 'workerMessage',
    connId: h.connOf(workerId),
    msg: { type: 'WORKER_DRAINING', workerId },
  });
}

function outcomes(h: CoreHarness, jobId: string): string[] {
  const reply = h.request({ type: 'GET_JOB_STATUS', jobId, attempts: true });
  return (expectReply(reply, 'JOB_STATUS').attempts ?? []).map((a) => a.outcome);
}

describe('core: an attempt its worker requeues', () => {
  it('ends REQUEUED, and the job is QUEUED at once without counting the attempt', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    const { attemptId } = h.assignmentOf(jobId);
    drain(h, 'w1'); // nobody to take it again: it stays QUEUED
    const effects = requeue(h, jobId);
    assert.deepEqual(eventsOf(effects, 'job.attemptRequeued'), [
      {
        type: 'job.attemptRequeued',
        jobId,
        workerId: 'w1',
        attemptId,
        attempt: 1,
        requeues: 1,
        error: CUT_OFF,
      },
    ]);
    assert.deepEqual(eventsOf(effects, 'job.retryScheduled'), [], 'no back-off');
    const record = h.record(jobId);
    assert.deepEqual([record.state, record.retryAtMs], ['QUEUED', null]);
    const status = h.status(jobId);
    assert.deepEqual([status.attempts, status.requeues, status.error], [1, 1, CUT_OFF]);
    assert.deepEqual(outcomes(h, jobId), ['REQUEUED']);
    // Its one counted attempt is still to come.
    h.register('w2', 1);
    assert.equal(h.assignmentOf(jobId).attemptNumber, 2);
    h.result(jobId, { success: false, error: 'boom' });
    const failed = h.status(jobId);
    assert.deepEqual([failed.state, failed.error], ['FAILED', 'boom (all 1 attempts used)']);
  });

  it('counts the eleventh requeue like a failed attempt, with back-off', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 2 });
    for (let i = 1; i <= MAX_FREE_REQUEUES; i++) {
      requeue(h, jobId);
      assert.equal(h.assignmentOf(jobId).attemptNumber, i + 1, 'assigned again at once');
    }
    const effects = requeue(h, jobId);
    assert.deepEqual(eventsOf(effects, 'job.attemptRequeued'), []);
    const [retry] = eventsOf(effects, 'job.retryScheduled');
    assert.equal(retry?.cause, 'task_failure');
    assert.ok((retry?.delayMs ?? 0) > 0, 'the normal back-off');
    assert.match(retry?.error ?? '', /requeued 10 times already: this attempt counts/);
    assert.equal(h.record(jobId).state, 'RETRY_WAIT');
    assert.equal(h.status(jobId).requeues, MAX_FREE_REQUEUES);
    h.tick(retry?.delayMs ?? 0);
    assert.equal(h.assignmentOf(jobId).attemptNumber, 12);
    requeue(h, jobId);
    const failed = h.status(jobId);
    assert.equal(failed.state, 'FAILED', 'the 12th requeue counted too: both attempts used');
    assert.match(failed.error ?? '', /requeued 10 times already.*\(all 2 attempts used\)$/);
    assert.deepEqual(outcomes(h, jobId), [
      ...Array<string>(MAX_FREE_REQUEUES).fill('REQUEUED'),
      'FAILED',
      'FAILED',
    ]);
  });

  it('fails the job when the counted requeue was its last attempt', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    for (let i = 0; i < MAX_FREE_REQUEUES; i++) requeue(h, jobId);
    const [failed] = eventsOf(requeue(h, jobId), 'job.failed');
    assert.equal(failed?.attempts, 11);
    const status = h.status(jobId);
    assert.deepEqual([status.state, status.attempts, status.requeues], ['FAILED', 11, 10]);
  });

  it('is a success when the result says so, and wins over retryable: false', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const done = h.submit();
    h.result(done, { success: true, requeue: true });
    assert.equal(h.status(done).state, 'COMPLETED');
    const cut = h.submit({ maxAttempts: 1 });
    h.result(cut, { success: false, error: CUT_OFF, retryable: false, requeue: true });
    assert.equal(h.assignmentOf(cut).attemptNumber, 2, 'requeued, not failed');
  });

  it('changes nothing under a lease that is not current', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    const effects = h.result(jobId, {
      success: false,
      error: CUT_OFF,
      requeue: true,
      attemptId: 'not-the-lease',
    });
    assert.equal(eventsOf(effects, 'result.stale').length, 1);
    assert.equal(h.record(jobId).state, 'RUNNING');
  });

  it('still does not count after a restart, and shows in a stored snapshot', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    drain(h, 'w1');
    requeue(h, jobId);
    h.restart();
    assert.equal(h.status(jobId).requeues, 1);
    h.register('w1', 1);
    h.result(jobId, { success: false, error: 'boom' });
    const failed = h.status(jobId); // terminal: read from the store
    assert.deepEqual([failed.state, failed.attempts, failed.requeues], ['FAILED', 2, 1]);
  });

  it('gives a re-run its budget on top of the attempts that counted', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    requeue(h, jobId);
    h.result(jobId, { success: false, error: 'boom' });
    assert.equal(h.status(jobId).state, 'FAILED');
    rerunWithOneMore(h, jobId);
  });
});
