/**
 * `signal`, `publish` and `trigger` of the client CLI against a stand-in for
 * the client library: what each sends, its `--json` and human output, and
 * usage errors (exit 2, nothing connected). Also the library's own checks,
 * which refuse bad input before anything is sent.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DtpClient } from '../../src/client/client.js';
import { RemoteError, RequestTooLargeError } from '../../src/client/errors.js';
import {
  publishMessage,
  setTriggerMessage,
  signalMessage,
  type PublishOptions,
  type PublishResult,
  type SignalResult,
  type TriggerOptions,
  type TriggerSnapshot,
} from '../../src/client/signals.js';
import { runClientCli } from '../../src/cli/client-cli.js';
import { MAX_SIGNAL_PAYLOAD_BYTES } from '../../src/protocol/limits.js';
import type { JsonValue } from '../../src/protocol/messages.js';

function snapshot(t: TriggerOptions): TriggerSnapshot {
  return {
    name: t.name,
    event: t.event,
    taskType: t.taskType,
    queue: t.queue ?? 'default',
    priority: t.priority ?? null,
    maxAttempts: t.maxAttempts ?? null,
    createdAtMillis: 1_000,
    updatedAtMillis: 2_000,
  };
}

/** A stand-in for the client library that records what the CLI asked for. */
class RecordingClient {
  connectedTo: string | null = null;
  readonly signals: { jobId: string; name: string; payload: JsonValue }[] = [];
  readonly publishes: { name: string; payload: JsonValue; options: PublishOptions }[] = [];
  readonly sets: TriggerOptions[] = [];
  readonly deletes: string[] = [];
  signalReply: SignalResult | Error = { jobId: 'j1', name: 'go', resumed: false, signalsHeld: 1 };
  publishReply: PublishResult = { eventId: 'e1', jobIds: [], resumed: 0, duplicate: false };
  stored: TriggerSnapshot[] = [];

  signal(jobId: string, name: string, payload: JsonValue): Promise<SignalResult> {
    this.signals.push({ jobId, name, payload });
    const reply = this.signalReply;
    return reply instanceof Error ? Promise.reject(reply) : Promise.resolve(reply);
  }
  publish(name: string, payload: JsonValue, options: PublishOptions): Promise<PublishResult> {
    this.publishes.push({ name, payload, options });
    return Promise.resolve(this.publishReply);
  }
  readonly triggers = {
    set: (t: TriggerOptions) => {
      this.sets.push(t);
      return Promise.resolve(snapshot(t));
    },
    list: () => Promise.resolve(this.stored),
    delete: (name: string) => {
      this.deletes.push(name);
      return Promise.resolve(this.stored.some((t) => t.name === name));
    },
  };
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
  client = new RecordingClient(),
  input?: string,
): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runClientCli(argv, {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    env: {},
    color: false,
    interactive: false,
    readInput: (path) =>
      path === '-' && input !== undefined
        ? Promise.resolve(input)
        : Promise.reject(new Error(`ENOENT: no such file ${path}`)),
    connect: (host, port) => {
      client.connectedTo = `${host}:${port}`;
      return Promise.resolve(client as unknown as DtpClient);
    },
  });
  return { code, stdout, stderr, client };
}

const doc = (r: Run): Record<string, unknown> => JSON.parse(r.stdout) as Record<string, unknown>;

describe('client CLI: signal', () => {
  it('sends the job, the name and any JSON payload (default null), printing the reply', async () => {
    const plain = await run(['signal', 'j1', 'go', '--json']);
    assert.equal(plain.code, 0, plain.stdout);
    assert.deepEqual(plain.client.signals, [{ jobId: 'j1', name: 'go', payload: null }]);
    assert.deepEqual(doc(plain), { jobId: 'j1', name: 'go', resumed: false, signalsHeld: 1 });
    for (const [text, value] of [
      ['{"ok":true}', { ok: true }],
      ['[1,2]', [1, 2]],
      ['"yes"', 'yes'],
      ['42', 42],
      ['null', null],
    ] as const) {
      const r = await run(['signal', 'j1', 'go', '--payload', text]);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(r.client.signals[0]?.payload, value);
    }
    const stdin = await run(['signal', 'j1', 'go', '--payload-file', '-'], undefined, '[true]');
    assert.deepEqual(stdin.client.signals[0]?.payload, [true]);
  });

  it('says for a person whether the job resumed or holds the signal', async () => {
    const held = await run(['signal', 'j1', 'go']);
    assert.equal(
      held.stdout,
      'Signal go sent to job j1: held until the job waits for it (1 signal held)\n',
    );
    const client = new RecordingClient();
    client.signalReply = { jobId: 'j1', name: 'go', resumed: true, signalsHeld: 0 };
    const resumed = await run(['signal', 'j1', 'go'], client);
    assert.equal(
      resumed.stdout,
      'Signal go sent to job j1: the job was waiting for it and runs again\n',
    );
  });

  it("exits 1 with the coordinator's message for an unknown or terminal job", async () => {
    const client = new RecordingClient();
    client.signalReply = new RemoteError({ code: 'UNKNOWN_JOB', message: 'Unknown job: nope' });
    const r = await run(['signal', 'nope', 'go', '--json'], client);
    assert.equal(r.code, 1);
    assert.deepEqual(doc(r), { error: { code: 'UNKNOWN_JOB', message: 'Unknown job: nope' } });
    const human = await run(['signal', 'nope', 'go'], client);
    assert.equal(human.code, 1);
    assert.match(human.stderr, /Unknown job: nope/);
  });
});

describe('client CLI: publish', () => {
  it('sends the name, payload, key and event id, printing eventId, jobIds and resumed', async () => {
    const client = new RecordingClient();
    client.publishReply = { eventId: 'order-7', jobIds: ['a', 'b'], resumed: 3, duplicate: false };
    const argv = ['publish', 'order.paid', '--payload', '{"id":7}', '--key', 'k7'];
    const r = await run([...argv, '--event-id', 'order-7', '--json'], client);
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(r.client.publishes, [
      { name: 'order.paid', payload: { id: 7 }, options: { key: 'k7', eventId: 'order-7' } },
    ]);
    assert.deepEqual(doc(r), { eventId: 'order-7', jobIds: ['a', 'b'], resumed: 3 });
    const human = await run(argv, client);
    assert.equal(
      human.stdout,
      'Published event order-7: 2 jobs created (a, b), 3 waiting jobs woken\n',
    );
    const bare = await run(['publish', 'tick']);
    assert.deepEqual(bare.client.publishes, [{ name: 'tick', payload: null, options: {} }]);
    assert.equal(bare.stdout, 'Published event e1: no job created, 0 waiting jobs woken\n');
  });

  it('notes a duplicate event id on stderr and marks it in --json', async () => {
    const client = new RecordingClient();
    client.publishReply = { eventId: 'x', jobIds: ['a'], resumed: 0, duplicate: true };
    const json = await run(['publish', 'tick', '--event-id', 'x', '--json'], client);
    assert.deepEqual(doc(json), { eventId: 'x', jobIds: ['a'], resumed: 0, duplicate: true });
    assert.equal(json.stderr, '');
    const human = await run(['publish', 'tick', '--event-id', 'x'], client);
    assert.match(human.stderr, /Note: event x was published before; nothing was done again/);
  });
});

describe('client CLI: trigger', () => {
  it('sets a trigger with its options and prints the trigger object', async () => {
    const r = await run([
      'trigger',
      'set',
      'on-paid',
      '--event',
      'order.paid',
      '--task',
      'ship',
      '--queue',
      'orders',
      '--priority',
      'HIGH',
      '--max-attempts',
      '5',
      '--json',
    ]);
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(r.client.sets, [
      {
        name: 'on-paid',
        event: 'order.paid',
        taskType: 'ship',
        queue: 'orders',
        priority: 'HIGH',
        maxAttempts: 5,
      },
    ]);
    assert.deepEqual(doc(r), {
      name: 'on-paid',
      event: 'order.paid',
      taskType: 'ship',
      queue: 'orders',
      priority: 'HIGH',
      maxAttempts: 5,
      createdAtMillis: 1_000,
      updatedAtMillis: 2_000,
    });
    const plain = await run(['trigger', 'set', 't', '--event', 'e', '--task', 'SHA256']);
    assert.deepEqual(plain.client.sets, [{ name: 't', event: 'e', taskType: 'SHA256' }]);
    assert.equal(plain.stdout, 't  event e  task SHA256  queue default\n');
  });

  it('lists triggers as {"triggers": [...]} and deletes by name', async () => {
    const client = new RecordingClient();
    const empty = await run(['trigger', 'list'], client);
    assert.equal(empty.stdout, 'No triggers\n');
    client.stored = [snapshot({ name: 't', event: 'e', taskType: 'X', maxAttempts: 2 })];
    const list = await run(['trigger', 'list', '--json'], client);
    assert.deepEqual(doc(list), {
      triggers: [
        {
          name: 't',
          event: 'e',
          taskType: 'X',
          queue: 'default',
          priority: null,
          maxAttempts: 2,
          createdAtMillis: 1_000,
          updatedAtMillis: 2_000,
        },
      ],
    });
    const human = await run(['trigger', 'list'], client);
    assert.equal(human.stdout, 't  event e  task X  queue default  max-attempts 2\n');
    const gone = await run(['trigger', 'delete', 't', '--json'], client);
    assert.deepEqual(doc(gone), { name: 't', deleted: true });
    const none = await run(['trigger', 'delete', 'u'], client);
    assert.equal(none.code, 0);
    assert.equal(none.stdout, 'No trigger u; nothing deleted\n');
    assert.deepEqual(client.deletes, ['t', 'u']);
  });
});

describe('client CLI: signals, usage errors', () => {
  it('refuses bad input with exit 2 naming what is wrong, before connecting', async () => {
    const big = JSON.stringify('x'.repeat(MAX_SIGNAL_PAYLOAD_BYTES));
    const cases: [string[], RegExp][] = [
      [['signal', 'j1'], /missing required argument 'name'/],
      [['signal', 'j1', '9lives'], /<name> must match/],
      [['signal', 'j1', 'go', '--payload', '{oops'], /--payload is not valid JSON/],
      [
        ['signal', 'j1', 'go', '--payload', big],
        /--payload is 262,146 bytes of JSON; the limit is 256 KiB/,
      ],
      [['signal', 'j1', 'go', '--payload', '1', '--payload-file', 'f'], /not both/],
      [['signal', 'j1', 'go', '--payload-file', 'nowhere.json'], /cannot read --payload-file/],
      [['publish'], /missing required argument 'name'/],
      [['publish', 'a b'], /<name> must match/],
      [['publish', 'e', '--key', ''], /--key must be 1..256 characters, got 0/],
      [['publish', 'e', '--event-id', 'x'.repeat(257)], /--event-id must be 1..256 characters/],
      [['trigger'], /missing required argument 'action'/],
      [['trigger', 'fire', 't'], /expected one of set, list, delete/],
      [['trigger', 'set'], /trigger set: missing <name>/],
      [['trigger', 'set', 't', '--task', 'X'], /missing --event/],
      [['trigger', 'set', 't', '--event', 'e'], /missing --task/],
      [['trigger', 'set', 't', '--event', 'e e', '--task', 'X'], /--event: event name must match/],
      [['trigger', 'set', 't', '--event', 'e', '--task', 'X', '--queue', '-q'], /--queue/],
      [
        ['trigger', 'set', 't', '--event', 'e', '--task', 'X', '--max-attempts', '0'],
        /--max-attempts/,
      ],
      [
        ['trigger', 'set', 't', '--event', 'e', '--task', 'X', '--priority', 'URGENT'],
        /--priority/,
      ],
      [['trigger', 'list', '--event', 'e'], /--event goes with trigger set only/],
      [['trigger', 'delete', 't', '--task', 'X'], /--task goes with trigger set only/],
      [['trigger', 'delete', '-t'], /./],
      [['trigger', 'list', 'extra'], /trigger list takes no name/],
    ];
    for (const [argv, message] of cases) {
      const r = await run([...argv, '--json']);
      assert.equal(r.code, 2, `${argv.join(' ')}: ${r.stdout}`);
      const error = (doc(r) as { error: { code: string; message: string } }).error;
      assert.equal(error.code, 'USAGE', argv.join(' '));
      assert.match(error.message, message, argv.join(' '));
      assert.equal(r.client.connectedTo, null, `${argv.join(' ')} connected`);
    }
  });

  it('gives help for each command with its flags', async () => {
    for (const [command, flag] of [
      ['signal', /--payload <json>.*any JSON value/],
      ['publish', /--event-id <id>/],
      ['trigger', /--max-attempts <1\.\.1000>/],
    ] as const) {
      const r = await run([command, '--help']);
      assert.equal(r.code, 0);
      assert.match(r.stdout, flag, command);
    }
    assert.match((await run(['--help'])).stdout, /signal .*\n.*publish .*\n.*trigger /s);
  });
});

describe('client library: signal, publish and trigger checks', () => {
  it('builds the requests, leaving out what is unset and null for an absent payload', () => {
    assert.deepEqual(signalMessage('j1', 'go', undefined), {
      type: 'SIGNAL_JOB',
      jobId: 'j1',
      name: 'go',
      payload: null,
    });
    assert.deepEqual(publishMessage('e', [1], { key: 'k' }), {
      type: 'PUBLISH_EVENT',
      name: 'e',
      payload: [1],
      key: 'k',
    });
    assert.deepEqual(setTriggerMessage({ name: 't', event: 'e', taskType: 'X' }), {
      type: 'SET_TRIGGER',
      trigger: { name: 't', event: 'e', taskType: 'X' },
    });
  });

  it('refuses bad names, keys, ids, payloads and trigger options with a typed error', () => {
    assert.throws(() => signalMessage('', 'go', null), TypeError);
    assert.throws(() => signalMessage('j1', 'no spaces', null), /signal name must match/);
    assert.throws(() => signalMessage('j1', 'go', () => 1), /payload is not JSON/);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    assert.throws(() => publishMessage('e', cyclic), /payload is not JSON/);
    const big = 'x'.repeat(MAX_SIGNAL_PAYLOAD_BYTES);
    assert.throws(
      () => signalMessage('j1', 'go', big),
      (err: unknown) =>
        err instanceof RequestTooLargeError &&
        err.code === 'PAYLOAD_TOO_LARGE' &&
        err.message === 'payload too large (262,146 bytes; the limit is 256 KiB)',
    );
    // Exactly at the limit is fine.
    signalMessage('j1', 'go', 'x'.repeat(MAX_SIGNAL_PAYLOAD_BYTES - 2));
    assert.throws(() => publishMessage('e', null, { key: '' }), RangeError);
    assert.throws(() => publishMessage('e', null, { eventId: 'x'.repeat(257) }), RangeError);
    publishMessage('e', null, { eventId: 'x'.repeat(256) });
    assert.throws(() => publishMessage('1e', null), /event name must match/);
    const base = { name: 't', event: 'e', taskType: 'X' };
    assert.throws(() => setTriggerMessage({ ...base, name: '' }), /trigger name/);
    assert.throws(() => setTriggerMessage({ ...base, event: 'a b' }), /event name/);
    assert.throws(() => setTriggerMessage({ ...base, taskType: '' }), /taskType/);
    assert.throws(() => setTriggerMessage({ ...base, queue: '-' }), /queue/);
    assert.throws(() => setTriggerMessage({ ...base, maxAttempts: 0 }), RangeError);
    assert.throws(
      () => setTriggerMessage({ ...base, priority: 'URGENT' as 'HIGH' }),
      /priority must be one of/,
    );
  });
});
