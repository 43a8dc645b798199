/**
 * The store contract, one suite for every backend: given a way to open a
 * fresh store and to reopen the same one (a restart), every behaviour the
 * coordinator relies on is checked the same way.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type {
  QueueSettingsRecord,
  AttemptRecord,
  JobRecord,
  ScheduleRecord,
  Store,
  StoreReadResult,
} from '../../src/store/store.js';
import { StoreError } from '../../src/store/store.js';
import { batchOf, jobRecord } from './job-record.js';
import { checkSignalsKept, describeSignalContract } from './store-contract-signals.js';

export { batchOf } from './job-record.js';

export interface StoreBackend {
  name: string;
  /** A new, empty store. */
  open(): Promise<Store>;
  /** The same store opened again after `close()` (omit for non-durable backends). */
  reopen?(store: Store): Promise<Store>;
  /** Called once after the suite. */
  cleanup?(): Promise<void>;
}

function attempt(
  jobId: string,
  attemptNumber: number,
  overrides: Partial<AttemptRecord> = {},
): AttemptRecord {
  return {
    jobId,
    attemptNumber,
    attemptId: `${jobId}-a${attemptNumber}`,
    workerId: 'w1',
    startedAtMs: 2_000 + attemptNumber,
    finishedAtMs: 2_100 + attemptNumber,
    outcome: 'WORKER_LOST',
    error: 'lost',
    ...overrides,
  };
}

function expectOp<T extends StoreReadResult['op']>(
  result: StoreReadResult,
  op: T,
): Extract<StoreReadResult, { op: T }> {
  assert.equal(result.op, op);
  return result as Extract<StoreReadResult, { op: T }>;
}

async function getJob(store: Store, jobId: string, withAttempts = false) {
  return expectOp(await store.read({ op: 'job', jobId, withAttempts }), 'job');
}

async function list(
  store: Store,
  query: Partial<{
    beforeSeq: number;
    states: JobRecord['state'][];
    taskType: string;
    limit: number;
  }>,
) {
  const result = await store.read({
    op: 'list',
    query: {
      beforeSeq: query.beforeSeq ?? null,
      states: query.states ?? null,
      taskType: query.taskType ?? null,
      limit: query.limit ?? 100,
    },
  });
  return expectOp(result, 'list').jobs;
}

const terminal = (
  seq: number,
  state: 'COMPLETED' | 'FAILED' | 'CANCELLED',
  finishedAtMs: number,
  extra: Partial<JobRecord> = {},
): JobRecord => jobRecord(seq, { state, finishedAtMs, updatedAtMs: finishedAtMs, ...extra });

export function describeStoreContract(backend: StoreBackend): void {
  describe(`store contract: ${backend.name}`, () => {
    const open: Store[] = [];
    const fresh = async (): Promise<Store> => {
      const store = await backend.open();
      open.push(store);
      return store;
    };
    after(async () => {
      await Promise.all(open.map((store) => store.close()));
      await backend.cleanup?.();
    });

    it('starts empty when new', async () => {
      const store = await fresh();
      // `epoch` is the shared store's own (PostgreSQL); the rest is every store's.
      const { activeJobs, activeAttempts, maxSeq } = await store.recover();
      assert.deepEqual(
        { activeJobs, activeAttempts, maxSeq },
        {
          activeJobs: [],
          activeAttempts: [],
          maxSeq: 0,
        },
      );
    });

    it('round-trips every field of a job when it is inserted and then updated', async () => {
      const store = await fresh();
      const job = jobRecord(1, {
        idempotencyKey: 'k1',
        priority: 'HIGH',
        timeoutMs: 1_234,
        traceContext: {
          traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
          tracestate: 'vendor=opaque',
        },
      });
      await store.commit(batchOf([{ job, isNew: true }]));
      assert.deepEqual((await getJob(store, 'job-1')).job, job);
      const done: JobRecord = {
        ...job,
        state: 'COMPLETED',
        attempts: 2,
        result: '{"n":1}',
        resultFormat: 'json',
        error: 'earlier failure',
        updatedAtMs: 5_000,
        startedAtMs: 4_000,
        finishedAtMs: 5_000,
        progress: { fraction: 0.75, message: 'three quarters', atMillis: 4_900 },
      };
      await store.commit(batchOf([{ job: done, isNew: false }]));
      assert.deepEqual((await getJob(store, 'job-1')).job, done);
      assert.deepEqual(
        expectOp(await store.read({ op: 'jobByKey', key: 'k1' }), 'jobByKey').job,
        done,
      );
      const running: JobRecord = {
        ...jobRecord(2),
        state: 'RUNNING',
        attempts: 1,
        workerId: 'w1',
        attemptId: 'lease-1',
        deadlineAtMs: 9_000,
        startedAtMs: 3_000,
      };
      await store.commit(batchOf([{ job: running, isNew: true }]));
      assert.deepEqual((await getJob(store, 'job-2')).job, running);
    });

    it('keeps queue and group of jobs, lists and counts by queue, and recovers queue settings', async () => {
      const store = await fresh();
      const rows = [
        jobRecord(1, { queue: 'emails', groupKey: 'tenant-1' }),
        jobRecord(2, { queue: 'emails', state: 'COMPLETED', finishedAtMs: 5_000 }),
        jobRecord(3),
      ];
      await store.commit(batchOf(rows.map((job) => ({ job, isNew: true }))));
      const settings: QueueSettingsRecord = {
        name: 'emails',
        paused: true,
        concurrency: 3,
        rateMax: 10,
        rateIntervalMs: 1_000,
        groupConcurrency: null,
        groupRateMax: 2,
        groupRateIntervalMs: 86_400_000,
        updatedAtMs: 7_000,
        heldUntilMs: null,
      };
      await store.commit({ ...batchOf([]), queues: [settings] });
      const changed = { ...settings, paused: false, concurrency: null, updatedAtMs: 8_000 };
      await store.commit({ ...batchOf([]), queues: [changed] });
      const got = await store.read({ op: 'job', jobId: 'job-1', withAttempts: false });
      assert.ok(got.op === 'job');
      assert.equal(got.job?.queue, 'emails');
      assert.equal(got.job?.groupKey, 'tenant-1');
      const list = await store.read({
        op: 'list',
        query: { beforeSeq: null, states: null, taskType: null, limit: 10, queue: 'emails' },
      });
      assert.ok(list.op === 'list');
      assert.deepEqual(
        list.jobs.map((j) => j.seq),
        [2, 1],
      );
      const counts = await store.read({ op: 'queueCounts', queue: null });
      assert.ok(counts.op === 'queueCounts');
      const sorted = [...counts.counts].sort((a, b) =>
        `${a.queue}/${a.state}` < `${b.queue}/${b.state}` ? -1 : 1,
      );
      assert.deepEqual(sorted, [
        { queue: 'default', state: 'QUEUED', count: 1 },
        { queue: 'emails', state: 'COMPLETED', count: 1 },
        { queue: 'emails', state: 'QUEUED', count: 1 },
      ]);
      const one = await store.read({ op: 'queueCounts', queue: 'default' });
      assert.ok(one.op === 'queueCounts');
      assert.deepEqual(one.counts, [{ queue: 'default', state: 'QUEUED', count: 1 }]);
      const recovered = await store.recover();
      assert.deepEqual(recovered.queueSettings, [changed]);
      assert.equal(recovered.activeJobs.find((j) => j.seq === 1)?.groupKey, 'tenant-1');
    });

    it('keeps delayed jobs and their schedule: recovers SCHEDULED rows and every schedule', async () => {
      const store = await fresh();
      const delayed = jobRecord(1, {
        state: 'SCHEDULED',
        runAtMs: 123_456,
        scheduleName: 'nightly',
      });
      const schedule = scheduleRecord('nightly');
      await store.commit({ ...batchOf([{ job: delayed, isNew: true }]), schedules: [schedule] });
      assert.deepEqual((await getJob(store, 'job-1')).job, delayed);
      const recovered = await store.recover();
      assert.deepEqual(recovered.activeJobs, [delayed]);
      assert.deepEqual(recovered.schedules, [schedule]);
      const due: JobRecord = { ...delayed, state: 'QUEUED', updatedAtMs: 123_456 };
      const advanced = {
        ...schedule,
        nextRunAtMs: 200_000,
        lastJobId: 'job-1',
        lastRunAtMs: 100_000,
      };
      await store.commit({ ...batchOf([{ job: due, isNew: false }]), schedules: [advanced] });
      assert.deepEqual((await store.recover()).schedules, [advanced]);
      const read = await store.read({ op: 'scheduleJobs', scheduleName: 'nightly', limit: 10 });
      assert.deepEqual(expectOp(read, 'scheduleJobs').jobs, [due]);
      await store.commit({ ...batchOf([]), deletedSchedules: ['nightly'] });
      assert.deepEqual((await store.recover()).schedules, []);
      assert.equal((await getJob(store, 'job-1')).job?.scheduleName, 'nightly');
    });

    it('reads delayed jobs by window: recovery loads the window and counts the rest, the window read pages by (runAtMs, seq)', async () => {
      const store = await fresh();
      const at = [500, 100, 300, 300, 900, 200];
      const jobs = at.map((runAtMs, i) => jobRecord(i + 1, { state: 'SCHEDULED', runAtMs }));
      // A delayed job with a parent, and a delayed parent: always loaded.
      const parent = jobRecord(7, { state: 'SCHEDULED', runAtMs: 5_000 });
      const child = jobRecord(8, {
        state: 'SCHEDULED',
        runAtMs: 6_000,
        dependsOn: ['job-7'],
        onParentFailure: 'cancel',
      });
      const queued = jobRecord(9);
      await store.commit(
        batchOf([...jobs, parent, child, queued].map((job) => ({ job, isNew: true }))),
      );
      const windowed = await store.recover({ untilMs: 300, limit: 3 });
      // Due by 300, earliest first, 3 at most: 100 (seq 2), 200 (seq 6), 300 (seq 3).
      assert.deepEqual(
        windowed.activeJobs.map((job) => job.seq),
        [2, 3, 6, 7, 8, 9],
      );
      assert.deepEqual(windowed.scheduledWindow, { untilMs: 300, limit: 3, farCount: 3 });
      const all = await store.recover();
      assert.equal(all.activeJobs.length, 9);
      assert.equal(all.scheduledWindow, undefined);
      const next = await store.read({
        op: 'scheduledWindow',
        after: { atMs: 300, seq: 3 },
        untilMs: 10_000,
        limit: 2,
      });
      assert.deepEqual(
        expectOp(next, 'scheduledWindow').jobs.map((job) => job.seq),
        [4, 1],
      );
      const rest = await store.read({
        op: 'scheduledWindow',
        after: { atMs: 500, seq: 1 },
        untilMs: 899,
        limit: 10,
      });
      assert.deepEqual(expectOp(rest, 'scheduledWindow').jobs, []);
      const last = await store.read({
        op: 'scheduledWindow',
        after: { atMs: 500, seq: 1 },
        untilMs: 10_000,
        limit: 10,
      });
      // Jobs with parents are left out (memory always holds them); the parent is not.
      assert.deepEqual(
        expectOp(last, 'scheduledWindow').jobs.map((job) => job.seq),
        [5, 7],
      );
    });

    it('round-trips the deduplication, expiry and rate-limit fields through every read', async () => {
      const store = await fresh();
      const keyed = jobRecord(1, {
        idempotencyKey: 'ik-1',
        state: 'SCHEDULED',
        runAtMs: 50_000,
        scheduleName: 'nightly',
        dedupKey: 'report:7',
        dedupMode: 'debounce',
        expiresAtMs: 90_000,
      });
      const ended = terminal(2, 'COMPLETED', 3_000, {
        dedupKey: 'sync',
        dedupMode: 'throttle',
        dedupUntilMs: 61_002,
        rateLimitedInARow: 0,
      });
      const waiting = jobRecord(3, { state: 'WAITING', dependsOn: ['job-2'] });
      await store.commit(batchOf([keyed, ended, waiting].map((job) => ({ job, isNew: true }))));
      const reads = async (): Promise<JobRecord[]> => {
        const [one, byKey, byIds, listed, scheduled, window] = await Promise.all([
          store.read({ op: 'job', jobId: 'job-1', withAttempts: false }),
          store.read({ op: 'jobByKey', key: 'ik-1' }),
          store.read({ op: 'jobs', jobIds: ['job-1'] }),
          store.read({
            op: 'list',
            query: { beforeSeq: 2, states: null, taskType: null, limit: 1 },
          }),
          store.read({ op: 'scheduleJobs', scheduleName: 'nightly', limit: 1 }),
          store.read({
            op: 'scheduledWindow',
            after: { atMs: 0, seq: 0 },
            untilMs: 100_000,
            limit: 1,
          }),
        ]);
        const recovered = await store.recover();
        return [
          expectOp(one, 'job').job,
          expectOp(byKey, 'jobByKey').job,
          ...expectOp(byIds, 'jobs').jobs,
          ...expectOp(listed, 'list').jobs,
          ...expectOp(scheduled, 'scheduleJobs').jobs,
          ...expectOp(window, 'scheduledWindow').jobs,
          recovered.activeJobs.find((job) => job.jobId === 'job-1'),
        ].map((job) => job ?? null) as JobRecord[];
      };
      const got = await reads();
      assert.equal(got.length, 7);
      for (const job of got) assert.deepEqual(job, keyed);
      const recovered = await store.recover();
      assert.deepEqual(recovered.parentJobs, [ended]);
      assert.deepEqual(recovered.throttledJobs, [ended]);
      // A later version: rate limited twice in a row, and a debounced
      // submission's payload and run time.
      const later: JobRecord = {
        ...keyed,
        payloadJson: '{"text":"replaced"}',
        runAtMs: 55_000,
        rateLimitedInARow: 2,
        updatedAtMs: 4_000,
      };
      await store.commit(batchOf([{ job: later, isNew: false }]));
      for (const job of await reads()) assert.deepEqual(job, later);
    });

    it('recovers the ended jobs whose throttle window is still open at the time given', async () => {
      const store = await fresh();
      const throttled = (seq: number, dedupUntilMs: number, extra: Partial<JobRecord> = {}) =>
        terminal(seq, 'COMPLETED', 500, {
          dedupKey: `k${seq}`,
          dedupMode: 'throttle',
          dedupUntilMs,
          ...extra,
        });
      const rows = [
        throttled(1, 1_000),
        throttled(2, 2_000),
        throttled(3, 3_000, { state: 'CANCELLED' }),
        terminal(4, 'COMPLETED', 500, { dedupKey: 'k4', dedupMode: 'active' }),
        jobRecord(5, { dedupKey: 'k5', dedupMode: 'throttle', dedupUntilMs: 9_000 }),
      ];
      await store.commit(batchOf(rows.map((job) => ({ job, isNew: true }))));
      const ids = (jobs: JobRecord[] | undefined): string[] => (jobs ?? []).map((job) => job.jobId);
      assert.deepEqual(ids((await store.recover()).throttledJobs), ['job-1', 'job-2', 'job-3']);
      assert.deepEqual(ids((await store.recover(undefined, 1_000)).throttledJobs), [
        'job-2',
        'job-3',
      ]);
      const windowed = await store.recover({ untilMs: 0, limit: 1 }, 2_500);
      assert.deepEqual(ids(windowed.throttledJobs), ['job-3']);
      assert.deepEqual(ids(windowed.activeJobs), ['job-5'], 'an active one is an active job');
      assert.deepEqual((await store.recover(undefined, 3_000)).throttledJobs ?? [], []);
    });

    it('recovers every delayed job with a deduplication key whatever the window, and counts only the rest', async () => {
      const store = await fresh();
      const far = 10_000_000;
      const rows = [
        jobRecord(1, { state: 'SCHEDULED', runAtMs: far, dedupKey: 'k', dedupMode: 'active' }),
        jobRecord(2, { state: 'SCHEDULED', runAtMs: far }),
        jobRecord(3, { state: 'SCHEDULED', runAtMs: far, expiresAtMs: far + 1 }),
        jobRecord(4, { state: 'SCHEDULED', runAtMs: 100, dedupKey: 'n', dedupMode: 'debounce' }),
        jobRecord(5, { state: 'SCHEDULED', runAtMs: 200 }),
      ];
      await store.commit(batchOf(rows.map((job) => ({ job, isNew: true }))));
      const recovered = await store.recover({ untilMs: 1_000, limit: 10 });
      assert.deepEqual(
        recovered.activeJobs.map((job) => job.jobId),
        ['job-1', 'job-4', 'job-5'],
      );
      assert.equal(recovered.scheduledWindow?.farCount, 2);
      const full = await store.recover({ untilMs: 1_000, limit: 1 });
      assert.deepEqual(
        full.activeJobs.map((job) => job.jobId),
        ['job-1', 'job-4'],
      );
      assert.equal(full.scheduledWindow?.farCount, 3);
    });

    it('keeps group holds by queue and group key: upserted, ended by a bound, recovered', async () => {
      const store = await fresh();
      assert.deepEqual((await store.recover()).groupHolds ?? [], []);
      await store.commit({
        ...batchOf([]),
        groupHolds: [
          { queue: 'q1', groupKey: 'g1', untilMs: 100 },
          { queue: 'q1', groupKey: null, untilMs: 200 },
          { queue: 'q2', groupKey: 'g1', untilMs: 300 },
        ],
      });
      assert.deepEqual((await store.recover()).groupHolds, [
        { queue: 'q1', groupKey: null, untilMs: 200 },
        { queue: 'q1', groupKey: 'g1', untilMs: 100 },
        { queue: 'q2', groupKey: 'g1', untilMs: 300 },
      ]);
      // The bound applies after the batch's holds: one given already ended goes too.
      await store.commit({
        ...batchOf([]),
        groupHolds: [
          { queue: 'q1', groupKey: 'g1', untilMs: 400 },
          { queue: 'q3', groupKey: null, untilMs: 240 },
        ],
        groupHoldsEndedBeforeMs: 250,
      });
      assert.deepEqual((await store.recover()).groupHolds, [
        { queue: 'q1', groupKey: 'g1', untilMs: 400 },
        { queue: 'q2', groupKey: 'g1', untilMs: 300 },
      ]);
      // Batches given together apply in order (a store may merge them).
      await Promise.all([
        store.commit({
          ...batchOf([]),
          groupHolds: [{ queue: 'q4', groupKey: 'a', untilMs: 500 }],
        }),
        store.commit({ ...batchOf([]), groupHoldsEndedBeforeMs: 600 }),
        store.commit({
          ...batchOf([]),
          groupHolds: [{ queue: 'q5', groupKey: null, untilMs: 550 }],
        }),
        store.commit({
          ...batchOf([]),
          groupHolds: [{ queue: 'q1', groupKey: 'g1', untilMs: 700 }],
        }),
      ]);
      assert.deepEqual((await store.recover()).groupHolds, [
        { queue: 'q1', groupKey: 'g1', untilMs: 700 },
        { queue: 'q5', groupKey: null, untilMs: 550 },
      ]);
    });

    it('keeps until when a queue is held back', async () => {
      const store = await fresh();
      const settings: QueueSettingsRecord = {
        name: 'emails',
        paused: false,
        concurrency: null,
        rateMax: null,
        rateIntervalMs: null,
        groupConcurrency: null,
        groupRateMax: null,
        groupRateIntervalMs: null,
        updatedAtMs: 7_000,
        heldUntilMs: 12_000,
      };
      await store.commit({ ...batchOf([]), queues: [settings] });
      assert.deepEqual((await store.recover()).queueSettings, [settings]);
      const released = { ...settings, heldUntilMs: null, updatedAtMs: 12_000 };
      await store.commit({ ...batchOf([]), queues: [released] });
      assert.deepEqual((await store.recover()).queueSettings, [released]);
    });

    it('answers null for a job or key it does not hold', async () => {
      const store = await fresh();
      assert.deepEqual(await getJob(store, 'nope', true), { op: 'job', job: null, attempts: null });
      assert.equal(
        expectOp(await store.read({ op: 'jobByKey', key: 'nope' }), 'jobByKey').job,
        null,
      );
    });

    it('keeps attempts per job in order and returns them only when asked', async () => {
      const store = await fresh();
      await store.commit(
        batchOf([{ job: jobRecord(1), isNew: true }], [attempt('job-1', 2), attempt('job-1', 1)]),
      );
      const plain = await getJob(store, 'job-1');
      assert.equal(plain.attempts, null);
      const full = await getJob(store, 'job-1', true);
      assert.deepEqual(full.attempts, [attempt('job-1', 1), attempt('job-1', 2)]);
      // A later version of an attempt replaces the earlier one.
      const ended = attempt('job-1', 2, { outcome: 'SUCCEEDED', error: null, finishedAtMs: 9_999 });
      await store.commit(batchOf([], [ended]));
      assert.deepEqual((await getJob(store, 'job-1', true)).attempts, [attempt('job-1', 1), ended]);
    });

    it('counts the REQUEUED attempts of a job in a job read', async () => {
      const store = await fresh();
      const requeued = (n: number) =>
        attempt('job-1', n, { outcome: 'REQUEUED', error: 'cut off' });
      await store.commit(
        batchOf(
          [
            { job: jobRecord(1), isNew: true },
            { job: jobRecord(2), isNew: true },
          ],
          [requeued(1), attempt('job-1', 2), requeued(3)],
        ),
      );
      assert.equal((await getJob(store, 'job-1')).job?.requeues, 2);
      assert.equal((await getJob(store, 'job-2')).job?.requeues ?? null, null);
      // A later version of an attempt with another outcome no longer counts.
      await store.commit(batchOf([], [attempt('job-1', 3)]));
      assert.equal((await getJob(store, 'job-1')).job?.requeues, 1);
    });

    it('recovers only non-terminal jobs, in seq order, with their attempts and the highest seq', async () => {
      const store = await fresh();
      await store.commit(
        batchOf(
          [
            { job: jobRecord(3, { state: 'RETRY_WAIT', retryAtMs: 77 }), isNew: true },
            { job: terminal(4, 'COMPLETED', 50), isNew: true },
            { job: jobRecord(1), isNew: true },
            {
              job: jobRecord(2, {
                state: 'RUNNING',
                workerId: 'w',
                attemptId: 'a',
                deadlineAtMs: 9,
              }),
              isNew: true,
            },
            { job: terminal(5, 'FAILED', 60), isNew: true },
          ],
          [attempt('job-3', 1), attempt('job-4', 1)],
        ),
      );
      const recovered = await store.recover();
      assert.deepEqual(
        recovered.activeJobs.map((j) => j.seq),
        [1, 2, 3],
      );
      assert.deepEqual(recovered.activeAttempts, [attempt('job-3', 1)]);
      assert.equal(recovered.maxSeq, 5);
    });

    it('lists newest first with cursor, state and task type filters', async () => {
      const store = await fresh();
      const rows = Array.from({ length: 30 }, (_, i) =>
        jobRecord(i + 1, {
          state: i % 3 === 0 ? 'QUEUED' : 'COMPLETED',
          taskType: i % 2 === 0 ? 'SHA256' : 'resize',
          finishedAtMs: i % 3 === 0 ? null : 100 + i,
        }),
      );
      await store.commit(batchOf(rows.map((job) => ({ job, isNew: true }))));
      const seqs = (jobs: JobRecord[]): number[] => jobs.map((j) => j.seq);
      assert.deepEqual(seqs(await list(store, { limit: 5 })), [30, 29, 28, 27, 26]);
      assert.deepEqual(seqs(await list(store, { limit: 3, beforeSeq: 26 })), [25, 24, 23]);
      const queued = rows
        .filter((r) => r.state === 'QUEUED')
        .map((r) => r.seq)
        .reverse();
      assert.deepEqual(seqs(await list(store, { states: ['QUEUED'] })), queued);
      const resize = rows
        .filter((r) => r.taskType === 'resize')
        .map((r) => r.seq)
        .reverse();
      assert.deepEqual(seqs(await list(store, { taskType: 'resize' })), resize);
      const both = rows
        .filter((r) => r.taskType === 'SHA256' && r.state === 'QUEUED')
        .map((r) => r.seq)
        .reverse();
      assert.deepEqual(seqs(await list(store, { taskType: 'SHA256', states: ['QUEUED'] })), both);
      const either = rows
        .filter((r) => r.state === 'QUEUED' || r.state === 'COMPLETED')
        .map((r) => r.seq)
        .reverse();
      assert.deepEqual(
        seqs(await list(store, { states: ['QUEUED', 'COMPLETED'], limit: 100 })),
        either,
      );
    });

    it('lists the FAILED jobs of a queue finished since a time, with their attempts when asked', async () => {
      const store = await fresh();
      const rows = [
        terminal(1, 'FAILED', 100, { queue: 'emails', attempts: 2 }),
        terminal(2, 'FAILED', 200, { queue: 'emails', attempts: 1, taskType: 'SEND' }),
        terminal(3, 'FAILED', 300, { queue: 'other' }),
        terminal(4, 'COMPLETED', 400, { queue: 'emails' }),
        terminal(5, 'FAILED', 500, { queue: 'emails' }),
      ];
      await store.commit(
        batchOf(
          rows.map((job) => ({ job, isNew: true })),
          [attempt('job-1', 1), attempt('job-1', 2), attempt('job-2', 1), attempt('job-3', 1)],
        ),
      );
      const read = async (finishedSinceMs: number | null, withAttempts: boolean) =>
        expectOp(
          await store.read({
            op: 'list',
            query: {
              beforeSeq: null,
              states: ['FAILED'],
              taskType: null,
              limit: 10,
              queue: 'emails',
              finishedSinceMs,
            },
            withAttempts,
          }),
          'list',
        );
      const all = await read(null, false);
      assert.deepEqual(
        all.jobs.map((j) => j.seq),
        [5, 2, 1],
      );
      assert.equal(all.attempts, undefined);
      const since = await read(200, true);
      assert.deepEqual(
        since.jobs.map((j) => j.seq),
        [5, 2],
        'finished at or after the bound',
      );
      assert.deepEqual((since.attempts ?? []).map((a) => `${a.jobId}#${a.attemptNumber}`).sort(), [
        'job-2#1',
      ]);
      const withHistory = await read(100, true);
      assert.deepEqual(
        (withHistory.attempts ?? []).map((a) => `${a.jobId}#${a.attemptNumber}`).sort(),
        ['job-1#1', 'job-1#2', 'job-2#1'],
      );
      // A re-run: the same row QUEUED again with a fresh attempt budget.
      const again = { ...(rows[0] as JobRecord), state: 'QUEUED' as const, maxAttempts: 5 };
      await store.commit(batchOf([{ job: { ...again, finishedAtMs: null }, isNew: false }]));
      const back = (await getJob(store, 'job-1')).job;
      assert.equal(back?.state, 'QUEUED');
      assert.equal(back?.maxAttempts, 5);
      assert.equal(back?.finishedAtMs, null);
    });

    it('purges only terminal jobs of one state finished before the bound, with their attempts and keys', async () => {
      const store = await fresh();
      await store.commit(
        batchOf(
          [
            { job: terminal(1, 'COMPLETED', 100, { idempotencyKey: 'old' }), isNew: true },
            { job: terminal(2, 'COMPLETED', 200), isNew: true },
            { job: terminal(3, 'FAILED', 100), isNew: true },
            { job: jobRecord(4), isNew: true },
            { job: terminal(5, 'COMPLETED', 300), isNew: true },
          ],
          [attempt('job-1', 1), attempt('job-2', 1)],
        ),
      );
      const purge = async (limit: number): Promise<number> =>
        expectOp(
          await store.read({
            op: 'purge',
            query: { state: 'COMPLETED', finishedBeforeMs: 250, limit },
          }),
          'purge',
        ).deleted;
      assert.equal(await purge(1), 1, 'at most limit rows per call');
      assert.equal(await purge(10), 1);
      assert.equal(await purge(10), 0);
      assert.equal((await getJob(store, 'job-1')).job, null);
      assert.equal((await getJob(store, 'job-2')).job, null);
      assert.equal(
        expectOp(await store.read({ op: 'jobByKey', key: 'old' }), 'jobByKey').job,
        null,
      );
      for (const kept of ['job-3', 'job-4', 'job-5'])
        assert.notEqual((await getJob(store, kept)).job, null);
      // The key of a purged job may be used again.
      await store.commit(batchOf([{ job: jobRecord(6, { idempotencyKey: 'old' }), isNew: true }]));
      assert.equal(
        expectOp(await store.read({ op: 'jobByKey', key: 'old' }), 'jobByKey').job?.jobId,
        'job-6',
      );
    });

    it('keeps dependsOn and the parent-failure policy, recovers WAITING jobs with the ended parents they need', async () => {
      const store = await fresh();
      const parentDone = terminal(1, 'COMPLETED', 100, { result: 'r1' });
      const parentOpen = jobRecord(2, { state: 'RUNNING', workerId: 'w', attemptId: 'a' });
      const unrelated = terminal(3, 'COMPLETED', 100);
      const child = jobRecord(4, {
        state: 'WAITING',
        dependsOn: ['job-2', 'job-1'],
        onParentFailure: 'run',
      });
      await store.commit(
        batchOf([parentDone, parentOpen, unrelated, child].map((job) => ({ job, isNew: true }))),
      );
      assert.deepEqual((await getJob(store, 'job-4')).job, child);
      const recovered = await store.recover();
      assert.deepEqual(
        recovered.activeJobs.map((j) => [j.jobId, j.state]),
        [
          ['job-2', 'RUNNING'],
          ['job-4', 'WAITING'],
        ],
      );
      assert.deepEqual(
        (recovered.parentJobs ?? []).map((j) => [j.jobId, j.result]),
        [['job-1', 'r1']],
      );
      const byIds = expectOp(
        await store.read({ op: 'jobs', jobIds: ['job-3', 'nope', 'job-1'] }),
        'jobs',
      );
      assert.deepEqual(byIds.jobs.map((j) => j.jobId).sort(), ['job-1', 'job-3']);
    });

    it('purges a parent only once no non-terminal job depends on it', async () => {
      const store = await fresh();
      const parent = terminal(1, 'COMPLETED', 100, { result: 'r1' });
      const child = jobRecord(2, { state: 'QUEUED', dependsOn: ['job-1'] });
      await store.commit(batchOf([parent, child].map((job) => ({ job, isNew: true }))));
      const purge = async (): Promise<number> =>
        expectOp(
          await store.read({
            op: 'purge',
            query: { state: 'COMPLETED', finishedBeforeMs: 1_000_000, limit: 10 },
          }),
          'purge',
        ).deleted;
      assert.equal(await purge(), 0);
      assert.notEqual((await getJob(store, 'job-1')).job, null);
      const childDone = { ...child, state: 'COMPLETED' as const, finishedAtMs: 200 };
      await store.commit(batchOf([{ job: childDone, isNew: false }]));
      assert.equal(await purge(), 2);
    });

    it('keeps recorded steps in order: recovers them for active jobs, lists them in a job read, replaces one by index, clears them', async () => {
      const store = await fresh();
      const running = jobRecord(1, { state: 'RUNNING', workerId: 'w', attemptId: 'a' });
      const done = terminal(2, 'COMPLETED', 100);
      await store.commit(batchOf([running, done].map((job) => ({ job, isNew: true }))));
      const step = (jobId: string, index: number, result: string | null) => ({
        jobId,
        index,
        name: `s${index}`,
        result,
        atMs: 1_000 + index,
      });
      await store.commit({
        ...batchOf([]),
        steps: [step('job-1', 0, '{"a":1}'), step('job-1', 1, null), step('job-2', 0, '"x"')],
      });
      await store.commit({ ...batchOf([]), steps: [step('job-1', 1, '[1,2]')] });
      const recovered = await store.recover();
      assert.deepEqual(
        [...(recovered.activeSteps ?? [])].sort((a, b) => a.index - b.index),
        [step('job-1', 0, '{"a":1}'), step('job-1', 1, '[1,2]')],
      );
      assert.deepEqual((await getJob(store, 'job-2')).job?.steps, [
        { name: 's0', atMs: 1_000, resultBytes: 3 },
      ]);
      assert.deepEqual(
        (await getJob(store, 'job-1')).job?.steps?.map((st) => st.resultBytes),
        [7, 5],
        'the byte length of each recorded JSON text',
      );
      assert.equal((await getJob(store, 'job-1')).job?.steps?.length, 2);
      await store.commit({
        ...batchOf([]),
        clearedSteps: ['job-1'],
        steps: [step('job-1', 0, '0')],
      });
      assert.deepEqual((await store.recover()).activeSteps, [step('job-1', 0, '0')]);
    });

    it('keeps the job a waiting job waits for: recovered beside it once ended, not purged while it waits', async () => {
      const store = await fresh();
      const target = terminal(1, 'COMPLETED', 100, { result: 'r1' });
      const waiter = jobRecord(2, { state: 'WAITING' });
      await store.commit({
        ...batchOf([target, waiter].map((job) => ({ job, isNew: true }))),
        stepWaits: [{ jobId: 'job-2', targetId: 'job-1' }],
      });
      const recovered = await store.recover();
      assert.deepEqual(
        (recovered.parentJobs ?? []).map((j) => j.jobId),
        ['job-1'],
      );
      const purge = async (): Promise<number> =>
        expectOp(
          await store.read({
            op: 'purge',
            query: { state: 'COMPLETED', finishedBeforeMs: 1_000_000, limit: 10 },
          }),
          'purge',
        ).deleted;
      assert.equal(await purge(), 0);
      const waiterDone = { ...waiter, state: 'COMPLETED' as const, finishedAtMs: 200 };
      await store.commit({
        ...batchOf([{ job: waiterDone, isNew: false }]),
        steps: [{ jobId: 'job-2', index: 0, name: 'dtp.waitFor', result: '{}', atMs: 150 }],
      });
      assert.equal(await purge(), 2);
      assert.equal((await getJob(store, 'job-2')).job, null);
    });

    it('recovers the delayed job a waiting job waits for whatever the window', async () => {
      const store = await fresh();
      const target = jobRecord(1, { state: 'SCHEDULED', runAtMs: 10_000_000 });
      const other = jobRecord(2, { state: 'SCHEDULED', runAtMs: 10_000_000 });
      const waiter = jobRecord(3, { state: 'WAITING', attempts: 1 });
      await store.commit({
        ...batchOf([target, other, waiter].map((job) => ({ job, isNew: true }))),
        stepWaits: [{ jobId: 'job-3', targetId: 'job-1' }],
        steps: [{ jobId: 'job-3', index: 0, name: 'dtp.waitFor', result: null, atMs: 5 }],
      });
      const recovered = await store.recover({ untilMs: 1_000, limit: 10 });
      assert.deepEqual(
        recovered.activeJobs.map((j) => j.jobId),
        ['job-1', 'job-3'],
      );
      assert.equal(recovered.scheduledWindow?.farCount, 1);
    });

    it('recovers a sleeping job (SCHEDULED with steps) with its attempts and steps whatever the window', async () => {
      const store = await fresh();
      const sleeping = jobRecord(1, { state: 'SCHEDULED', runAtMs: 10_000_000, attempts: 1 });
      const far = jobRecord(2, { state: 'SCHEDULED', runAtMs: 10_000_000 });
      await store.commit({
        ...batchOf(
          [sleeping, far].map((job) => ({ job, isNew: true })),
          [attempt('job-1', 1, { outcome: 'SUSPENDED', error: null })],
        ),
        steps: [{ jobId: 'job-1', index: 0, name: 'dtp.sleep', result: '{}', atMs: 5 }],
      });
      const recovered = await store.recover({ untilMs: 1_000, limit: 10 });
      assert.deepEqual(
        recovered.activeJobs.map((j) => j.jobId),
        ['job-1'],
      );
      assert.equal(recovered.scheduledWindow?.farCount, 1);
      assert.deepEqual(
        recovered.activeAttempts.map((a) => [a.jobId, a.outcome]),
        [['job-1', 'SUSPENDED']],
      );
      assert.equal(recovered.activeSteps?.length, 1);
    });

    it('keeps child links: listed with the parent, recovered for active parents, one per key', async () => {
      const store = await fresh();
      const parent = jobRecord(1, { state: 'RUNNING', workerId: 'w', attemptId: 'a' });
      const done = terminal(2, 'COMPLETED', 100);
      const kids = [
        jobRecord(3, { parentJobId: 'job-1', childKey: 'k:a' }),
        jobRecord(4, { parentJobId: 'job-1', childKey: 'o:0' }),
        terminal(5, 'COMPLETED', 100, { parentJobId: 'job-2', childKey: 'o:0' }),
      ];
      await store.commit(batchOf([parent, done, ...kids].map((job) => ({ job, isNew: true }))));
      assert.deepEqual((await getJob(store, 'job-3')).job, kids[0]);
      const parentRead = expectOp(
        await store.read({ op: 'job', jobId: 'job-1', withAttempts: false }),
        'job',
      );
      assert.deepEqual(parentRead.children, ['job-3', 'job-4']);
      const leaf = expectOp(
        await store.read({ op: 'job', jobId: 'job-4', withAttempts: false }),
        'job',
      );
      assert.equal(leaf.children, undefined, 'a job without children lists none');
      const recovered = await store.recover();
      assert.deepEqual(
        (recovered.childLinks ?? []).map((l) => [l.parentJobId, l.childKey, l.jobId]).sort(),
        [
          ['job-1', 'k:a', 'job-3'],
          ['job-1', 'o:0', 'job-4'],
        ],
      );
      const links = expectOp(
        await store.read({ op: 'children', parentJobIds: ['job-2'] }),
        'children',
      );
      assert.deepEqual(links.links, [{ parentJobId: 'job-2', childKey: 'o:0', jobId: 'job-5' }]);
      await assert.rejects(
        store.commit(
          batchOf([{ job: jobRecord(6, { parentJobId: 'job-1', childKey: 'k:a' }), isNew: true }]),
        ),
        StoreError,
      );
      assert.equal((await getJob(store, 'job-6')).job, null, 'the second child of a key');
    });

    it('rejects a batch with StoreError and applies none of it when a key repeats', async () => {
      const store = await fresh();
      await store.commit(batchOf([{ job: jobRecord(1, { idempotencyKey: 'k' }), isNew: true }]));
      await assert.rejects(
        store.commit(
          batchOf([
            { job: jobRecord(2), isNew: true },
            { job: jobRecord(3, { idempotencyKey: 'k' }), isNew: true },
          ]),
        ),
        StoreError,
      );
      assert.equal((await getJob(store, 'job-2')).job, null, 'nothing of the failed batch');
    });

    describeSignalContract(fresh);

    if (backend.reopen !== undefined) {
      const reopen = backend.reopen.bind(backend);
      it('keeps every committed batch when closed and opened again', async () => {
        const store = await fresh();
        const batches = Array.from({ length: 20 }, (_, i) =>
          batchOf(
            [{ job: jobRecord(i + 1, { idempotencyKey: `k${i}` }), isNew: true }],
            [attempt(`job-${i + 1}`, 1)],
          ),
        );
        await Promise.all(batches.map((batch) => store.commit(batch)));
        await store.close();
        const again = await reopen(store);
        open.push(again);
        const recovered = await again.recover();
        assert.equal(recovered.activeJobs.length, 20);
        assert.equal(recovered.activeAttempts.length, 20);
        assert.equal(recovered.maxSeq, 20);
      });

      it('keeps signals, events and triggers when closed and opened again', async () => {
        const store = await fresh();
        await checkSignalsKept(store, () => reopen(store));
      });
    }
  });
}

/** A complete schedule row for the contract. */
export function scheduleRecord(name: string): ScheduleRecord {
  return {
    name,
    taskType: 'SHA256',
    cron: '0 2 * * *',
    everyMs: null,
    timezone: 'Europe/Berlin',
    payloadJson: '{"text":"report"}',
    maxAttempts: 2,
    priority: 'HIGH',
    timeoutMs: 5_000,
    overlap: 'skip',
    catchUp: 'none',
    paused: false,
    nextRunAtMs: 100_000,
    lastRunAtMs: null,
    lastJobId: null,
    createdAtMs: 1_000,
    updatedAtMs: 1_000,
    queue: 'reports',
  };
}
