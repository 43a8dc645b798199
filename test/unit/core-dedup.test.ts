/**
 * Deduplication keys in the core (dedup.ts): `active` while the key's job is
 * not terminal, `throttle` for a window after the key's job was created,
 * `debounce` while it has not started (payload and run time replaced). Keys
 * are per queue; a batch and a flow decide in order; the index is rebuilt by
 * recovery (open throttle windows included).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClientReply, JsonObject } from '../../src/protocol/messages.js';
import { CoreHarness, START_MS, eventsOf, expectReply } from '../helpers/core-harness.js';

function submitted(reply: ClientReply | undefined) {
  return expectReply(reply, 'JOB_SUBMITTED');
}

describe('core: deduplication keys', () => {
  it('active: a second submission names the live job; once it ended a new job is made', () => {
    const h = new CoreHarness();
    const first = submitted(h.submitRequest({ dedupKey: 'sync-42' }));
    assert.equal(first.deduplicated, false);
    assert.equal(first.job?.dedupKey, 'sync-42');
    assert.equal(first.job?.dedupMode, 'active');
    const second = submitted(
      h.submitRequest({ dedupKey: 'sync-42', payload: { durationMillis: 5 } }),
    );
    assert.deepEqual(
      [second.jobId, second.deduplicated, second.replaced],
      [first.jobId, true, undefined],
    );
    assert.equal(second.job?.state, 'QUEUED');
    const matched = h.events('job.dedupMatched');
    assert.deepEqual(matched.at(-1), {
      type: 'job.dedupMatched',
      jobId: first.jobId,
      dedupKey: 'sync-42',
      mode: 'active',
      replaced: false,
    });
    assert.equal(h.core.activeCount, 1, 'nothing was created');
    h.register('w1', 1);
    h.result(first.jobId);
    const third = submitted(h.submitRequest({ dedupKey: 'sync-42' }));
    assert.notEqual(third.jobId, first.jobId);
    assert.equal(third.deduplicated, false);
  });

  it('keys are scoped to a queue', () => {
    const h = new CoreHarness();
    const a = h.submit({ dedupKey: 'k', queue: 'emails' });
    const b = h.submit({ dedupKey: 'k', queue: 'reports' });
    assert.notEqual(a, b);
    assert.equal(h.submit({ dedupKey: 'k', queue: 'emails' }), a);
  });

  it('is separate from idempotency keys, and a submission without a key is never deduplicated', () => {
    const h = new CoreHarness();
    const a = h.submit({ dedupKey: 'k', idempotencyKey: 'k' });
    assert.notEqual(h.submit({ idempotencyKey: 'other' }), a);
    assert.notEqual(h.submit({}), a);
    assert.equal(h.submit({ dedupKey: 'k', idempotencyKey: 'k2' }), a);
  });

  it('throttle: within the window any state answers; after it a new job opens a new window', () => {
    const h = new CoreHarness();
    const key = {
      dedupKey: 'digest:user-7',
      dedupMode: 'throttle' as const,
      dedupWindowMillis: 1_000,
    };
    const first = h.submit(key);
    h.register('w1', 1);
    h.result(first);
    assert.equal(h.status(first).state, 'COMPLETED');
    h.tick(999);
    const again = submitted(h.submitRequest(key));
    assert.deepEqual([again.jobId, again.deduplicated], [first, true]);
    h.tick(1); // the window is [created, created + 1000)
    const next = submitted(h.submitRequest(key));
    assert.notEqual(next.jobId, first);
    assert.equal(next.deduplicated, false);
    h.tick(500);
    assert.equal(h.submit(key), next.jobId, 'the new job opened a new window');
  });

  it('throttle windows of ended jobs survive a restart; closed ones do not', () => {
    const h = new CoreHarness();
    const key = { dedupKey: 'k', dedupMode: 'throttle' as const, dedupWindowMillis: 10_000 };
    const first = h.submit(key);
    h.register('w1', 1);
    h.result(first);
    h.tick(5_000);
    h.restart();
    assert.equal(h.submit(key), first);
    h.tick(5_000);
    h.restart();
    assert.notEqual(h.submit(key), first);
  });

  it('debounce: replaces the payload and pushes the run time while the job has not started', () => {
    const h = new CoreHarness();
    const first = submitted(
      h.submitRequest({
        dedupKey: 'reindex:doc-1',
        dedupMode: 'debounce',
        runAtMillis: START_MS + 5_000,
        payload: { durationMillis: 1 },
      }),
    );
    assert.equal(first.job?.state, 'SCHEDULED');
    h.tick(4_000);
    const second = submitted(
      h.submitRequest({
        dedupKey: 'reindex:doc-1',
        dedupMode: 'debounce',
        runAtMillis: h.clock + 5_000,
        payload: { durationMillis: 2 },
      }),
    );
    assert.deepEqual(
      [second.jobId, second.deduplicated, second.replaced],
      [first.jobId, true, true],
    );
    assert.equal(second.job?.runAtMillis, START_MS + 9_000);
    h.register('w1', 1);
    h.tick(1_000); // the first run time passes: nothing starts
    assert.equal(h.status(first.jobId).state, 'SCHEDULED');
    h.tick(4_000);
    const assign = h.assignmentOf(first.jobId);
    assert.deepEqual(assign.payload, { durationMillis: 2 });
    // Replaced rows are written: a restart keeps the new payload.
    assert.equal(h.store.committedJob(first.jobId)?.payloadJson, '{"durationMillis":2}');
  });

  it("debounce after the start makes a new job, which becomes the key's job", () => {
    const h = new CoreHarness();
    const spec = { dedupKey: 'k', dedupMode: 'debounce' as const };
    const first = h.submit({ ...spec, runAtMillis: START_MS + 100 });
    h.register('w1', 1);
    h.tick(100);
    assert.equal(h.status(first).state, 'RUNNING');
    const second = submitted(h.submitRequest({ ...spec, runAtMillis: h.clock + 100 }));
    assert.notEqual(second.jobId, first);
    assert.equal(second.deduplicated, false);
    const third = submitted(h.submitRequest({ ...spec, runAtMillis: h.clock + 200 }));
    assert.deepEqual([third.jobId, third.replaced], [second.jobId, true]);
  });

  it('refuses what cannot be decided, creating nothing', () => {
    const h = new CoreHarness();
    const refusals: [Parameters<CoreHarness['submitRequest']>[0], RegExp][] = [
      [{ dedupKey: '' }, /dedupKey must be 1\.\.256/],
      [{ dedupKey: 'x'.repeat(257) }, /dedupKey must be 1\.\.256/],
      [{ dedupMode: 'active' }, /need a dedupKey/],
      [{ dedupKey: 'k', dedupMode: 'throttle' }, /throttle needs dedupWindowMillis/],
      [{ dedupKey: 'k', dedupMode: 'throttle', dedupWindowMillis: 0 }, /dedupWindowMillis must be/],
      [{ dedupKey: 'k', dedupWindowMillis: 10 }, /for dedupMode throttle only/],
      [{ dedupKey: 'k', dedupMode: 'debounce' }, /debounce needs a delay/],
    ];
    for (const [options, message] of refusals) {
      const reply = expectReply(h.submitRequest(options), 'ERROR');
      assert.match(reply.message, message);
      assert.equal(reply.code, 'INVALID_REQUEST');
    }
    assert.equal(h.core.activeCount, 0);
  });

  it('a key used twice in one batch: the second names the job the first made', () => {
    const h = new CoreHarness();
    const job = (payload: JsonObject, dedupKey?: string) => ({
      taskType: 'SLEEP',
      payload,
      maxAttempts: null,
      idempotencyKey: null,
      priority: null,
      ...(dedupKey !== undefined && { dedupKey }),
    });
    const reply = expectReply(
      h.request({
        type: 'SUBMIT_JOBS',
        jobs: [
          job({ durationMillis: 1 }, 'k'),
          job({ durationMillis: 2 }),
          job({ durationMillis: 3 }, 'k'),
        ],
      }),
      'JOBS_SUBMITTED',
    );
    assert.equal(reply.jobIds[0], reply.jobIds[2]);
    assert.deepEqual(reply.deduplicated, [false, false, true]);
    assert.deepEqual(reply.replaced, [false, false, false]);
    assert.equal(h.core.activeCount, 2);
    const plain = expectReply(
      h.request({ type: 'SUBMIT_JOBS', jobs: [job({ durationMillis: 1 })] }),
      'JOBS_SUBMITTED',
    );
    assert.equal(plain.deduplicated, undefined, 'absent when no job of the batch matched');
  });

  it('a flow job its key answers is not made; its dependents wait for the existing job', () => {
    const h = new CoreHarness();
    const existing = h.submit({ dedupKey: 'extract' });
    const reply = expectReply(
      h.request({
        type: 'SUBMIT_FLOW',
        jobs: [
          { ref: 'a', taskType: 'SLEEP', payload: { durationMillis: 1 }, dedupKey: 'extract' },
          { ref: 'b', taskType: 'SLEEP', payload: { durationMillis: 1 }, dependsOn: ['a'] },
        ],
      }),
      'FLOW_SUBMITTED',
    );
    assert.deepEqual(reply.jobs[0], { ref: 'a', jobId: existing, deduplicated: true });
    const b = reply.jobs[1]?.jobId as string;
    assert.deepEqual(h.status(b).dependsOn, [existing]);
    assert.equal(h.status(b).state, 'WAITING');
    h.register('w1', 1);
    h.result(existing);
    assert.equal(h.status(b).state, 'RUNNING');
  });

  it('active: any live job of the key answers, also when a later one made by another mode has ended', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const running = h.submit({ dedupKey: 'k' });
    assert.equal(h.status(running).state, 'RUNNING');
    // Not SCHEDULED: a debounced submission makes a new job, which ends at once.
    const later = h.submit({ dedupKey: 'k', dedupMode: 'debounce', runAtMillis: START_MS + 100 });
    assert.notEqual(later, running);
    expectReply(h.request({ type: 'CANCEL_JOB', jobId: later }), 'JOB_CANCEL');
    const again = submitted(h.submitRequest({ dedupKey: 'k' }));
    assert.deepEqual([again.jobId, again.deduplicated], [running, true]);
    assert.equal(h.core.activeCount, 1);
  });

  it("a restart finds the same key's job: an ended job's open window, not an older live job", () => {
    const h = new CoreHarness();
    const key = { dedupKey: 'k', dedupMode: 'throttle' as const, dedupWindowMillis: 1_000 };
    const older = h.submit(key); // stays QUEUED: no worker
    h.tick(1_000);
    const later = h.submit(key);
    assert.notEqual(later, older, 'the window of the older one had closed');
    expectReply(h.request({ type: 'CANCEL_JOB', jobId: later }), 'JOB_CANCEL');
    h.tick(500);
    assert.equal(h.submit(key), later, "the later job's window is open");
    h.restart();
    assert.equal(h.submit(key), later, 'and still after a restart');
    h.tick(500);
    const next = submitted(h.submitRequest(key));
    assert.ok(![older, later].includes(next.jobId), 'both windows closed: a new job');
    assert.equal(next.deduplicated, false);
  });

  it('a recovered live keyed job still holds its key, also when it is delayed far ahead', () => {
    const h = new CoreHarness({
      config: { scheduledWindow: { windowMs: 1_000, limit: 10, marginMs: 100 } },
    });
    const far = h.submit({ dedupKey: 'k', runAtMillis: START_MS + 3_600_000 });
    h.restart();
    assert.equal(h.submit({ dedupKey: 'k' }), far);
    assert.equal(eventsOf(h.last, 'job.dedupMatched').length, 1);
  });
});
