/**
 * The CLI of delayed jobs and schedules against an in-process coordinator:
 * `--json` documents as the contract gives them, bad input refused with exit
 * 2 naming the flag before anything is sent, and an unknown schedule exit 1.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runCliOn, type CliRun } from '../helpers/cli-runner.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

let tc: TestCoordinator;

async function cli(...argv: string[]): Promise<CliRun> {
  return runCliOn(tc.coordinator.clientPort, argv);
}

function json(out: { code: number; stdout: string; stderr: string }): Record<string, unknown> {
  assert.equal(out.code, 0, out.stdout + out.stderr);
  return JSON.parse(out.stdout) as Record<string, unknown>;
}

describe('client CLI: delayed jobs and schedules', () => {
  before(async () => {
    tc = await startCoordinator();
  });
  after(() => tc.close());

  it('submits a delayed job SCHEDULED with runAtMillis, lists and cancels it', async () => {
    const runAt = Date.now() + 3_600_000;
    const out = json(
      await cli('submit', 'sha256', '--text', 'x', '--run-at', String(runAt), '--json'),
    );
    const job = out.job as Record<string, unknown>;
    assert.equal(job.state, 'SCHEDULED');
    assert.equal(job.runAtMillis, runAt);
    const iso = json(
      await cli(
        'submit',
        'sha256',
        '--text',
        'y',
        '--run-at',
        '2026-12-24T18:00:00+01:00',
        '--json',
      ),
    );
    assert.equal(
      (iso.job as { runAtMillis: number }).runAtMillis,
      Math.max(
        Date.parse('2026-12-24T17:00:00Z'),
        (iso.job as { createdAtMillis: number }).createdAtMillis,
      ),
    );
    const listed = json(await cli('list', '--state', 'SCHEDULED', '--json')).jobs as {
      jobId: string;
    }[];
    assert.ok(listed.some((j) => j.jobId === out.jobId));
    const cancelled = json(await cli('cancel', String(out.jobId), '--json'));
    assert.equal(cancelled.cancelled, true);
  });

  it('refuses bad time input with exit 2 naming the flag, before anything is sent', async () => {
    const before = (json(await cli('list', '--json')).jobs as unknown[]).length;
    for (const [args, flag] of [
      [['--delay', '2s', '--run-at', '0'], /--delay and --run-at/],
      [['--delay', 'soon'], /--delay/],
      [['--delay', '367d'], /--delay/],
      [['--run-at', 'tomorrow'], /--run-at/],
      [['--run-at', '2026-12-24T18:00:00'], /--run-at/],
      [['--run-at', String(Date.now() + 400 * 86_400_000)], /--run-at/],
    ] as const) {
      const out = await cli('submit', 'sha256', '--text', 'x', ...args);
      assert.equal(out.code, 2, `${args.join(' ')}: ${out.stderr}`);
      assert.match(out.stderr, flag);
    }
    for (const [args, flag] of [
      [['--cron', '61 * * * *'], /--cron/],
      [['--cron', '* * * *'], /--cron/],
      [['--cron', '0 0 31 2 *'], /--cron: cron "0 0 31 2 \*" never fires/],
      [['--cron', '0 0 31 4,6,9,11 *'], /--cron: .*never fires/],
      [['--cron', '0 2 * * *', '--timezone', 'Mars/Olympus'], /--timezone/],
      [['--every', '500ms'], /--every/],
      [['--every', 'often'], /--every/],
      [['--every', '1s', '--cron', '* * * * *'], /--cron or --every/],
      [[], /--cron or --every/],
      [['--every', '1m', '--queue', '9bad'], /--queue/],
    ] as const) {
      const out = await cli('schedule', 'set', 'bad', 'SHA256', ...args);
      assert.equal(out.code, 2, `${args.join(' ')}: ${out.stderr}`);
      assert.match(out.stderr, flag);
    }
    assert.equal((json(await cli('list', '--json')).jobs as unknown[]).length, before);
    assert.deepEqual(json(await cli('schedule', 'list', '--json')).schedules, []);
  });

  it('prints the contract documents for set, show, pause, resume, trigger and delete', async () => {
    const set = json(
      await cli(
        'schedule',
        'set',
        'nightly',
        'SHA256',
        '--cron',
        '0 2 * * *',
        '--timezone',
        'Europe/Berlin',
        '--payload',
        '{"text": "r"}',
        '--json',
      ),
    );
    assert.equal(set.cron, '0 2 * * *');
    assert.equal(set.everyMillis, null);
    assert.equal(set.timezone, 'Europe/Berlin');
    assert.equal(set.overlap, 'allow');
    assert.equal(set.catchUp, 'latest');
    assert.equal(set.paused, false);
    assert.equal(set.queue, 'default');
    assert.equal(typeof set.nextRunAtMillis, 'number');
    const again = json(
      await cli(
        'schedule',
        'set',
        'nightly',
        'SHA256',
        '--cron',
        '0 2 * * *',
        '--timezone',
        'Europe/Berlin',
        '--payload',
        '{"text": "r"}',
        '--json',
      ),
    );
    assert.deepEqual(again, set);
    const paused = json(await cli('schedule', 'pause', 'nightly', '--json'));
    assert.equal(paused.paused, true);
    assert.equal(paused.nextRunAtMillis, null);
    const triggered = json(await cli('schedule', 'trigger', 'nightly', '--json'));
    const job = triggered.job as Record<string, unknown>;
    assert.equal(job.scheduleName, 'nightly');
    const queued = json(
      await cli(
        'schedule',
        'set',
        'reports',
        'SHA256',
        '--every',
        '1h',
        '--payload',
        '{"text": "q"}',
        '--queue',
        'rq',
        '--json',
      ),
    );
    assert.equal(queued.queue, 'rq');
    const inQueue = json(await cli('schedule', 'trigger', 'reports', '--json'));
    assert.equal((inQueue.job as Record<string, unknown>).queue, 'rq');
    await cli('schedule', 'delete', 'reports');
    assert.equal(typeof job.runAtMillis, 'number');
    const shown = json(await cli('schedule', 'show', 'nightly', '--json'));
    assert.deepEqual(
      (shown.recentJobs as { jobId: string }[]).map((j) => j.jobId),
      [triggered.jobId],
    );
    assert.equal(json(await cli('schedule', 'resume', 'nightly', '--json')).paused, false);
    assert.deepEqual(json(await cli('schedule', 'delete', 'nightly', '--json')), {
      deleted: 'nightly',
    });
    const unknown = await cli('schedule', 'show', 'nightly');
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /Unknown schedule/);
  });
});
