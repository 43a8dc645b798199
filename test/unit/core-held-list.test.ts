/**
 * A held list longer than a registration (feature `moreHeld`): the
 * registration lists the first attempts with `moreHeld: true`, HELD_ATTEMPTS
 * messages the rest. Until the last part (or a heartbeat timeout) the
 * session is assigned nothing and the leases not listed yet stay the
 * worker's; then what no part listed is revoked. HELD_ATTEMPTS outside such
 * a list, or past its bounds, loses the worker.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  MAX_HELD_ATTEMPTS_PER_MESSAGE,
  MAX_HELD_ATTEMPTS_TOTAL,
} from '../../src/protocol/limits.js';
import type { HeldAttempt } from '../../src/protocol/messages.js';
import { CoreHarness, eventsOf, messagesOf } from '../helpers/core-harness.js';

const HEARTBEAT_TIMEOUT_MS = 1_000;

/** A worker `w1` of `capacity` slots running `running` jobs (of maxAttempts 2), and one job queued. */
function busyWorker(capacity: number, running: number) {
  const h = new CoreHarness({ config: { heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS } });
  h.register('w1', capacity);
  const held: HeldAttempt[] = [];
  for (let i = 0; i < running; i++) {
    const jobId = h.submit({ maxAttempts: 2 });
    held.push({ jobId, attemptId: h.assignmentOf(jobId).attemptId });
  }
  const waiting = h.submit({ maxAttempts: 2 });
  return { h, held, waiting };
}

function sortedIds(held: readonly { jobId: string }[]): string[] {
  return held.map((a) => a.jobId).sort();
}

describe('core: a held list in several parts', () => {
  it('takes every listed attempt back and assigns nothing until the last part', () => {
    const { h, held, waiting } = busyWorker(3, 3);
    const [a, b, c] = held as [HeldAttempt, HeldAttempt, HeldAttempt];
    const connId = h.register('w1', 4, null, { heldAttempts: [a], moreHeld: true });
    assert.equal(h.events('worker.lost')[0]?.cause, 'replaced');
    assert.deepEqual(h.running().get('w1'), [a.jobId]);
    assert.equal(h.record(waiting).state, 'QUEUED', 'nothing new while the list goes on');
    assert.equal(h.core.inspect().workers[0]?.listingHeld, true);
    assert.equal(h.core.inspect().freeSlots, 0);
    h.held('w1', [b], true);
    assert.equal(h.record(waiting).state, 'QUEUED');
    const last = h.held('w1', [c], false);
    assert.deepEqual(h.running().get('w1')?.length, 4, 'all three back, and the waiting job');
    assert.equal(h.assignmentOf(waiting).connId, connId);
    assert.deepEqual(eventsOf(last, 'worker.heldListEnded'), [
      {
        type: 'worker.heldListEnded',
        workerId: 'w1',
        connId,
        listed: 3,
        revoked: 0,
        timedOut: false,
      },
    ]);
    for (const { jobId, attemptId } of held) {
      h.result(jobId, { attemptId });
      assert.deepEqual([h.status(jobId).state, h.status(jobId).attempts], ['COMPLETED', 1]);
    }
  });

  it('revokes what no part listed once the list ends, and cancels what it cannot take', () => {
    const { h, held, waiting } = busyWorker(3, 3);
    const [a, b, c] = held as [HeldAttempt, HeldAttempt, HeldAttempt];
    const connId = h.register('w1', 1, null, { heldAttempts: [], moreHeld: true });
    h.held('w1', [a, b, { jobId: 'gone', attemptId: 'gone' }], true);
    assert.deepEqual(h.running().get('w1'), [a.jobId], 'one slot: the first fits');
    assert.deepEqual(
      messagesOf(h.last, 'TASK_CANCEL', connId).map((m) => m.jobId),
      [b.jobId, 'gone'],
    );
    assert.equal(h.record(b.jobId).attempts, 1, 'revoked: to be retried');
    assert.equal(h.record(c.jobId).state, 'RUNNING', 'still the worker’s until the list ends');
    const last = h.held('w1', [], false);
    assert.equal(eventsOf(last, 'worker.heldListEnded')[0]?.revoked, 1);
    const queued = h.core.activeJobs().filter((job) => job.state === 'QUEUED');
    assert.deepEqual(
      sortedIds(queued),
      sortedIds([b, c, { jobId: waiting }]),
      'both to be retried; w1 is full',
    );
    assert.deepEqual(h.core.inspect().keptLeases, []);
    assert.equal(h.status(c.jobId).error, 'worker w1 lost (worker re-registered)');
  });

  it('counts a result of an attempt not listed yet', () => {
    const { h, held, waiting } = busyWorker(2, 2);
    const [a, b] = held as [HeldAttempt, HeldAttempt];
    h.register('w1', 2, null, { heldAttempts: [a], moreHeld: true });
    h.result(b.jobId, { attemptId: b.attemptId, workerId: 'w1' });
    assert.equal(h.status(b.jobId).state, 'COMPLETED');
    h.held('w1', [b], false);
    assert.deepEqual(
      messagesOf(h.last, 'TASK_CANCEL').map((m) => m.jobId),
      [b.jobId],
    );
    assert.deepEqual(h.running().get('w1'), [a.jobId, waiting].sort());
  });

  it('ends at a heartbeat timeout when the rest never comes', () => {
    const { h, held, waiting } = busyWorker(2, 2);
    const [a, b] = held as [HeldAttempt, HeldAttempt];
    const connId = h.register('w1', 2, null, { heldAttempts: [a], moreHeld: true });
    h.clock += HEARTBEAT_TIMEOUT_MS / 2;
    h.heartbeat('w1');
    assert.deepEqual(eventsOf(h.tick(), 'worker.heldListEnded'), [], 'not yet');
    h.clock += HEARTBEAT_TIMEOUT_MS / 2 + 1;
    h.heartbeat('w1');
    const effects = h.tick();
    assert.deepEqual(
      eventsOf(effects, 'worker.heldListEnded').map((e) => [e.connId, e.revoked, e.timedOut]),
      [[connId, 1, true]],
    );
    assert.deepEqual(h.running().get('w1')?.sort(), [a.jobId, b.jobId].sort(), 'b retried there');
    assert.equal(h.assignmentOf(b.jobId).attemptNumber, 2);
    assert.equal(h.record(waiting).state, 'QUEUED', 'the session is full');
    // A late part is outside any list now: a violation.
    h.held('w1', [b], false);
    assert.equal(h.events('worker.lost').at(-1)?.cause, 'protocol_violation');
  });

  it('loses a worker that sends HELD_ATTEMPTS without a list announced', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    h.held('w1', [], false);
    const [lost] = h.events('worker.lost');
    assert.equal(lost?.cause, 'protocol_violation');
    assert.match(lost?.reason ?? '', /HELD_ATTEMPTS without a list announced/);
  });

  it('loses a worker whose part, or whose list in all, is too long', () => {
    const part = (n: number, from = 0): HeldAttempt[] =>
      Array.from({ length: n }, (_, i) => ({ jobId: `j${from + i}`, attemptId: `a${from + i}` }));
    const long = new CoreHarness();
    long.register('w1', 1, null, { moreHeld: true });
    long.held('w1', part(MAX_HELD_ATTEMPTS_PER_MESSAGE + 1), true);
    assert.match(long.events('worker.lost')[0]?.reason ?? '', /at most 2000 attempts, got 2001/);
    const many = new CoreHarness();
    many.register('w1', 1, null, { moreHeld: true });
    let sent = 0;
    while (sent + MAX_HELD_ATTEMPTS_PER_MESSAGE <= MAX_HELD_ATTEMPTS_TOTAL) {
      many.held('w1', part(MAX_HELD_ATTEMPTS_PER_MESSAGE, sent), true);
      sent += MAX_HELD_ATTEMPTS_PER_MESSAGE;
    }
    assert.equal(many.events('worker.lost').length, 0);
    many.held('w1', part(MAX_HELD_ATTEMPTS_PER_MESSAGE, sent), true);
    assert.match(many.events('worker.lost')[0]?.reason ?? '', /at most 14096 attempts in all/);
  });
});
