/**
 * Signals, events and triggers through the client library and the CLI
 * against a real coordinator: the shapes of the replies and of `--json`, the
 * errors for an unknown or terminal job, an event id published twice, and a
 * trigger's job made by a publish (and run by a worker with the event's
 * payload). A coordinator that does not know the requests: the library's
 * FeatureUnsupportedError and the CLI's exit 1. (That a signal wakes a
 * waiting handler is tested with the handler API.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  DtpClient,
  FeatureUnsupportedError,
  RemoteError,
  type PublishResult,
} from '../../src/client/index.js';
import type { Worker } from '../../src/worker/worker.js';
import { runCliOn, type CliRun } from '../helpers/cli-runner.js';
import { StrictV1Coordinator } from '../helpers/strict-v1.js';
import {
  startCoordinator,
  startTaskWorker,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';

const json = (run: CliRun): Record<string, unknown> =>
  JSON.parse(run.stdout) as Record<string, unknown>;

describe('signals, events and triggers: client and CLI', () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  before(async () => {
    tc = await startCoordinator();
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  after(async () => {
    await client.close();
    await tc.close();
  });

  const cli = (...argv: string[]): Promise<CliRun> => runCliOn(tc.coordinator.clientPort, argv);

  it('holds signals sent to a job that is not waiting, counting them', async () => {
    // No worker serves the type: the job stays QUEUED.
    const job = await client.submit('SHA256', { text: 'signals' }, { queue: 'held-signals' });
    const first = await client.signal(job.jobId, 'approve', { by: 'ann' });
    assert.deepEqual(first, {
      jobId: job.jobId,
      name: 'approve',
      resumed: false,
      signalsHeld: 1,
    });
    const second = await cli('signal', job.jobId, 'approve', '--payload', '[1,2]', '--json');
    assert.equal(second.code, 0, second.stdout + second.stderr);
    assert.deepEqual(json(second), {
      jobId: job.jobId,
      name: 'approve',
      resumed: false,
      signalsHeld: 2,
    });
    const human = await cli('signal', job.jobId, 'other');
    assert.equal(human.code, 0, human.stderr);
    assert.match(
      human.stdout,
      /^Signal other sent to job \S+: held until the job waits for it \(3 signals held\)\n$/,
    );
    assert.equal((await client.status(job.jobId)).signalsHeld, 3);
  });

  it("refuses a signal to an unknown or terminal job: RemoteError, exit 1 with the coordinator's message", async () => {
    await assert.rejects(
      client.signal('no-such-job', 'approve'),
      (err: unknown) => err instanceof RemoteError && err.code === 'UNKNOWN_JOB',
    );
    const unknown = await cli('signal', 'no-such-job', 'approve', '--json');
    assert.equal(unknown.code, 1);
    const error = (json(unknown) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'UNKNOWN_JOB');
    assert.match(error.message, /no-such-job/);

    const job = await client.submit('SHA256', { text: 'gone' }, { queue: 'held-signals' });
    await client.cancel(job.jobId);
    await assert.rejects(
      client.signal(job.jobId, 'approve'),
      (err: unknown) => err instanceof RemoteError && /has ended \(CANCELLED\)/.test(err.message),
    );
    const terminal = await cli('signal', job.jobId, 'approve');
    assert.equal(terminal.code, 1);
    assert.match(terminal.stderr, /^Error \(INVALID_REQUEST\): .*has ended \(CANCELLED\)/);
  });

  it('publishes an event with a generated id, and answers a known id with the first reply', async () => {
    const plain = await client.publish('nothing.listens', { a: 1 });
    assert.equal(typeof plain.eventId, 'string');
    assert.ok(plain.eventId.length > 0);
    assert.deepEqual(
      { ...plain, eventId: '' },
      {
        eventId: '',
        jobIds: [],
        resumed: 0,
        duplicate: false,
      },
    );

    const once = await cli(
      'publish',
      'nothing.listens',
      '--event-id',
      'evt-1',
      '--key',
      'k',
      '--json',
    );
    assert.equal(once.code, 0, once.stdout + once.stderr);
    assert.deepEqual(json(once), { eventId: 'evt-1', jobIds: [], resumed: 0 });
    const again = await cli('publish', 'nothing.listens', '--event-id', 'evt-1', '--json');
    assert.equal(again.code, 0);
    assert.deepEqual(json(again), { eventId: 'evt-1', jobIds: [], resumed: 0, duplicate: true });
    const human = await cli('publish', 'nothing.listens', '--event-id', 'evt-1');
    assert.match(human.stderr, /Note: event evt-1 was published before; nothing was done again/);
    const lib = await client.publish('nothing.listens', null, { eventId: 'evt-1' });
    assert.equal(lib.duplicate, true);
  });

  it('sets, lists and deletes triggers; a publish creates the trigger’s job with the event’s payload', async () => {
    const set = await cli(
      'trigger',
      'set',
      'on-paid',
      '--event',
      'order.paid',
      '--task',
      'reverse',
      '--queue',
      'orders',
      '--max-attempts',
      '2',
      '--json',
    );
    assert.equal(set.code, 0, set.stdout + set.stderr);
    const shown = json(set);
    assert.deepEqual(
      {
        name: shown.name,
        event: shown.event,
        taskType: shown.taskType,
        queue: shown.queue,
        priority: shown.priority,
        maxAttempts: shown.maxAttempts,
      },
      {
        name: 'on-paid',
        event: 'order.paid',
        taskType: 'reverse',
        queue: 'orders',
        priority: null,
        maxAttempts: 2,
      },
    );
    assert.equal(typeof shown.createdAtMillis, 'number');
    const second = await client.triggers.set({
      name: 'also-paid',
      event: 'order.paid',
      taskType: 'reverse',
      priority: 'HIGH',
    });
    assert.equal(second.queue, 'default');
    assert.equal(second.priority, 'HIGH');

    const listed = await cli('trigger', 'list', '--json');
    assert.equal(listed.code, 0);
    const triggers = (json(listed) as { triggers: { name: string; event: string }[] }).triggers;
    assert.deepEqual(
      triggers.map((t) => [t.name, t.event]),
      [
        ['also-paid', 'order.paid'],
        ['on-paid', 'order.paid'],
      ],
    );

    const published: PublishResult = await client.publish(
      'order.paid',
      { text: 'paid' },
      { eventId: 'order-1-paid' },
    );
    assert.equal(published.jobIds.length, 2, 'one job per trigger');
    assert.equal(published.resumed, 0);
    assert.equal(published.duplicate, false);
    // The same event id again: the first reply, and no job more.
    const again = await cli('publish', 'order.paid', '--event-id', 'order-1-paid', '--json');
    assert.deepEqual(json(again), {
      eventId: 'order-1-paid',
      jobIds: published.jobIds,
      resumed: 0,
      duplicate: true,
    });
    const inOrders = await client.listPage({ queue: 'orders' });
    assert.equal(inOrders.jobs.length, 1);
    const worker: Worker = await startTaskWorker(tc.coordinator.workerPort, 'signals-w1');
    try {
      for (const jobId of published.jobIds) {
        const done = await client.wait(jobId, 10_000);
        assert.equal(done.state, 'COMPLETED', JSON.stringify(done));
        assert.equal(done.taskType, 'reverse');
        assert.equal(done.result, 'diap', "the job's payload is the event's");
      }
      const onPaid = await client.status(published.jobIds[1] ?? '');
      assert.equal(onPaid.queue, 'orders', 'trigger-name order: also-paid, then on-paid');
      assert.equal(onPaid.maxAttempts, 2);
    } finally {
      await worker.close();
    }

    const deleted = await cli('trigger', 'delete', 'on-paid', '--json');
    assert.equal(deleted.code, 0);
    assert.deepEqual(json(deleted), { name: 'on-paid', deleted: true });
    assert.equal(await client.triggers.delete('on-paid'), false, 'deleted already');
    const none = await cli('trigger', 'delete', 'on-paid');
    assert.equal(none.stdout, 'No trigger on-paid; nothing deleted\n');
    assert.deepEqual(
      (await client.triggers.list()).map((t) => t.name),
      ['also-paid'],
    );
    assert.equal((await client.publish('order.paid', { text: 'x' })).jobIds.length, 1);
    assert.equal(await client.triggers.delete('also-paid'), true);
    assert.deepEqual((await client.publish('order.paid', { text: 'y' })).jobIds, []);
    const empty = await cli('trigger', 'list');
    assert.equal(empty.stdout, 'No triggers\n');
  });
});

describe('signals, events and triggers: a coordinator that does not know them', () => {
  let v1: StrictV1Coordinator;
  let client: DtpClient;
  before(async () => {
    v1 = await StrictV1Coordinator.start();
    client = await DtpClient.connect({ host: '127.0.0.1', port: v1.clientPort });
  });
  after(async () => {
    await client.close();
    await v1.close();
  });

  it('fails each call with FeatureUnsupportedError naming signals, and the CLI with exit 1', async () => {
    const calls: [string, () => Promise<unknown>][] = [
      ['signal', () => client.signal('j1', 'go')],
      ['publish', () => client.publish('e', null)],
      ['triggers.set', () => client.triggers.set({ name: 't', event: 'e', taskType: 'SHA256' })],
      ['triggers.list', () => client.triggers.list()],
      ['triggers.delete', () => client.triggers.delete('t')],
    ];
    for (const [what, call] of calls) {
      await assert.rejects(
        call(),
        (err: unknown) =>
          err instanceof FeatureUnsupportedError &&
          err.feature === 'signals' &&
          err.code === 'UNSUPPORTED_FEATURE' &&
          /this coordinator does not support signals/.test(err.message),
        what,
      );
    }
    for (const argv of [
      ['signal', 'j1', 'go'],
      ['publish', 'e'],
      ['trigger', 'list'],
    ]) {
      const run = await runCliOn(v1.clientPort, [...argv, '--json']);
      assert.equal(run.code, 1, argv.join(' '));
      assert.equal(
        (json(run) as { error: { code: string } }).error.code,
        'UNSUPPORTED_FEATURE',
        argv.join(' '),
      );
    }
  });
});
