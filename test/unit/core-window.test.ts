/**
 * The near window of delayed jobs (core/scheduled-window.ts): memory holds
 * the SCHEDULED jobs due up to a horizon; later ones are in the store only,
 * counted, and loaded as the clock nears them; requests about a far job
 * (status, cancel, wait, a key, a dependent) still find it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CoreHarness,
  START_MS,
  effectsOf,
  expectReply,
  messagesOf,
  type EffectOf,
} from '../helpers/core-harness.js';

const ALL = ['SCHEDULED', 'WAITING'];
const WINDOW = { windowMs: 10_000, limit: 3, marginMs: 1_000 };

function windowed(config: Record<string, number> = {}): CoreHarness {
  return new CoreHarness({ config: { scheduledWindow: WINDOW, ...config } });
}

function windowReads(h: CoreHarness): EffectOf<'read'>[] {
  return effectsOf(h.log, 'read').filter((r) => r.read.op === 'scheduledWindow');
}

/** Feeds wake-ups at the times the core asks for, up to `untilMs`. */
function wakeUntil(h: CoreHarness, untilMs: number): void {
  for (let i = 0; i < 1_000; i++) {
    const at = effectsOf(h.log, 'wakeAt').at(-1)?.atMs ?? null;
    if (at === null || at > untilMs) break;
    h.clock = Math.max(h.clock, at);
    h.handle({ kind: 'wake' });
  }
  h.clock = untilMs;
  h.handle({ kind: 'wake' });
}

function stateOf(h: CoreHarness, jobId: string): string {
  const reply = h.request({ type: 'GET_JOB_STATUS', jobId, knownStates: ALL });
  return expectReply(reply, 'JOB_STATUS').job.state;
}

describe('core: the near window of delayed jobs', () => {
  it('keeps a job due beyond the horizon in the store only, loads it as the clock nears it, and starts it at its time', () => {
    const h = windowed();
    h.register('w1', 1);
    const near = h.submit({ runAtMillis: START_MS + 5_000 });
    const far = h.submit({ runAtMillis: START_MS + 60_000 });
    let view = h.core.inspect();
    assert.equal(view.scheduledCount, 1, 'only the near job is in memory');
    assert.equal(view.farScheduledCount, 1);
    assert.equal(h.core.scheduledCount, 2, 'both count as SCHEDULED');
    assert.equal(h.core.activeJobs().length, 1);
    assert.equal(view.activeByState.SCHEDULED, 2, 'the jobs gauge counts the far one');
    assert.equal(h.record(far).state, 'SCHEDULED', 'the far job is durable');
    assert.equal(stateOf(h, far), 'SCHEDULED', 'status reads it from the store');
    wakeUntil(h, START_MS + 59_999);
    assert.deepEqual(
      messagesOf(h.log, 'TASK_ASSIGN').map((m) => m.jobId),
      [near],
    );
    view = h.core.inspect();
    assert.equal(view.farScheduledCount, 0, 'loaded by a window read');
    assert.equal(view.scheduledCount, 1);
    assert.ok(windowReads(h).length >= 1);
    assert.ok(
      windowReads(h).every((r) => r.afterCommit === true),
      'reads run after commits',
    );
    h.result(near);
    wakeUntil(h, START_MS + 60_000);
    const started = messagesOf(h.log, 'TASK_ASSIGN').map((m) => m.jobId);
    assert.deepEqual(started, [near, far]);
    assert.equal(h.record(far).startedAtMs, START_MS + 60_000);
  });

  it('keeps in memory a job created while a window read is out and due within its target', () => {
    const h = windowed();
    h.submit({ runAtMillis: START_MS + 60_000 }); // far: a read will be needed
    h.holdReads = true;
    h.clock = START_MS + WINDOW.windowMs - WINDOW.marginMs;
    h.handle({ kind: 'wake' });
    const [read] = h.heldReads;
    assert.ok(read !== undefined && read.read.op === 'scheduledWindow');
    assert.equal(read.read.untilMs, h.clock + WINDOW.windowMs);
    // Beyond the old horizon, within the read's target: had it gone to the
    // store only, a read that did not see its commit would lose it.
    const inTarget = h.submit({ runAtMillis: START_MS + 15_000 });
    const view = h.core.inspect();
    assert.equal(view.farScheduledCount, 1, 'not counted as far');
    assert.ok(h.core.activeJobs().some((j) => j.jobId === inTarget));
    h.holdReads = false;
    h.answerHeldReads();
    assert.ok(h.core.activeJobs().some((j) => j.jobId === inTarget));
    assert.equal(h.core.activeJobs().filter((j) => j.jobId === inTarget).length, 1);
  });

  it('pages by (runAtMs, seq): a full read moves the horizon to its last job, the next read brings the rest', () => {
    const h = windowed();
    h.register('w1', 10);
    const due = START_MS + 30_000;
    const jobs = [1, 2, 3, 4, 5].map(() => h.submit({ runAtMillis: due }));
    assert.equal(h.core.inspect().farScheduledCount, 5);
    wakeUntil(h, due);
    assert.deepEqual(
      messagesOf(h.log, 'TASK_ASSIGN').map((m) => m.jobId),
      jobs,
      'all five start at their time, in submission order',
    );
    assert.ok(windowReads(h).length >= 2, 'more than one read of at most 3');
  });

  it('cancels a far job durably, and a wait on a far job is answered when it ends', () => {
    const h = windowed();
    const far = h.submit({ runAtMillis: START_MS + 600_000 });
    const cancelled = expectReply(
      h.request({ type: 'CANCEL_JOB', jobId: far, knownStates: ALL }),
      'JOB_CANCEL',
    );
    assert.equal(cancelled.cancelled, true);
    assert.equal(h.record(far).state, 'CANCELLED');
    assert.equal(h.core.scheduledCount, 0);
    // It does not come back with a later window.
    wakeUntil(h, START_MS + 700_000);
    assert.equal(h.record(far).state, 'CANCELLED');
    assert.equal(messagesOf(h.log, 'TASK_ASSIGN').length, 0);

    const waited = h.submit({ runAtMillis: h.clock + 600_000 });
    const waitRequest = h.peekRequestId();
    assert.equal(
      h.request({ type: 'WAIT_JOB', jobId: waited, timeoutMillis: 60_000, knownStates: ALL }),
      undefined,
      'the wait is pending',
    );
    h.request({ type: 'CANCEL_JOB', jobId: waited, knownStates: ALL });
    const answer = h.log
      .filter((e): e is EffectOf<'reply'> => e.kind === 'reply' && e.requestId === waitRequest)
      .map((e) => e.msg);
    assert.equal(answer.length, 1);
    assert.ok(answer[0]?.type === 'JOB_STATUS' && answer[0].job.state === 'CANCELLED');
  });

  it('finds a far job by its idempotency key, and a dependent of a far job waits for it', () => {
    const h = windowed();
    h.register('w1', 2);
    const runAtMillis = START_MS + 60_000;
    const keyed = h.submit({ runAtMillis, idempotencyKey: 'k1' });
    assert.equal(h.submit({ runAtMillis, idempotencyKey: 'k1' }), keyed, 'the key is known');
    const far = h.submit({ runAtMillis: runAtMillis + 1 });
    assert.equal(h.core.inspect().farScheduledCount, 1, 'only the job without a key is far');
    const child = h.submit({ dependsOn: [far] });
    assert.equal(stateOf(h, child), 'WAITING');
    wakeUntil(h, runAtMillis + 1);
    assert.deepEqual(
      messagesOf(h.log, 'TASK_ASSIGN').map((m) => m.jobId),
      [keyed, far],
    );
    h.result(far);
    assert.deepEqual(
      messagesOf(h.log, 'TASK_ASSIGN').map((m) => m.jobId),
      [keyed, far, child],
    );
  });

  it('makes no second job for a key whose lookup was out while a far job with it was created and committed', () => {
    const h = windowed();
    const runAtMillis = START_MS + 60_000;
    const element = {
      taskType: 'SLEEP',
      payload: { durationMillis: 10 },
      maxAttempts: null,
      idempotencyKey: 'k1',
      priority: null,
      runAtMillis,
    };
    h.holdReads = true;
    h.submitRequest({ runAtMillis, idempotencyKey: 'k1' });
    const batchRequest = h.peekRequestId();
    h.request({ type: 'SUBMIT_JOBS', jobs: [element] });
    const [first, second] = h.heldReads;
    assert.ok(first !== undefined && second !== undefined, 'both key lookups are out');
    // The batch's lookup was answered from the store as it was before the job existed.
    const stale = h.store.readNow(second.read);
    h.holdReads = false;
    h.handle({ kind: 'readDone', readId: first.readId, result: h.store.readNow(first.read) });
    const created = expectReply(
      effectsOf(h.log, 'reply').find((r) => r.msg.type === 'JOB_SUBMITTED')?.msg,
      'JOB_SUBMITTED',
    ).jobId;
    h.handle({ kind: 'readDone', readId: second.readId, result: stale });
    const batch = effectsOf(h.log, 'reply').find((r) => r.requestId === batchRequest)?.msg;
    assert.deepEqual(expectReply(batch, 'JOBS_SUBMITTED').jobIds, [created]);
  });

  it('counts far jobs toward maxScheduledJobs, never toward maxActiveJobs', () => {
    const h = windowed({ maxScheduledJobs: 2, maxActiveJobs: 1 });
    h.submit({ runAtMillis: START_MS + 60_000 });
    h.submit({ runAtMillis: START_MS + 70_000 });
    const refused = h.submitRequest({ runAtMillis: START_MS + 80_000 });
    assert.equal(refused?.type, 'SUBMIT_REJECTED');
    assert.equal(h.submitRequest({})?.type, 'JOB_SUBMITTED', 'far jobs are not active');
  });

  it('recovers only the window, counts the rest, and starts overdue jobs at once in time order', () => {
    const h = windowed();
    h.register('w1', 10);
    const later = h.submit({ runAtMillis: START_MS + 50_000 });
    const earlier = h.submit({ runAtMillis: START_MS + 40_000 });
    const farthest = h.submit({ runAtMillis: START_MS + 900_000 });
    h.clock = START_MS + 100_000; // down while they fell due
    h.restart();
    let view = h.core.inspect();
    assert.equal(view.scheduledCount, 2, 'the overdue ones are in the window');
    assert.equal(view.farScheduledCount, 1);
    h.register('w1', 10);
    h.handle({ kind: 'wake' });
    assert.deepEqual(
      messagesOf(h.log, 'TASK_ASSIGN').map((m) => m.jobId),
      [earlier, later],
    );
    wakeUntil(h, START_MS + 900_000);
    view = h.core.inspect();
    assert.equal(view.farScheduledCount, 0);
    assert.equal(messagesOf(h.log, 'TASK_ASSIGN').at(-1)?.jobId, farthest);
  });
  it('recovers a full window beside a far delayed parent without skipping the jobs between them', () => {
    const h = windowed(); // 3 jobs per read
    const parent = h.submit({ runAtMillis: START_MS + 600_000 });
    h.submit({ dependsOn: [parent] }); // the graph loads the parent at recovery
    const near = [1, 2, 3, 4].map((k) => h.submit({ runAtMillis: START_MS + k * 1_000 }));
    h.restart();
    h.register('w1', 10);
    wakeUntil(h, START_MS + 5_000);
    assert.deepEqual(
      messagesOf(h.log, 'TASK_ASSIGN').map((m) => m.jobId),
      near,
      'the fourth, beyond the full window, is loaded in its turn',
    );
  });
});
