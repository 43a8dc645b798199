/**
 * The core's time: delayed jobs (SCHEDULED until runAtMs, never started
 * before it, promoted in due-time order, bounded by maxScheduledJobs and
 * not counted as active), the wake-up it asks of the shell, and schedules
 * (ticks through the injected cron evaluator, one job per tick, catch-up,
 * overlap, pause, trigger, recovery).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createCronEvaluator } from '../../src/coordinator/cron.js';
import type { ScheduleDefinition } from '../../src/protocol/messages.js';
import {
  CoreHarness,
  START_MS,
  effectsOf,
  expectReply,
  messagesOf,
} from '../helpers/core-harness.js';

const ALL = ['SCHEDULED', 'WAITING'];

function stateOf(h: CoreHarness, jobId: string): string {
  const reply = h.request({ type: 'GET_JOB_STATUS', jobId, knownStates: ALL });
  return expectReply(reply, 'JOB_STATUS').job.state;
}

function lastWakeAt(h: CoreHarness): number | null | undefined {
  return effectsOf(h.log, 'wakeAt').at(-1)?.atMs;
}

function every(name: string, everyMillis: number, extra: Partial<ScheduleDefinition> = {}) {
  return {
    type: 'SET_SCHEDULE' as const,
    schedule: {
      name,
      taskType: 'SLEEP',
      cron: null,
      everyMillis,
      timezone: null,
      payload: { durationMillis: 1 },
      maxAttempts: null,
      priority: null,
      timeoutMillis: null,
      overlap: null,
      catchUp: null,
      paused: null,
      ...extra,
    },
  };
}

function scheduleJobs(h: CoreHarness, name: string): string[] {
  return h.store
    .committedJobs()
    .filter((job) => job.scheduleName === name)
    .sort((a, b) => a.seq - b.seq)
    .map((job) => job.jobId);
}

describe('core: delayed jobs', () => {
  it('starts no attempt before runAtMs, and asks to be woken at it', () => {
    const h = new CoreHarness();
    h.register('w1', 2);
    const jobId = h.submit({ runAtMillis: START_MS + 5_000 });
    assert.equal(stateOf(h, jobId), 'SCHEDULED');
    assert.equal(lastWakeAt(h), START_MS + 5_000);
    h.clock = START_MS + 4_999;
    h.handle({ kind: 'wake' });
    assert.equal(messagesOf(h.log, 'TASK_ASSIGN').length, 0);
    h.clock = START_MS + 5_000;
    h.handle({ kind: 'wake' });
    assert.deepEqual(
      messagesOf(h.log, 'TASK_ASSIGN').map((m) => m.jobId),
      [jobId],
    );
    assert.equal(h.record(jobId).runAtMs, START_MS + 5_000);
  });

  it('arms the wake-up at the earliest due job and re-arms after it fires', () => {
    const h = new CoreHarness();
    h.submit({ runAtMillis: START_MS + 9_000 });
    h.submit({ runAtMillis: START_MS + 3_000 });
    assert.equal(lastWakeAt(h), START_MS + 3_000);
    h.clock = START_MS + 3_000;
    h.handle({ kind: 'wake' });
    assert.equal(lastWakeAt(h), START_MS + 9_000);
  });

  it('queues overdue jobs in due-time order, not submission order', () => {
    const h = new CoreHarness();
    const late = h.submit({ runAtMillis: START_MS + 2_000 });
    const early = h.submit({ runAtMillis: START_MS + 1_000 });
    h.clock = START_MS + 10_000;
    h.handle({ kind: 'wake' });
    h.register('w1', 1);
    h.result(early);
    assert.deepEqual(
      messagesOf(h.log, 'TASK_ASSIGN').map((m) => m.jobId),
      [early, late],
    );
  });

  it('treats a time in the past as now', () => {
    const h = new CoreHarness();
    const jobId = h.submit({ runAtMillis: START_MS - 50_000 });
    assert.equal(stateOf(h, jobId), 'QUEUED');
    assert.equal(h.record(jobId).runAtMs, START_MS);
  });

  it('refuses a time more than 366 days ahead and creates nothing', () => {
    const h = new CoreHarness();
    const reply = h.submitRequest({ runAtMillis: START_MS + 367 * 86_400_000 });
    assert.equal(expectReply(reply, 'ERROR').code, 'INVALID_REQUEST');
    assert.match((reply as { message: string }).message, /runAtMillis/);
    assert.equal(h.store.committedJobs().length, 0);
  });

  it('bounds SCHEDULED jobs by maxScheduledJobs, not by maxActiveJobs', () => {
    const h = new CoreHarness({ config: { maxActiveJobs: 1, maxScheduledJobs: 2 } });
    h.submit({ runAtMillis: START_MS + 1_000 });
    h.submit({ runAtMillis: START_MS + 1_000 });
    expectReply(h.submitRequest({ runAtMillis: START_MS + 1_000 }), 'SUBMIT_REJECTED');
    h.submit(); // the one active slot is still free
    expectReply(h.submitRequest(), 'SUBMIT_REJECTED');
  });

  it('cancels a SCHEDULED job, which then never runs and frees its slot', () => {
    const h = new CoreHarness({ config: { maxScheduledJobs: 1 } });
    h.register('w1', 1);
    const jobId = h.submit({ runAtMillis: START_MS + 1_000 });
    const reply = h.request({ type: 'CANCEL_JOB', jobId, knownStates: ALL });
    assert.equal(expectReply(reply, 'JOB_CANCEL').cancelled, true);
    h.clock = START_MS + 2_000;
    h.handle({ kind: 'wake' });
    assert.equal(messagesOf(h.log, 'TASK_ASSIGN').length, 0);
    h.submit({ runAtMillis: START_MS + 5_000 });
  });

  it('answers a known idempotency key with the original job whatever the time', () => {
    const h = new CoreHarness();
    const first = h.submit({ idempotencyKey: 'k', runAtMillis: START_MS + 1_000 });
    const again = h.submit({ idempotencyKey: 'k', runAtMillis: START_MS + 99_000 });
    assert.equal(again, first);
  });

  it('recovers SCHEDULED jobs after a restart and starts the overdue ones at once', () => {
    const h = new CoreHarness();
    const jobId = h.submit({ runAtMillis: START_MS + 1_000 });
    h.clock = START_MS + 60_000;
    h.restart();
    h.register('w1', 1);
    h.handle({ kind: 'wake' }); // what the term feeds when it starts serving
    assert.deepEqual(
      messagesOf(h.last, 'TASK_ASSIGN').map((m) => m.jobId),
      [jobId],
    );
  });
});

describe('core: schedules', () => {
  it('makes one job per interval tick, each with its tick as runAtMs', () => {
    const h = new CoreHarness();
    expectReply(h.request(every('s', 1_000)), 'SCHEDULE_INFO');
    assert.equal(lastWakeAt(h), START_MS + 1_000);
    for (let t = 1; t <= 3; t++) {
      h.clock = START_MS + t * 1_000;
      h.handle({ kind: 'wake' });
    }
    const rows = scheduleJobs(h, 's').map((id) => h.record(id));
    assert.deepEqual(
      rows.map((r) => r.runAtMs),
      [START_MS + 1_000, START_MS + 2_000, START_MS + 3_000],
    );
    assert.equal(h.store.committedSchedules()[0]?.lastJobId, rows.at(-1)?.jobId);
  });

  it('collapses ticks that passed together into one job for the latest', () => {
    const h = new CoreHarness();
    h.request(every('s', 1_000));
    h.clock = START_MS + 5_500;
    h.handle({ kind: 'wake' });
    const rows = scheduleJobs(h, 's').map((id) => h.record(id));
    assert.deepEqual(
      rows.map((r) => r.runAtMs),
      [START_MS + 5_000],
    );
    assert.equal(h.store.committedSchedules()[0]?.nextRunAtMs, START_MS + 6_000);
  });

  it('setting the same definition again changes nothing, not even the next run', () => {
    const h = new CoreHarness();
    const first = expectReply(h.request(every('s', 1_000)), 'SCHEDULE_INFO').schedule;
    h.clock += 400;
    const again = expectReply(h.request(every('s', 1_000)), 'SCHEDULE_INFO').schedule;
    assert.equal(again.nextRunAtMillis, first.nextRunAtMillis);
  });

  it('after a restart, catch-up latest makes one job for missed ticks and none makes none', () => {
    for (const catchUp of ['latest', 'none'] as const) {
      const h = new CoreHarness();
      h.request(every('s', 1_000, { catchUp }));
      h.clock = START_MS + 10_500; // the coordinator was down meanwhile
      h.restart();
      h.handle({ kind: 'wake' });
      assert.equal(scheduleJobs(h, 's').length, catchUp === 'latest' ? 1 : 0, catchUp);
      assert.equal(h.store.committedSchedules()[0]?.nextRunAtMs, START_MS + 11_000);
    }
  });

  it('skips a tick while the previous job is not terminal with overlap skip', () => {
    const h = new CoreHarness();
    h.request(every('s', 1_000, { overlap: 'skip' }));
    h.clock = START_MS + 1_000;
    h.handle({ kind: 'wake' });
    h.clock = START_MS + 2_000;
    h.handle({ kind: 'wake' });
    assert.equal(scheduleJobs(h, 's').length, 1);
    assert.equal(h.events('schedule.skipped')[0]?.reason, 'overlap');
  });

  it('skips ticks while paused; resume starts from the next tick after now', () => {
    const h = new CoreHarness();
    h.request(every('s', 1_000));
    const paused = expectReply(h.request({ type: 'PAUSE_SCHEDULE', name: 's' }), 'SCHEDULE_INFO');
    assert.equal(paused.schedule.nextRunAtMillis, null);
    h.clock = START_MS + 5_000;
    h.handle({ kind: 'wake' });
    assert.equal(scheduleJobs(h, 's').length, 0);
    const resumed = expectReply(h.request({ type: 'RESUME_SCHEDULE', name: 's' }), 'SCHEDULE_INFO');
    assert.equal(resumed.schedule.nextRunAtMillis, START_MS + 6_000);
  });

  it('trigger makes one job now, also while paused', () => {
    const h = new CoreHarness();
    h.request(every('s', 60_000, { paused: true }));
    const reply = h.request({ type: 'TRIGGER_SCHEDULE', name: 's', knownStates: ALL });
    const job = expectReply(reply, 'JOB_SUBMITTED').job;
    assert.equal(job?.scheduleName, 's');
    assert.equal(job?.runAtMillis, START_MS);
  });

  it('refuses a trigger at the active-jobs limit like a submission, and makes no job', () => {
    const h = new CoreHarness({ config: { maxActiveJobs: 1 } });
    h.request(every('s', 60_000, { paused: true }));
    h.submit();
    const reply = expectReply(
      h.request({ type: 'TRIGGER_SCHEDULE', name: 's', knownStates: ALL }),
      'SUBMIT_REJECTED',
    );
    assert.equal(reply.retryable, true);
    assert.equal(h.store.committedJobs().filter((j) => j.scheduleName === 's').length, 0);
  });

  it('answers an unknown name with UNKNOWN_SCHEDULE', () => {
    const h = new CoreHarness();
    const reply = h.request({ type: 'DELETE_SCHEDULE', name: 'nope' });
    assert.equal(expectReply(reply, 'ERROR').code, 'UNKNOWN_SCHEDULE');
    assert.match((reply as { message: string }).message, /Unknown schedule/);
  });

  it('refuses a bad definition with INVALID_SCHEDULE and stores nothing', () => {
    const h = new CoreHarness();
    for (const bad of [
      every('s', 999),
      every('1bad', 1_000),
      every('s', 1_000, { cron: '* * * * *' }),
      every('s', 0, { everyMillis: null, cron: '61 * * * *' }),
      every('s', 0, { everyMillis: null, cron: '* * * *' }),
      every('s', 0, { everyMillis: null, cron: '0 2 * * *', timezone: 'Mars/Olympus' }),
    ]) {
      assert.equal(expectReply(h.request(bad), 'ERROR').code, 'INVALID_SCHEDULE');
    }
    assert.equal(h.store.committedSchedules().length, 0);
  });

  it('refuses a cron that never fires, and keeps working', () => {
    const h = new CoreHarness();
    for (const expr of ['0 0 31 2 *', '0 0 31 4,6,9,11 *']) {
      for (const paused of [null, true]) {
        const reply = h.request(every('s', 0, { everyMillis: null, cron: expr, paused }));
        const error = expectReply(reply, 'ERROR');
        assert.equal(error.code, 'INVALID_SCHEDULE');
        assert.match(error.message, /never fires/);
      }
    }
    assert.equal(h.store.committedSchedules().length, 0);
    expectReply(h.request(every('s', 1_000)), 'SCHEDULE_INFO');
  });

  it('refuses a cron the evaluator accepts but finds no next run for', () => {
    const real = createCronEvaluator();
    const h = new CoreHarness({ cron: { problem: () => null, next: () => null } });
    const reply = h.request(every('s', 0, { everyMillis: null, cron: '0 0 1 1 *' }));
    assert.match(expectReply(reply, 'ERROR').message, /has no next run/);
    assert.notEqual(real.next('0 0 1 1 *', 'UTC', START_MS), null);
  });

  it('writes the tick job and the schedule advance in the same batch', () => {
    const h = new CoreHarness();
    h.request(every('s', 1_000));
    const commitsBefore = h.store.commits;
    h.clock = START_MS + 1_000;
    h.handle({ kind: 'wake' });
    assert.equal(h.store.commits, commitsBefore + 1);
    const schedule = h.store.committedSchedules()[0];
    assert.equal(schedule?.lastJobId, scheduleJobs(h, 's')[0]);
  });
});

describe('cron evaluation (croner, injected)', () => {
  const cron = createCronEvaluator();

  it('moves a 02:30 Berlin tick that does not exist on the spring-forward day to 03:30', () => {
    const after = Date.parse('2026-03-28T12:00:00Z');
    assert.equal(
      new Date(cron.next('30 2 * * *', 'Europe/Berlin', after) as number).toISOString(),
      '2026-03-29T01:30:00.000Z',
    );
  });

  it('evaluates 6 fields with seconds first', () => {
    assert.equal(cron.next('*/5 * * * * *', 'UTC', 1_000), 5_000);
  });

  it('names what is wrong', () => {
    assert.match(cron.problem('61 * * * *', 'UTC') ?? '', /minute/);
    assert.match(cron.problem('* * * * *', 'Nowhere/City') ?? '', /time zone/);
    assert.equal(cron.problem('0 2 * * *', 'Europe/Berlin'), null);
  });

  it('says that an expression whose days never occur in its months never fires', () => {
    for (const expr of ['0 0 31 2 *', '0 0 30 2 *', '0 0 30,31 2 *', '0 0 31 4,6,9,11 *']) {
      assert.match(cron.problem(expr, 'UTC') ?? '', /never fires: day of month .* does not occur/);
    }
    assert.match(cron.problem('0 0 31 2 *', 'UTC') ?? '', /day of month 31 .* month 2/);
  });

  it('accepts rare but real dates: 29 February, the last day, a weekday, a fifth Monday', () => {
    for (const expr of [
      '0 0 29 2 *',
      '0 0 L 2 *',
      '0 0 31 1-12/2 *',
      '0 0 31 2 1', // day of week joins with OR: every Monday of February
      '0 0 * 2 1#5',
      '0 0 1 * *',
    ]) {
      assert.equal(cron.problem(expr, 'UTC'), null, expr);
      assert.notEqual(cron.next(expr, 'UTC', Date.parse('2026-03-01T00:00:00Z')), null, expr);
    }
  });

  it('evaluates 200 never-firing expressions without searching for them (bounded work)', () => {
    const startedMs = performance.now();
    for (let i = 0; i < 200; i++) {
      const problem = cron.problem(`${i % 60} 0 31 2 *`, 'Europe/Berlin');
      assert.match(problem ?? '', /never fires/);
    }
    // The library's own search took 3-70 ms per expression (and overflowed
    // the stack for some); the static check takes microseconds.
    assert.ok(performance.now() - startedMs < 250, `took ${performance.now() - startedMs} ms`);
  });

  it('gives no next tick, never a throw, for an expression it cannot evaluate', () => {
    assert.equal(cron.next('0 0 31 4,6,9,11 *', 'UTC', Date.parse('2026-01-01T00:00:00Z')), null);
  });

  it('a cron schedule in the core ticks at the evaluator times', () => {
    const h = new CoreHarness({ startMs: Date.parse('2026-01-01T00:00:00Z') });
    h.request(every('c', 0, { everyMillis: null, cron: '0 2 * * *', timezone: 'Europe/Berlin' }));
    assert.equal(
      new Date(h.store.committedSchedules()[0]?.nextRunAtMs as number).toISOString(),
      '2026-01-01T01:00:00.000Z',
    );
  });
});
