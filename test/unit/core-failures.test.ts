/**
 * The core's failure handling: lost workers, retries with back-off,
 * exhaustion, task failures, execution deadlines, stale results and oversized
 * results.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Effect } from '../../src/coordinator/core/types.js';
import { MAX_ERROR_CHARS, MAX_RESULT_BYTES } from '../../src/protocol/limits.js';
import type { JobRecord } from '../../src/store/store.js';
import { CoreHarness, effectsOf, eventsOf, messagesOf } from '../helpers/core-harness.js';

describe('core: lost workers and retries', () => {
  it('retries a job elsewhere as attempt 2 when its worker connection closes', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    const first = h.assignmentOf(jobId);
    h.closeWorker('w1', 'connection reset');

    // The worker went away, not the job: no back-off, the job queues again at once.
    const job = h.record(jobId);
    assert.equal(job.state, 'QUEUED');
    assert.equal(job.error, 'worker w1 lost (connection reset)');
    assert.equal(job.retryAtMs, null);
    assert.equal(job.workerId, null);
    assert.equal(job.attemptId, null);
    assert.equal(job.attempts, 1);
    const scheduled = h.events('job.retryScheduled');
    assert.equal(scheduled[0]?.cause, 'worker_lost');
    assert.equal(scheduled[0]?.delayMs, 0);
    assert.deepEqual(h.events('job.requeued'), [{ type: 'job.requeued', jobId, attempts: 1 }]);

    const w2 = h.register('w2', 1);
    const second = h.assignmentOf(jobId);
    assert.equal(second.connId, w2);
    assert.equal(second.attemptNumber, 2);
    assert.notEqual(second.attemptId, first.attemptId);
    h.result(jobId, { result: 'done' });
    const done = h.status(jobId);
    assert.equal(done.state, 'COMPLETED');
    assert.equal(done.result, 'done');
    assert.equal(done.attempts, 2);
    assert.equal(done.error, 'worker w1 lost (connection reset)', 'latest error kept');
  });

  it('doubles the back-off between attempts when failures repeat', () => {
    const h = new CoreHarness({ config: { defaultMaxAttempts: 5 } });
    h.register('w1', 1);
    const jobId = h.submit();
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 4; attempt++) {
      h.result(jobId, { success: false });
      const job = h.record(jobId);
      delays.push((job.retryAtMs as number) - h.clock);
      h.tick((job.retryAtMs as number) - h.clock);
    }
    assert.deepEqual(delays, [100, 200, 400, 800]);
  });

  it('fails the job with every attempt used when the last attempt fails', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    for (let attempt = 1; attempt <= 3; attempt++) {
      assert.equal(h.assignmentOf(jobId).attemptNumber, attempt);
      h.result(jobId, { success: false, error: `bad ${attempt}` });
      h.tick(10_000);
    }
    const job = h.status(jobId);
    assert.equal(job.state, 'FAILED');
    assert.equal(job.attempts, 3);
    assert.equal(job.error, 'bad 3 (all 3 attempts used)');
    assert.match(job.error ?? '', /\(all 3 attempts used\)$/);
    assert.equal(h.assignmentsOf(jobId).length, 3, 'no fourth attempt');
    const failed = h.events('job.failed');
    assert.equal(failed.length, 1);
    assert.equal(failed[0]?.cause, 'task_failure');
    assert.equal(h.core.activeCount, 0);
  });

  it('uses the job maxAttempts instead of the default when the submission sets one', () => {
    const h = new CoreHarness({ config: { defaultMaxAttempts: 3 } });
    h.register('w1', 1);
    const once = h.submit({ maxAttempts: 1 });
    h.closeWorker('w1');
    assert.equal(h.status(once).state, 'FAILED');
    assert.equal(h.status(once).error, 'worker w1 lost (connection reset) (all 1 attempts used)');

    h.register('w1', 1);
    const five = h.submit({ maxAttempts: 5 });
    for (let attempt = 1; attempt <= 4; attempt++) {
      h.result(five, { success: false });
      assert.equal(h.status(five).state, 'RETRY_WAIT', `attempt ${attempt}`);
      h.tick(10_000);
    }
    h.result(five, { success: false });
    assert.equal(h.status(five).state, 'FAILED');
    assert.equal(h.status(five).maxAttempts, 5);
  });

  it('completes a FAIL task when it fails on attempts 1-2 and succeeds on attempt 3', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit({ taskType: 'FAIL', payload: { failUntilAttempt: 3 } });
    for (let attempt = 1; attempt <= 3; attempt++) {
      assert.equal(h.assignmentOf(jobId).attemptNumber, attempt);
      if (attempt < 3) {
        h.result(jobId, { success: false, error: `deliberate failure on attempt ${attempt}` });
        h.tick(10_000);
      } else {
        h.result(jobId, { result: `succeeded on attempt ${attempt}` });
      }
    }
    const job = h.status(jobId);
    assert.equal(job.state, 'COMPLETED');
    assert.equal(job.result, 'succeeded on attempt 3');
    assert.equal(job.attempts, 3);
    assert.equal(job.error, 'deliberate failure on attempt 2');
  });

  it('retries every running job of a worker when it is lost', () => {
    const h = new CoreHarness();
    h.register('w1', 3);
    const ids = [h.submit(), h.submit(), h.submit()];
    const effects = h.closeWorker('w1', 'EOF');
    assert.equal(eventsOf(effects, 'worker.lost')[0]?.runningJobs, 3);
    assert.equal(eventsOf(effects, 'job.retryScheduled').length, 3);
    for (const jobId of ids) assert.equal(h.status(jobId).state, 'QUEUED');
  });
});

describe('core: execution deadlines', () => {
  const config = { taskTimeoutMs: 1_000 };

  it('revokes the attempt 1 ms after the deadline and frees the slot', () => {
    const h = new CoreHarness({ config });
    const connId = h.register('w1', 1);
    const jobId = h.submit();
    const waiting = h.submit();
    const { attemptId } = h.assignmentOf(jobId);
    assert.equal(h.record(jobId).deadlineAtMs, h.clock + 1_000);

    assert.deepEqual(effectsOf(h.tick(1_000), 'send'), [], 'now == deadline is in time');
    assert.equal(h.status(jobId).state, 'RUNNING');
    const effects = h.tick(1);
    assert.deepEqual(messagesOf(effects, 'TASK_CANCEL', connId), [
      { type: 'TASK_CANCEL', jobId, attemptId },
    ]);
    assert.deepEqual(eventsOf(effects, 'job.deadlineExceeded'), [
      { type: 'job.deadlineExceeded', jobId, workerId: 'w1', attemptId, timeoutMs: 1_000 },
    ]);
    const job = h.status(jobId);
    assert.equal(job.state, 'RETRY_WAIT');
    assert.equal(job.error, 'execution deadline exceeded (1000 ms) on worker w1');
    assert.equal(messagesOf(effects, 'TASK_ASSIGN', connId)[0]?.jobId, waiting, 'slot reused');
  });

  it('fails the job when the deadline passes on the final attempt', () => {
    const h = new CoreHarness({ config });
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    h.tick(1_001);
    const job = h.status(jobId);
    assert.equal(job.state, 'FAILED');
    assert.equal(
      job.error,
      'execution deadline exceeded (1000 ms) on worker w1 (all 1 attempts used)',
    );
    assert.equal(h.events('job.failed')[0]?.cause, 'deadline');
    assert.deepEqual(h.running().get('w1'), []);
  });

  it('gives each attempt a fresh deadline when the job is retried', () => {
    const h = new CoreHarness({ config });
    h.register('w1', 1);
    const jobId = h.submit();
    h.tick(1_001);
    h.tick(100);
    assert.equal(h.assignmentOf(jobId).attemptNumber, 2);
    assert.equal(h.record(jobId).deadlineAtMs, h.clock + 1_000);
    h.tick(999);
    assert.equal(h.status(jobId).state, 'RUNNING');
  });
});

/** Asserts an input changed nothing but emitted one result.stale event. */
function assertStale(h: CoreHarness, act: () => Effect[], jobId: string, reason: RegExp): void {
  const before = h.store.committedJob(jobId);
  const view = JSON.stringify(h.core.inspect());
  const effects = act();
  assert.equal(effects.length, 1, JSON.stringify(effects));
  const stale = eventsOf(effects, 'result.stale');
  assert.equal(stale.length, 1);
  assert.equal(stale[0]?.jobId, jobId);
  assert.match(stale[0]?.reason ?? '', reason);
  assert.deepEqual(h.store.committedJob(jobId), before);
  assert.equal(JSON.stringify(h.core.inspect()), view);
}

describe('core: stale results', () => {
  it('ignores a result of a superseded attempt when the job was reassigned', () => {
    const h = new CoreHarness({ config: { taskTimeoutMs: 1_000 } });
    h.register('w1', 1);
    const jobId = h.submit();
    const old = h.assignmentOf(jobId);
    h.tick(1_001);
    h.tick(100);
    assert.equal(h.assignmentOf(jobId).attemptNumber, 2);
    assertStale(h, () => h.result(jobId, { attemptId: old.attemptId }), jobId, /current lease/);
    assert.equal(h.status(jobId).state, 'RUNNING');
    assert.equal(h.status(jobId).attempts, 2);
  });

  it('ignores a result when the job waits to retry', () => {
    const h = new CoreHarness({ config: { taskTimeoutMs: 1_000 } });
    h.register('w1', 1);
    const jobId = h.submit();
    const old = h.assignmentOf(jobId);
    h.tick(1_001);
    assertStale(
      h,
      () => h.result(jobId, { attemptId: old.attemptId }),
      jobId,
      /not the current lease/,
    );
    h.tick(100);
    assert.equal(h.assignmentOf(jobId).attemptNumber, 2, 'the retry goes on');
  });

  it('ignores a duplicate result of the same attempt when the job completed', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.result(jobId, { result: 'first' });
    assertStale(h, () => h.result(jobId, { result: 'second' }), jobId, /already finished/);
    assertStale(h, () => h.result(jobId, { success: false }), jobId, /already finished/);
    assert.equal(h.status(jobId).result, 'first');
  });

  it('ignores a duplicate failure of the same attempt when the job already retries', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.result(jobId, { success: false, error: 'one' });
    assertStale(
      h,
      () => h.result(jobId, { success: false, error: 'two' }),
      jobId,
      /not the current/,
    );
    assert.equal(h.status(jobId).error, 'one');
  });

  it('ignores a result when the job is unknown', () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 1);
    const effects = h.handle({
      kind: 'workerMessage',
      connId,
      msg: {
        type: 'TASK_RESULT',
        workerId: 'w1',
        jobId: 'nope',
        attemptId: 'x',
        success: true,
        result: 'r',
        error: null,
      },
    });
    assert.equal(effects.length, 1);
    assert.match(eventsOf(effects, 'result.stale')[0]?.reason ?? '', /not an active job/);
    assert.equal(h.store.committedJob('nope'), undefined);
  });

  it('ignores a result with the current lease when it comes from another worker', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    h.register('w2', 1);
    const jobId = h.submit();
    const holder = h.assignmentOf(jobId).workerId;
    const other = holder === 'w1' ? 'w2' : 'w1';
    assertStale(h, () => h.result(jobId, { workerId: other }), jobId, /belongs to worker/);
  });

  it('ignores a late result of the lost session when the worker registered again', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    const old = h.assignmentOf(jobId);
    h.register('w1', 1);
    assertStale(
      h,
      () => h.result(jobId, { attemptId: old.attemptId }),
      jobId,
      /not the current lease/,
    );
  });
});

describe('core: result and error sizes', () => {
  it('completes a job when its result is exactly the size limit', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.result(jobId, { result: 'a'.repeat(MAX_RESULT_BYTES) });
    assert.equal(h.status(jobId).state, 'COMPLETED');
    assert.equal(h.status(jobId).result?.length, MAX_RESULT_BYTES);
  });

  it('fails the attempt when the result is over 512 KiB', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.result(jobId, { result: 'a'.repeat(512 * 1024 + 1) });
    const job = h.record(jobId) as JobRecord;
    assert.equal(job.state, 'RETRY_WAIT');
    assert.equal(job.result, null);
    assert.match(job.error ?? '', /^result too large \(524289 bytes/);
  });

  it('counts UTF-8 bytes, not characters, when measuring a result', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.result(jobId, { result: 'é'.repeat(MAX_RESULT_BYTES / 2 + 1) });
    assert.equal(h.status(jobId).state, 'RETRY_WAIT');
  });

  it('measures a result as JSON-encoded when it holds characters that need escapes', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const fits = h.submit();
    h.result(fits, { result: '"'.repeat(MAX_RESULT_BYTES / 2) });
    assert.equal(h.status(fits).state, 'COMPLETED');
    const over = h.submit();
    h.result(over, { result: '"'.repeat(MAX_RESULT_BYTES / 2 + 1) });
    assert.equal(h.status(over).state, 'RETRY_WAIT');
    assert.match(h.status(over).error ?? '', /^result too large/);
  });

  it('truncates an attempt error when it is longer than the limit', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.result(jobId, { success: false, error: 'e'.repeat(MAX_ERROR_CHARS * 3) });
    const error = h.status(jobId).error ?? '';
    assert.equal(error, `${'e'.repeat(MAX_ERROR_CHARS)}... (truncated)`);
  });

  it('records a placeholder error when a failure carries none', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.result(jobId, { success: false, error: null });
    assert.match(h.status(jobId).error ?? '', /without an error message/);
  });
});
