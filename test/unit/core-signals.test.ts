/**
 * Signals, events and triggers in the core (signals.ts): a signal held
 * before the wait is taken at once, one that comes while the job waits
 * resumes it; each signal is taken once, oldest first; a wait times out to
 * null; an event wakes every job waiting for its name and key and makes one
 * job per trigger; an event id answers the same again; bounds; recovery.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_SIGNALS_HELD } from '../../src/protocol/limits.js';
import type { ClientReply } from '../../src/protocol/messages.js';
import type { Effect } from '../../src/coordinator/core/types.js';
import { CoreHarness, START_MS, expectReply } from '../helpers/core-harness.js';

const W = 'w1';

function harness(capacity = 4): CoreHarness {
  const h = new CoreHarness();
  h.register(W, capacity, null, { steps: true });
  return h;
}

const suspend = (h: CoreHarness, ...args: Parameters<CoreHarness['suspend']>): Effect[] =>
  h.suspend(...args);

function signal(
  h: CoreHarness,
  jobId: string,
  name: string,
  payload: unknown,
): ClientReply | undefined {
  return h.request({ type: 'SIGNAL_JOB', jobId, name, payload: payload as never });
}

function publish(
  h: CoreHarness,
  name: string,
  payload: unknown,
  extra: { key?: string; eventId?: string } = {},
) {
  return h.request({ type: 'PUBLISH_EVENT', name, payload: payload as never, ...extra });
}

/** The recorded value of the job's last step, parsed. */
function lastStep(h: CoreHarness, jobId: string): { name: string; value: unknown } {
  const assign = h.assignmentOf(jobId);
  const step = assign.steps?.at(-1);
  assert.ok(step !== undefined, 'the assignment carries the steps');
  return { name: step.name, value: JSON.parse(step.result ?? 'null') };
}

describe('core: signals', () => {
  it('a signal that comes while the job waits resumes it, with its payload', () => {
    const h = harness();
    const jobId = h.submit({});
    suspend(h, jobId, { waitForSignal: { name: 'approve' } });
    const waiting = h.status(jobId);
    assert.equal(waiting.state, 'WAITING');
    assert.deepEqual(waiting.waitingFor, { signal: 'approve', untilMillis: null });
    assert.equal(h.assignmentsOf(jobId).length, 1);
    const reply = expectReply(signal(h, jobId, 'approve', { by: 'ana' }), 'JOB_SIGNALLED');
    assert.deepEqual([reply.resumed, reply.signalsHeld], [true, 0]);
    assert.equal(h.assignmentsOf(jobId).length, 2, 'the handler runs again');
    assert.deepEqual(lastStep(h, jobId), {
      name: 'dtp.waitForSignal',
      value: { signal: { name: 'approve', payload: { by: 'ana' }, atMillis: h.clock } },
    });
    h.result(jobId);
    const done = h.status(jobId);
    assert.deepEqual([done.state, done.attempts, done.suspensions], ['COMPLETED', 2, 1]);
  });

  it('a signal held before the wait is taken at once; each once, oldest first', () => {
    const h = harness();
    const jobId = h.submit({ payload: { durationMillis: 1 } });
    const first = expectReply(signal(h, jobId, 'step', 1), 'JOB_SIGNALLED');
    assert.deepEqual([first.resumed, first.signalsHeld], [false, 1]);
    signal(h, jobId, 'other', 'x');
    signal(h, jobId, 'step', 2);
    assert.equal(h.status(jobId).signalsHeld, 3);
    suspend(h, jobId, { waitForSignal: { name: 'step' } });
    assert.equal(h.status(jobId).state, 'RUNNING', 'queued again at once and assigned');
    assert.deepEqual(
      (lastStep(h, jobId).value as { signal: { payload: unknown } }).signal.payload,
      1,
    );
    suspend(h, jobId, { waitForSignal: { name: 'step' } });
    assert.deepEqual(
      (lastStep(h, jobId).value as { signal: { payload: unknown } }).signal.payload,
      2,
    );
    suspend(h, jobId, { waitForSignal: { name: 'step' } });
    assert.equal(h.status(jobId).state, 'WAITING', 'none left: it waits');
    assert.equal(h.status(jobId).signalsHeld, 1, 'the other name is still held');
  });

  it('a wait times out to null', () => {
    const h = harness();
    const jobId = h.submit({});
    suspend(h, jobId, { waitForSignal: { name: 'approve', timeoutMillis: 1_000 } });
    assert.deepEqual(h.status(jobId).waitingFor, {
      signal: 'approve',
      untilMillis: START_MS + 1_000,
    });
    h.tick(999);
    assert.equal(h.status(jobId).state, 'WAITING');
    h.tick(1);
    assert.deepEqual(lastStep(h, jobId).value, { signal: null });
  });

  it('a wait of timeout 0 takes a signal already held, else ends null at once', () => {
    const h = harness();
    const jobId = h.submit({});
    signal(h, jobId, 'approve', 'yes');
    suspend(h, jobId, { waitForSignal: { name: 'approve', timeoutMillis: 0 } });
    assert.deepEqual(
      (lastStep(h, jobId).value as { signal: { payload: unknown } }).signal.payload,
      'yes',
    );
    suspend(h, jobId, { waitForSignal: { name: 'approve', timeoutMillis: 0 } });
    h.tick(0); // the coordinator's next timer round
    assert.deepEqual(lastStep(h, jobId).value, { signal: null }, 'none held: no wait');
    assert.equal(h.status(jobId).state, 'RUNNING');
  });

  it('refuses a signal to an ended or unknown job, and beyond the bound', () => {
    const h = harness();
    const done = h.submit({});
    h.result(done);
    const ended = expectReply(signal(h, done, 'approve', null), 'ERROR');
    assert.match(ended.message, /has ended \(COMPLETED\)/);
    const unknown = expectReply(signal(h, 'nope', 'approve', null), 'ERROR');
    assert.equal(unknown.code, 'UNKNOWN_JOB');
    const jobId = h.submit({ queue: 'nobody' });
    for (let i = 0; i < MAX_SIGNALS_HELD; i++) signal(h, jobId, 'n', i);
    const over = expectReply(signal(h, jobId, 'n', 'one more'), 'ERROR');
    assert.equal(over.code, 'LIMIT_EXCEEDED');
    const bad = expectReply(signal(h, jobId, 'not a name!', null), 'ERROR');
    assert.equal(bad.code, 'INVALID_REQUEST');
  });
});

describe('core: events and triggers', () => {
  it('an event wakes every job waiting for its name and matching key', () => {
    const h = harness(4);
    const any = h.submit({});
    const keyed = h.submit({});
    const otherKey = h.submit({});
    suspend(h, any, { waitForEvent: { name: 'paid' } });
    suspend(h, keyed, { waitForEvent: { name: 'paid', key: 'order-7' } });
    suspend(h, otherKey, { waitForEvent: { name: 'paid', key: 'order-8' } });
    assert.deepEqual(h.status(keyed).waitingFor, {
      event: 'paid',
      key: 'order-7',
      untilMillis: null,
    });
    const reply = expectReply(
      publish(h, 'paid', { amount: 5 }, { key: 'order-7', eventId: 'e1' }),
      'EVENT_PUBLISHED',
    );
    assert.deepEqual([reply.eventId, reply.jobIds, reply.resumed], ['e1', [], 2]);
    assert.equal(h.status(otherKey).state, 'WAITING');
    const value = lastStep(h, keyed).value as { event: Record<string, unknown> };
    assert.deepEqual(value.event, {
      name: 'paid',
      payload: { amount: 5 },
      key: 'order-7',
      eventId: 'e1',
      atMillis: h.clock,
    });
  });

  it('an event published before the wait began does not wake it', () => {
    const h = harness();
    publish(h, 'paid', 1);
    const jobId = h.submit({});
    suspend(h, jobId, { waitForEvent: { name: 'paid' } });
    assert.equal(h.status(jobId).state, 'WAITING');
  });

  it('a trigger makes one job per event; a repeated event id does nothing again', () => {
    const h = harness();
    const set = expectReply(
      h.request({
        type: 'SET_TRIGGER',
        trigger: { name: 'welcome', event: 'user.signup', taskType: 'SLEEP', queue: 'mail' },
      }),
      'TRIGGER_INFO',
    );
    assert.equal(set.trigger.queue, 'mail');
    const first = expectReply(
      publish(h, 'user.signup', { durationMillis: 3 }, { eventId: 'signup-1' }),
      'EVENT_PUBLISHED',
    );
    assert.equal(first.jobIds.length, 1);
    const job = h.status(first.jobIds[0] as string);
    assert.deepEqual([job.taskType, job.queue], ['SLEEP', 'mail']);
    const again = expectReply(
      publish(h, 'user.signup', { durationMillis: 3 }, { eventId: 'signup-1' }),
      'EVENT_PUBLISHED',
    );
    assert.deepEqual([again.jobIds, again.duplicate], [first.jobIds, true]);
    assert.equal(h.core.activeCount, 1);
    const list = expectReply(h.request({ type: 'LIST_TRIGGERS' }), 'TRIGGER_LIST');
    assert.deepEqual(
      list.triggers.map((t) => t.name),
      ['welcome'],
    );
    const deleted = expectReply(
      h.request({ type: 'DELETE_TRIGGER', name: 'welcome' }),
      'TRIGGER_DELETED',
    );
    assert.equal(deleted.deleted, true);
    const none = expectReply(publish(h, 'user.signup', {}), 'EVENT_PUBLISHED');
    assert.deepEqual(none.jobIds, []);
  });

  it('a wait for an event times out to null', () => {
    const h = harness();
    const jobId = h.submit({});
    suspend(h, jobId, { waitForEvent: { name: 'paid', timeoutMillis: 50 } });
    h.tick(50);
    assert.deepEqual(lastStep(h, jobId).value, { event: null });
  });

  it('across a restart: held signals, a waiting job, triggers and event ids are kept', () => {
    const h = harness();
    const held = h.submit({ queue: 'nobody' });
    signal(h, held, 'go', 'kept');
    const waiting = h.submit({});
    suspend(h, waiting, { waitForEvent: { name: 'paid', key: 'k', timeoutMillis: 60_000 } });
    h.request({
      type: 'SET_TRIGGER',
      trigger: { name: 't', event: 'paid', taskType: 'SLEEP' },
    });
    h.restart();
    h.register(W, 4, null, { steps: true });
    assert.equal(h.status(held).signalsHeld, 1);
    assert.deepEqual(h.status(waiting).waitingFor, {
      event: 'paid',
      key: 'k',
      untilMillis: START_MS + 60_000,
    });
    const first = expectReply(
      publish(h, 'paid', { durationMillis: 1 }, { key: 'k', eventId: 'x' }),
      'EVENT_PUBLISHED',
    );
    assert.deepEqual([first.jobIds.length, first.resumed], [1, 1]);
    h.restart();
    const again = expectReply(
      publish(h, 'paid', {}, { key: 'k', eventId: 'x' }),
      'EVENT_PUBLISHED',
    );
    assert.deepEqual([again.jobIds, again.resumed, again.duplicate], [first.jobIds, 1, true]);
  });
});
