/**
 * `client.sh status --attempts` and `client.sh purge` against a real
 * coordinator (the CLI in-process, the real client library underneath), and
 * the library's `status(id, {attempts: true})` and `purge()`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import { runClientCli, type CliIo } from '../../src/cli/client-cli.js';
import type { AttemptSnapshot, JobSnapshot } from '../../src/protocol/messages.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

let tc: TestCoordinator;
let raw: RawClient;

before(async () => {
  tc = await startCoordinator();
  raw = await RawClient.connect(tc.coordinator.clientPort);
});

after(async () => {
  await raw.close();
  await tc.close();
});

async function cli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    env: {},
    color: false,
    interactive: false,
  };
  const code = await runClientCli([...argv, '--port', String(tc.coordinator.clientPort)], io);
  return { code, stdout, stderr };
}

/** A job whose first attempt's worker died and whose second attempt succeeded. */
async function twoAttemptJob(taskType: string): Promise<string> {
  const first = await ScriptedWorker.register(tc.coordinator.workerPort, `${taskType}-1`, 1, {
    taskTypes: [taskType],
  });
  const jobId = await raw.submit(taskType, { n: 1 }, { maxAttempts: 3 });
  await first.assignments.next();
  await first.close();
  const second = await ScriptedWorker.register(tc.coordinator.workerPort, `${taskType}-2`, 1, {
    taskTypes: [taskType],
  });
  second.succeed(await second.assignments.next(), 'fine');
  assert.equal((await raw.wait(jobId)).state, 'COMPLETED');
  await second.close();
  return jobId;
}

describe('client.sh status --attempts', () => {
  it('shows every attempt as a table, and in --json as the attempts array', async () => {
    const jobId = await twoAttemptJob('HISTORY_CLI');
    const human = await cli(['status', jobId, '--attempts']);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /State:\s+COMPLETED/);
    assert.match(human.stdout, /Attempts:\n {2}# +WORKER +STARTED +DURATION +OUTCOME +ERROR\n/);
    assert.match(human.stdout, /\n {2}1 +HISTORY_CLI-1 +\S+Z +\S+ (ms|s) +WORKER_LOST +/);
    assert.match(human.stdout, /\n {2}2 +HISTORY_CLI-2 +\S+Z +\S+ (ms|s) +SUCCEEDED +-\n/);

    const json = await cli(['status', jobId, '--attempts', '--json']);
    assert.equal(json.code, 0);
    const doc = JSON.parse(json.stdout) as Omit<JobSnapshot, 'attempts'> & {
      attempts: AttemptSnapshot[];
      attemptCount: number;
    };
    assert.equal(doc.jobId, jobId);
    assert.equal(doc.attemptCount, 2);
    assert.deepEqual(
      doc.attempts.map((a) => [a.attemptNumber, a.workerId, a.outcome]),
      [
        [1, 'HISTORY_CLI-1', 'WORKER_LOST'],
        [2, 'HISTORY_CLI-2', 'SUCCEEDED'],
      ],
    );
    assert.ok(doc.attempts.every((a) => typeof a.finishedAtMillis === 'number'));

    const plain = JSON.parse((await cli(['status', jobId, '--json'])).stdout) as JobSnapshot;
    assert.equal(plain.attempts, 2, 'without --attempts the snapshot is unchanged');
  });

  it('is available in the library', async () => {
    const jobId = await twoAttemptJob('HISTORY_LIB');
    const client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    try {
      const { job, attempts } = await client.status(jobId, { attempts: true });
      assert.equal(job.state, 'COMPLETED');
      assert.deepEqual(
        attempts?.map((a) => a.outcome),
        ['WORKER_LOST', 'SUCCEEDED'],
      );
      assert.equal((await client.status(jobId)).attempts, 2);
    } finally {
      await client.close();
    }
  });
});

describe('client.sh purge', () => {
  it('deletes terminal jobs older than a duration and forgets them', async () => {
    const jobId = await twoAttemptJob('PURGE_CLI');
    const kept = await cli(['purge', '--state', 'completed', '--older-than', '1h', '--json']);
    assert.equal(kept.code, 0, kept.stderr);
    assert.deepEqual(JSON.parse(kept.stdout), {
      deleted: 0,
      state: 'COMPLETED',
      olderThanMillis: 3_600_000,
    });
    const purged = await cli(['purge', '--state', 'COMPLETED', '--older-than', '0ms']);
    assert.equal(purged.code, 0, purged.stderr);
    assert.match(
      purged.stdout,
      /^Purged [1-9][0-9]* COMPLETED jobs? finished more than 0ms ago\n$/,
    );
    const gone = await cli(['status', jobId]);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /UNKNOWN_JOB/);
  });

  it('refuses non-terminal states and malformed durations with exit 2', async () => {
    for (const argv of [
      ['purge', '--state', 'RUNNING', '--older-than', '1h'],
      ['purge', '--state', 'QUEUED', '--older-than', '1h'],
      ['purge', '--state', 'FAILED', '--older-than', '7'],
      ['purge', '--state', 'FAILED', '--older-than', 'seven days'],
      ['purge', '--state', 'FAILED'],
      ['purge', '--older-than', '1d'],
    ]) {
      const r = await cli(argv);
      assert.equal(r.code, 2, `${argv.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /Usage error/);
    }
    const library = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    try {
      await assert.rejects(library.purge('RUNNING' as never, 0), /only terminal jobs/);
    } finally {
      await library.close();
    }
  });
});
