/**
 * The schedule metrics, from core events alone: ticks by outcome, the lag
 * from a tick's time to its job's first start (the making lag plus the
 * first attempt's queue wait, once per job), and the scheduled-jobs gauge.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { EMPTY_INSPECTION } from '../../src/coordinator/leadership/role.js';
import {
  CoordinatorMetrics,
  MAX_TICK_JOBS_FOLLOWED,
  type MetricsSource,
} from '../../src/coordinator/observability/metrics.js';
import type { CoreEvent } from '../../src/coordinator/core/types.js';

function source(scheduledCount: number): MetricsSource {
  return {
    events: new EventEmitter(),
    inspect: () => ({ ...EMPTY_INSPECTION, scheduledCount }),
    failure: null,
    integrityProblems: null,
    status: () => ({
      role: 'leader' as const,
      epoch: null,
      leaderClient: null,
      leaderWorker: null,
    }),
  };
}

async function sample(metrics: CoordinatorMetrics, key: string): Promise<number> {
  const text = await metrics.text();
  const line = text.split('\n').find((l) => l.startsWith(`${key} `));
  assert.ok(line !== undefined, `no sample ${key}`);
  return Number(line.slice(key.length + 1));
}

const assigned = (jobId: string, attempt: number, queuedMs: number): CoreEvent => ({
  type: 'job.assigned',
  jobId,
  workerId: 'w',
  attempt,
  maxAttempts: 3,
  attemptId: `${jobId}-${attempt}`,
  queuedMs,
});

describe('schedule metrics', () => {
  it('counts ticks by outcome, all at 0 before any', async () => {
    const m = new CoordinatorMetrics(source(0), { maxActiveJobs: 10, defaultMetrics: false });
    for (const outcome of ['fired', 'overlap', 'missed', 'limit']) {
      assert.equal(await sample(m, `dtp_schedule_ticks_total{outcome="${outcome}"}`), 0);
    }
    m.record({ type: 'schedule.fired', name: 'a', jobId: 'j1', tickMs: 1_000, lagMs: 5 });
    m.record({ type: 'schedule.skipped', name: 'a', tickMs: 2_000, reason: 'overlap' });
    m.record({ type: 'schedule.skipped', name: 'a', tickMs: 3_000, reason: 'overlap' });
    m.record({ type: 'schedule.skipped', name: 'b', tickMs: 3_000, reason: 'missed' });
    m.record({ type: 'schedule.skipped', name: 'b', tickMs: 4_000, reason: 'limit' });
    assert.equal(await sample(m, 'dtp_schedule_ticks_total{outcome="fired"}'), 1);
    assert.equal(await sample(m, 'dtp_schedule_ticks_total{outcome="overlap"}'), 2);
    assert.equal(await sample(m, 'dtp_schedule_ticks_total{outcome="missed"}'), 1);
    assert.equal(await sample(m, 'dtp_schedule_ticks_total{outcome="limit"}'), 1);
  });

  it("observes a tick's lag to its job's first start once, and nothing for other jobs", async () => {
    const m = new CoordinatorMetrics(source(0), { maxActiveJobs: 10, defaultMetrics: false });
    m.record({ type: 'schedule.fired', name: 'a', jobId: 'tick-job', tickMs: 1_000, lagMs: 30 });
    m.record(assigned('plain-job', 1, 4_000));
    m.record(assigned('tick-job', 1, 220));
    m.record(assigned('tick-job', 2, 9_000)); // a retry is not the first start
    assert.equal(await sample(m, 'dtp_schedule_start_lag_seconds_count'), 1);
    assert.equal(await sample(m, 'dtp_schedule_start_lag_seconds_sum'), 0.25);
    assert.equal(await sample(m, 'dtp_schedule_start_lag_seconds_bucket{le="0.1"}'), 0);
    assert.equal(await sample(m, 'dtp_schedule_start_lag_seconds_bucket{le="0.25"}'), 1);
    // A cancelled tick job is forgotten: it never starts.
    m.record({ type: 'schedule.fired', name: 'a', jobId: 'gone', tickMs: 2_000, lagMs: 1 });
    m.record({ type: 'job.cancelled', jobId: 'gone', from: 'QUEUED' });
    m.record(assigned('gone', 1, 1));
    assert.equal(await sample(m, 'dtp_schedule_start_lag_seconds_count'), 1);
  });

  it('follows a bounded number of unstarted tick jobs, dropping the oldest', async () => {
    const m = new CoordinatorMetrics(source(0), { maxActiveJobs: 10, defaultMetrics: false });
    for (let i = 0; i <= MAX_TICK_JOBS_FOLLOWED; i++) {
      m.record({ type: 'schedule.fired', name: 'a', jobId: `j${i}`, tickMs: i, lagMs: 0 });
    }
    m.record(assigned('j0', 1, 10)); // dropped: not observed
    m.record(assigned(`j${MAX_TICK_JOBS_FOLLOWED}`, 1, 10));
    assert.equal(await sample(m, 'dtp_schedule_start_lag_seconds_count'), 1);
  });

  it('exports the SCHEDULED jobs held as a gauge', async () => {
    const m = new CoordinatorMetrics(source(42), { maxActiveJobs: 10, defaultMetrics: false });
    assert.equal(await sample(m, 'dtp_scheduled_jobs'), 42);
  });
});
