/**
 * RERUN_JOBS in the core: the FAILED jobs of a queue (by task type and
 * finish time) queued again as the same jobs, with a fresh attempt budget
 * and their attempts kept, bounded per request; refused requests change
 * nothing; a job that changed while the store was read is left alone.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JsonObject, RerunJobs } from '../../src/protocol/messages.js';
import { CoreHarness, expectReply, START_MS } from '../helpers/core-harness.js';

/** A job of `queue` that failed its only attempt (no retries). */
function failedJob(h: CoreHarness, queue: string, taskType = 'SLEEP'): string {
  const payload: JsonObject = taskType === 'SLEEP' ? { durationMillis: 10 } : { text: 'x' };
  const jobId = h.submit({ queue, taskType, payload, maxAttempts: 1 });
  h.result(jobId, { success: false, error: 'partner API down', retryable: false });
  assert.equal(h.status(jobId).state, 'FAILED');
  return jobId;
}

function rerun(h: CoreHarness, fields: Partial<RerunJobs> = {}) {
  return h.request({ type: 'RERUN_JOBS', queue: 'q', state: 'FAILED', ...fields });
}

describe('RERUN_JOBS', () => {
  it('queues the FAILED jobs of the queue again with a fresh budget, their attempts kept', () => {
    const h = new CoreHarness();
    h.register('w1', 10, null);
    const a = failedJob(h, 'q');
    const b = failedJob(h, 'q');
    const elsewhere = failedJob(h, 'other');
    const done = h.submit({ queue: 'q' });
    h.result(done);

    const reply = expectReply(rerun(h, { maxAttempts: 2 }), 'JOBS_RERUN');
    assert.deepEqual(reply, { type: 'JOBS_RERUN', rerun: 2, jobIds: [b, a], more: false });
    assert.equal(h.status(elsewhere).state, 'FAILED');
    assert.equal(h.status(done).state, 'COMPLETED');

    // The same job, attempt 2 of 1 + 2, its first attempt still in its history.
    const assign = h.assignmentOf(a);
    assert.equal(assign.attemptNumber, 2);
    assert.equal(assign.maxAttempts, 3);
    h.result(a, { success: false, error: 'still down' });
    h.tick(60_000);
    h.result(a);
    const status = expectReply(
      h.request({ type: 'GET_JOB_STATUS', jobId: a, attempts: true }),
      'JOB_STATUS',
    );
    assert.equal(status.job.state, 'COMPLETED');
    assert.equal(status.job.attempts, 3);
    assert.deepEqual(
      status.attempts?.map((x) => [x.attemptNumber, x.outcome, x.error]),
      [
        [1, 'FAILED', 'partner API down'],
        [2, 'FAILED', 'still down'],
        [3, 'SUCCEEDED', null],
      ],
    );
  });

  it('gives the coordinator default budget when the request names none, and survives a restart', () => {
    const h = new CoreHarness({ config: { defaultMaxAttempts: 4 } });
    h.register('w1', 1, null);
    const a = failedJob(h, 'q');
    h.closeWorker('w1');
    expectReply(rerun(h), 'JOBS_RERUN');
    h.restart();
    const row = h.record(a);
    assert.equal(row.state, 'QUEUED');
    assert.equal(row.maxAttempts, 5);
    assert.equal(row.finishedAtMs, null);
    h.register('w2', 1, null);
    assert.equal(h.assignmentOf(a).attemptNumber, 2);
  });

  it('selects by task type and finish time, and takes at most `limit` per request', () => {
    const h = new CoreHarness();
    h.register('w1', 10, null);
    const early = failedJob(h, 'q');
    h.clock += 10_000;
    const lateSleep = failedJob(h, 'q');
    const lateCount = failedJob(h, 'q', 'WORD_COUNT');
    h.closeWorker('w1');

    const byType = expectReply(rerun(h, { taskType: 'WORD_COUNT' }), 'JOBS_RERUN');
    assert.deepEqual(byType.jobIds, [lateCount]);
    const since = expectReply(
      rerun(h, { finishedSinceMillis: START_MS + 10_000, limit: 5 }),
      'JOBS_RERUN',
    );
    assert.deepEqual(since.jobIds, [lateSleep]);
    assert.equal(h.status(early).state, 'FAILED');

    const again = [failedJobAfterRerun(h, lateSleep), failedJobAfterRerun(h, lateCount)];
    const first = expectReply(rerun(h, { limit: 2 }), 'JOBS_RERUN');
    assert.equal(first.rerun, 2);
    assert.equal(first.more, true);
    const second = expectReply(rerun(h, { limit: 2 }), 'JOBS_RERUN');
    assert.deepEqual(second, { type: 'JOBS_RERUN', rerun: 1, jobIds: [early], more: false });
    assert.deepEqual(first.jobIds.sort(), again.sort());
  });

  it('refuses a bad request naming the field, and changes nothing', () => {
    const h = new CoreHarness();
    h.register('w1', 1, null);
    const a = failedJob(h, 'q');
    const cases: [Partial<RerunJobs>, string][] = [
      [{ state: 'COMPLETED' }, 'state'],
      [{ queue: '9bad' }, 'queue'],
      [{ limit: 0 }, 'limit'],
      [{ limit: 10_001 }, 'limit'],
      [{ maxAttempts: 0 }, 'maxAttempts'],
      [{ finishedSinceMillis: -1 }, 'finishedSinceMillis'],
      [{ taskType: '' }, 'taskType'],
    ];
    for (const [fields, field] of cases) {
      const reply = expectReply(rerun(h, fields), 'ERROR');
      assert.equal(reply.code, 'INVALID_REQUEST');
      assert.match(reply.message ?? '', new RegExp(field));
    }
    assert.equal(h.status(a).state, 'FAILED');
  });

  it('leaves a job alone that another request queued again while the store was read', () => {
    const h = new CoreHarness();
    h.register('w1', 1, null);
    const a = failedJob(h, 'q');
    h.closeWorker('w1');
    h.holdReads = true;
    const first = h.peekRequestId();
    assert.equal(rerun(h), undefined);
    assert.equal(rerun(h), undefined);
    h.holdReads = false;
    // Both reads see the job FAILED: the store is read before either answer is applied.
    const answers = h.heldReads.map((read) => ({
      readId: read.readId,
      result: h.store.readNow(read.read),
    }));
    const replies = answers.flatMap(({ readId, result }) =>
      h
        .handle({ kind: 'readDone', readId, result })
        .flatMap((e) =>
          e.kind === 'reply' && e.msg.type === 'JOBS_RERUN' ? [[e.requestId, e.msg.rerun]] : [],
        ),
    );
    assert.deepEqual(replies, [
      [first, 1],
      [first + 1, 0],
    ]);
    assert.equal(h.core.inspect().activeByState.QUEUED, 1);
    assert.equal(h.status(a).state, 'QUEUED');
  });

  it('keeps within the active-job limit and says more remain', () => {
    const h = new CoreHarness({ config: { maxActiveJobs: 1 } });
    h.register('w1', 1, null);
    failedJob(h, 'q');
    failedJob(h, 'q');
    h.closeWorker('w1');
    const reply = expectReply(rerun(h), 'JOBS_RERUN');
    assert.equal(reply.rerun, 1);
    assert.equal(reply.more, true);
  });
});

/** Runs a re-queued job's attempt and fails it again (no retry left). */
function failedJobAfterRerun(h: CoreHarness, jobId: string): string {
  h.register(`again-${jobId}`, 1, null);
  h.result(jobId, { success: false, error: 'again', retryable: false });
  h.closeWorker(`again-${jobId}`);
  assert.equal(h.status(jobId).state, 'FAILED');
  return jobId;
}
