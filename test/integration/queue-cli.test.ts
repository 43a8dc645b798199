/**
 * Queue names that do not exist yet and paused queues, through the CLI, the
 * client library and the HTTP API against a real coordinator: a typo of a
 * queue is refused (`UNKNOWN_QUEUE`) unless `--create`, a new queue can be
 * paused before its first job, a submission into a paused queue warns, and
 * a rate with a wrong unit names the forms it takes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DtpClient, RemoteError } from '../../src/client/index.js';
import { runCliOn, type CliRun } from '../helpers/cli-runner.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

describe('queues that do not exist yet, and paused queues', () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  let httpBase: string;
  before(async () => {
    tc = await startCoordinator({ metricsPort: 0 });
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    httpBase = `http://127.0.0.1:${tc.coordinator.httpPort}`;
  });
  after(async () => {
    await client.close();
    await tc.close();
  });

  const cli = (...argv: string[]): Promise<CliRun> => runCliOn(tc.coordinator.clientPort, argv);

  it('refuses queue pause of a typo with exit 1 naming the queue it resembles; --create makes it', async () => {
    await client.submit('SHA256', { text: 'r' }, { queue: 'reports' });
    const typo = await cli('queue', 'pause', 'reprots');
    assert.equal(typo.code, 1);
    assert.match(typo.stderr, /Error \(UNKNOWN_QUEUE\): Unknown queue "reprots".*"reports"/);
    const json = await cli('queue', 'pause', 'reprots', '--json');
    assert.equal(
      (JSON.parse(json.stdout) as { error: { code: string } }).error.code,
      'UNKNOWN_QUEUE',
    );
    assert.equal(
      (await client.queues.list()).some((q) => q.name === 'reprots'),
      false,
      'nothing was created',
    );
    const made = await cli('queue', 'pause', 'reprots', '--create', '--json');
    assert.equal(made.code, 0, made.stdout);
    const doc = JSON.parse(made.stdout) as { name: string; paused: boolean; created: boolean };
    assert.deepEqual([doc.name, doc.paused, doc.created], ['reprots', true, true]);
  });

  it('pauses a new queue before its first job (with a note), and resumes only a queue that exists', async () => {
    const paused = await cli('queue', 'pause', 'nightly');
    assert.equal(paused.code, 0, paused.stderr);
    assert.match(
      paused.stderr,
      /Note: queue nightly had no jobs and no settings; it is a new queue/,
    );
    assert.match(paused.stdout, /^nightly \(paused\)/);
    const ghost = await cli('queue', 'resume', 'ghost');
    assert.equal(ghost.code, 1);
    assert.match(ghost.stderr, /UNKNOWN_QUEUE.*nothing to resume/);
    assert.equal((await cli('queue', 'resume', 'nightly')).code, 0);
    const set = await cli('queue', 'set', 'fresh', '--concurrency', '2');
    assert.equal(set.code, 0, 'set makes settings, never refused');
    const misplaced = await cli('queue', 'set', 'fresh', '--create', '--concurrency', '2');
    assert.equal(misplaced.code, 2);
  });

  it('gives the library and the HTTP API the same rule, with create to override', async () => {
    await assert.rejects(
      client.queues.resume('nowhere'),
      (err: unknown) => err instanceof RemoteError && err.code === 'UNKNOWN_QUEUE',
    );
    const made = await client.queues.resume('nowhere', { create: true });
    assert.equal(made.created, true);
    const post = (path: string, body: unknown) =>
      fetch(`${httpBase}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const refused = await post('/api/queues/reportz/pause', {});
    assert.equal(refused.status, 404);
    assert.equal(
      ((await refused.json()) as { error: { code: string } }).error.code,
      'UNKNOWN_QUEUE',
    );
    const created = await post('/api/queues/reportz/pause', { create: true });
    assert.equal(created.status, 200);
    assert.deepEqual(
      ((await created.json()) as { created?: boolean; paused: boolean }).paused,
      true,
    );
  });

  it('warns on stderr and in --json when a job goes into a paused queue', async () => {
    await client.queues.pause('held', { create: true });
    const plain = await cli('submit', 'sha256', '--text', 'x', '--queue', 'held');
    assert.equal(plain.code, 0, plain.stderr);
    assert.match(
      plain.stderr,
      /Warning: queue held is paused; the job waits until it is resumed \(queue resume held\)/,
    );
    const json = await cli('submit', 'sha256', '--text', 'y', '--queue', 'held', '--json');
    const doc = JSON.parse(json.stdout) as { warning: string; queuePaused: boolean };
    assert.equal(doc.queuePaused, true);
    assert.match(doc.warning, /queue held is paused/);
    const handle = await client.submit('SHA256', { text: 'z' }, { queue: 'held' });
    assert.equal(handle.queuePaused, true);
    const running = await client.submit('SHA256', { text: 'z' }, { queue: 'reports' });
    assert.equal(running.queuePaused, false);
  });

  it('names the accepted forms of a rate with a wrong unit (exit 2)', async () => {
    const out = await cli('queue', 'set', 'reports', '--rate', '10/1sec');
    assert.equal(out.code, 2);
    assert.match(out.stderr, /--rate: unknown unit "sec" in "10\/1sec": expected n\/<duration>/);
    assert.doesNotMatch(out.stderr, /undefined/);
  });
});
