/**
 * The dashboard in headless Chromium against a real coordinator (in this
 * process) and real workers and CLI runs (some as separate processes): the
 * page loads and goes live; a job submitted from the CLI appears and turns
 * COMPLETED without a reload; cancel from the page cancels a running job;
 * filters and paging; the job page shows two attempts after a worker was
 * killed; the Queues and Schedules pages with their actions; a delayed job
 * in the list and on its page; a flow around a job (parents, dependents,
 * WAITING in the list, child jobs and steps); a job's deduplication key and
 * expiry, "expired", and queues held by a handler (the API's answers with
 * those fields laid over them in the browser); a job waiting for a signal
 * (what it waits for, the signals it holds), signalled from its page after
 * confirming, and going on; the triggers under Schedules; with client tokens the page asks for one first.
 * Schedules' times in their own zones, named, with the browser in another
 * zone. README's command for a picture of the page, run as written (the
 * system's `chromium`): a PNG of the loaded page, not its "Loading…". Skipped,
 * saying why, only where no Chromium is installed.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { Page, Request } from 'playwright-core';
import { startWorker } from '../../src/worker/start-worker.js';
import type { Worker } from '../../src/worker/worker.js';
import { runCommand } from '../helpers/bounded-command.js';
import { browserSkipReason, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { cleanEnv, ROOT, ScriptProcess } from '../helpers/processes.js';
import { codeBlocks, readmeSection, shellLines } from '../helpers/readme.js';
import { scheduleDefinition } from '../helpers/schedules.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import {
  startCoordinator,
  startRealWorker,
  tempDir,
  testLogger,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';
import { KNOWN_STATES } from '../../src/protocol/job-view.js';
import type { SetQueue, SubmitJob } from '../../src/protocol/messages.js';

const skip = browserSkipReason();
const IO_TASKS = fileURLToPath(new URL('../fixtures/io-tasks.js', import.meta.url));

/** README's command for a picture of the dashboard ("The dashboard"). */
const SCREENSHOT =
  "chromium --headless --no-sandbox --window-size=1280,860 --virtual-time-budget=5000 --screenshot=dashboard.png 'http://localhost:8080/?snapshot'";

/** Whether `command -v name` finds a program. */
function onPath(name: string): boolean {
  return spawnSync('bash', ['-c', `command -v ${name}`]).status === 0;
}

let tc: TestCoordinator;
let browser: TestBrowser;
let page: Page;
let client: RawClient;
let base: string;

/** Marks the page; a reload would lose the mark. */
async function markPage(): Promise<void> {
  await page.evaluate(() => {
    (globalThis as unknown as { dtpMark: number }).dtpMark = 42;
  });
}

async function stillMarked(): Promise<boolean> {
  return page.evaluate(() => (globalThis as unknown as { dtpMark?: number }).dtpMark === 42);
}

/** One attribute of every element matching the selector, in page order. */
/** The attribute of every match, read in one step in the page (a re-render between reads cannot strand one). */
function attributes(selector: string, name: string): Promise<string[]> {
  return page
    .locator(selector)
    .evaluateAll(
      (elements: { getAttribute(attr: string): string | null }[], attr: string): string[] =>
        elements.map((e) => e.getAttribute(attr) ?? ''),
      name,
    );
}

/** A SUBMIT_JOB that shows every state in its reply. */
function submitMessage(taskType: string, payload: Record<string, number>): SubmitJob {
  return {
    type: 'SUBMIT_JOB',
    taskType,
    payload,
    maxAttempts: null,
    idempotencyKey: null,
    priority: null,
    knownStates: [...KNOWN_STATES],
  };
}

/** A job's state as the API shows it (WAITING too, which a v1 client sees as QUEUED). */
async function stateOf(jobId: string): Promise<string> {
  const reply = await client.request({
    type: 'GET_JOB_STATUS',
    jobId,
    knownStates: [...KNOWN_STATES],
  });
  assert.equal(reply.type, 'JOB_STATUS', JSON.stringify(reply));
  return reply.type === 'JOB_STATUS' ? reply.job.state : '';
}

function row(jobId: string): string {
  return `[data-testid=job-row][data-job-id="${jobId}"]`;
}

describe('dashboard in Chromium', { skip, timeout: 120_000 }, () => {
  before(async () => {
    tc = await startCoordinator({ metricsPort: 0, heartbeatTimeoutMs: 500 });
    base = `http://127.0.0.1:${tc.coordinator.httpPort}/`;
    client = await RawClient.connect(tc.coordinator.clientPort);
    browser = await launchBrowser();
    page = browser.page;
  });

  after(async () => {
    await browser?.close();
    await client?.close();
    await tc?.close();
  });

  it('loads the overview and goes live', async () => {
    await page.goto(base);
    await page.waitForSelector('[data-testid=overview]');
    await page.waitForSelector('[data-testid=live-status]:has-text("live")');
    assert.match(
      (await page.textContent('[data-testid=charts-note]')) ?? '',
      /start empty after a restart/,
    );
    assert.equal(await page.locator('[data-testid=chart-throughput] svg').count(), 1);
  });

  it("takes README's picture of the page as written: the page loaded, not its Loading… state", async (t) => {
    const shown = codeBlocks(readmeSection(ROOT, 'The dashboard'))
      .flatMap((b) => (b.lang === 'sh' ? shellLines(b) : []))
      .filter((line) => line.startsWith('chromium '));
    assert.deepEqual(shown, [SCREENSHOT], "README's screenshot command");
    if (!onPath('chromium')) {
      t.skip('no `chromium` on the PATH to run the command as written');
      return;
    }
    const dir = tempDir('dtp-screenshot-');
    try {
      const line = SCREENSHOT.replace('8080', String(tc.coordinator.httpPort));
      const bounded = { cwd: dir.dir, env: cleanEnv(), timeoutMs: 60_000 };
      const shot = await runCommand('bash', ['-c', line], bounded);
      const how = shot.timedOut ? 'killed after 60 s' : `exit ${String(shot.status)}`;
      assert.equal(shot.status, 0, `${how}:\n${shot.stderr}`);
      // A PNG of the window's size.
      const png = readFileSync(join(dir.dir, 'dashboard.png'));
      assert.equal(png.subarray(1, 4).toString('latin1'), 'PNG');
      assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [1280, 860]);
      // What that picture shows: the same command asked for the page instead.
      const dump = line.replace('--screenshot=dashboard.png', '--dump-dom');
      const dom = await runCommand('bash', ['-c', dump], bounded);
      assert.equal(dom.status, 0, dom.stderr);
      assert.match(dom.stdout, /data-testid="overview"/);
      assert.match(dom.stdout, /data-testid="chart-throughput"/);
      assert.doesNotMatch(dom.stdout, /Loading…/);
      assert.match(dom.stdout, /snapshot, not live/);
    } finally {
      dir.remove();
    }
  });

  it('charts the failure rate of a bucket with 6 completed and 3 failed jobs as 33.3 %', async () => {
    // All nine end in one 10-second bucket: start with at least 4 s of it left.
    await until(() => Date.now() % 10_000 < 6_000, { timeoutMs: 11_000, intervalMs: 50 });
    const worker = await ScriptedWorker.register(tc.coordinator.workerPort, 'rate-worker', 9);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 9; i++)
        ids.push(await client.submit('SHA256', { text: `rate-${i}` }, { maxAttempts: 1 }));
      for (let i = 0; i < 9; i++) {
        const assign = await worker.assignments.next();
        if (i < 3) worker.fail(assign, 'planned failure');
        else worker.succeed(assign, 'ok');
      }
      for (const id of ids) await client.wait(id);
    } finally {
      await worker.close();
    }
    const overview = (await (await fetch(`${base}api/overview`)).json()) as {
      activity: { buckets: { completed: number; failed: number }[] };
    };
    assert.ok(
      overview.activity.buckets.some((b) => b.completed === 6 && b.failed === 3),
      'the API has the bucket',
    );
    await page.goto(base);
    const dot = '[data-testid=chart-failures] g[data-series="failed %"] circle';
    await page.waitForSelector(dot);
    assert.equal(Number(await page.getAttribute(dot, 'data-value')).toFixed(1), '33.3');
    const legend = '[data-testid=chart-failures] .legend [data-series="failed %"]';
    assert.match((await page.textContent(legend)) ?? '', /33\.3 %/);
    // Drawn where the axis says 33.3 % is: between the ticks 0 and 50 (the axis top).
    const chart = '[data-testid=chart-failures] svg';
    const labels = await page.locator(`${chart} > g > text.axis`).allTextContents();
    assert.deepEqual(labels, ['0', '25', '50']);
    const [y0, , yTop] = (await attributes(`${chart} > g > line.grid`, 'y1')).map(Number);
    const cy = Number(await page.getAttribute(dot, 'cy'));
    assert.ok(Math.abs(cy - (y0! + ((yTop! - y0!) * 100) / 3 / 50)) < 0.5, `${cy} ${y0} ${yTop}`);
  });

  it('shows a job submitted from the CLI and its completion without a reload', async () => {
    const worker = startRealWorker(tc.coordinator.workerPort, 'browser-worker', 2);
    try {
      await page.goto(`${base}#/jobs`);
      await page.waitForSelector('[data-testid=job-filters]');
      await markPage();
      const cli = ScriptProcess.start('client.sh', [
        '--port',
        String(tc.coordinator.clientPort),
        'submit',
        'sleep',
        '--milliseconds',
        '700',
        '--quiet',
      ]);
      assert.equal(await cli.exited, 0, cli.output);
      const jobId = cli.output.trim();
      await page.waitForSelector(row(jobId));
      await page.waitForSelector(`${row(jobId)}[data-state=COMPLETED]`, { timeout: 15_000 });
      assert.ok(await stillMarked(), 'the page was not reloaded');
    } finally {
      await worker.close();
    }
  });

  it('cancels a running job from its page, after confirming', async () => {
    const worker = startRealWorker(tc.coordinator.workerPort, 'cancel-worker', 1);
    try {
      const jobId = await client.submit('SLEEP', { durationMillis: 60_000 });
      await until(async () => (await client.status(jobId)).state === 'RUNNING', {
        timeoutMs: 10_000,
      });
      await page.goto(`${base}#/jobs/${jobId}`);
      await page.waitForSelector('[data-testid=job-page] [data-state=RUNNING]');
      await markPage();
      await page.click('[data-testid=action-cancel]');
      await page.waitForSelector('[data-testid=confirm-dialog]');
      await page.click('[data-testid=confirm-cancel]');
      assert.equal(await page.locator('[data-testid=confirm-dialog]').count(), 0);
      assert.equal(
        (await client.status(jobId)).state,
        'RUNNING',
        'nothing happens without confirming',
      );
      await page.click('[data-testid=action-cancel]');
      await page.click('[data-testid=confirm-ok]');
      await page.waitForSelector('[data-testid=job-page] [data-state=CANCELLED]');
      assert.equal((await client.status(jobId)).state, 'CANCELLED');
      await page.waitForSelector('[data-testid=action-rerun]');
      assert.ok(await stillMarked());
    } finally {
      await worker.close();
    }
  });

  it('filters by state and task type, searches by key, and pages with cursors', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) ids.push(await client.submit('PAGED_UI', { i }));
    const keyed = await client.submit('OTHER_UI', { k: 1 }, { idempotencyKey: 'invoice-2024-17' });
    const newestFirst = [...ids].reverse();

    await page.goto(`${base}#/jobs`);
    await page.fill('[data-testid=job-filters] input[name=type]', 'PAGED_UI');
    await page.selectOption('[data-testid=job-filters] select[name=state]', 'QUEUED');
    await page.click('[data-testid=job-filters] button[type=submit]');
    const rowIds = (): Promise<string[]> => attributes('[data-testid=job-row]', 'data-job-id');
    await until(async () => (await rowIds())[0] === newestFirst[0], { timeoutMs: 5_000 });
    assert.deepEqual(await rowIds(), newestFirst.slice(0, 25));
    await page.click('[data-testid=page-older]');
    await until(async () => (await rowIds())[0] === newestFirst[25], { timeoutMs: 5_000 });
    assert.deepEqual(await rowIds(), newestFirst.slice(25, 50));
    await page.click('[data-testid=page-older]');
    await until(async () => (await rowIds()).length === 10, { timeoutMs: 5_000 });
    assert.deepEqual(await rowIds(), newestFirst.slice(50));
    assert.ok(await page.isDisabled('[data-testid=page-older]'), 'the last page has no older one');
    await page.click('[data-testid=page-newer]');
    await until(async () => (await rowIds())[0] === newestFirst[25], { timeoutMs: 5_000 });

    await page.selectOption('[data-testid=job-filters] select[name=state]', 'COMPLETED');
    await page.click('[data-testid=job-filters] button[type=submit]');
    await page.waitForSelector('[data-testid=no-jobs]');

    await page.goto(`${base}#/jobs`);
    // Only the hash changed: wait until the filter bar has reset to the new
    // route, or the reset could wipe what is typed next.
    await page.waitForSelector('[data-testid=job-filters] select[name=state] >> visible=true');
    await until(
      async () =>
        (await page.inputValue('[data-testid=job-filters] select[name=state]')) === '' &&
        (await page.inputValue('[data-testid=job-filters] input[name=type]')) === '',
      { timeoutMs: 5_000 },
    );
    await page.fill('[data-testid=job-filters] input[name=search]', 'invoice-2024-17');
    await page.click('[data-testid=job-filters] button[type=submit]');
    await until(async () => (await rowIds()).join() === keyed, { timeoutMs: 5_000 });
    await page.fill('[data-testid=job-filters] input[name=search]', ids[7] as string);
    await page.click('[data-testid=job-filters] button[type=submit]');
    await until(async () => (await rowIds()).join() === ids[7], { timeoutMs: 5_000 });
  });

  it('shows the answer to the newest filter even when an older answer arrives after it', async () => {
    const marker = await client.submit('LATE_UI', { n: 1 });
    await client.submit('NOISE_UI', { n: 2 }); // newer: the unfiltered page shows it first
    // Hold back the first, unfiltered, list request until the filtered one was answered.
    let releaseFirst: () => void = () => undefined;
    const firstHeld = new Promise<void>((resolve) => {
      releaseFirst = resolve;
    });
    let filteredAnswered: () => void = () => undefined;
    const filteredDone = new Promise<void>((resolve) => {
      filteredAnswered = resolve;
    });
    let held: Request | null = null;
    await page.route('**/api/jobs?*', async (route) => {
      const url = new URL(route.request().url());
      if (!url.searchParams.has('type') && held === null) {
        held = route.request();
        await firstHeld;
        await route.continue();
        return;
      }
      const response = await route.fetch();
      await route.fulfill({ response });
      if (url.searchParams.get('type') === 'LATE_UI') filteredAnswered();
    });
    try {
      await page.goto(`${base}#/jobs`);
      const late = await until(() => held, { timeoutMs: 5_000 });
      await page.fill('[data-testid=job-filters] input[name=type]', 'LATE_UI');
      await page.click('[data-testid=job-filters] button[type=submit]');
      await filteredDone;
      releaseFirst();
      await page.waitForSelector(row(marker));
      // The late unfiltered answer lists jobs of other types: once the page has
      // read it and rendered (two frames), it must not have replaced the rows.
      await (await late.response())?.finished();
      await page.evaluate(
        'new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))',
      );
      assert.deepEqual(await attributes('[data-testid=job-row]', 'data-job-id'), [marker]);
    } finally {
      releaseFirst();
      await page.unroute('**/api/jobs?*');
    }
  });

  it('shows two attempts on the job page after the first worker was killed', async () => {
    const victim = ScriptProcess.start('worker.sh', [
      '--coordinator-host',
      '127.0.0.1',
      '--coordinator-port',
      String(tc.coordinator.workerPort),
      '--id',
      'doomed-worker',
      '--capacity',
      '1',
      '--heartbeat-interval-millis',
      '100',
    ]);
    let survivor: Worker | null = null;
    try {
      const jobId = await client.submit('SLEEP', { durationMillis: 1_500 });
      await until(async () => (await client.status(jobId)).workerId === 'doomed-worker', {
        timeoutMs: 20_000,
      });
      await page.goto(`${base}#/jobs/${jobId}`);
      await page.waitForSelector('[data-testid=attempt-row]');
      await victim.kill();
      survivor = startRealWorker(tc.coordinator.workerPort, 'survivor-worker', 1);
      await page.waitForSelector('[data-testid=attempt-row] >> nth=1', { timeout: 15_000 });
      await page.waitForSelector('[data-testid=job-page] [data-state=COMPLETED]', {
        timeout: 15_000,
      });
      const outcomes = await attributes('[data-testid=attempt-row]', 'data-outcome');
      assert.deepEqual(outcomes, ['WORKER_LOST', 'SUCCEEDED']);
      assert.match(
        (await page.textContent('[data-testid=attempt-timeline]')) ?? '',
        /doomed-worker[\s\S]*survivor-worker/,
      );
      assert.equal(await page.textContent('[data-testid=job-attempts]'), '2/3');
    } finally {
      await victim.kill();
      await survivor?.close();
    }
  });

  it('shows queues with limits and group backlogs, and pauses one after confirming, live', async () => {
    const set = (msg: Omit<SetQueue, 'type'>) => client.request({ type: 'SET_QUEUE', ...msg });
    await set({ name: 'ui-q', concurrency: 3, rateLimit: { max: 20, intervalMillis: 1_000 } });
    await set({ name: 'ui-q', groupConcurrency: 1 });
    for (const [group, n] of [
      ['tenant-big', 3],
      ['tenant-small', 1],
    ] as const) {
      for (let i = 0; i < n; i++) {
        await client.request({
          ...submitMessage('QUEUE_UI', { i }),
          queue: 'ui-q',
          groupKey: group,
        });
      }
    }
    await page.goto(`${base}#/queues`);
    const queueRow = '[data-testid=queue-row][data-queue=ui-q]';
    await page.waitForSelector(`${queueRow}[data-paused=false]`);
    await markPage();
    assert.equal(
      await page.textContent(`${queueRow} [data-testid=queue-concurrency]`),
      '3 · 1 per group',
    );
    assert.match(
      (await page.textContent(`${queueRow} [data-testid=queue-rate]`)) ?? '',
      /^20 per 1\.00 s/,
    );
    assert.equal(
      await page.getAttribute(
        `${queueRow} [data-testid=queue-count][data-state=QUEUED]`,
        'data-count',
      ),
      '4',
    );
    const groups = '[data-testid=queue-groups][data-queue=ui-q] [data-testid=group-row]';
    assert.deepEqual(await attributes(groups, 'data-group'), ['tenant-big', 'tenant-small']);
    assert.deepEqual(await attributes(groups, 'data-queued'), ['3', '1']);

    const paused = async (): Promise<boolean> => {
      const reply = await client.request({ type: 'LIST_QUEUES' });
      return reply.type === 'QUEUE_LIST' && reply.queues.some((q) => q.name === 'ui-q' && q.paused);
    };
    await page.click(`${queueRow} [data-testid=queue-pause]`);
    await page.click('[data-testid=confirm-cancel]');
    assert.equal(await paused(), false, 'nothing happens without confirming');
    await page.click(`${queueRow} [data-testid=queue-pause]`);
    await page.click('[data-testid=confirm-ok]');
    await page.waitForSelector(`${queueRow}[data-paused=true]`);
    assert.equal(await paused(), true);
    // Resumed elsewhere: the page follows without a reload.
    await set({ name: 'ui-q', paused: false });
    await page.waitForSelector(`${queueRow}[data-paused=false]`, { timeout: 5_000 });
    assert.ok(await stillMarked(), 'the page was not reloaded');
  });

  it('shows schedules with next runs and the last job, and triggers and pauses one after confirming', async () => {
    const reply = await client.request({
      type: 'SET_SCHEDULE',
      schedule: scheduleDefinition('ui-hourly', 'SCHEDULE_UI', { everyMillis: 3_600_000 }),
    });
    assert.equal(reply.type, 'SCHEDULE_INFO', JSON.stringify(reply));
    await page.goto(`${base}#/schedules`);
    const scheduleRow = '[data-testid=schedule-row][data-schedule=ui-hourly]';
    await page.waitForSelector(`${scheduleRow}[data-paused=false]`);
    await markPage();
    assert.match((await page.textContent(scheduleRow)) ?? '', /every 1\.0 h/);
    assert.equal(await page.locator(`${scheduleRow} [data-testid=schedule-unserved]`).count(), 1);
    assert.match(
      (await page.textContent(`${scheduleRow} [data-testid=schedule-countdown]`)) ?? '',
      /^in (59 min|1 h)/,
    );
    assert.match(
      (await page.textContent(`${scheduleRow} [data-testid=schedule-next-runs]`)) ?? '',
      /then .*, .*, .*, /,
    );

    await page.click(`${scheduleRow} [data-testid=schedule-trigger]`);
    await page.click('[data-testid=confirm-ok]');
    await page.waitForSelector('[data-testid=notice]:has-text("Triggered ui-hourly")');
    const lastJob = `${scheduleRow} [data-testid=schedule-last-job]`;
    await page.waitForSelector(`${lastJob} [data-state=QUEUED]`);
    const jobId = (await page.getAttribute(lastJob, 'data-job-id')) ?? '';
    assert.equal((await client.status(jobId)).scheduleName, 'ui-hourly');
    // Its job cancelled elsewhere: the page follows without a reload.
    await client.request({ type: 'CANCEL_JOB', jobId });
    await page.waitForSelector(`${lastJob} [data-state=CANCELLED]`, { timeout: 5_000 });

    await page.click(`${scheduleRow} [data-testid=schedule-pause]`);
    await page.click('[data-testid=confirm-ok]');
    await page.waitForSelector(`${scheduleRow}[data-paused=true]`);
    const info = await client.request({ type: 'GET_SCHEDULE', name: 'ui-hourly' });
    assert.ok(info.type === 'SCHEDULE_INFO' && info.schedule.paused);
    assert.ok(await stillMarked(), 'the page was not reloaded');
  });

  it("shows a schedule's times in its own zone, named, whatever the browser's zone", async () => {
    // The browser in New York, the schedule in Berlin: 02:00 there is 20:00 or 21:00 here.
    const cdp = await browser.context.newCDPSession(page);
    await cdp.send('Emulation.setTimezoneOverride', { timezoneId: 'America/New_York' });
    try {
      for (const [name, extra] of [
        ['ui-berlin', { cron: '0 2 * * *', timezone: 'Europe/Berlin' }],
        ['ui-interval', { everyMillis: 3_600_000 }],
      ] as const) {
        const schedule = scheduleDefinition(name, 'SCHEDULE_UI', extra);
        const reply = await client.request({ type: 'SET_SCHEDULE', schedule });
        assert.equal(reply.type, 'SCHEDULE_INFO', JSON.stringify(reply));
      }
      const triggered = await client.request({ type: 'TRIGGER_SCHEDULE', name: 'ui-berlin' });
      assert.equal(triggered.type, 'JOB_SUBMITTED', JSON.stringify(triggered));
      const info = await client.request({ type: 'GET_SCHEDULE', name: 'ui-berlin' });
      assert.ok(info.type === 'SCHEDULE_INFO' && info.schedule.lastRunAtMillis !== null);
      await page.goto(`${base}#/schedules`);
      const berlin = '[data-testid=schedule-row][data-schedule=ui-berlin]';
      await page.waitForSelector(`${berlin} [data-testid=schedule-last-run]`);
      const text = async (selector: string): Promise<string> =>
        (await page.textContent(selector)) ?? '';

      assert.match(
        await text(`${berlin} [data-testid=schedule-next]`),
        /^\d{4}-\d\d-\d\d 02:00:00$/,
      );
      assert.equal(
        await text(`${berlin} [data-testid=schedule-next-runs] [data-testid=schedule-zone]`),
        'Europe/Berlin',
      );
      assert.match(
        (await page.getAttribute(`${berlin} [data-testid=schedule-next] span`, 'title')) ?? '',
        /^\d{4}-\d\d-\d\d (20|21):00:00 in this browser's zone \(America\/New_York\)$/,
      );
      const then = (await text(`${berlin} [data-testid=schedule-then]`)).replace(/^then /, '');
      assert.deepEqual(
        then.split(', ').map((t) => t.slice(11)),
        ['02:00:00', '02:00:00', '02:00:00', '02:00:00'],
      );
      // The trigger's time, as a Berlin clock read it.
      const lastRun = new Intl.DateTimeFormat('sv-SE', {
        timeZone: 'Europe/Berlin',
        dateStyle: 'short',
        timeStyle: 'medium',
      }).format(info.schedule.lastRunAtMillis);
      assert.equal(await text(`${berlin} [data-testid=schedule-last-run]`), lastRun);
      assert.equal(
        await text(`${berlin} [data-testid=schedule-last-job] [data-testid=schedule-zone]`),
        'Europe/Berlin',
      );

      // An interval has no zone of its own: the browser's, named as such.
      const interval = '[data-testid=schedule-row][data-schedule=ui-interval]';
      assert.equal(
        await text(`${interval} [data-testid=schedule-zone]`),
        "America/New_York, this browser's zone",
      );
    } finally {
      await cdp.send('Emulation.setTimezoneOverride', { timezoneId: '' });
      await cdp.detach();
      for (const name of ['ui-berlin', 'ui-interval'])
        await client.request({ type: 'DELETE_SCHEDULE', name });
    }
  });

  it('shows a job\'s deduplication key and expiry, "expired" on its page and in the list, and queues held by a handler', async () => {
    // The snapshots come from the coordinator, with the fields it would add
    // laid over them in the browser, so this checks the page's rendering.
    const submitted = async (taskType: string): Promise<string> => {
      const reply = await client.request({ ...submitMessage(taskType, {}), queue: 'held-q' });
      assert.equal(reply.type, 'JOB_SUBMITTED', JSON.stringify(reply));
      return reply.type === 'JOB_SUBMITTED' ? reply.jobId : '';
    };
    const waiting = await submitted('EXPIRY_UI');
    const expired = await submitted('EXPIRY_UI');
    await client.request({ type: 'CANCEL_JOB', jobId: expired });
    const expiresAtMillis = Date.now() + 3_600_000;
    const extra: Record<string, Record<string, unknown>> = {
      [waiting]: { dedupKey: 'invoice-7', dedupMode: 'throttle', expiresAtMillis },
      [expired]: { expiresAtMillis: Date.now() - 1_000, expired: true },
    };
    const overlay = (job: { jobId: string }) => ({ ...job, ...extra[job.jobId] });
    const heldUntil = Date.now() + 90_000;
    await page.route(
      (url) => url.pathname.startsWith('/api/'),
      async (route) => {
        const response = await route.fetch();
        const { pathname } = new URL(route.request().url());
        const body = (await response.json()) as Record<string, unknown>;
        if (pathname === '/api/jobs') {
          body.jobs = (body.jobs as { jobId: string }[]).map(overlay);
        } else if (pathname.startsWith('/api/jobs/') && !pathname.endsWith('/flow')) {
          body.job = overlay(body.job as { jobId: string });
        } else if (pathname === '/api/queues') {
          body.queues = (body.queues as { name: string }[]).map((q) =>
            q.name !== 'held-q'
              ? q
              : {
                  ...q,
                  rateLimitedUntilMillis: heldUntil,
                  heldGroups: [{ groupKey: 'tenant-a', untilMillis: heldUntil - 30_000 }],
                },
          );
        }
        await route.fulfill({ response, json: body });
      },
    );
    try {
      const time = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/;
      await page.goto(`${base}#/jobs/${waiting}`);
      await page.waitForSelector('[data-testid=job-page] [data-state=QUEUED]');
      assert.equal(await page.textContent('[data-testid=job-dedup-key]'), 'invoice-7');
      assert.equal(await page.textContent('[data-testid=job-dedup-mode]'), ' (throttle)');
      assert.match((await page.textContent('[data-testid=job-expires-at]')) ?? '', time);
      assert.match(
        (await page.textContent('[data-testid=job-expires-countdown]')) ?? '',
        /\(in (1 h|59 min \d+ s) unless an attempt starts first\)/,
      );
      assert.equal(await page.locator('[data-testid=job-expired]').count(), 0);

      await page.goto(`${base}#/jobs/${expired}`);
      await page.waitForSelector('[data-testid=job-page] [data-state=CANCELLED]');
      assert.equal(
        await page.textContent('[data-testid=job-page] [data-testid=job-expired]'),
        'expired',
      );
      assert.equal(await page.locator('[data-testid=job-expires-countdown]').count(), 0);
      assert.equal(await page.locator('[data-testid=job-dedup-key]').count(), 0);

      await page.goto(`${base}#/jobs?type=EXPIRY_UI`);
      await page.waitForSelector(row(waiting));
      assert.equal(await page.textContent(`${row(expired)} [data-testid=job-expired]`), 'expired');
      assert.equal(await page.locator(`${row(waiting)} [data-testid=job-expired]`).count(), 0);

      await page.goto(`${base}#/queues`);
      const queueRow = '[data-testid=queue-row][data-queue=held-q]';
      await page.waitForSelector(`${queueRow} [data-testid=queue-held]`);
      assert.match(
        (await page.textContent(`${queueRow} [data-testid=queue-held]`)) ?? '',
        /^held by a handler until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/,
      );
      const held = '[data-testid=queue-held-groups][data-queue=held-q] [data-testid=held-group]';
      assert.deepEqual(await attributes(held, 'data-group'), ['tenant-a']);
      assert.deepEqual(await attributes(held, 'data-until'), [String(heldUntil - 30_000)]);
      assert.equal(await page.locator('[data-testid=queue-held]').count(), 1, 'only that queue');
    } finally {
      await page.unrouteAll();
    }
  });

  it('lists a delayed job as SCHEDULED with its run time, counts down on its page, and follows it to QUEUED', async () => {
    const runAtMillis = Date.now() + 2_500;
    const reply = await client.request({ ...submitMessage('DELAYED_UI', {}), runAtMillis });
    assert.equal(reply.type, 'JOB_SUBMITTED', JSON.stringify(reply));
    const jobId = reply.type === 'JOB_SUBMITTED' ? reply.jobId : '';
    await page.goto(`${base}#/jobs?state=SCHEDULED&type=DELAYED_UI`);
    await page.waitForSelector(`${row(jobId)}[data-state=SCHEDULED]`);
    assert.notEqual(await page.textContent(`${row(jobId)} [data-testid=job-run-at]`), '-');
    await page.goto(`${base}#/jobs/${jobId}`);
    await page.waitForSelector('[data-testid=job-page] [data-state=SCHEDULED]');
    await markPage();
    assert.match((await page.textContent('[data-testid=job-countdown]')) ?? '', /^ ?in [0-9] s$/);
    await page.waitForSelector('[data-testid=job-page] [data-state=QUEUED]', { timeout: 10_000 });
    assert.equal(await page.locator('[data-testid=job-countdown]').count(), 0);
    assert.ok(await stillMarked(), 'the page was not reloaded');
  });

  it('shows a flow around a job: parents with states, dependents, WAITING in the list, child jobs and steps', async () => {
    const idle = (ref: string, dependsOn: string[] = []) => ({
      ref,
      taskType: 'FLOW_UI',
      payload: {},
      dependsOn,
    });
    const reply = await client.request({
      type: 'SUBMIT_FLOW',
      jobs: [idle('a'), idle('b', ['a']), idle('c', ['a']), idle('d', ['b', 'c'])],
    });
    assert.equal(reply.type, 'FLOW_SUBMITTED', JSON.stringify(reply));
    const ids = new Map(
      reply.type === 'FLOW_SUBMITTED' ? reply.jobs.map((j) => [j.ref, j.jobId]) : [],
    );
    const id = (ref: string): string => ids.get(ref) as string;
    await page.goto(`${base}#/jobs?state=WAITING&type=FLOW_UI`);
    for (const ref of ['b', 'c', 'd'])
      await page.waitForSelector(`${row(id(ref))}[data-state=WAITING]`);
    assert.equal(await page.locator(row(id('a'))).count(), 0, 'a is QUEUED, not WAITING');

    // The snapshot fields of child jobs and steps, as a coordinator that has them would send them.
    const made = 'made-by-handler-0001';
    const ofB = (url: URL): boolean => url.pathname === `/api/jobs/${id('b')}`;
    await page.route(ofB, async (route) => {
      const response = await route.fetch();
      const details = (await response.json()) as { job: Record<string, unknown> };
      details.job.parentJobId = id('a');
      details.job.children = [made];
      details.job.steps = [
        { name: 'fetch', atMillis: Date.now(), resultBytes: 3_500 },
        { name: 'dtp.sleep', atMillis: Date.now(), resultBytes: 20 },
        { name: 'dtp.sleep', atMillis: Date.now(), resultBytes: 20 },
      ];
      // Four attempts started, two of them ended in a sleep, one was requeued: one counts.
      details.job.attempts = 4;
      details.job.suspensions = 2;
      details.job.requeues = 1;
      await route.fulfill({ response, json: details });
    });
    await page.goto(`${base}#/jobs/${id('b')}`);
    await page.waitForSelector('[data-testid=flow-tree]');
    assert.deepEqual(await attributes('[data-testid=flow-node]', 'data-level'), ['-1', '0', '1']);
    assert.deepEqual(await attributes('[data-testid=flow-node]', 'data-job-id'), [
      id('a'),
      id('b'),
      id('d'),
    ]);
    assert.deepEqual(await attributes('[data-testid=parent-link]', 'data-job-id'), [id('a')]);
    await page.waitForSelector('[data-testid=job-parents] [data-state=QUEUED]');
    assert.deepEqual(await attributes('[data-testid=child-link]', 'data-job-id'), [made]);
    assert.deepEqual(await attributes('[data-testid=parent-job-link]', 'data-job-id'), [id('a')]);
    assert.equal(await page.textContent('[data-testid=step-row] td'), 'fetch');
    assert.equal(await page.textContent('[data-testid=step-row] td:nth-child(2)'), '3.4 KiB');
    assert.equal(await page.textContent('[data-testid=job-attempts]'), '1/3');
    assert.equal(await page.textContent('[data-testid=job-suspensions]'), '2');
    assert.equal(await page.textContent('[data-testid=job-requeues]'), '1');
    await page.unroute(ofB);

    // From the first job: every dependent below it, and a click follows one.
    await page.goto(`${base}#/jobs/${id('a')}`);
    await page.waitForSelector(`[data-testid=flow-node][data-job-id="${id('d')}"][data-level="2"]`);
    assert.equal(await page.locator('[data-testid=job-relations]').count(), 0, 'a has no parents');
    await page.click(`[data-testid=flow-link][data-job-id="${id('c')}"]`);
    await page.waitForSelector(`[data-testid=flow-node][data-job-id="${id('c')}"][data-level="0"]`);
    await client.request({ type: 'CANCEL_JOB', jobId: id('a') });
  });

  it('shows what a waiting job waits for, signals it after confirming, and sees it go on', async () => {
    const worker = await startWorker({
      coordinatorHost: '127.0.0.1',
      coordinatorPort: tc.coordinator.workerPort,
      workerId: 'signal-worker',
      capacity: 2,
      threads: 1,
      heartbeatIntervalMs: 50,
      reconnectDelayMs: 50,
      tasks: [IO_TASKS],
      logger: testLogger('worker'),
    });
    try {
      const jobId = await client.submit('io.waitSignal', {});
      await until(async () => (await stateOf(jobId)) === 'WAITING', {
        timeoutMs: 10_000,
        what: 'the job waiting for its signal',
      });
      // A signal of another name: held, not taken.
      const held = await client.request({
        type: 'SIGNAL_JOB',
        jobId,
        name: 'comment',
        payload: 'later',
      });
      assert.ok(held.type === 'JOB_SIGNALLED' && !held.resumed, JSON.stringify(held));
      await page.goto(`${base}#/jobs/${jobId}`);
      await page.waitForSelector('[data-testid=job-page] [data-state=WAITING]');
      await markPage();
      assert.match(
        (await page.textContent('[data-testid=job-waiting-for]')) ?? '',
        /signal approve, no time limit/,
      );
      assert.equal(await page.textContent('[data-testid=job-signals-held]'), '1');

      await page.click('[data-testid=action-signal]');
      await page.waitForSelector('[data-testid=confirm-dialog]');
      assert.equal(await page.inputValue('input[name=signal-name]'), 'approve');
      await page.click('[data-testid=confirm-cancel]');
      assert.equal(await stateOf(jobId), 'WAITING', 'nothing without confirming');

      await page.click('[data-testid=action-signal]');
      await page.fill('textarea[name=signal-payload]', '{"by": ');
      await page.click('[data-testid=confirm-ok]');
      await page.waitForSelector('[data-testid=confirm-dialog] .error:has-text("not valid JSON")');
      await page.fill('textarea[name=signal-payload]', '{"by": "ann"}');
      await page.click('[data-testid=confirm-ok]');
      await page.waitForSelector('[data-testid=notice]:has-text("goes on")');
      await page.waitForSelector('[data-testid=job-page] [data-state=COMPLETED]', {
        timeout: 10_000,
      });
      assert.deepEqual(JSON.parse((await page.textContent('[data-testid=job-result]')) ?? ''), {
        approved: { by: 'ann' },
      });
      assert.equal(await page.locator('[data-testid=action-signal]').count(), 0, 'job ended');
      assert.ok(await stillMarked());
    } finally {
      await worker.close();
    }
  });

  it('lists the triggers under Schedules', async () => {
    const reply = await client.request({
      type: 'SET_TRIGGER',
      trigger: { name: 'ui-on-paid', event: 'order.paid', taskType: 'PAID_UI', maxAttempts: 2 },
    });
    assert.equal(reply.type, 'TRIGGER_INFO', JSON.stringify(reply));
    await page.goto(`${base}#/schedules`);
    const triggerRow = '[data-testid=trigger-row][data-name=ui-on-paid]';
    await page.waitForSelector(triggerRow);
    const text = (await page.textContent(triggerRow)) ?? '';
    assert.match(text, /order\.paid/);
    assert.match(text, /PAID_UI/);
    assert.match(text, /default.*NORMAL2/);
  });

  it('lists workers with their slots and task types', async () => {
    const worker = startRealWorker(tc.coordinator.workerPort, 'listed-worker', 3);
    try {
      await page.goto(`${base}#/workers`);
      await page.waitForSelector('[data-testid=worker-row][data-worker-id=listed-worker]', {
        timeout: 10_000,
      });
      const text = await page.textContent('[data-testid=worker-row][data-worker-id=listed-worker]');
      assert.match(text ?? '', /0\/3/);
      assert.match(text ?? '', /SLEEP/);
    } finally {
      await worker.close();
    }
  });

  it('shows a worker of 5,000 slots with a bounded slot bar and job list', async () => {
    const big = await ScriptedWorker.register(tc.coordinator.workerPort, 'big-worker', 1024, {
      taskTypes: ['BIG_UI'],
      extensions: { slots: 5000 },
    });
    try {
      const jobs = Array.from({ length: 100 }, () => ({ taskType: 'BIG_UI', payload: {} }));
      assert.equal((await client.request({ type: 'SUBMIT_JOBS', jobs })).type, 'JOBS_SUBMITTED');
      for (let i = 0; i < 100; i++) await big.assignments.next();
      const bigRow = '[data-testid=worker-row][data-worker-id=big-worker]';
      await page.goto(`${base}#/workers`);
      await page.waitForSelector(`${bigRow}:has-text("100/5000")`, { timeout: 10_000 });
      assert.equal(await page.locator(`${bigRow} .slots i`).count(), 32);
      assert.equal(await page.locator(`${bigRow} .slots i.busy`).count(), 1, '100 of 5,000');
      assert.equal(await page.locator(`${bigRow} a.chip`).count(), 20);
      assert.equal(await page.textContent(`${bigRow} [data-testid=worker-more-jobs]`), ' +80 more');
    } finally {
      await big.close();
    }
  });
});

describe('dashboard with client tokens', { skip, timeout: 60_000 }, () => {
  it('asks for a token, opens a session, and goes live with the cookie', async () => {
    const dir = tempDir();
    const tokenFile = join(dir.dir, 'client-tokens');
    writeFileSync(tokenFile, 'let-me-in\n');
    const guarded = await startCoordinator({
      metricsPort: 0,
      security: { clientTokenFile: tokenFile },
    });
    const tokenBrowser = await launchBrowser();
    try {
      const tokenPage = tokenBrowser.page;
      await tokenPage.goto(`http://127.0.0.1:${guarded.coordinator.httpPort}/`);
      await tokenPage.waitForSelector('[data-testid=token-form]');
      await tokenPage.fill('[data-testid=token-form] input[name=token]', 'wrong');
      await tokenPage.click('[data-testid=token-form] button');
      await tokenPage.waitForSelector('[data-testid=token-form] .error');
      await tokenPage.fill('[data-testid=token-form] input[name=token]', 'let-me-in');
      await tokenPage.click('[data-testid=token-form] button');
      await tokenPage.waitForSelector('[data-testid=overview]');
      await tokenPage.waitForSelector('[data-testid=live-status]:has-text("live")');
      const cookies = await tokenBrowser.context.cookies();
      const session = cookies.find((c) => c.name === 'dtp_session');
      assert.ok(session !== undefined && session.httpOnly && session.sameSite === 'Strict');
    } finally {
      await tokenBrowser.close();
      await guarded.close();
      dir.remove();
    }
  });
});
