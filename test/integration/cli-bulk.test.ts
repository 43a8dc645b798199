/**
 * `client.sh submit-many` against a real coordinator with a small
 * `--max-active-jobs`: every field a job of SUBMIT_JOBS takes, and a file
 * larger than the room left, which stops at the refused batch, says what
 * was created and what not (stdout, `--json`) and goes on with
 * `--from-line` once there is room.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { runCliOn, type CliRun } from '../helpers/cli-runner.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

/** Room for one batch of 1,000 and half of the next. */
const MAX_ACTIVE = 1_500;

describe('client.sh submit-many', () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  before(async () => {
    tc = await startCoordinator({ maxActiveJobs: MAX_ACTIVE });
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  after(async () => {
    await client.close();
    await tc.close();
  });

  const run = (text: string, ...argv: string[]): Promise<CliRun> =>
    runCliOn(tc.coordinator.clientPort, ['submit-many', '--file', '-', ...argv], () =>
      Promise.resolve(text),
    );

  it('takes queue, groupKey and runAtMillis, as submit-flow jobs do', async () => {
    const runAt = Date.now() + 3_600_000;
    const line = {
      taskType: 'SHA256',
      payload: { text: 'a' },
      queue: 'reports',
      groupKey: 'tenant-7',
      runAtMillis: runAt,
      maxAttempts: 2,
      priority: 'LOW',
      timeoutMillis: 5_000,
      idempotencyKey: 'bulk-fields',
    };
    const out = await run(`${JSON.stringify(line)}\n`, '--json');
    assert.equal(out.code, 0, out.stdout + out.stderr);
    const [jobId] = (JSON.parse(out.stdout) as { jobIds: string[] }).jobIds;
    const job = await client.status(jobId as string);
    assert.equal(job.queue, 'reports');
    assert.equal(job.groupKey, 'tenant-7');
    assert.equal(job.runAtMillis, runAt);
    assert.equal(job.state, 'SCHEDULED');
    assert.deepEqual([job.maxAttempts, job.priority, job.timeoutMillis], [2, 'LOW', 5_000]);
    await client.cancel(jobId as string);
  });

  it('refuses a line with parents or a bad queue before sending anything (exit 2)', async () => {
    const parents = await run('{"taskType":"SHA256","payload":{},"dependsOn":["x"]}\n');
    assert.equal(parents.code, 2);
    assert.match(parents.stderr, /line 1: "dependsOn" is for jobs with parents: .*submit-flow/);
    const queue = await run(
      '{"taskType":"SHA256","payload":{}}\n{"taskType":"SHA256","payload":{},"queue":"9x"}\n',
    );
    assert.equal(queue.code, 2);
    assert.match(queue.stderr, /line 2: queue name must match/);
    const far = await run(
      `${JSON.stringify({ taskType: 'SHA256', payload: {}, runAtMillis: Date.now() + 400 * 86_400_000 })}\n`,
    );
    assert.equal(far.code, 2);
    assert.match(far.stderr, /line 1: runAtMillis .*366 days/);
    assert.equal(tc.coordinator.inspect().activeCount, 0);
  });

  it('stops at the refused batch, reports what was and was not created, and resumes with --from-line', async () => {
    const lines = Array.from({ length: 2_500 }, (_, i) =>
      JSON.stringify({ taskType: 'SHA256', payload: { text: `line ${i + 1}` } }),
    );
    const text = `${lines.join('\n')}\n`;
    const first = await run(text, '--json');
    assert.equal(first.code, 3, first.stderr);
    assert.equal(first.stderr, '');
    const doc = JSON.parse(first.stdout) as {
      error: { code: string; message: string; limit: number };
      jobIds: string[];
      remaining: { fromLine: number; toLine: number; jobs: number };
      resumeFromLine: number;
    };
    assert.equal(doc.error.code, 'SUBMIT_REJECTED');
    assert.equal(doc.error.limit, MAX_ACTIVE);
    assert.match(doc.error.message, /the batch of lines 1001\.\.2000 was refused/);
    assert.equal(doc.jobIds.length, 1_000);
    assert.deepEqual(doc.remaining, { fromLine: 1_001, toLine: 2_500, jobs: 1_500 });
    assert.equal(doc.resumeFromLine, 1_001);
    assert.equal(tc.coordinator.inspect().activeCount, 1_000);
    const lastCreated = await client.status(doc.jobIds[999] as string);
    assert.equal(lastCreated.taskType, 'SHA256');

    // Plain output: the ids created on stdout, the account and the way on on stderr.
    const plain = await run(text);
    assert.equal(plain.code, 3);
    assert.equal(plain.stdout, '');
    assert.match(plain.stderr, /^The batch of lines 1\.\.1000 was refused:\n/);
    assert.match(plain.stderr, /No job was created\.\nNot created: lines 1\.\.2500 \(2500 jobs\)/);
    assert.match(plain.stderr, /run the same command with --from-line 1 once the coordinator/);

    // Room again: the jobs of the first run end (cancelled here, as a worker would finish them).
    for (let i = 0; i < doc.jobIds.length; i += 100) {
      await Promise.all(doc.jobIds.slice(i, i + 100).map((id) => client.cancel(id)));
    }
    assert.equal(tc.coordinator.inspect().activeCount, 0);
    const rest = await run(text, '--from-line', String(doc.resumeFromLine));
    assert.equal(rest.code, 0, rest.stderr);
    const ids = rest.stdout.trim().split('\n');
    assert.equal(ids.length, 1_500);
    assert.equal(new Set([...ids, ...doc.jobIds]).size, 2_500);
    const job = await client.status(ids[1_499] as string);
    assert.equal(job.state, 'QUEUED');
    assert.equal(tc.coordinator.inspect().activeCount, 1_500);
  });
});
