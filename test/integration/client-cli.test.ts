/**
 * The client CLI against a real coordinator and a worker that loaded the
 * fixture task module: custom task types through `submit <TYPE> --payload`,
 * the warning when no live worker serves a type, `workers` with task types,
 * and the coordinator's refusal of a bad name.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCliOn, type CliRun } from '../helpers/cli-runner.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import type { Worker } from '../../src/worker/worker.js';
import {
  startCoordinator,
  startTaskWorker,
  tempDir,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';

let tc: TestCoordinator;

async function cli(...argv: string[]): Promise<CliRun> {
  return runCliOn(tc.coordinator.clientPort, argv, () => Promise.resolve('{"values": [4, 5]}'));
}

describe('client CLI against a coordinator with users own tasks', () => {
  let worker: Worker;
  before(async () => {
    tc = await startCoordinator();
    worker = await startTaskWorker(tc.coordinator.workerPort, 'cli-w');
    await tc.waitForEvent('worker.registered', (e) => e.workerId === 'cli-w');
  });
  after(async () => {
    await worker.close();
    await tc.close();
  });

  it('submits a custom type with a JSON payload and waits for its result', async () => {
    const quiet = await cli('submit', 'reverse', '--payload', '{"text":"hello"}', '--quiet');
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.match(quiet.stdout, /^[^\s]+\n$/, 'only the job id');
    assert.equal(quiet.stderr, '', 'no warning: a live worker serves reverse');
    const waited = await cli('wait', quiet.stdout.trim(), '--json', '--exit-status');
    assert.equal(waited.code, 0);
    const job = JSON.parse(waited.stdout) as JobSnapshot;
    assert.deepEqual([job.state, job.taskType, job.result], ['COMPLETED', 'reverse', 'olleh']);

    const fromStdin = await cli('submit', 'stats.sum', '--payload-file', '-', '--json');
    const { jobId } = JSON.parse(fromStdin.stdout) as { jobId: string };
    const sum = JSON.parse((await cli('wait', jobId, '--json')).stdout) as JobSnapshot;
    assert.deepEqual(JSON.parse(sum.result ?? 'null'), { n: 2, sum: 9, attempt: 1 });
  });

  it('warns, but submits, when no live worker serves the task type', async () => {
    const human = await cli('submit', 'nobody.serves', '--payload', '{}');
    assert.equal(human.code, 0);
    assert.match(human.stdout, /^Job submitted\n {2}ID: {7}\S+\n/);
    assert.match(human.stderr, /Warning: no live worker serves task type nobody\.serves/);
    const json = await cli('submit', 'nobody.serves', '--payload', '{}', '--json');
    const doc = JSON.parse(json.stdout) as { warning?: string; job: JobSnapshot };
    assert.match(doc.warning ?? '', /no live worker serves task type nobody\.serves/);
    assert.equal(doc.job.state, 'QUEUED');
  });

  it('exits 1 with the coordinator message for an invalid task type name', async () => {
    const run = await cli('submit', 'Sleep', '--payload', '{}', '--json');
    assert.equal(run.code, 1);
    assert.match(run.stdout, /Invalid task type/);
  });

  it('shows the task types of each worker', async () => {
    const human = await cli('workers');
    assert.match(human.stdout, /TASK TYPES/);
    assert.match(human.stdout, /cli-w .*built-ins, .*reverse/);
  });

  it('exits 4 under --exit-status for a job that failed', async () => {
    const submitted = await cli('submit', 'refuse', '--payload', '{}', '--quiet');
    const waited = await cli('wait', submitted.stdout.trim(), '--exit-status');
    assert.equal(waited.code, 4);
    assert.match(waited.stdout, /State: {4}FAILED/);
    assert.match(waited.stdout, /cannot ever work/);
  });
});

describe('client CLI against a coordinator with client tokens', () => {
  const temp = tempDir('dtp-cli-tokens-');
  const tokenFile = join(temp.dir, 'client.tokens');
  const wrongFile = join(temp.dir, 'wrong.token');
  let worker: Worker;
  before(async () => {
    writeFileSync(tokenFile, 'cli-token-0123456789abcdef\n');
    writeFileSync(wrongFile, 'not-the-token\n');
    tc = await startCoordinator({ security: { clientTokenFile: tokenFile } });
    worker = await startTaskWorker(tc.coordinator.workerPort, 'cli-tok-w');
    await tc.waitForEvent('worker.registered', (e) => e.workerId === 'cli-tok-w');
  });
  after(async () => {
    await worker.close();
    await tc.close();
    temp.remove();
  });

  it('runs bench on connections that authenticate with --token-file', async () => {
    const args = ['bench', '--jobs', '6', '--concurrency', '2', '--warmup', '0', '--json'];
    const ok = await cli(...args, '--token-file', tokenFile);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    const report = JSON.parse(ok.stdout) as { completed: number; errors: number };
    assert.deepEqual([report.completed, report.errors], [6, 0]);
    const refused = await cli(...args, '--token-file', wrongFile);
    assert.equal(refused.code, 1, 'a refused token fails the bench instead of counting errors');
    assert.match(refused.stdout, /UNAUTHENTICATED/);
  });
});
