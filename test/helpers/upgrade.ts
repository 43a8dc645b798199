/**
 * What the upgrade tests of both stores check after a database written by an
 * older schema is opened by this code: the old job comes back with every
 * later column at its default, and a job using every later column (and
 * every later table) is written and read back whole. And for the schema
 * before the newest, a database using all it had: every row comes back.
 */
import assert from 'node:assert/strict';
import type {
  GroupHoldRecord,
  JobRecord,
  QueueSettingsRecord,
  Store,
} from '../../src/store/store.js';
import { batchOf, jobRecord } from './job-record.js';
import { eventRecord, signalRecord, triggerRecord } from './store-contract-signals.js';

/** The job an old schema holds: only the first schema's columns are set. */
export const OLD_JOB = { seq: 1, jobId: 'old-1', createdAtMs: 1_000 } as const;

/** A job with every column a later migration added. */
export function newJob(): JobRecord {
  return jobRecord(2, {
    jobId: 'new-2',
    state: 'WAITING',
    dependsOn: [OLD_JOB.jobId],
    onParentFailure: 'run',
    progress: { fraction: 0.5, message: 'half', atMillis: 1_500 },
    runAtMs: 9_000,
    scheduleName: 'nightly',
    queue: 'reports',
    groupKey: 'tenant-1',
    resultFormat: null,
    parentJobId: OLD_JOB.jobId,
    childKey: 'k:report',
    dedupKey: 'report-of-day',
    dedupMode: 'throttle',
    dedupUntilMs: 61_000,
    expiresAtMs: 99_000,
    rateLimitedInARow: 2,
  });
}

/** Queue settings with every column a later migration added. */
const NEW_QUEUE: QueueSettingsRecord = {
  name: 'reports',
  paused: false,
  concurrency: 2,
  rateMax: null,
  rateIntervalMs: null,
  groupConcurrency: null,
  groupRateMax: null,
  groupRateIntervalMs: null,
  updatedAtMs: 1_700,
  heldUntilMs: 90_000,
};

/** A group hold (the holds table came with a later migration). */
const NEW_HOLD: GroupHoldRecord = { queue: 'reports', groupKey: 'tenant-1', untilMs: 80_000 };

/** A recorded step of {@link newJob} (the steps table came with a later migration). */
const NEW_STEP = { jobId: 'new-2', index: 0, name: 'dtp.waitFor', result: null, atMs: 1_600 };

/** A signal {@link newJob} holds, an event and a trigger (tables of schema 12). */
const NEW_SIGNAL = signalRecord('new-2', 1);
const NEW_EVENT = eventRecord('evt-1', { jobIds: ['new-2'] });
const NEW_TRIGGER = triggerRecord('on-paid');

/** Checks the old job as recovered, then writes and recovers {@link newJob}. */
export async function checkUpgraded(open: () => Promise<Store>): Promise<void> {
  const store = await open();
  try {
    const before = await store.recover();
    assert.equal(before.activeJobs.length, 1);
    const old = before.activeJobs[0] as JobRecord;
    assert.equal(old.jobId, OLD_JOB.jobId);
    assert.equal(old.queue, 'default');
    assert.equal(old.groupKey, null);
    assert.equal(old.dependsOn, null);
    assert.equal(old.runAtMs, null);
    assert.equal(old.progress ?? null, null);
    assert.equal(old.parentJobId ?? null, null);
    assert.equal(old.childKey ?? null, null);
    assert.equal(old.dedupKey ?? null, null);
    assert.equal(old.dedupMode ?? null, null);
    assert.equal(old.dedupUntilMs ?? null, null);
    assert.equal(old.expiresAtMs ?? null, null);
    assert.equal(old.rateLimitedInARow ?? 0, 0);
    await store.commit({
      ...batchOf([{ job: newJob(), isNew: true }]),
      steps: [NEW_STEP],
      stepWaits: [{ jobId: 'new-2', targetId: OLD_JOB.jobId }],
      queues: [NEW_QUEUE],
      groupHolds: [NEW_HOLD],
      signals: [NEW_SIGNAL],
      events: [NEW_EVENT],
      triggers: [NEW_TRIGGER],
    });
  } finally {
    await store.close();
  }
  const again = await open();
  try {
    const after = await again.recover();
    const found = after.activeJobs.find((job) => job.jobId === 'new-2');
    assert.deepEqual(found, newJob());
    assert.deepEqual(after.activeSteps, [NEW_STEP]);
    assert.deepEqual(after.queueSettings, [NEW_QUEUE]);
    assert.deepEqual(after.groupHolds, [NEW_HOLD]);
    assert.deepEqual(after.activeSignals, [NEW_SIGNAL]);
    assert.deepEqual(after.triggers, [NEW_TRIGGER]);
    assert.deepEqual(await again.read({ op: 'event', eventId: 'evt-1' }), {
      op: 'event',
      event: NEW_EVENT,
    });
    // The old job is active: its child comes back as one of its links.
    assert.deepEqual(after.childLinks, [
      { parentJobId: OLD_JOB.jobId, childKey: 'k:report', jobId: 'new-2' },
    ]);
  } finally {
    await again.close();
  }
}

/**
 * What a database of schema 11 holds, written by each store's test in its
 * own SQL before this code opens it: the old job (every column of schema
 * 11 set) with an attempt, {@link newJob} waiting for it with a step, the
 * queue settings and a group hold.
 */
export const SCHEMA_11 = {
  oldJob: jobRecord(1, {
    jobId: OLD_JOB.jobId,
    state: 'RUNNING',
    attempts: 1,
    workerId: 'w-1',
    attemptId: 'a-1',
    deadlineAtMs: 70_000,
    traceContext: {
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      tracestate: 'vendor=1',
    },
    dedupKey: 'old-key',
    dedupMode: 'active',
    expiresAtMs: 50_000,
  }),
  attempt: {
    jobId: OLD_JOB.jobId,
    attemptNumber: 1,
    attemptId: 'a-1',
    workerId: 'w-1',
    startedAtMs: 10_000,
    finishedAtMs: null,
    outcome: 'RUNNING' as const,
    error: null,
  },
  newJob: newJob(),
  step: NEW_STEP,
  queue: NEW_QUEUE,
  hold: NEW_HOLD,
} as const;

/** Checks every row of {@link SCHEMA_11} came back, then the new tables are written and read. */
export async function checkUpgradedFrom11(open: () => Promise<Store>): Promise<void> {
  const store = await open();
  try {
    const recovered = await store.recover();
    assert.deepEqual(recovered.activeJobs, [SCHEMA_11.oldJob, SCHEMA_11.newJob]);
    assert.deepEqual(recovered.activeAttempts, [SCHEMA_11.attempt]);
    assert.deepEqual(recovered.activeSteps, [SCHEMA_11.step]);
    assert.deepEqual(recovered.queueSettings, [SCHEMA_11.queue]);
    assert.deepEqual(recovered.groupHolds, [SCHEMA_11.hold]);
    assert.deepEqual(recovered.throttledJobs, [], 'a window that is not a throttle one');
    assert.equal(recovered.maxSeq, 2);
    assert.deepEqual(recovered.activeSignals, []);
    assert.deepEqual(recovered.triggers, []);
    await store.commit({
      ...batchOf([]),
      signals: [NEW_SIGNAL],
      events: [NEW_EVENT],
      triggers: [NEW_TRIGGER],
    });
    const after = await store.recover();
    assert.deepEqual(after.activeSignals, [NEW_SIGNAL]);
    assert.deepEqual(after.triggers, [NEW_TRIGGER]);
  } finally {
    await store.close();
  }
}
