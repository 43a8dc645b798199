/**
 * What the upgrade tests of both stores check after a database written by an
 * older schema is opened by this code: the old job comes back with every
 * later column at its default, and a job using every later column is
 * written and read back whole.
 */
import assert from 'node:assert/strict';
import type { JobRecord, Store } from '../../src/store/store.js';
import { jobRecord } from './job-record.js';
import { batchOf } from './store-contract.js';

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
  });
}

/** A recorded step of {@link newJob} (the steps table came with a later migration). */
const NEW_STEP = { jobId: 'new-2', index: 0, name: 'dtp.waitFor', result: null, atMs: 1_600 };

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
    await store.commit({
      ...batchOf([{ job: newJob(), isNew: true }]),
      steps: [NEW_STEP],
      stepWaits: [{ jobId: 'new-2', targetId: OLD_JOB.jobId }],
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
    // The old job is active: its child comes back as one of its links.
    assert.deepEqual(after.childLinks, [
      { parentJobId: OLD_JOB.jobId, childKey: 'k:report', jobId: 'new-2' },
    ]);
  } finally {
    await again.close();
  }
}
