/**
 * The schedule metrics on a real coordinator's `/metrics`: a fired tick,
 * its job's first start observed as the start lag, a trigger that is no
 * tick, and delayed jobs in the scheduled-jobs gauge.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KNOWN_STATES } from '../../src/protocol/job-view.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { scheduleDefinition } from '../helpers/schedules.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

let tc: TestCoordinator;
let client: RawClient;

before(async () => {
  tc = await startCoordinator({ metricsPort: 0 });
  client = await RawClient.connect(tc.coordinator.clientPort);
});

after(async () => {
  await client.close();
  await tc.close();
});

/** One sample of the exposition, as printed (`name` or `name{a="b"}`). */
async function sample(key: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${tc.coordinator.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${key} `));
  assert.ok(line !== undefined, `no sample ${key}`);
  return Number(line.slice(key.length + 1));
}

describe('schedule metrics on /metrics', () => {
  it('counts a fired tick and observes its start lag once, and not a trigger', async () => {
    const worker = await ScriptedWorker.register(tc.coordinator.workerPort, 'tick-worker', 2, {
      taskTypes: ['TICK_METRICS'],
    });
    try {
      const set = await client.request({
        type: 'SET_SCHEDULE',
        schedule: scheduleDefinition('metered', 'TICK_METRICS', { everyMillis: 1_000 }),
      });
      assert.equal(set.type, 'SCHEDULE_INFO', JSON.stringify(set));
      const fired = await tc.waitForEvent('schedule.fired', (e) => e.name === 'metered');
      const assign = await worker.assignments.next(5_000);
      assert.equal(assign.jobId, fired.jobId);
      await client.request({ type: 'PAUSE_SCHEDULE', name: 'metered' });
      const firedBefore = await sample('dtp_schedule_ticks_total{outcome="fired"}');
      assert.ok(firedBefore >= 1, 'the tick counted');
      assert.equal(await sample('dtp_schedule_start_lag_seconds_count'), firedBefore);
      const lagS = await sample('dtp_schedule_start_lag_seconds_sum');
      assert.ok(lagS >= 0 && lagS < 5 * firedBefore, `lag ${lagS} s`);
      worker.succeed(assign, 'ok');

      const trigger = await client.request({ type: 'TRIGGER_SCHEDULE', name: 'metered' });
      assert.equal(trigger.type, 'JOB_SUBMITTED', JSON.stringify(trigger));
      await worker.assignments.next(5_000);
      assert.equal(await sample('dtp_schedule_ticks_total{outcome="fired"}'), firedBefore);
      assert.equal(await sample('dtp_schedule_start_lag_seconds_count'), firedBefore);
    } finally {
      await worker.close();
    }
  });

  it('shows delayed jobs in dtp_scheduled_jobs until they are cancelled', async () => {
    const before = await sample('dtp_scheduled_jobs');
    const reply = await client.request({
      type: 'SUBMIT_JOB',
      taskType: 'LATER_METRICS',
      payload: {},
      maxAttempts: null,
      idempotencyKey: null,
      priority: null,
      runAtMillis: Date.now() + 3_600_000,
      knownStates: [...KNOWN_STATES],
    });
    assert.equal(reply.type, 'JOB_SUBMITTED', JSON.stringify(reply));
    assert.equal(await sample('dtp_scheduled_jobs'), before + 1);
    const jobId = reply.type === 'JOB_SUBMITTED' ? reply.jobId : '';
    await client.request({ type: 'CANCEL_JOB', jobId });
    assert.equal(await sample('dtp_scheduled_jobs'), before);
  });
});
