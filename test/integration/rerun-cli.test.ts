/**
 * `client.sh rerun` against an in-process coordinator and worker: the
 * `--json` document, the human line, the filters, and bad flags refused with
 * exit 2 naming the flag before any connection is made.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runCliOn, type CliRun } from '../helpers/cli-runner.js';
import { DtpClient } from '../../src/client/index.js';
import type { Worker } from '../../src/worker/worker.js';
import {
  startCoordinator,
  startRealWorker,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';

let tc: TestCoordinator;
let worker: Worker;
let client: DtpClient;

async function cli(port: number, ...argv: string[]): Promise<CliRun> {
  return runCliOn(port, argv);
}

const rerun = (...argv: string[]) => cli(tc.coordinator.clientPort, 'rerun', ...argv);

/** A job of `queue` that failed its only attempt (it would succeed on its second). */
async function failed(queue: string): Promise<string> {
  const handle = await client.submit('FAIL', { failUntilAttempt: 2 }, { queue, maxAttempts: 1 });
  assert.equal((await handle.wait()).state, 'FAILED');
  return handle.jobId;
}

describe('client CLI: rerun', () => {
  before(async () => {
    tc = await startCoordinator();
    worker = startRealWorker(tc.coordinator.workerPort, 'w1', 2);
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  after(async () => {
    await client.close();
    await worker.close();
    await tc.close();
  });

  it('re-runs the FAILED jobs of a queue and prints how many', async () => {
    const a = await failed('imports');
    const b = await failed('imports');
    await failed('other');
    const none = await rerun(
      '--queue',
      'imports',
      '--since',
      String(Date.now() + 60_000),
      '--json',
    );
    assert.equal(none.code, 0, none.stderr);
    assert.deepEqual(JSON.parse(none.stdout), {
      rerun: 0,
      jobIds: [],
      more: false,
      queue: 'imports',
    });
    const out = await rerun('--queue', 'imports', '--state', 'FAILED', '--since', '1h', '--json');
    assert.equal(out.code, 0, out.stderr);
    assert.deepEqual(JSON.parse(out.stdout), {
      rerun: 2,
      jobIds: [b, a],
      more: false,
      queue: 'imports',
    });
    // Each succeeds on its second attempt, its first kept.
    for (const id of [a, b]) {
      const job = await client.wait(id, 20_000);
      assert.equal(job.state, 'COMPLETED');
      assert.equal(job.attempts, 2);
    }
    const human = await rerun('--queue', 'other', '--limit', '1');
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^Re-ran 1 FAILED job of queue other\n/);
  });

  it('refuses bad flags with exit 2 naming the flag, before connecting', async () => {
    // Nothing listens on this port: exit 2, not 1, means nothing was sent.
    const port = 1;
    const cases: [string[], RegExp][] = [
      [['--state', 'FAILED'], /--queue/],
      [['--queue', '9bad'], /--queue/],
      [['--queue', 'q', '--state', 'COMPLETED'], /--state/],
      [['--queue', 'q', '--since', 'yesterday'], /--since/],
      [['--queue', 'q', '--limit', '0'], /--limit/],
      [['--queue', 'q', '--limit', '10001'], /--limit/],
      [['--queue', 'q', '--max-attempts', '0'], /--max-attempts/],
      [['--queue', 'q', '--type', ''], /--type/],
    ];
    for (const [argv, flag] of cases) {
      const out = await cli(port, 'rerun', ...argv, '--json');
      assert.equal(out.code, 2, `${argv.join(' ')}: ${out.stdout}${out.stderr}`);
      const error = (JSON.parse(out.stdout) as { error: { code: string; message: string } }).error;
      assert.equal(error.code, 'USAGE');
      assert.match(error.message, flag);
    }
  });
});
