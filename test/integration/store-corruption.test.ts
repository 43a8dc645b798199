/**
 * A database with a damaged page: the coordinator still starts (restart does
 * not read the whole file), finds the damage in the background and says so,
 * and a request that reads the damaged page gets an error while every other
 * request is served.
 */
import assert from 'node:assert/strict';
import { openSync, readFileSync, writeSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { JobRecord } from '../../src/store/store.js';
import { jobRecord } from '../helpers/job-record.js';
import { RawClient } from '../helpers/raw-peers.js';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';

const JOBS = 3_000;
const VICTIM = 1_500;

/** A database of completed jobs whose payloads are easy to find in the file. */
async function writeJobs(path: string): Promise<JobRecord[]> {
  const store = await SqliteStore.open({ path });
  const jobs = Array.from({ length: JOBS }, (_, i) =>
    jobRecord(i + 1, {
      state: 'COMPLETED',
      result: 'ok',
      resultFormat: 'text',
      payloadJson: JSON.stringify({ text: `payload-marker-${i + 1}-end` }),
      finishedAtMs: 5_000,
    }),
  );
  await store.commit({ batchId: 1, jobs: jobs.map((job) => ({ job, isNew: true })), attempts: [] });
  await store.close();
  return jobs;
}

/** Overwrites the page that holds a job's row with zeroes (its b-tree header becomes invalid). */
function damagePageOf(path: string, marker: string): void {
  const file = readFileSync(path);
  const pageSize = file.readUInt16BE(16) === 1 ? 65_536 : file.readUInt16BE(16);
  const offset = file.indexOf(Buffer.from(marker));
  assert.ok(offset > pageSize, `marker ${marker} not found past the first page`);
  const page = Math.floor(offset / pageSize);
  const fd = openSync(path, 'r+');
  writeSync(fd, Buffer.alloc(pageSize), 0, pageSize, page * pageSize);
  closeSync(fd);
}

describe('a damaged database', () => {
  const tmp = tempDir('dtp-corrupt-');
  let tc: TestCoordinator | null = null;
  let c: RawClient | null = null;
  after(async () => {
    await c?.close();
    await tc?.close();
    tmp.remove();
  });

  it('starts, reports the damage, and fails only the requests that read it', async () => {
    const path = join(tmp.dir, 'db.sqlite');
    const jobs = await writeJobs(path);
    damagePageOf(path, `payload-marker-${VICTIM}-end`);
    tc = await startCoordinator({ databasePath: path });
    const problems = await new Promise<readonly string[]>((resolve) =>
      tc?.coordinator.events.once('integrity', resolve),
    );
    assert.ok(problems.length > 0, 'the background check finds the damage');
    assert.deepEqual(tc.coordinator.integrityProblems, problems);
    c = await RawClient.connect(tc.coordinator.clientPort);
    const victim = jobs[VICTIM - 1] as JobRecord;
    const failed = await c.request({ type: 'GET_JOB_STATUS', jobId: victim.jobId });
    assert.ok(failed.type === 'ERROR', JSON.stringify(failed));
    assert.equal(failed.code, 'STORE_READ_FAILED');
    assert.equal(tc.coordinator.failure, null, 'a failed read does not stop the coordinator');
    const healthy = jobs[0] as JobRecord;
    const fine = await c.request({ type: 'GET_JOB_STATUS', jobId: healthy.jobId });
    assert.ok(fine.type === 'JOB_STATUS' && fine.job.state === 'COMPLETED');
    const submitted = await c.submit('SHA256', { text: 'still accepting work' });
    assert.ok(submitted.length > 0);
  });
});
