/**
 * What the core does now that history lives only in the store: reads come
 * back later (and may fail), keyed submissions wait for their lookup, the
 * attempt history, purge and retention, the limit on pending waits, and the
 * forgiveness of the coordinator's own stalls.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClientReply } from '../../src/protocol/messages.js';
import {
  CLIENT_CONN,
  CoreHarness,
  eventsOf,
  expectReply,
  repliesOf,
} from '../helpers/core-harness.js';

const KEYED = { idempotencyKey: 'order-1', payload: { durationMillis: 5 } } as const;

/** The replies of `effects` to one request. */
function repliesTo(effects: ReturnType<CoreHarness['handle']>, requestId: number): ClientReply[] {
  return effects.flatMap((e) =>
    e.kind === 'reply' && e.connId === CLIENT_CONN && e.requestId === requestId ? [e.msg] : [],
  );
}

/** A job that completed and whose end is committed (so it lives in the store only). */
function finishedJob(h: CoreHarness, options: Parameters<CoreHarness['submit']>[0] = {}): string {
  h.register(`w-${h.newConn()}`, 1);
  const jobId = h.submit(options);
  h.result(jobId, { result: 'done' });
  assert.equal(h.store.committedJob(jobId)?.state, 'COMPLETED');
  return jobId;
}

describe('core: keyed submissions while the store is asked', () => {
  it('creates one job for two submissions with a new key sent while the lookup is out', () => {
    const h = new CoreHarness();
    h.holdReads = true;
    const first = h.peekRequestId();
    assert.equal(h.submitRequest(KEYED), undefined, 'held until the store answers');
    const second = h.peekRequestId();
    assert.equal(h.submitRequest(KEYED), undefined, 'queued behind the first lookup');
    assert.equal(h.heldReads.length, 1, 'one lookup per key');
    h.holdReads = false;
    const effects = h.answerHeldReads();
    const a = expectReply(repliesTo(effects, first)[0], 'JOB_SUBMITTED');
    const b = expectReply(repliesTo(effects, second)[0], 'JOB_SUBMITTED');
    assert.equal(a.jobId, b.jobId);
    assert.equal(eventsOf(effects, 'job.submitted').length, 1);
    assert.equal(h.store.maxSeq(), 1);
  });

  it('answers a key of a job that only the store remembers with that job', () => {
    const h = new CoreHarness();
    const jobId = finishedJob(h, KEYED);
    const reply = expectReply(h.submitRequest(KEYED), 'JOB_SUBMITTED');
    assert.equal(reply.jobId, jobId);
    assert.equal(reply.job?.state, 'COMPLETED');
    const conflict = expectReply(
      h.submitRequest({ ...KEYED, payload: { durationMillis: 6 } }),
      'ERROR',
    );
    assert.equal(conflict.code, 'IDEMPOTENCY_CONFLICT');
  });

  it('fails the held submissions with STORE_READ_FAILED and creates nothing when the lookup fails', () => {
    const h = new CoreHarness();
    h.holdReads = true;
    const first = h.peekRequestId();
    h.submitRequest(KEYED);
    const second = h.peekRequestId();
    h.submitRequest(KEYED);
    h.holdReads = false;
    const effects = h.answerHeldReads(true);
    for (const requestId of [first, second]) {
      assert.equal(
        expectReply(repliesTo(effects, requestId)[0], 'ERROR').code,
        'STORE_READ_FAILED',
      );
    }
    assert.equal(h.core.activeCount, 0);
    assert.equal(h.submit(KEYED).length > 0, true, 'the next submission is looked up afresh');
  });
});

describe('core: reads of history', () => {
  it('answers status, wait and cancel of a stored job from the store', () => {
    const h = new CoreHarness();
    const jobId = finishedJob(h);
    assert.equal(h.status(jobId).state, 'COMPLETED');
    const wait = h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 1_000 });
    assert.equal(expectReply(wait, 'JOB_STATUS').job.state, 'COMPLETED');
    const cancel = expectReply(h.request({ type: 'CANCEL_JOB', jobId }), 'JOB_CANCEL');
    assert.equal(cancel.cancelled, false);
    assert.equal(cancel.job.state, 'COMPLETED');
    const unknown = expectReply(h.request({ type: 'GET_JOB_STATUS', jobId: 'nope' }), 'ERROR');
    assert.equal(unknown.code, 'UNKNOWN_JOB');
  });

  it('answers a failed read with STORE_READ_FAILED for that request only', () => {
    const h = new CoreHarness();
    const jobId = finishedJob(h);
    h.store.failReads('disk I/O error');
    const failed = expectReply(h.request({ type: 'GET_JOB_STATUS', jobId }), 'ERROR');
    assert.equal(failed.code, 'STORE_READ_FAILED');
    assert.match(failed.message, /disk I\/O error/);
    h.store.failReads(null);
    assert.equal(h.status(jobId).state, 'COMPLETED');
    const active = h.submit();
    assert.equal(h.status(active).jobId, active, 'active jobs never need the store');
  });

  it('answers from memory a job whose end is not committed yet, and lists it as it is', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.holdReads = true;
    // The result, handled but with its batch not taken: the store still says RUNNING.
    h.core.handle({
      kind: 'workerMessage',
      connId: h.connOf('w1'),
      msg: {
        type: 'TASK_RESULT',
        workerId: 'w1',
        jobId,
        attemptId: h.assignmentOf(jobId).attemptId,
        success: true,
        result: 'r',
        error: null,
      },
    });
    assert.equal(h.store.committedJob(jobId)?.state, 'RUNNING');
    const status = h.core.handle({
      kind: 'clientRequest',
      connId: CLIENT_CONN,
      requestId: 900,
      msg: { type: 'GET_JOB_STATUS', jobId },
    });
    assert.equal(expectReply(repliesOf(status)[0], 'JOB_STATUS').job.state, 'COMPLETED');
    const list = h.core.handle({
      kind: 'clientRequest',
      connId: CLIENT_CONN,
      requestId: 901,
      msg: { type: 'LIST_JOBS', limit: 10, state: 'COMPLETED', cursor: null },
    });
    const read = list.find((e) => e.kind === 'read');
    assert.ok(read?.kind === 'read');
    const page = h.core.handle({
      kind: 'readDone',
      readId: read.readId,
      result: h.store.readNow(read.read),
    });
    const jobs = expectReply(repliesOf(page)[0], 'JOB_LIST').jobs;
    assert.deepEqual(
      jobs.map((j) => [j.jobId, j.state]),
      [[jobId, 'COMPLETED']],
    );
  });
});

describe('core: attempt history', () => {
  it('records every attempt with its worker, times and outcome', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.clock += 5;
    h.closeWorker('w1');
    h.register('w2', 1);
    h.clock += 7;
    h.result(jobId, { result: 'ok' });
    const reply = expectReply(
      h.request({ type: 'GET_JOB_STATUS', jobId, attempts: true }),
      'JOB_STATUS',
    );
    assert.deepEqual(
      reply.attempts?.map((a) => [a.attemptNumber, a.workerId, a.outcome]),
      [
        [1, 'w1', 'WORKER_LOST'],
        [2, 'w2', 'SUCCEEDED'],
      ],
    );
    const [first, second] = reply.attempts ?? [];
    assert.ok(first !== undefined && second !== undefined);
    assert.equal((first.finishedAtMillis ?? 0) - first.startedAtMillis, 5);
    assert.equal((second.finishedAtMillis ?? 0) - second.startedAtMillis, 7);
    assert.match(first.error ?? '', /worker w1 lost/);
    assert.equal(reply.job.startedAtMillis, second.startedAtMillis);
    assert.equal(reply.job.finishedAtMillis, second.finishedAtMillis);
  });

  it('writes no attempt row for a first attempt that succeeded, and shows it from the job row', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.clock += 9;
    h.result(jobId, { result: 'ok' });
    assert.equal(h.store.committedJob(jobId)?.state, 'COMPLETED');
    assert.deepEqual(h.store.committedAttempts(jobId), [], 'the hot path writes no attempt row');
    const row = h.store.committedJob(jobId);
    assert.equal(row?.workerId, 'w1', 'the COMPLETED row names the worker that completed it');
    const reply = expectReply(
      h.request({ type: 'GET_JOB_STATUS', jobId, attempts: true }),
      'JOB_STATUS',
    );
    assert.equal(reply.job.workerId, null, 'the snapshot shows a worker only while RUNNING');
    assert.deepEqual(
      reply.attempts?.map((a) => [
        a.attemptNumber,
        a.attemptId,
        a.workerId,
        a.outcome,
        a.error,
        (a.finishedAtMillis ?? 0) - a.startedAtMillis,
      ]),
      [[1, row?.attemptId, 'w1', 'SUCCEEDED', null, 9]],
    );
  });

  it('writes the rows of a job that needed a retry, the succeeding attempt included', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.closeWorker('w1');
    h.register('w2', 1);
    h.result(jobId, { result: 'ok' });
    assert.deepEqual(
      h.store.committedAttempts(jobId).map((a) => [a.attemptNumber, a.outcome]),
      [
        [1, 'WORKER_LOST'],
        [2, 'SUCCEEDED'],
      ],
    );
  });

  it('shows the running attempt of an active job, and nothing without asking', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    const plain = expectReply(h.request({ type: 'GET_JOB_STATUS', jobId }), 'JOB_STATUS');
    assert.equal(plain.attempts, undefined);
    const full = expectReply(
      h.request({ type: 'GET_JOB_STATUS', jobId, attempts: true }),
      'JOB_STATUS',
    );
    assert.deepEqual(
      full.attempts?.map((a) => [a.workerId, a.outcome, a.finishedAtMillis]),
      [['w1', 'RUNNING', null]],
    );
  });

  it('records an attempt a restart interrupted (its worker did not come back)', () => {
    const h = new CoreHarness({ config: { heartbeatTimeoutMs: 1_000 } });
    h.register('w1', 1);
    const jobId = h.submit();
    h.restart();
    h.tick(1_001);
    const reply = expectReply(
      h.request({ type: 'GET_JOB_STATUS', jobId, attempts: true }),
      'JOB_STATUS',
    );
    assert.deepEqual(
      reply.attempts?.map((a) => a.outcome),
      ['INTERRUPTED'],
    );
  });
});

describe('core: purge and retention', () => {
  it('purges terminal jobs of a state older than asked, and forgets their keys', () => {
    const h = new CoreHarness();
    const old = finishedJob(h, KEYED);
    h.clock += 10_000;
    const recent = finishedJob(h);
    const purged = expectReply(
      h.request({ type: 'PURGE_JOBS', state: 'COMPLETED', olderThanMillis: 5_000 }),
      'JOBS_PURGED',
    );
    assert.equal(purged.deleted, 1);
    assert.equal(h.store.committedJob(old), undefined);
    assert.equal(h.store.committedJob(recent)?.state, 'COMPLETED');
    assert.equal(eventsOf(h.last, 'jobs.purged')[0]?.deleted, 1);
    const again = h.submit(KEYED);
    assert.notEqual(again, old, 'the key of a purged job creates a new job');
  });

  it('refuses to purge a state that is not terminal', () => {
    const h = new CoreHarness();
    for (const state of ['QUEUED', 'RUNNING', 'RETRY_WAIT'] as const) {
      const reply = expectReply(
        h.request({ type: 'PURGE_JOBS', state, olderThanMillis: 0 }),
        'ERROR',
      );
      assert.equal(reply.code, 'INVALID_REQUEST');
    }
  });

  it('purges more than one step of rows on one request', () => {
    const h = new CoreHarness();
    h.register('w1', 10);
    const ids = Array.from({ length: 1_203 }, () => h.submit({ payload: { durationMillis: 1 } }));
    for (const jobId of ids) h.result(jobId);
    h.clock += 1;
    const purged = expectReply(
      h.request({ type: 'PURGE_JOBS', state: 'COMPLETED', olderThanMillis: 0 }),
      'JOBS_PURGED',
    );
    assert.equal(purged.deleted, 1_203);
  });

  it('deletes old terminal jobs in the background when retention is set', () => {
    const h = new CoreHarness({ config: { retainTerminalMs: 60_000 } });
    const jobId = finishedJob(h);
    h.tick(30_000);
    assert.equal(h.store.committedJob(jobId)?.state, 'COMPLETED', 'not old enough');
    const effects = h.tick(31_000);
    assert.equal(h.store.committedJob(jobId), undefined);
    assert.equal(eventsOf(effects, 'jobs.purged')[0]?.reason, 'retention');
  });
});

describe('core: limits and stalls', () => {
  it('refuses a WAIT_JOB beyond the per-connection limit and keeps the others', () => {
    const h = new CoreHarness({ config: { maxWaitsPerConnection: 2 } });
    const jobId = h.submit();
    assert.equal(h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 1_000 }), undefined);
    assert.equal(h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 1_000 }), undefined);
    const refused = expectReply(
      h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 1_000 }),
      'ERROR',
    );
    assert.equal(refused.code, 'TOO_MANY_WAITS');
    const other = h.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 1_000 }, CLIENT_CONN + 1);
    assert.equal(other, undefined, 'another connection has its own allowance');
  });

  it('does not hold a stall of its own against workers, and says so', () => {
    const h = new CoreHarness({ config: { heartbeatTimeoutMs: 1_000, sweepIntervalMs: 100 } });
    h.register('w1', 1);
    h.tick(100);
    const effects = h.tick(5_000);
    assert.equal(eventsOf(effects, 'worker.lost').length, 0);
    assert.equal(eventsOf(effects, 'coordinator.stalled')[0]?.stalledMs, 4_900);
    let lost = 0;
    for (let i = 0; i < 5; i++) lost += eventsOf(h.tick(250), 'worker.lost').length;
    assert.equal(lost, 1, 'silence after the stall counts');
  });

  it('loses a silent worker as usual when ticks come on time', () => {
    const h = new CoreHarness({ config: { heartbeatTimeoutMs: 1_000, sweepIntervalMs: 300 } });
    h.register('w1', 1);
    let lost = 0;
    for (let i = 0; i < 4; i++) lost += eventsOf(h.tick(300), 'worker.lost').length;
    assert.equal(lost, 1);
    assert.equal(h.events('coordinator.stalled').length, 0);
  });
});
