import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  RemoteError,
  SubmitRejectedError,
  TransportError,
  WaitTimeoutError,
} from '../../src/client/errors.js';
import { UsageError } from '../../src/cli/flags.js';
import {
  EXIT_CODES,
  errorDocument,
  exitCodeFor,
  formatCancel,
  formatErrorText,
  formatJobBlock,
  formatJobTable,
  formatWorkerTable,
  labelLine,
  toJsonLine,
} from '../../src/cli/output.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';

const SHA_ABC = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';

function job(overrides: Partial<JobSnapshot> = {}): JobSnapshot {
  return {
    jobId: 'job-1',
    taskType: 'SHA256',
    state: 'QUEUED',
    attempts: 0,
    maxAttempts: 3,
    workerId: null,
    result: null,
    error: null,
    createdAtMillis: 1_700_000_000_000,
    updatedAtMillis: 1_700_000_000_000,
    priority: 'NORMAL',
    ...overrides,
  };
}

/** Column (1-based) where the value of a `  Label:  value` line starts. */
function valueColumn(line: string): number {
  const match = /^ {2}\w+: +/.exec(line);
  assert.ok(match, `not a label line: ${JSON.stringify(line)}`);
  return match[0].length + 1;
}

describe('human job block', () => {
  it('prints the labels two spaces in with values at column 13', () => {
    const text = formatJobBlock(job({ state: 'COMPLETED', attempts: 1, result: SHA_ABC }));
    assert.equal(
      text,
      [
        'Job job-1',
        '  Type:     SHA256',
        '  Priority: NORMAL',
        '  State:    COMPLETED',
        '  Attempt:  1/3',
        `  Result:   ${SHA_ABC}`,
        '',
      ].join('\n'),
    );
    for (const line of text.trimEnd().split('\n').slice(1)) assert.equal(valueColumn(line), 13);
  });

  it('shows the parent of a child job and the children of a parent, one id a line', () => {
    const child = formatJobBlock(job({ parentJobId: 'job-0' }));
    assert.match(child, /^ {2}Parent: {3}job-0$/m);
    const parent = formatJobBlock(job({ children: ['job-2', 'job-3'] }));
    assert.ok(parent.endsWith(`  Children: job-2\n${' '.repeat(12)}job-3\n`), parent);
    assert.doesNotMatch(formatJobBlock(job()), /Parent:|Children:/);
  });

  it('shows the recorded steps of a job, one name a line', () => {
    const steps = [
      { name: 'fetch', atMillis: 1 },
      { name: 'dtp.sleep', atMillis: 2 },
    ];
    const text = formatJobBlock(job({ steps }));
    assert.ok(text.endsWith(`  Steps:    fetch\n${' '.repeat(12)}dtp.sleep\n`), text);
    assert.doesNotMatch(formatJobBlock(job()), /Steps:/);
  });

  it('shows Worker only while RUNNING', () => {
    const running = formatJobBlock(job({ state: 'RUNNING', attempts: 1, workerId: 'worker-2' }));
    assert.match(running, /^ {2}Worker: {3}worker-2$/m);
    const retrying = formatJobBlock(job({ state: 'RETRY_WAIT', workerId: 'worker-2' }));
    assert.doesNotMatch(retrying, /Worker:/);
  });

  it('shows Result and Error only when set, Error kept after a success', () => {
    const queued = formatJobBlock(job());
    assert.doesNotMatch(queued, /Result:|Error:/);
    const retried = formatJobBlock(
      job({
        state: 'COMPLETED',
        attempts: 2,
        result: 'succeeded on attempt 2',
        error: 'deliberate failure on attempt 1',
      }),
    );
    assert.match(retried, /^ {2}Attempt: {2}2\/3$/m);
    assert.match(retried, /^ {2}Result: {3}succeeded on attempt 2$/m);
    assert.match(retried, /^ {2}Error: {4}deliberate failure on attempt 1$/m);
  });

  it('starts a submission with "Job submitted" and an ID line', () => {
    const lines = formatJobBlock(job({ priority: 'HIGH' }), { submitted: true }).split('\n');
    assert.equal(lines[0], 'Job submitted');
    assert.equal(lines[1], '  ID:       job-1');
    assert.equal(lines[3], '  Priority: HIGH');
  });

  it('indents continuation lines of a multi-line value to column 13', () => {
    assert.equal(labelLine('Error', 'first\nsecond'), '  Error:    first\n            second');
  });

  it('uses colour only when asked', () => {
    const done = job({ state: 'COMPLETED', result: 'x' });
    assert.ok(!formatJobBlock(done).includes('\x1b['));
    assert.ok(formatJobBlock(done, { color: true }).includes('\x1b[32mCOMPLETED\x1b[0m'));
  });

  it('says whether cancel moved the job', () => {
    assert.match(formatCancel(true, job({ state: 'CANCELLED' })), /^Cancelled\nJob job-1\n/);
    assert.match(formatCancel(false, job({ state: 'COMPLETED' })), /already COMPLETED/);
  });
});

describe('tables', () => {
  it('aligns the job table under a header, newest first as given', () => {
    const text = formatJobTable(
      [
        job({ jobId: 'job-long-id-2', state: 'RUNNING', workerId: 'w1', attempts: 1 }),
        job({ jobId: 'job-1', taskType: 'PRIME_COUNT' }),
      ],
      null,
    );
    const lines = text.trimEnd().split('\n');
    assert.equal(lines.length, 3);
    assert.match(lines[0] ?? '', /^JOB ID +TYPE +STATE +PRIORITY +ATTEMPT +WORKER$/);
    const stateColumn = (lines[0] ?? '').indexOf('STATE');
    assert.equal((lines[1] ?? '').indexOf('RUNNING'), stateColumn);
    assert.equal((lines[2] ?? '').indexOf('QUEUED'), stateColumn);
    assert.ok(
      lines.every((line) => line === line.trimEnd()),
      'no trailing blanks',
    );
  });

  it('prints the header alone for no jobs and hints at the next page', () => {
    assert.match(formatJobTable([], null), /^JOB ID +TYPE/);
    assert.equal(formatJobTable([], null).trimEnd().split('\n').length, 1);
    assert.match(formatJobTable([job()], 'c-1'), /list --cursor c-1/);
  });

  it('aligns the worker table', () => {
    const text = formatWorkerTable([
      { workerId: 'w-a', capacity: 2, activeTasks: 0, lastHeartbeatMillis: 0 },
      { workerId: 'worker-long', capacity: 16, activeTasks: 3, lastHeartbeatMillis: 0 },
    ]);
    const lines = text.trimEnd().split('\n');
    assert.match(lines[0] ?? '', /^WORKER ID +CAPACITY +ACTIVE +LAST HEARTBEAT$/);
    const capacityColumn = (lines[0] ?? '').indexOf('CAPACITY');
    assert.equal((lines[1] ?? '').indexOf('2 '), capacityColumn);
    assert.equal((lines[2] ?? '').indexOf('16'), capacityColumn);
    assert.match(lines[1] ?? '', /1970-01-01T00:00:00\.000Z$/);
  });

  it('shows a QUEUED column only when a worker holds prefetched attempts', () => {
    const text = formatWorkerTable([
      { workerId: 'w-a', capacity: 2, activeTasks: 2, lastHeartbeatMillis: 0, queuedTasks: 3 },
      { workerId: 'w-b', capacity: 1, activeTasks: 0, lastHeartbeatMillis: 0 },
    ]);
    const lines = text.trimEnd().split('\n');
    assert.match(lines[0] ?? '', /^WORKER ID +CAPACITY +ACTIVE +QUEUED +LAST HEARTBEAT$/);
    assert.match(lines[1] ?? '', /^w-a +2 +2 +3 +1970/);
    assert.match(lines[2] ?? '', /^w-b +1 +0 +0 +1970/);
    const none = formatWorkerTable([
      { workerId: 'w-a', capacity: 2, activeTasks: 2, lastHeartbeatMillis: 0, queuedTasks: 0 },
    ]);
    assert.doesNotMatch(none, /QUEUED/);
  });

  it('shows task types and draining when the coordinator reports them', () => {
    const builtins = ['SLEEP', 'WORD_COUNT', 'SHA256', 'PRIME_COUNT', 'FAIL'];
    const text = formatWorkerTable([
      { workerId: 'w-a', capacity: 2, activeTasks: 0, lastHeartbeatMillis: 0 },
      {
        workerId: 'w-b',
        capacity: 1,
        activeTasks: 1,
        lastHeartbeatMillis: 0,
        taskTypes: [...builtins, 'resize', 'emails.send'],
        draining: true,
      },
      {
        workerId: 'w-c',
        capacity: 1,
        activeTasks: 0,
        lastHeartbeatMillis: 0,
        taskTypes: ['SHA256'],
      },
    ]);
    const lines = text.trimEnd().split('\n');
    assert.match(
      lines[0] ?? '',
      /^WORKER ID +CAPACITY +ACTIVE +LAST HEARTBEAT +DRAINING +TASK TYPES$/,
    );
    assert.match(lines[1] ?? '', / no +built-ins$/);
    assert.match(lines[2] ?? '', / yes +built-ins, resize, emails\.send$/);
    assert.match(lines[3] ?? '', / no +SHA256$/);
  });
});

describe('errors', () => {
  it('gives {"error":{"code","message"}} for failures', () => {
    const unknown = new RemoteError({ message: 'Unknown job: nope', code: null });
    assert.deepEqual(errorDocument(unknown), {
      error: { code: 'UNKNOWN_JOB', message: 'Unknown job: nope' },
    });
    assert.deepEqual(errorDocument(new UsageError('missing --text')), {
      error: { code: 'USAGE', message: 'missing --text' },
    });
    assert.deepEqual(errorDocument(new Error('bug')), {
      error: { code: 'INTERNAL', message: 'bug' },
    });
  });

  it('adds the admission numbers to a rejection', () => {
    const err = new SubmitRejectedError({
      reason: 'too many active jobs',
      activeCount: 7,
      limit: 7,
      retryable: true,
    });
    assert.equal(
      toJsonLine(errorDocument(err)),
      '{"error":{"code":"SUBMIT_REJECTED","message":"too many active jobs","activeCount":7,"limit":7,"retryable":true}}\n',
    );
    const text = formatErrorText(err);
    assert.match(text, /too many active jobs/);
    assert.match(text, /Active jobs: 7/);
    assert.match(text, /Limit: +7/);
  });

  it('keeps the last snapshot of a wait timeout', () => {
    const doc = errorDocument(new WaitTimeoutError(job({ state: 'RUNNING' }), 300));
    assert.equal(doc.error.code, 'WAIT_TIMEOUT');
    assert.equal(doc.error.job?.state, 'RUNNING');
  });

  it('maps failures to exit codes 1, 2 and 3', () => {
    assert.equal(exitCodeFor(new UsageError('x')), EXIT_CODES.usage);
    assert.equal(
      exitCodeFor(
        new SubmitRejectedError({ reason: 'r', activeCount: 1, limit: 1, retryable: false }),
      ),
      3,
    );
    assert.equal(exitCodeFor(new TransportError('CONNECT_FAILED', 'refused')), 1);
    assert.equal(exitCodeFor(new RemoteError({ message: 'Unknown job: x', code: null })), 1);
    assert.equal(exitCodeFor(new WaitTimeoutError(job(), 1)), 1);
  });

  it('infers remote error codes when the reply has none', () => {
    const code = (message: string, given: string | null = null): string =>
      new RemoteError({ message, code: given }).code;
    assert.equal(code('Unknown job: x'), 'UNKNOWN_JOB');
    assert.equal(code('Invalid payload: text must be a string'), 'INVALID_PAYLOAD');
    assert.equal(
      code('Idempotency key k-1 was used for a different submission'),
      'IDEMPOTENCY_CONFLICT',
    );
    assert.equal(code('Something else'), 'REMOTE_ERROR');
    assert.equal(code('Unknown job: x', 'CUSTOM'), 'CUSTOM');
  });
});
