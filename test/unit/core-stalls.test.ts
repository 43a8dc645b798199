/**
 * The core after a stall of its own loop, and at the end of a worker
 * connection: leases kept for a worker whose session ended only because the
 * coordinator had stalled (its results still count, on its next session),
 * taken back by a registration that lists what the worker holds
 * (`heldAttempts`), revoked after a grace period otherwise; and nothing
 * assigned to a connection whose end has been read.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_HELD_ATTEMPTS } from '../../src/protocol/limits.js';
import { CoreHarness, eventsOf, messagesOf } from '../helpers/core-harness.js';

const HEARTBEAT_TIMEOUT_MS = 1_000;
/** Sweep period of these tests; a gap of more than 1 s between ticks is a stall. */
const SWEEP_MS = 100;
const STALL_MS = 10_000;

function harness(): CoreHarness {
  const h = new CoreHarness({
    config: { heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS, sweepIntervalMs: SWEEP_MS },
  });
  h.tick();
  return h;
}

/** The coordinator does not run for STALL_MS; the next input is the first after it. */
function stall(h: CoreHarness): void {
  h.clock += STALL_MS;
}

describe('core: a session that ends right after a stall of the coordinator', () => {
  it('keeps its leases, and accepts the result from the worker’s next session', () => {
    const h = harness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    const { attemptId } = h.assignmentOf(jobId);
    stall(h);
    const closed = h.closeWorker('w1', 'connection closed');
    assert.equal(eventsOf(closed, 'worker.lost').length, 1);
    assert.deepEqual(eventsOf(closed, 'worker.leasesKept'), [
      {
        type: 'worker.leasesKept',
        workerId: 'w1',
        jobs: 1,
        untilMs: h.clock + HEARTBEAT_TIMEOUT_MS,
        reason: 'connection closed',
      },
    ]);
    assert.equal(h.status(jobId).state, 'RUNNING');
    assert.equal(eventsOf(h.tick(), 'coordinator.stalled').length, 1);
    h.register('w1', 1);
    assert.deepEqual(h.running().get('w1'), [], 'the new session holds nothing');
    h.result(jobId, { attemptId, result: 'finished during the stall' });
    const done = h.status(jobId);
    assert.deepEqual(
      [done.state, done.attempts, done.result],
      ['COMPLETED', 1, 'finished during the stall'],
    );
    assert.deepEqual(h.core.inspect().keptLeases, []);
  });

  it('revokes the kept leases once a heartbeat timeout passes without the worker', () => {
    const h = harness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    stall(h);
    h.closeWorker('w1', 'connection closed');
    h.tick(); // notices the stall, which ended before the leases were kept
    h.tick(HEARTBEAT_TIMEOUT_MS);
    assert.equal(h.status(jobId).state, 'RUNNING', 'not before the grace period ends');
    h.tick(1);
    const job = h.status(jobId);
    assert.equal(job.state, 'FAILED');
    assert.equal(job.error, 'worker w1 lost (connection closed) (all 1 attempts used)');
    assert.deepEqual(h.core.inspect().keptLeases, []);
  });

  it('extends the grace period by a later stall of its own', () => {
    const h = harness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    stall(h);
    h.closeWorker('w1');
    h.tick();
    h.tick(HEARTBEAT_TIMEOUT_MS / 2);
    h.tick(STALL_MS); // another stall: not the worker's absence
    assert.equal(h.status(jobId).state, 'RUNNING');
    h.tick(HEARTBEAT_TIMEOUT_MS / 2 + 1);
    assert.equal(h.status(jobId).state, 'FAILED');
  });

  it('keeps the leases of a session replaced by a registration that says nothing about them', () => {
    const h = harness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    const { attemptId } = h.assignmentOf(jobId);
    stall(h);
    h.register('w1', 1);
    assert.equal(h.events('worker.lost')[0]?.cause, 'replaced');
    assert.equal(h.events('worker.leasesKept').length, 1);
    h.result(jobId, { attemptId });
    assert.equal(h.status(jobId).state, 'COMPLETED');
  });

  it('revokes at once when the close comes long after the stall, as always', () => {
    const h = harness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    stall(h);
    h.tick();
    // Ticks as usual for more than the stall threshold (1 s) since the stall was noticed.
    for (let k = 0; k < 11; k++) h.tick(SWEEP_MS);
    const effects = h.closeWorker('w1');
    assert.deepEqual(eventsOf(effects, 'worker.leasesKept'), []);
    assert.equal(h.status(jobId).state, 'FAILED');
  });

  it('does not keep the leases of a draining worker', () => {
    const h = harness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    h.handle({
      kind: 'workerMessage',
      connId: h.connOf('w1'),
      msg: { type: 'WORKER_DRAINING', workerId: 'w1' },
    });
    stall(h);
    const effects = h.closeWorker('w1');
    assert.deepEqual(eventsOf(effects, 'worker.leasesKept'), []);
    assert.equal(h.status(jobId).state, 'FAILED');
  });
});

describe('core: a registration that lists the attempts it still holds', () => {
  it('takes the listed kept leases back, revokes the unlisted, cancels the unknown', () => {
    const h = harness();
    h.register('w1', 2);
    const kept = h.submit({ maxAttempts: 1 });
    const dropped = h.submit({ maxAttempts: 1 });
    const keptAttempt = h.assignmentOf(kept).attemptId;
    stall(h);
    h.closeWorker('w1', 'connection closed');
    const heldAttempts = [
      { jobId: kept, attemptId: keptAttempt },
      { jobId: 'no-such-job', attemptId: 'no-such-attempt' },
    ];
    const connId = h.register('w1', 2, null, { heldAttempts });
    const effects = h.last;
    assert.deepEqual(
      messagesOf(effects, 'TASK_CANCEL', connId).map((m) => m.jobId),
      ['no-such-job'],
    );
    const sent = effects.flatMap((e) => (e.kind === 'send' ? [e.msg.type] : []));
    assert.equal(sent[0], 'WORKER_REGISTERED', 'registered before anything else');
    assert.deepEqual(eventsOf(effects, 'worker.leasesReclaimed'), [
      { type: 'worker.leasesReclaimed', workerId: 'w1', connId, jobs: 1 },
    ]);
    assert.deepEqual(h.running().get('w1'), [kept]);
    assert.equal(h.status(dropped).state, 'FAILED');
    assert.equal(
      h.status(dropped).error,
      'worker w1 lost (connection closed) (all 1 attempts used)',
    );
    assert.deepEqual(h.core.inspect().keptLeases, []);
    h.result(kept, { attemptId: keptAttempt });
    assert.deepEqual([h.status(kept).state, h.status(kept).attempts], ['COMPLETED', 1]);
  });

  it('takes the listed attempts over from the live session it replaces', () => {
    const h = harness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    const { attemptId } = h.assignmentOf(jobId);
    const other = h.submit({ maxAttempts: 1 });
    h.register('w1', 1, null, { heldAttempts: [{ jobId, attemptId }] });
    assert.equal(h.events('worker.lost')[0]?.cause, 'replaced');
    assert.deepEqual(h.running().get('w1'), [jobId]);
    assert.equal(h.status(other).state, 'QUEUED', 'the slot is taken by the attempt it kept');
    h.result(jobId, { attemptId });
    assert.deepEqual([h.status(jobId).state, h.status(jobId).attempts], ['COMPLETED', 1]);
    assert.equal(h.assignmentOf(other).attemptNumber, 1);
  });

  it('revokes everything of the session it replaces when it lists nothing', () => {
    const h = harness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 2 });
    h.register('w1', 1, null, { heldAttempts: [] });
    const job = h.record(jobId);
    assert.equal(job.attempts, 2, 'retried at once on the new session');
    assert.deepEqual(h.core.inspect().keptLeases, []);
  });

  it('cancels a listed attempt whose lease was revoked meanwhile', () => {
    const h = harness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 2 });
    const { attemptId } = h.assignmentOf(jobId);
    h.closeWorker('w1'); // no stall: revoked at once
    const connId = h.register('w1', 1, null, { heldAttempts: [{ jobId, attemptId }] });
    assert.deepEqual(messagesOf(h.last, 'TASK_CANCEL', connId), [
      { type: 'TASK_CANCEL', jobId, attemptId },
    ]);
    assert.equal(h.assignmentOf(jobId).attemptNumber, 2);
  });

  it('refuses a list longer than one session can hold', () => {
    const h = harness();
    const heldAttempts = Array.from({ length: MAX_HELD_ATTEMPTS + 1 }, (_, i) => ({
      jobId: `j${i}`,
      attemptId: `a${i}`,
    }));
    const connId = h.register('w1', 1, null, { heldAttempts });
    const [error] = messagesOf(h.last, 'ERROR', connId);
    assert.equal(error?.code, 'INVALID_REGISTRATION');
    assert.match(error?.message ?? '', /heldAttempts may list at most 5120/);
  });
});

describe('core: the end of a worker connection has been read', () => {
  it('assigns nothing more there, but still accepts what it sent before', () => {
    const h = harness();
    const connId = h.register('w1', 1);
    const first = h.submit({ maxAttempts: 1 });
    const waiting = h.submit({ maxAttempts: 1 });
    h.handle({ kind: 'workerEnding', connId });
    h.result(first);
    assert.equal(h.status(first).state, 'COMPLETED');
    assert.deepEqual(h.assignmentsOf(waiting), [], 'not handed to a connection that ended');
    h.closeWorker('w1', 'connection closed');
    assert.deepEqual([h.status(waiting).state, h.status(waiting).attempts], ['QUEUED', 0]);
    h.register('w2', 1);
    assert.equal(h.assignmentOf(waiting).attemptNumber, 1);
  });

  it('ignores a registration read from it, which replaces no live session', () => {
    const h = harness();
    h.register('w1', 1);
    const jobId = h.submit({ maxAttempts: 1 });
    const connId = h.newConn();
    h.handle({ kind: 'workerEnding', connId });
    const effects = h.handle({
      kind: 'workerMessage',
      connId,
      msg: { type: 'WORKER_REGISTER', workerId: 'w1', capacity: 4, taskTypes: null },
    });
    assert.deepEqual(messagesOf(effects, 'WORKER_REGISTERED'), []);
    assert.equal(eventsOf(effects, 'worker.rejected').length, 1);
    assert.equal(h.core.inspect().workers[0]?.connId, h.connOf('w1'), 'the live session stays');
    assert.equal(h.status(jobId).state, 'RUNNING');
    h.handle({ kind: 'workerClosed', connId, reason: 'connection closed' });
    assert.equal(h.status(jobId).state, 'RUNNING');
  });
});
