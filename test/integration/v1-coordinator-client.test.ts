/**
 * Every client command, and the client library, against a strict v1
 * coordinator: nothing that worked with v1 may break because the client
 * knows extensions.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { DtpClient, JobFailedError } from '../../src/client/index.js';
import { runClientCli } from '../../src/cli/client-cli.js';
import { MAX_FRAME_BYTES } from '../../src/protocol/framing.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import { StrictV1Coordinator, V1Worker } from '../helpers/strict-v1.js';
import type { RawMessage } from '../helpers/v1-wire.js';

/** Runs built-in tasks the way a worker would, quickly (sleep is not slept). */
function resultOf(assign: RawMessage): { ok: boolean; text: string } {
  const payload = assign.payload as Record<string, unknown>;
  const attempt = Number(assign.attemptNumber);
  switch (assign.taskType) {
    case 'SHA256':
      return { ok: true, text: createHash('sha256').update(String(payload.text)).digest('hex') };
    case 'WORD_COUNT':
      return { ok: true, text: String(String(payload.text).split(/\s+/).filter(Boolean).length) };
    case 'FAIL':
      return attempt < Number(payload.failUntilAttempt)
        ? { ok: false, text: `deliberate failure on attempt ${attempt}` }
        : { ok: true, text: `succeeded on attempt ${attempt}` };
    case 'SLEEP':
      return Number(payload.durationMillis) >= 60_000
        ? { ok: false, text: 'never ends in a test' }
        : { ok: true, text: `slept ${String(payload.durationMillis)} ms` };
    default:
      return { ok: true, text: 'ok' };
  }
}

/** Answers every assignment until the worker closes; long sleeps are held forever. */
async function serve(worker: V1Worker): Promise<void> {
  let closed = false;
  void worker.closed.then(() => (closed = true));
  while (!closed) {
    let assign: RawMessage;
    try {
      assign = await worker.assignments.next(100);
    } catch {
      continue; // nothing within 100 ms: look whether the worker closed
    }
    const payload = assign.payload as Record<string, unknown>;
    if (assign.taskType === 'SLEEP' && Number(payload.durationMillis) >= 60_000) continue;
    const { ok, text } = resultOf(assign);
    if (ok) worker.succeed(assign, text);
    else worker.fail(assign, text);
  }
}

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

let v1: StrictV1Coordinator;
let worker: V1Worker;

async function cli(...argv: string[]): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await runClientCli(
    [...argv, '--host', '127.0.0.1', '--port', String(v1.clientPort)],
    {
      stdout: (text) => (stdout += text),
      stderr: (text) => (stderr += text),
      env: {},
      color: false,
      interactive: false,
    },
  );
  return { code, stdout, stderr };
}

async function cliJson<T = Record<string, unknown>>(...argv: string[]): Promise<T> {
  const run = await cli(...argv, '--json');
  assert.equal(run.code, 0, `${argv.join(' ')}: ${run.stdout}${run.stderr}`);
  return JSON.parse(run.stdout) as T;
}

async function submitted(...argv: string[]): Promise<string> {
  const doc = await cliJson<{ jobId: string; job: JobSnapshot; warning?: string }>(
    'submit',
    ...argv,
  );
  assert.equal(doc.job.jobId, doc.jobId);
  assert.equal(doc.warning, undefined, 'a v1 coordinator does not say how many workers serve');
  return doc.jobId;
}

describe('client commands against a strict v1 coordinator', () => {
  before(async () => {
    v1 = await StrictV1Coordinator.start();
    worker = await V1Worker.register(v1.workerPort, 'v1-w1', 4);
    void serve(worker);
  });
  after(async () => {
    worker.close();
    await v1.close();
  });

  it('submits every task, waits for each, and never sends WAIT_JOB on a working connection', async () => {
    const cases: [string[], string, string][] = [
      [['sha256', '--text', 'abc'], 'SHA256', createHash('sha256').update('abc').digest('hex')],
      [['word-count', '--text', 'one  two\tthree'], 'WORD_COUNT', '3'],
      [['prime-count', '--limit', '100'], 'PRIME_COUNT', 'ok'],
      [['sleep', '--milliseconds', '5'], 'SLEEP', 'slept 5 ms'],
      [['fail', '--fail-until-attempt', '2'], 'FAIL', 'succeeded on attempt 2'],
      [['SHA256', '--payload', '{"text":"x"}', '--priority', 'high'], 'SHA256', 'x'],
    ];
    for (const [args, taskType, result] of cases) {
      const jobId = await submitted(...args);
      const job = await cliJson<JobSnapshot>('wait', jobId, '--timeout-millis', '10000');
      assert.equal(job.state, 'COMPLETED', JSON.stringify(job));
      assert.equal(job.taskType, taskType);
      if (taskType !== 'SHA256' || result !== 'x') assert.equal(job.result, result);
    }
    const waits = v1.seen.filter((s) => s.type === 'WAIT_JOB');
    assert.equal(waits.length, 1, 'one probe for the whole process');
    const otherFailures = v1.seen.filter((s) => s.undecodable !== null && s.type !== 'WAIT_JOB');
    assert.deepEqual(otherFailures, []);
  });

  it('shows status, waits with --exit-status, times out, cancels', async () => {
    const failing = await submitted('fail', '--fail-until-attempt', '9', '--max-attempts', '2');
    const human = await cli('wait', failing, '--exit-status');
    assert.equal(human.code, 4, human.stderr);
    assert.match(human.stderr, /does not understand WAIT_JOB .*polling/);
    assert.match(human.stdout, /State: {4}FAILED/);
    assert.match(human.stdout, /all 2 attempts used/);
    const status = await cliJson<JobSnapshot>('status', failing);
    assert.equal(status.state, 'FAILED');

    const stuck = await submitted('sleep', '--milliseconds', '600000');
    const timedOut = await cli('wait', stuck, '--timeout-millis', '100', '--json');
    assert.equal(timedOut.code, 1);
    assert.equal(
      (JSON.parse(timedOut.stdout) as { error: { code: string } }).error.code,
      'WAIT_TIMEOUT',
    );
    const cancel = await cliJson<{ cancelled: boolean; job: JobSnapshot }>('cancel', stuck);
    assert.equal(cancel.cancelled, true);
    assert.equal(cancel.job.state, 'CANCELLED');
    assert.equal((await cli('wait', stuck, '--exit-status')).code, 4);
    const unknown = await cli('status', 'no-such-job', '--json');
    assert.equal(unknown.code, 1);
    assert.match(unknown.stdout, /Unknown job/);
  });

  it('reports what the v1 coordinator says about a task type it cannot decode', async () => {
    const run = await cli('submit', 'resize', '--payload', '{"w":1}', '--json');
    assert.equal(run.code, 1);
    assert.match(run.stdout, /Malformed request: Undecodable message/);
  });

  it('lists workers', async () => {
    const doc = await cliJson<{ workers: { workerId: string }[] }>('workers');
    assert.deepEqual(
      doc.workers.map((w) => w.workerId),
      ['v1-w1'],
    );
    const human = await cli('workers');
    assert.match(human.stdout, /^WORKER ID +CAPACITY +ACTIVE +LAST HEARTBEAT\nv1-w1 /);
  });

  it('runs the bench (waits by polling)', async () => {
    const report = await cliJson<Record<string, number>>(
      'bench',
      '--jobs',
      '12',
      '--concurrency',
      '3',
      '--warmup',
      '2',
    );
    assert.deepEqual(
      [report.jobs, report.accepted, report.rejected, report.completed, report.failed],
      [12, 12, 0, 12, 0],
    );
  });
});

describe('listing a v1 coordinator of any size up to the frame limit', () => {
  let big: StrictV1Coordinator;
  let ids: string[];
  before(async () => {
    big = await StrictV1Coordinator.start();
    // About 307 bytes per snapshot: 3,300 jobs make a JOB_LIST of ~0.97 MiB.
    ids = big.seedCompleted(3_300);
  });
  after(() => big.close());

  it('gets every job in one page without a limit, and pages by itself with one', async () => {
    v1 = big;
    const all = await cliJson<{ jobs: JobSnapshot[]; nextCursor: string | null }>('list');
    assert.equal(all.jobs.length, ids.length);
    assert.deepEqual(
      all.jobs.map((j) => j.jobId),
      ids,
    );
    assert.equal(all.nextCursor, null);
    // The reply fit one frame; `--json` adds `queue` and `groupKey` to each job.
    const asSent = all.jobs.map(({ queue: _q, groupKey: _g, ...rest }) => rest);
    assert.ok(JSON.stringify(asSent).length < MAX_FRAME_BYTES);

    const page1 = await cliJson<{ jobs: JobSnapshot[]; nextCursor: string | null }>(
      'list',
      '--limit',
      '1000',
    );
    assert.deepEqual(
      page1.jobs.map((j) => j.jobId),
      ids.slice(0, 1000),
    );
    assert.ok(page1.nextCursor !== null);
    const page2 = await cliJson<{ jobs: JobSnapshot[]; nextCursor: string | null }>(
      'list',
      '--limit',
      '3000',
      '--cursor',
      page1.nextCursor,
    );
    assert.deepEqual(
      page2.jobs.map((j) => j.jobId),
      ids.slice(1000),
    );
    assert.equal(page2.nextCursor, null);
    const none = await cliJson<{ jobs: JobSnapshot[] }>('list', '--state', 'QUEUED');
    assert.deepEqual(none.jobs, []);
  });

  it('iterates every job through the library, page by page', async () => {
    const client = await DtpClient.connect({ host: '127.0.0.1', port: big.clientPort });
    try {
      const seen: string[] = [];
      for await (const job of client.list({ limit: 700 })) seen.push(job.jobId);
      assert.deepEqual(seen, ids);
      const completed: string[] = [];
      for await (const job of client.list({ state: 'COMPLETED' })) completed.push(job.jobId);
      assert.equal(completed.length, ids.length);
    } finally {
      await client.close();
    }
  });
});

describe('the client library against a strict v1 coordinator', () => {
  let lib: StrictV1Coordinator;
  let w: V1Worker;
  before(async () => {
    lib = await StrictV1Coordinator.start();
    w = await V1Worker.register(lib.workerPort, 'lib-w', 2);
    void serve(w);
  });
  after(async () => {
    w.close();
    await lib.close();
  });

  it('submits, awaits results and typed failures, and learns that WAIT_JOB is unknown', async () => {
    const told: boolean[] = [];
    const client = await DtpClient.connect({
      host: '127.0.0.1',
      port: lib.clientPort,
      onFeatures: (features) => told.push(features.waitJob),
    });
    try {
      const job = await client.submit('WORD_COUNT', { text: 'a b c d' });
      assert.equal(job.servingWorkers, null);
      assert.equal(job.snapshot.taskType, 'WORD_COUNT');
      assert.equal(await job.result({ timeoutMs: 10_000 }), '4');
      const failing = await client.submit('FAIL', { failUntilAttempt: 5 }, { maxAttempts: 1 });
      await assert.rejects(failing.result(), (err: unknown) => {
        assert.ok(err instanceof JobFailedError);
        assert.match(err.jobError ?? '', /deliberate failure on attempt 1/);
        assert.equal(err.job.state, 'FAILED');
        return true;
      });
      assert.deepEqual(told, [false]);
      assert.deepEqual(await client.features(), { waitJob: false });
    } finally {
      await client.close();
    }
  });
});
