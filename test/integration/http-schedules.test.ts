/**
 * Schedules and delayed jobs through the HTTP API on a real coordinator:
 * `GET /api/schedules` with next runs (every and cron in a time zone) and
 * the last job's state, `GET /api/schedules/<name>` with recent jobs,
 * pause, resume and trigger, errors (404, 405, 400, 415), delayed jobs in
 * `/api/jobs?state=SCHEDULED`, and the mutating calls behind the same
 * token and Origin checks as every other action.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { JobDetails, JobPage } from '../../src/http/api.js';
import type {
  ScheduleDetails,
  ScheduleList,
  ScheduleView,
  TriggerResult,
} from '../../src/http/schedules-api.js';
import { KNOWN_STATES } from '../../src/protocol/job-view.js';
import type { ScheduleDefinition } from '../../src/protocol/messages.js';
import { HttpApi } from '../helpers/http-api.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { scheduleDefinition } from '../helpers/schedules.js';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';

const HOUR_MS = 3_600_000;

function definition(name: string, extra: Partial<ScheduleDefinition>): ScheduleDefinition {
  return scheduleDefinition(name, 'NIGHTLY_REPORT', { payload: { report: name }, ...extra });
}

async function setSchedule(client: RawClient, def: ScheduleDefinition): Promise<void> {
  const reply = await client.request({ type: 'SET_SCHEDULE', schedule: def });
  assert.equal(reply.type, 'SCHEDULE_INFO', JSON.stringify(reply));
}

/** Hour and minute of an instant in a time zone. */
function wallClock(ms: number, timeZone: string): string {
  return new Intl.DateTimeFormat('en-GB', {
    timeZone,
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  }).format(new Date(ms));
}

describe('HTTP API: /api/schedules', () => {
  let tc: TestCoordinator;
  let api: HttpApi;
  let client: RawClient;

  before(async () => {
    tc = await startCoordinator({ metricsPort: 0 });
    api = new HttpApi(tc.coordinator.httpPort as number);
    client = await RawClient.connect(tc.coordinator.clientPort);
    await setSchedule(client, definition('hourly', { everyMillis: HOUR_MS }));
    await setSchedule(
      client,
      definition('berlin-night', { cron: '30 2 * * *', timezone: 'Europe/Berlin' }),
    );
  });

  after(async () => {
    await client.close();
    await tc.close();
  });

  it('lists schedules by name with their next runs, every and cron in a time zone', async () => {
    const list = await api.ok<ScheduleList>('/api/schedules');
    assert.deepEqual(
      list.schedules.map((s) => s.name),
      ['berlin-night', 'hourly'],
    );
    const [night, hourly] = list.schedules as [ScheduleView, ScheduleView];
    assert.equal(hourly.everyMillis, HOUR_MS);
    assert.equal(hourly.nextRunsAtMillis.length, 5);
    assert.equal(hourly.nextRunsAtMillis[0], hourly.nextRunAtMillis);
    hourly.nextRunsAtMillis.slice(1).forEach((at, i) => {
      assert.equal(at - (hourly.nextRunsAtMillis[i] as number), HOUR_MS);
    });
    assert.equal(night.timezone, 'Europe/Berlin');
    assert.equal(night.nextRunsAtMillis.length, 5);
    assert.equal(night.nextRunsAtMillis[0], night.nextRunAtMillis);
    for (const at of night.nextRunsAtMillis) assert.equal(wallClock(at, 'Europe/Berlin'), '02:30');
    const ordered = [...night.nextRunsAtMillis].sort((a, b) => a - b);
    assert.deepEqual(night.nextRunsAtMillis, ordered);
    assert.equal(new Set(night.nextRunsAtMillis).size, 5);
    assert.equal(night.lastJobState, null);
    assert.equal(night.served, false, 'no worker serves NIGHTLY_REPORT');
    assert.ok(list.nowMillis > 0);
  });

  it('says whether a live worker serves the task type', async () => {
    const worker = await ScriptedWorker.register(tc.coordinator.workerPort, 'report-worker', 1, {
      taskTypes: ['OTHER_REPORT'],
    });
    try {
      await setSchedule(
        client,
        scheduleDefinition('served-one', 'OTHER_REPORT', { everyMillis: HOUR_MS }),
      );
      const shown = await api.ok<ScheduleDetails>('/api/schedules/served-one');
      assert.equal(shown.served, true);
      const list = await api.ok<ScheduleList>('/api/schedules');
      assert.equal(list.schedules.find((s) => s.name === 'served-one')?.served, true);
      assert.equal(list.schedules.find((s) => s.name === 'hourly')?.served, false);
    } finally {
      await worker.close();
      await client.request({ type: 'DELETE_SCHEDULE', name: 'served-one' });
    }
  });

  it('triggers a job now, and shows it as the last job and first of the recent ones', async () => {
    const triggered = await api.expect<TriggerResult>(
      'POST',
      '/api/schedules/hourly/trigger',
      201,
      {},
    );
    assert.equal(triggered.job.jobId, triggered.jobId);
    assert.equal(triggered.job.scheduleName, 'hourly');
    assert.equal(triggered.job.state, 'QUEUED', 'no worker serves its type');
    const details = await api.ok<ScheduleDetails>('/api/schedules/hourly');
    assert.equal(details.lastJobId, triggered.jobId);
    assert.equal(details.lastJobState, 'QUEUED');
    assert.deepEqual(details.recentJobs[0], {
      jobId: triggered.jobId,
      state: 'QUEUED',
      runAtMillis: triggered.job.runAtMillis,
    });
    const list = await api.ok<ScheduleList>('/api/schedules');
    const hourly = list.schedules.find((s) => s.name === 'hourly');
    assert.equal(hourly?.lastJobState, 'QUEUED');
  });

  it('pauses and resumes a schedule: no next runs while paused', async () => {
    const paused = await api.expect<ScheduleView>(
      'POST',
      '/api/schedules/berlin-night/pause',
      200,
      {},
    );
    assert.equal(paused.paused, true);
    assert.equal(paused.nextRunAtMillis, null);
    assert.deepEqual(paused.nextRunsAtMillis, []);
    const shown = await api.ok<ScheduleDetails>('/api/schedules/berlin-night');
    assert.equal(shown.paused, true);
    const resumed = await api.expect<ScheduleView>(
      'POST',
      '/api/schedules/berlin-night/resume',
      200,
      {},
    );
    assert.equal(resumed.paused, false);
    assert.equal(resumed.nextRunsAtMillis.length, 5);
  });

  it('answers 404 for an unknown schedule, 405 for a wrong method, 400 and 415 for bad bodies', async () => {
    assert.match(await api.fails('GET', '/api/schedules/nope', 404), /Unknown schedule/);
    assert.match(
      await api.fails('POST', '/api/schedules/nope/trigger', 404, {}),
      /Unknown schedule/,
    );
    await api.fails('GET', '/api/schedules/hourly/pause', 405);
    await api.fails('POST', '/api/schedules/hourly', 405, {});
    await api.fails('POST', '/api/schedules/hourly/pause', 400, { paused: true });
    await api.fails('POST', '/api/schedules/hourly/pause', 415, 'x', {
      'content-type': 'text/plain',
    });
    await api.fails('GET', '/api/schedules?x=1', 400);
    await api.fails('GET', '/api/schedules/hourly/other', 404);
    const details = await api.ok<ScheduleDetails>('/api/schedules/hourly');
    assert.equal(details.paused, false, 'nothing changed');
  });

  it('lists delayed jobs under state SCHEDULED with their run time', async () => {
    const runAtMillis = Date.now() + HOUR_MS;
    const reply = await client.request({
      type: 'SUBMIT_JOB',
      taskType: 'LATER_TYPE',
      payload: {},
      maxAttempts: null,
      idempotencyKey: null,
      priority: null,
      runAtMillis,
      knownStates: [...KNOWN_STATES],
    });
    assert.equal(reply.type, 'JOB_SUBMITTED', JSON.stringify(reply));
    const jobId = reply.type === 'JOB_SUBMITTED' ? reply.jobId : '';
    const page = await api.ok<JobPage>('/api/jobs?state=SCHEDULED');
    assert.deepEqual(
      page.jobs.map((j) => [j.jobId, j.state, j.runAtMillis]),
      [[jobId, 'SCHEDULED', runAtMillis]],
    );
    const details = await api.ok<JobDetails>(`/api/jobs/${jobId}`);
    assert.equal(details.job.state, 'SCHEDULED');
    assert.equal(details.job.runAtMillis, runAtMillis);
  });
});

describe('HTTP API: schedule actions behind tokens and origins', () => {
  it('refuses pause and trigger without a token or from another origin, and changes nothing', async () => {
    const dir = tempDir();
    const tokenFile = join(dir.dir, 'client-tokens');
    writeFileSync(tokenFile, 'sched-token\n');
    const tc = await startCoordinator({ metricsPort: 0, security: { clientTokenFile: tokenFile } });
    const client = await RawClient.connect(tc.coordinator.clientPort);
    try {
      const auth = await client.request({ type: 'AUTH', token: 'sched-token' });
      assert.equal(auth.type, 'AUTH_OK', JSON.stringify(auth));
      await setSchedule(client, definition('guarded', { everyMillis: HOUR_MS }));
      const open = new HttpApi(tc.coordinator.httpPort as number);
      const bearer = open.with({ authorization: 'Bearer sched-token' });
      await open.fails('POST', '/api/schedules/guarded/trigger', 401, {});
      await open.fails('POST', '/api/schedules/guarded/pause', 401, {});
      await open.fails('GET', '/api/schedules', 401);
      const foreign = { origin: 'http://evil.example' };
      await bearer.fails('POST', '/api/schedules/guarded/trigger', 403, {}, foreign);
      await bearer.fails('POST', '/api/schedules/guarded/pause', 403, {}, foreign);
      const details = await bearer.ok<ScheduleDetails>('/api/schedules/guarded');
      assert.equal(details.paused, false);
      assert.deepEqual(details.recentJobs, [], 'no job was made');
      await bearer.expect('POST', '/api/schedules/guarded/trigger', 201, {});
      await bearer.expect('POST', '/api/schedules/guarded/pause', 200, {});
    } finally {
      await client.close();
      await tc.close();
      dir.remove();
    }
  });
});
