import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DtpClient, ListJobsOptions, SubmitRequest } from '../../src/client/client.js';
import { runClientCli } from '../../src/cli/client-cli.js';
import type { CliIo } from '../../src/cli/client-cli.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';

function snapshot(overrides: Partial<JobSnapshot> = {}): JobSnapshot {
  return {
    jobId: 'job-1',
    taskType: 'SHA256',
    state: 'QUEUED',
    attempts: 0,
    maxAttempts: 3,
    workerId: null,
    result: null,
    error: null,
    createdAtMillis: 1_000,
    updatedAtMillis: 1_000,
    priority: 'NORMAL',
    ...overrides,
  };
}

/** A stand-in for the client library that records what the CLI asked for. */
class RecordingClient {
  readonly submits: SubmitRequest[] = [];
  readonly lists: ListJobsOptions[] = [];
  connectedTo: string | null = null;
  servingWorkers: number | null = null;
  waitState: JobSnapshot['state'] = 'COMPLETED';
  /** What the next submission's reply says about deduplication. */
  outcome = { deduplicated: false, replaced: false };

  submit(request: SubmitRequest) {
    this.submits.push(request);
    const job = snapshot({ taskType: request.taskType });
    return Promise.resolve({
      jobId: 'job-1',
      snapshot: job,
      servingWorkers: this.servingWorkers,
      ...this.outcome,
    });
  }
  wait(jobId: string) {
    return Promise.resolve(snapshot({ jobId, state: this.waitState }));
  }
  listPage(options: ListJobsOptions) {
    this.lists.push(options);
    return Promise.resolve({ jobs: [], nextCursor: null });
  }
  close() {
    return Promise.resolve();
  }
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  client: RecordingClient;
}

async function run(
  argv: readonly string[],
  options: {
    env?: NodeJS.ProcessEnv;
    client?: RecordingClient;
    input?: string;
    program?: string;
  } = {},
): Promise<Run> {
  const client = options.client ?? new RecordingClient();
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    env: options.env ?? {},
    color: false,
    interactive: false,
    readInput: (path) =>
      path === '-' && options.input !== undefined
        ? Promise.resolve(options.input)
        : Promise.reject(new Error(`ENOENT: no such file ${path}`)),
    connect: (host, port) => {
      client.connectedTo = `${host}:${port}`;
      return Promise.resolve(client as unknown as DtpClient);
    },
    ...(options.program !== undefined && { program: options.program }),
  };
  const code = await runClientCli(argv, io);
  return { code, stdout, stderr, client };
}

function jsonError(r: Run): { code: string; message: string } {
  const doc = JSON.parse(r.stdout) as { error: { code: string; message: string } };
  return doc.error;
}

describe('client CLI', () => {
  it('prints usage and exits 2 without a command, 0 with --help', async () => {
    const none = await run([]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /Usage: client\.sh/);
    const help = await run(['--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Usage: client\.sh/);
    assert.match(help.stdout, /submit/);
    const json = await run(['--json']);
    assert.equal(json.code, 2);
    assert.equal(jsonError(json).code, 'USAGE');
  });

  it('names itself as it was started in usage and errors', async () => {
    const help = await run(['--help'], { program: 'dtp' });
    assert.match(help.stdout, /^Usage: dtp \[options\] \[command\]/);
    const wrong = await run(['stauts'], { program: 'dtp' });
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /Run `dtp --help` for usage\.\n$/);
    assert.doesNotMatch(wrong.stderr, /client\.sh/);
    const none = await run([], { program: 'dtp' });
    assert.match(none.stderr, /^Usage: dtp /);
  });

  it('keeps an unknown option without a hint when the task is no near miss', async () => {
    const r = await run(['submit', 'text.slugify', '--text', 'hi', '--json']);
    assert.equal(jsonError(r).message, "unknown option '--text'");
    const shortcut = await run(['submit', 'sha256', '--txt', 'hi', '--json']);
    assert.doesNotMatch(jsonError(shortcut).message, /is not a shortcut/);
  });

  it('gives per-command help, also for a task shortcut', async () => {
    const wait = await run(['wait', '--help']);
    assert.equal(wait.code, 0);
    assert.match(wait.stdout, /--exit-status/);
    const sleep = await run(['submit', 'sleep', '--help']);
    assert.equal(sleep.code, 0);
    assert.match(sleep.stdout, /--milliseconds <0\.\.600000>/);
    assert.equal((await run(['help', 'list'])).code, 0);
  });

  it('reports usage errors as one JSON document with exit 2, suggesting near names', async () => {
    const cases: [string[], RegExp][] = [
      [['stauts', 'x'], /unknown command 'stauts' \(Did you mean status\?\)/],
      [['submit', 'sha256', '--txt', 'x'], /Did you mean --text\?/],
      [['submit', 'teleport', '--distance', '3'], /unknown option '--distance'/],
      [['submit', 'sha265'], /did you mean sha256\?/],
      // A shortcut's flag after a near miss of the shortcut: the near miss is named.
      [
        ['submit', 'sha265', '--text', 'hi'],
        /^unknown option '--text': "sha265" is not a shortcut \(did you mean sha256\?\)$/,
      ],
      [['--host', 'h', 'submit', 'slepe', '--milliseconds', '5'], /did you mean sleep\?/],
      [['submit', 'sleep'], /missing --milliseconds/],
      [['submit', 'sleep', '--milliseconds', 'soon'], /--milliseconds must be an integer/],
      [['status'], /missing required argument 'job-id'/],
      [['status', 'a', 'b'], /too many arguments/],
      [['submit', 'x', '--payload', '[1]'], /--payload must be a JSON object/],
      [['submit', 'x', '--payload', '{'], /--payload is not valid JSON/],
      [['submit', 'x', '--payload', '{}', '--payload-file', 'f'], /not both/],
      [['submit', 'x', '--payload-file', 'missing.json'], /cannot read --payload-file/],
      [['submit', 'sha256', '--text', 'a', '--payload', '{}'], /takes its own flags/],
    ];
    for (const [argv, pattern] of cases) {
      const r = await run([...argv, '--json']);
      assert.equal(r.code, 2, argv.join(' '));
      assert.equal(jsonError(r).code, 'USAGE');
      assert.match(jsonError(r).message, pattern);
      assert.equal(r.client.connectedTo, null, 'no connection for a usage error');
    }
  });

  it('reads only connection and output settings from the environment', async () => {
    const env = {
      DTP_HOST: 'coordinator.example',
      DTP_PORT: '7171',
      DTP_JSON: '1',
      DTP_MAX_ATTEMPTS: '7',
      DTP_LIMIT: '5',
      DTP_PRIORITY: 'HIGH',
      DTP_TEXT: 'from env',
      DTP_TIMEOUT_MILLIS: 'x',
    };
    const submitted = await run(['submit', 'sha256', '--text', 'abc'], { env });
    assert.equal(submitted.code, 0, submitted.stdout);
    assert.equal(submitted.client.connectedTo, 'coordinator.example:7171');
    assert.deepEqual(submitted.client.submits[0], {
      taskType: 'SHA256',
      payload: { text: 'abc' },
      maxAttempts: null,
      idempotencyKey: null,
      priority: null,
      timeoutMillis: null,
    });
    assert.doesNotThrow(() => JSON.parse(submitted.stdout), 'DTP_JSON=1 gives JSON');
    const listed = await run(['list'], { env });
    assert.deepEqual(listed.client.lists, [{}]);
    const prime = await run(['submit', 'prime-count'], { env });
    assert.equal(prime.code, 2, 'DTP_LIMIT must not supply prime-count --limit');
    const explicit = await run(['workers', '--port', '7072'], { env });
    assert.equal(explicit.client.connectedTo, 'coordinator.example:7072');
  });

  it('submits any task type with a payload from a flag or standard input', async () => {
    const inline = await run(['submit', 'stats.sum', '--payload', '{"values":[1,2]}', '--json']);
    assert.equal(inline.code, 0);
    assert.equal(inline.client.submits[0]?.taskType, 'stats.sum');
    assert.deepEqual(inline.client.submits[0]?.payload, { values: [1, 2] });
    const stdin = await run(
      ['submit', 'Resize', '--payload-file', '-', '--task-timeout-millis', '50'],
      {
        input: '{"w": 3}',
      },
    );
    assert.equal(stdin.code, 0, stdin.stderr);
    assert.deepEqual(stdin.client.submits[0]?.payload, { w: 3 });
    assert.equal(stdin.client.submits[0]?.timeoutMillis, 50);
    assert.match(stdin.stdout, /^Job submitted\n {2}ID: {7}job-1\n/);
  });

  it('prints only the job id with --quiet', async () => {
    const r = await run(['submit', 'sha256', '--text', 'a', '--quiet']);
    assert.equal(r.stdout, 'job-1\n');
  });

  it('warns when no live worker serves the task type', async () => {
    const client = new RecordingClient();
    client.servingWorkers = 0;
    const human = await run(['submit', 'resize', '--payload', '{}'], { client });
    assert.equal(human.code, 0);
    assert.match(human.stderr, /Warning: no live worker serves task type resize/);
    const json = await run(['submit', 'resize', '--payload', '{}', '--json'], { client });
    const doc = JSON.parse(json.stdout) as { warning?: string };
    assert.match(doc.warning ?? '', /no live worker serves task type resize/);
    client.servingWorkers = 2;
    const served = await run(['submit', 'resize', '--payload', '{}', '--json'], { client });
    assert.equal((JSON.parse(served.stdout) as { warning?: string }).warning, undefined);
  });

  it('exits 4 under wait --exit-status when the job failed or was cancelled', async () => {
    for (const [state, plain, withFlag] of [
      ['COMPLETED', 0, 0],
      ['FAILED', 0, 4],
      ['CANCELLED', 0, 4],
    ] as const) {
      const client = new RecordingClient();
      client.waitState = state;
      assert.equal((await run(['wait', 'job-1'], { client })).code, plain);
      assert.equal((await run(['wait', 'job-1', '--exit-status'], { client })).code, withFlag);
    }
  });
});

describe('client CLI: queues', () => {
  it('refuses bad queue input with exit 2 naming the flag, before connecting', async () => {
    const cases: [string[], RegExp][] = [
      [['queue', 'set', 'q', '--rate', '0/1s'], /--rate/],
      [['queue', 'set', 'q', '--rate', 'abc'], /--rate/],
      [['queue', 'set', 'q', '--concurrency', '-1'], /--concurrency/],
      [['queue', 'set', 'q', '--group-rate', '5/2d'], /--group-rate/],
      [['queue', 'pause', '1bad'], /queue name/],
      [['queue', 'pause', 'q', '--concurrency', '3'], /--concurrency goes with queue set only/],
      [['queue', 'drain', 'q'], /list, pause, resume, set/],
      [['submit', 'sha256', '--text', 'a', '--queue', 'no spaces'], /--queue/],
      [['submit', 'sha256', '--text', 'a', '--group', 'x'.repeat(129)], /--group/],
      [['list', '--queue', '-x'], /--queue/],
    ];
    for (const [argv, message] of cases) {
      const r = await run([...argv, '--json']);
      assert.equal(r.code, 2, argv.join(' '));
      assert.match(jsonError(r).message, message, argv.join(' '));
      assert.equal(r.client.connectedTo, null, `${argv.join(' ')} connected`);
    }
  });

  it('sends queue and group with a submission and shows queue and groupKey in --json', async () => {
    const r = await run([
      'submit',
      'sha256',
      '--text',
      'a',
      '--queue',
      'emails',
      '--group',
      't1',
      '--json',
    ]);
    assert.equal(r.code, 0);
    assert.equal(r.client.submits[0]?.queue, 'emails');
    assert.equal(r.client.submits[0]?.groupKey, 't1');
    const plain = await run(['submit', 'sha256', '--text', 'a', '--json']);
    const job = (JSON.parse(plain.stdout) as { job: Record<string, unknown> }).job;
    assert.equal(job.queue, 'default');
    assert.equal(job.groupKey, null);
    assert.equal(plain.client.submits[0]?.queue, undefined, 'no queue field for the default');
  });
});

describe('client CLI: deduplication and expiry', () => {
  const submit = ['submit', 'sha256', '--text', 'a'];

  it("sends --dedup-key, --dedup-mode, --dedup-window and --expire-after as the job's fields", async () => {
    const before = Date.now();
    const r = await run([
      ...submit,
      '--dedup-key',
      'report:7',
      '--dedup-mode',
      'throttle',
      '--dedup-window',
      '5m',
      '--expire-after',
      '2h',
      '--json',
    ]);
    assert.equal(r.code, 0, r.stdout);
    const sent = r.client.submits[0];
    assert.deepEqual(
      [sent?.dedupKey, sent?.dedupMode, sent?.dedupWindowMillis],
      ['report:7', 'throttle', 300_000],
    );
    const expiresAt = sent?.expiresAtMillis ?? 0;
    assert.ok(expiresAt >= before + 7_200_000 && expiresAt <= Date.now() + 7_200_000);
    const doc = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.deepEqual(Object.keys(doc), ['jobId', 'job', 'deduplicated', 'replaced']);
    assert.deepEqual([doc.deduplicated, doc.replaced], [false, false]);
  });

  it('takes --expire-at as --run-at takes a time, and debounce with a delay', async () => {
    const at = '2100-01-02T03:04:05Z';
    const r = await run([
      ...submit,
      '--dedup-key',
      'k',
      '--dedup-mode',
      'debounce',
      '--delay',
      '30s',
      '--expire-at',
      at,
    ]);
    assert.equal(r.code, 0, r.stderr);
    const sent = r.client.submits[0];
    assert.equal(sent?.expiresAtMillis, Date.parse(at));
    assert.equal(sent?.dedupMode, 'debounce');
    assert.equal(sent?.dedupWindowMillis, undefined);
    const plain = await run([...submit]);
    for (const key of ['dedupKey', 'dedupMode', 'dedupWindowMillis', 'expiresAtMillis']) {
      assert.equal(key in (plain.client.submits[0] ?? {}), false, key);
    }
  });

  it('says when the job was deduplicated or replaced', async () => {
    const client = new RecordingClient();
    client.outcome = { deduplicated: true, replaced: false };
    const r = await run([...submit, '--dedup-key', 'k'], { client });
    assert.match(r.stdout, /^Job submitted\n/);
    assert.match(r.stdout, /\nDeduplicated: existing job job-1; nothing new was created\n$/);
    client.outcome = { deduplicated: true, replaced: true };
    const json = await run([...submit, '--dedup-key', 'k', '--json'], { client });
    const doc = JSON.parse(json.stdout) as Record<string, unknown>;
    assert.deepEqual([doc.deduplicated, doc.replaced], [true, true]);
    const human = await run([...submit, '--dedup-key', 'k'], { client });
    assert.match(
      human.stdout,
      /Deduplicated: existing job job-1; its payload and run time replaced/,
    );
  });

  it('refuses bad deduplication and expiry flags with exit 2 naming the flag, before connecting', async () => {
    const cases: [string[], RegExp][] = [
      [['--dedup-key', ''], /--dedup-key must be 1\.\.256 characters/],
      [['--dedup-key', 'k'.repeat(257)], /--dedup-key must be 1\.\.256 characters, got 257/],
      [['--dedup-key', 'k', '--dedup-mode', 'often'], /--dedup-mode/],
      [['--dedup-mode', 'active'], /--dedup-mode needs --dedup-key/],
      [['--dedup-key', 'k', '--dedup-mode', 'throttle'], /throttle needs --dedup-window/],
      [
        ['--dedup-key', 'k', '--dedup-window', '5s'],
        /--dedup-window goes only with --dedup-mode throttle/,
      ],
      [
        ['--dedup-key', 'k', '--dedup-mode', 'throttle', '--dedup-window', '0'],
        /--dedup-window must be 1ms\.\.366d/,
      ],
      [['--dedup-key', 'k', '--dedup-mode', 'throttle', '--dedup-window', '367d'], /1ms\.\.366d/],
      [
        ['--dedup-key', 'k', '--dedup-mode', 'throttle', '--dedup-window', 'soon'],
        /--dedup-window/,
      ],
      [['--dedup-key', 'k', '--dedup-mode', 'debounce'], /debounce needs a delay/],
      [['--expire-at', '2001-01-01T00:00:00Z'], /--expire-at is in the past/],
      [['--expire-at', 'tomorrow'], /--expire-at: expected ISO 8601/],
      [['--expire-after', '0'], /--expire-after must be at least 1ms/],
      [['--expire-after', '2h', '--expire-at', '4102444800000'], /cannot be used together/],
    ];
    for (const [flags, message] of cases) {
      const r = await run([...submit, ...flags, '--json']);
      assert.equal(r.code, 2, flags.join(' '));
      assert.match(jsonError(r).message, message, flags.join(' '));
      assert.equal(r.client.connectedTo, null, `${flags.join(' ')} connected`);
    }
  });
});
