/**
 * The store contract for signals, events and triggers (a part of
 * describeStoreContract, run on every backend): round trips, what recovery
 * brings back, the event read, and what a purge deletes with its jobs.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import {
  PURGE_EVENTS_PER_ROW,
  StoreError,
  type EventRecord,
  type JobRecord,
  type SignalRecord,
  type Store,
  type TriggerRecord,
} from '../../src/store/store.js';
import { batchOf, jobRecord } from './job-record.js';

/** Signal numbers as a coordinator gives them: from its clock in µs, beyond 32 bits. */
const SEQ_BASE = 1_700_000_000_000_000;

/** Signal `n` of a job (its seq is {@link SEQ_BASE} + n). */
export function signalRecord(
  jobId: string,
  n: number,
  overrides: Partial<SignalRecord> = {},
): SignalRecord {
  return {
    jobId,
    seq: SEQ_BASE + n,
    name: 'approved',
    payloadJson: JSON.stringify({ by: `user-${n}` }),
    atMs: 3_000 + n,
    consumed: false,
    ...overrides,
  };
}

export function eventRecord(eventId: string, overrides: Partial<EventRecord> = {}): EventRecord {
  return {
    eventId,
    name: 'order.paid',
    key: 'order-7',
    payloadJson: '{"amount":12.5}',
    atMs: 4_000,
    jobIds: ['job-10', 'job-11'],
    resumed: 3,
    ...overrides,
  };
}

export function triggerRecord(name: string, overrides: Partial<TriggerRecord> = {}): TriggerRecord {
  return {
    name,
    event: 'order.paid',
    taskType: 'SHA256',
    queue: 'billing',
    priority: 'HIGH',
    maxAttempts: 5,
    createdAtMs: 1_000,
    updatedAtMs: 1_000,
    ...overrides,
  };
}

async function readEvent(store: Store, eventId: string): Promise<EventRecord | null> {
  const result = await store.read({ op: 'event', eventId });
  assert.equal(result.op, 'event');
  return result.op === 'event' ? result.event : null;
}

/** The signals recovery brings back, in (jobId, seq) order. */
async function recoveredSignals(store: Store): Promise<SignalRecord[]> {
  const { activeSignals } = await store.recover();
  return [...(activeSignals ?? [])].sort(
    (a, b) => (a.jobId < b.jobId ? -1 : a.jobId > b.jobId ? 1 : 0) || a.seq - b.seq,
  );
}

const done = (seq: number, finishedAtMs: number, state: JobRecord['state'] = 'COMPLETED') =>
  jobRecord(seq, { state, finishedAtMs, updatedAtMs: finishedAtMs });

/** The tests; `fresh` opens a new empty store (closed by the suite). */
export function describeSignalContract(fresh: () => Promise<Store>): void {
  it('keeps signals by job and seq: recovers those no wait took of active jobs, a new version replacing the old', async () => {
    const store = await fresh();
    const waiting = jobRecord(1, { state: 'WAITING', attempts: 1 });
    const queued = jobRecord(2);
    const ended = done(3, 500);
    const first = signalRecord('job-1', 1);
    const second = signalRecord('job-1', 2, { name: 'other', payloadJson: 'null' });
    await store.commit({
      ...batchOf([waiting, queued, ended].map((job) => ({ job, isNew: true }))),
      signals: [
        first,
        second,
        signalRecord('job-2', 1, { consumed: true }),
        signalRecord('job-2', 2, { payloadJson: '[1,"two",{"three":3}]' }),
        signalRecord('job-3', 1),
      ],
    });
    assert.deepEqual(await recoveredSignals(store), [
      first,
      second,
      signalRecord('job-2', 2, { payloadJson: '[1,"two",{"three":3}]' }),
    ]);
    // A wait took the first: the new version, written with the wait's step, replaces it.
    await store.commit({ ...batchOf([]), signals: [{ ...first, consumed: true }] });
    assert.deepEqual(
      (await recoveredSignals(store)).map((s) => [s.jobId, s.seq - SEQ_BASE]),
      [
        ['job-1', 2],
        ['job-2', 2],
      ],
    );
    // Batches given together apply in order (a store may merge them).
    await Promise.all([
      store.commit({ ...batchOf([]), signals: [signalRecord('job-2', 3)] }),
      store.commit({ ...batchOf([]), signals: [signalRecord('job-2', 3, { consumed: true })] }),
      store.commit({ ...batchOf([]), signals: [{ ...second, consumed: true }] }),
    ]);
    assert.deepEqual(
      (await recoveredSignals(store)).map((s) => [s.jobId, s.seq - SEQ_BASE]),
      [['job-2', 2]],
    );
  });

  it('recovers the signals of a delayed job holding some whatever the window, and counts only the rest', async () => {
    const store = await fresh();
    const held = jobRecord(1, { state: 'SCHEDULED', runAtMs: 10_000_000 });
    const far = jobRecord(2, { state: 'SCHEDULED', runAtMs: 10_000_000 });
    const taken = jobRecord(3, { state: 'SCHEDULED', runAtMs: 10_000_000 });
    await store.commit({
      ...batchOf([held, far, taken].map((job) => ({ job, isNew: true }))),
      signals: [signalRecord('job-1', 1), signalRecord('job-3', 1, { consumed: true })],
    });
    const recovered = await store.recover({ untilMs: 1_000, limit: 10 });
    assert.deepEqual(
      recovered.activeJobs.map((job) => job.jobId),
      ['job-1'],
    );
    assert.equal(recovered.scheduledWindow?.farCount, 2);
    assert.deepEqual(recovered.activeSignals, [signalRecord('job-1', 1)]);
  });

  it('writes an event once and reads it by id: null for an id it does not hold', async () => {
    const store = await fresh();
    assert.equal(await readEvent(store, 'evt-1'), null);
    const keyed = eventRecord('evt-1');
    const plain = eventRecord('evt-2', { key: null, jobIds: [], resumed: 0, payloadJson: '"x"' });
    await store.commit({ ...batchOf([]), events: [keyed] });
    await store.commit({ ...batchOf([]), events: [plain] });
    assert.deepEqual(await readEvent(store, 'evt-1'), keyed);
    assert.deepEqual(await readEvent(store, 'evt-2'), plain);
    assert.equal(await readEvent(store, 'evt-3'), null);
  });

  it('rejects with StoreError, and applies none of the batch, an event id already stored', async () => {
    const store = await fresh();
    await store.commit({ ...batchOf([]), events: [eventRecord('evt-1')] });
    await assert.rejects(
      store.commit({
        ...batchOf([{ job: jobRecord(1), isNew: true }]),
        events: [eventRecord('evt-1', { resumed: 9 })],
      }),
      StoreError,
    );
    const job = await store.read({ op: 'job', jobId: 'job-1', withAttempts: false });
    assert.equal(job.op === 'job' ? job.job : undefined, null, 'nothing of the failed batch');
    assert.deepEqual(await readEvent(store, 'evt-1'), eventRecord('evt-1'));
  });

  it('deletes the signals of the jobs a purge deletes, and the events before its bound with COMPLETED jobs only', async () => {
    const store = await fresh();
    await store.commit({
      ...batchOf(
        [done(1, 100), done(2, 100, 'FAILED'), done(3, 900)].map((job) => ({ job, isNew: true })),
      ),
      signals: [signalRecord('job-1', 1), signalRecord('job-2', 1), signalRecord('job-3', 1)],
      events: [
        eventRecord('old', { atMs: 100 }),
        eventRecord('edge', { atMs: 500 }),
        eventRecord('new', { atMs: 900 }),
      ],
    });
    const failed = await store.read({
      op: 'purge',
      query: { state: 'FAILED', finishedBeforeMs: 500, limit: 10 },
    });
    assert.deepEqual(failed, { op: 'purge', deleted: 1 });
    assert.notEqual(await readEvent(store, 'old'), null, 'a purge of FAILED jobs keeps events');
    const completed = await store.read({
      op: 'purge',
      query: { state: 'COMPLETED', finishedBeforeMs: 500, limit: 10 },
    });
    assert.deepEqual(completed, { op: 'purge', deleted: 1 });
    assert.equal(await readEvent(store, 'old'), null);
    assert.notEqual(await readEvent(store, 'edge'), null, 'the bound is strict');
    assert.notEqual(await readEvent(store, 'new'), null);
    // The purged jobs' signals went with them: jobs of the same ids made
    // again hold none; the job kept keeps its own.
    await store.commit({
      ...batchOf([
        { job: jobRecord(4, { jobId: 'job-1' }), isNew: true },
        { job: jobRecord(5, { jobId: 'job-2' }), isNew: true },
        { job: { ...done(3, 900), state: 'QUEUED', finishedAtMs: null }, isNew: false },
      ]),
    });
    assert.deepEqual(await recoveredSignals(store), [signalRecord('job-3', 1)]);
  });

  it('deletes at most a bounded number of events per purge call, the oldest first', async () => {
    const store = await fresh();
    const limit = 1;
    const bound = limit * PURGE_EVENTS_PER_ROW;
    const events = Array.from({ length: bound + 2 }, (_, i) =>
      eventRecord(`e${i}`, { atMs: 100 + i }),
    );
    await store.commit({ ...batchOf([]), events });
    const purge = { state: 'COMPLETED', finishedBeforeMs: 10_000, limit } as const;
    assert.deepEqual(await store.read({ op: 'purge', query: purge }), { op: 'purge', deleted: 0 });
    assert.equal(await readEvent(store, `e${bound - 1}`), null);
    assert.notEqual(await readEvent(store, `e${bound}`), null);
    await store.read({ op: 'purge', query: purge });
    assert.equal(await readEvent(store, `e${bound + 1}`), null);
  });

  it('keeps triggers by name: upserted, deleted after the batch writes them, every one recovered', async () => {
    const store = await fresh();
    assert.deepEqual((await store.recover()).triggers ?? [], []);
    const paid = triggerRecord('on-paid');
    const bare = triggerRecord('a-bare', { priority: null, maxAttempts: null, queue: 'default' });
    await store.commit({ ...batchOf([]), triggers: [paid, bare] });
    assert.deepEqual((await store.recover()).triggers, [bare, paid]);
    const changed = triggerRecord('on-paid', { event: 'order.refunded', updatedAtMs: 2_000 });
    await store.commit({
      ...batchOf([]),
      triggers: [changed, triggerRecord('gone')],
      deletedTriggers: ['a-bare', 'gone'],
    });
    assert.deepEqual((await store.recover()).triggers, [changed]);
    // Batches given together apply in order (a store may merge them).
    await Promise.all([
      store.commit({ ...batchOf([]), triggers: [triggerRecord('x')] }),
      store.commit({ ...batchOf([]), deletedTriggers: ['x', 'on-paid'] }),
      store.commit({ ...batchOf([]), triggers: [triggerRecord('on-paid')] }),
    ]);
    assert.deepEqual((await store.recover()).triggers, [triggerRecord('on-paid')]);
  });
}

/** Checks signals, events and triggers survive a close and an open of the same store. */
export async function checkSignalsKept(store: Store, reopen: () => Promise<Store>): Promise<void> {
  const signal = signalRecord('job-1', 1);
  await store.commit({
    ...batchOf([{ job: jobRecord(1, { state: 'WAITING' }), isNew: true }]),
    signals: [signal],
    events: [eventRecord('evt-1')],
    triggers: [triggerRecord('on-paid')],
  });
  await store.close();
  const again = await reopen();
  try {
    const recovered = await again.recover();
    assert.deepEqual(recovered.activeSignals, [signal]);
    assert.deepEqual(recovered.triggers, [triggerRecord('on-paid')]);
    assert.deepEqual(await readEvent(again, 'evt-1'), eventRecord('evt-1'));
  } finally {
    await again.close();
  }
}
