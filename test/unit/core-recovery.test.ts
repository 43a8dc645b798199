/**
 * Restart recovery: a new core built on the store of a stopped one (a
 * MemoryStore holding what was committed). The SQLite store's side of the
 * same contract is covered by the shared store tests and by the restart
 * integration tests on real files.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CoreConfig, Effect } from '../../src/coordinator/core/types.js';
import type { Priority } from '../../src/protocol/messages.js';
import { CoreHarness, eventsOf, expectReply, messagesOf } from '../helpers/core-harness.js';

interface Backend {
  name: string;
  create(config?: Partial<CoreConfig>): CoreHarness;
  /** With `epoch`: as a new leadership term of a shared store. */
  restart(h: CoreHarness, epoch?: number): Effect[];
}

/** How long a restart keeps the attempts it found running for their workers (the heartbeat timeout). */
const GRACE_MS = 1_000;

const memoryBackend: Backend = {
  name: 'MemoryStore',
  create: (config = {}) => new CoreHarness({ config: { heartbeatTimeoutMs: GRACE_MS, ...config } }),
  restart: (h, epoch) => h.restart(epoch),
};

function setLimit(h: CoreHarness, name: string, concurrency: number): void {
  expectReply(h.request({ type: 'SET_QUEUE', name, concurrency }), 'QUEUE_INFO');
}

/** Lets the grace of the attempts a restart kept pass: their workers did not come back. */
function outlive(h: CoreHarness): Effect[] {
  return h.tick(GRACE_MS + 1);
}

for (const backend of [memoryBackend]) {
  describe(`core recovery on ${backend.name}`, () => {
    it('keeps state, result and error of terminal jobs when restarted', () => {
      const h = backend.create();
      h.register('w1', 3);
      const done = h.submit();
      const failed = h.submit({ maxAttempts: 1 });
      const cancelled = h.submit();
      h.result(done, { result: 'the result' });
      h.result(failed, { success: false, error: 'broke' });
      h.request({ type: 'CANCEL_JOB', jobId: cancelled });
      const before = [done, failed, cancelled].map((id) => h.status(id));
      backend.restart(h);
      assert.deepEqual(
        [done, failed, cancelled].map((id) => h.status(id)),
        before,
      );
      assert.equal(before[0]?.result, 'the result');
      assert.equal(before[1]?.error, 'broke (all 1 attempts used)');
      assert.equal(h.core.activeJobs().length, 0);
      assert.equal(h.core.activeCount, 0);
    });

    it('queues QUEUED jobs again when restarted', () => {
      const h = backend.create();
      const jobId = h.submit();
      backend.restart(h);
      assert.equal(h.status(jobId).state, 'QUEUED');
      h.register('w1', 1);
      assert.equal(h.assignmentOf(jobId).attemptNumber, 1);
    });

    it('requeues a RETRY_WAIT job at its original retry time when restarted', () => {
      const h = backend.create({ retryBaseDelayMs: 1_000 });
      h.register('w1', 1);
      const jobId = h.submit();
      h.result(jobId, { success: false });
      const retryAtMs = h.record(jobId).retryAtMs as number;
      assert.equal(retryAtMs, h.clock + 1_000);
      h.clock += 300;
      backend.restart(h);
      assert.equal(h.record(jobId).retryAtMs, retryAtMs);
      h.register('w1', 1);
      h.tick(699);
      assert.equal(h.status(jobId).state, 'RETRY_WAIT', 'not before retryAtMs');
      h.tick(1);
      assert.equal(h.status(jobId).state, 'RUNNING');
      assert.equal(h.assignmentOf(jobId).attemptNumber, 2);
    });

    it('requeues a RUNNING job whose worker did not come back, its attempts unchanged', () => {
      const h = backend.create();
      h.register('w1', 1);
      const jobId = h.submit();
      backend.restart(h);
      assert.equal(h.status(jobId).state, 'RUNNING', 'kept for its worker');
      const effects = outlive(h);
      assert.deepEqual(eventsOf(effects, 'job.recovered'), [
        { type: 'job.recovered', jobId, from: 'RUNNING', to: 'QUEUED' },
      ]);
      for (const job of [h.record(jobId), h.store.committedJob(jobId)]) {
        assert.equal(job?.state, 'QUEUED');
        assert.equal(job?.attempts, 1);
        assert.equal(job?.workerId, null);
        assert.equal(job?.attemptId, null);
        assert.equal(job?.deadlineAtMs, null);
        assert.match(job?.error ?? '', /coordinator restarted during attempt 1/);
      }
      h.register('w2', 1);
      assert.equal(h.assignmentOf(jobId).attemptNumber, 2);
    });

    it('lets a worker that lists its attempt after a restart go on with it', () => {
      const h = backend.create();
      h.register('w1', 1);
      const jobId = h.submit();
      const { attemptId } = h.assignmentOf(jobId);
      const effects = backend.restart(h);
      assert.deepEqual(
        eventsOf(effects, 'worker.leasesKept').map((e) => [e.workerId, e.jobs]),
        [['w1', 1]],
      );
      h.register('w1', 1, null, { heldAttempts: [{ jobId, attemptId }] });
      assert.deepEqual(messagesOf(h.last, 'TASK_ASSIGN'), [], 'no new attempt');
      assert.deepEqual(h.core.inspect().keptLeases, [], 'reattached: the grace no longer applies');
      h.result(jobId, { attemptId, result: 'done' });
      const job = h.status(jobId);
      assert.deepEqual([job.state, job.attempts, job.result], ['COMPLETED', 1, 'done']);
    });

    it("counts an attempt a restart kept toward its queue's concurrency until its worker is back or lost", () => {
      const h = backend.create();
      setLimit(h, 'api', 1);
      h.register('w1', 1);
      const first = h.submit({ queue: 'api' });
      const second = h.submit({ queue: 'api' });
      backend.restart(h);
      h.register('w2', 1);
      assert.deepEqual(messagesOf(h.last, 'TASK_ASSIGN'), [], 'the kept attempt holds the limit');
      assert.deepEqual(
        [h.status(first).state, h.status(first).workerId, h.status(second).state],
        ['RUNNING', 'w1', 'QUEUED'],
      );
      h.tick(GRACE_MS / 2);
      h.heartbeat('w2');
      assert.equal(h.status(second).state, 'QUEUED');
      h.tick(GRACE_MS / 2 + 1);
      const running = h.core.activeJobs().filter((j) => j.state === 'RUNNING');
      assert.equal(running.length, 1, 'once its worker is lost, one other starts');
      assert.ok([first, second].includes(running[0]?.jobId as string));
    });

    it('accepts the result of a kept attempt sent from its worker’s new session', () => {
      const h = backend.create();
      h.register('w1', 1);
      const jobId = h.submit();
      const { attemptId } = h.assignmentOf(jobId);
      backend.restart(h);
      h.register('w1', 1);
      h.result(jobId, { attemptId, workerId: 'w1', result: 'late but current' });
      assert.deepEqual(
        [h.status(jobId).state, h.status(jobId).result],
        ['COMPLETED', 'late but current'],
      );
    });

    it('fails a RUNNING job when the restart interrupted its final attempt', () => {
      const h = backend.create();
      h.register('w1', 1);
      const jobId = h.submit({ maxAttempts: 1 });
      backend.restart(h);
      const effects = outlive(h);
      assert.equal(eventsOf(effects, 'job.recovered')[0]?.to, 'FAILED');
      const job = h.status(jobId);
      assert.equal(job.state, 'FAILED');
      assert.match(job.error ?? '', /coordinator restarted during final attempt; outcome unknown/);
      assert.equal(h.core.activeCount, 0);
      backend.restart(h);
      assert.equal(h.status(jobId).state, 'FAILED', 'the failure was made durable');
    });

    it('names the epochs when a new leader of a shared store interrupted the attempt', () => {
      const h = backend.create();
      h.register('w1', 2);
      const requeued = h.submit();
      const failed = h.submit({ maxAttempts: 1 });
      backend.restart(h, 2);
      outlive(h);
      assert.equal(
        h.record(requeued).error,
        'leader changed (epoch 1 → 2) during attempt 1; outcome unknown (worker w1)',
      );
      assert.equal(
        h.status(failed).error,
        'leader changed (epoch 1 → 2) during final attempt; outcome unknown (worker w1; all 1 attempts used)',
      );
      const history = h.core.activeJobs().find((j) => j.jobId === requeued);
      assert.equal(history?.state, 'QUEUED');
      const attempts = h.store.committedAttempts(requeued);
      assert.deepEqual(
        attempts.map((a) => [a.outcome, a.error]),
        [
          [
            'INTERRUPTED',
            'leader changed (epoch 1 → 2) during attempt 1; outcome unknown (worker w1)',
          ],
        ],
      );
    });

    it('gives a kept attempt a fresh deadline after downtime; the deadline applies once its worker is back', () => {
      const h = backend.create({ taskTimeoutMs: 200, heartbeatTimeoutMs: 10_000 });
      h.register('w1', 1);
      const jobId = h.submit();
      const { attemptId } = h.assignmentOf(jobId);
      h.clock += 400;
      backend.restart(h);
      h.tick(0);
      h.register('w1', 1, null, { heldAttempts: [{ jobId, attemptId }] });
      assert.equal(h.record(jobId).deadlineAtMs, h.clock + 200);
      h.tick(200);
      assert.equal(h.status(jobId).state, 'RUNNING', 'not instantly expired');
      h.tick(1);
      assert.equal(h.status(jobId).state, 'RETRY_WAIT');
      assert.match(h.record(jobId).error ?? '', /execution deadline exceeded/);
    });

    it('ends a kept attempt as interrupted when its fresh deadline passes before its worker is back', () => {
      const h = backend.create({ taskTimeoutMs: 200, heartbeatTimeoutMs: 10_000 });
      h.register('w1', 1);
      const jobId = h.submit();
      backend.restart(h);
      h.tick(200);
      assert.equal(h.status(jobId).state, 'RUNNING');
      const effects = h.tick(1);
      assert.deepEqual(eventsOf(effects, 'job.deadlineExceeded'), []);
      assert.equal(h.status(jobId).state, 'QUEUED');
      assert.match(h.record(jobId).error ?? '', /coordinator restarted during attempt 1/);
    });

    it('treats results for pre-restart leases as stale once the grace has passed', () => {
      const h = backend.create();
      h.register('w1', 1);
      const jobId = h.submit();
      const old = h.assignmentOf(jobId);
      backend.restart(h);
      outlive(h);
      h.register('w1', 1);
      assert.notEqual(h.assignmentOf(jobId).attemptId, old.attemptId);
      const effects = h.result(jobId, { attemptId: old.attemptId, result: 'old' });
      assert.equal(eventsOf(effects, 'result.stale').length, 1);
      assert.equal(h.status(jobId).state, 'RUNNING');
      assert.equal(h.status(jobId).attempts, 2);
    });

    it('rebuilds activeCount from non-terminal jobs only when restarted', () => {
      const h = backend.create({ maxActiveJobs: 5, retryBaseDelayMs: 60_000 });
      h.register('w1', 2);
      h.result(h.submit()); // COMPLETED
      h.result(h.submit(), { success: false }); // RETRY_WAIT
      h.submit(); // RUNNING, attempts left
      h.submit({ maxAttempts: 1 }); // RUNNING, final attempt: FAILED by the restart
      h.submit(); // QUEUED: both slots are busy
      h.request({ type: 'CANCEL_JOB', jobId: h.submit() }); // CANCELLED
      assert.equal(h.core.activeCount, 4);
      backend.restart(h);
      assert.equal(h.core.activeCount, 4, 'the final attempt is kept for its worker');
      outlive(h);
      assert.equal(h.core.activeCount, 3);
      assert.deepEqual(
        h.core
          .activeJobs()
          .map((j) => j.state)
          .sort(),
        ['QUEUED', 'QUEUED', 'RETRY_WAIT'],
      );
      expectReply(h.submitRequest(), 'JOB_SUBMITTED');
      expectReply(h.submitRequest(), 'JOB_SUBMITTED');
      expectReply(h.submitRequest(), 'SUBMIT_REJECTED');
    });

    it('keeps priority and submission order when jobs are recovered', () => {
      const h = backend.create();
      h.register('w1', 1);
      const running = h.submit({ priority: 'LOW' });
      const order: [Priority, string][] = [];
      for (const priority of ['LOW', 'NORMAL', 'HIGH', 'NORMAL'] as const) {
        order.push([priority, h.submit({ priority })]);
      }
      backend.restart(h);
      outlive(h);
      h.register('w1', 1);
      const assigned: string[] = [];
      for (let i = 0; i < 5; i++) {
        const jobId = messagesOf(h.last, 'TASK_ASSIGN')[0]?.jobId as string;
        assigned.push(jobId);
        h.result(jobId);
      }
      const id = (p: Priority, n = 0): string =>
        order.filter(([q]) => q === p).map(([, j]) => j)[n] as string;
      assert.deepEqual(assigned, [
        id('HIGH'),
        id('NORMAL', 0),
        id('NORMAL', 1),
        running,
        id('LOW'),
      ]);
    });

    it('forgets writes that were not committed when the process crashes', () => {
      const h = backend.create();
      const kept = h.submit();
      // Handled but never committed: a crash before the group commit.
      h.core.handle({
        kind: 'clientRequest',
        connId: 1,
        requestId: 1,
        msg: {
          type: 'SUBMIT_JOB',
          taskType: 'SLEEP',
          payload: { durationMillis: 1 },
          maxAttempts: null,
          idempotencyKey: 'lost',
          priority: null,
        },
      });
      h.core.handle({
        kind: 'clientRequest',
        connId: 1,
        requestId: 2,
        msg: { type: 'CANCEL_JOB', jobId: kept },
      });
      assert.equal(h.store.committedJob(kept)?.state, 'QUEUED', 'handled, not committed');
      backend.restart(h);
      assert.equal(h.status(kept).state, 'QUEUED');
      assert.equal(h.store.committedJobByKey('lost'), undefined);
      assert.equal(h.core.activeCount, 1);
    });

    it('continues seq after the highest stored one when restarted', () => {
      const h = backend.create();
      h.register('w1', 1);
      const ids = [h.submit(), h.submit(), h.submit()];
      for (const jobId of ids) h.result(jobId);
      assert.equal(h.store.committedJob(ids[2] as string)?.seq, 3);
      backend.restart(h);
      const next = h.submit();
      assert.equal(h.store.committedJob(next)?.seq, 4);
      const listed = expectReply(
        h.request({ type: 'LIST_JOBS', limit: null, state: null, cursor: null }),
        'JOB_LIST',
      );
      assert.deepEqual(
        listed.jobs.map((j) => j.jobId),
        [next, ...ids.reverse()],
      );
    });

    it('answers known idempotency keys with the original job when restarted', () => {
      const h = backend.create();
      h.register('w1', 1);
      const finished = h.submit({ idempotencyKey: 'done' });
      h.result(finished);
      const active = h.submit({ idempotencyKey: 'active' });
      backend.restart(h);
      assert.equal(h.submit({ idempotencyKey: 'done' }), finished);
      assert.equal(h.submit({ idempotencyKey: 'active' }), active);
      const conflict = h.submitRequest({ idempotencyKey: 'active', priority: 'HIGH' });
      assert.match(expectReply(conflict, 'ERROR').message, /Idempotency key/);
    });
  });
}
