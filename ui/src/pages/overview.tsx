/**
 * The overview: jobs by state, admission headroom, workers and slots, queue
 * depth by priority, and throughput and failure rate over the last hour.
 * The charts are counted in the coordinator's memory since it started.
 */
import type { ActivityCounts, ActivitySeries } from '../../../src/http/activity.js';
import { api } from '../api.js';
import { Bar, LineChart } from '../components/charts.js';
import { formatTime } from '../format.js';
import { useLiveValue } from '../hooks.js';
import { jobsHref } from '../router.js';

const COLOURS = {
  completed: '#2e8b57',
  submitted: '#1f77b4',
  failed: '#c0392b',
  retried: '#e67e22',
  queued: '#6c7a89',
  running: '#d4a017',
  retry: '#e67e22',
};

/** Buckets that ended before counting began have no data (a gap, not zero). */
function counted(series: ActivitySeries): (ActivityCounts | null)[] {
  return series.buckets.map((b, i) =>
    series.startMillis + (i + 1) * series.bucketMillis <= series.sinceMillis ? null : b,
  );
}

function perSecond(series: ActivitySeries, kind: keyof ActivityCounts): (number | null)[] {
  return counted(series).map((b) => (b === null ? null : b[kind] / (series.bucketMillis / 1_000)));
}

/** Failed / (completed + failed) per bucket, in %; null where nothing ended. */
function failureRate(series: ActivitySeries): (number | null)[] {
  return counted(series).map((b) => {
    const ended = b === null ? 0 : b.completed + b.failed;
    return b === null || ended === 0 ? null : (100 * b.failed) / ended;
  });
}

export function OverviewPage() {
  const { value: overview, error } = useLiveValue('overview', api.overview);
  if (error !== null) return <p class="error">{error}</p>;
  if (overview === undefined) return <p class="muted">Loading…</p>;
  const { jobs, admission, workers, queueDepthByPriority: depth, activity } = overview;
  const since = activity.sinceMillis;
  const maxDepth = Math.max(1, depth.HIGH, depth.NORMAL, depth.LOW);
  return (
    <div class="overview" data-testid="overview">
      {overview.failure !== null && (
        <p class="error banner">
          The coordinator stopped working: {overview.failure.code}: {overview.failure.message}
        </p>
      )}
      <section class="cards">
        <a class="card" href={jobsHref({ state: 'QUEUED' })} data-testid="card-queued">
          <span class="card-value">{jobs.byState.QUEUED.toLocaleString()}</span>
          <span class="card-label">queued</span>
        </a>
        <a class="card" href={jobsHref({ state: 'RUNNING' })} data-testid="card-running">
          <span class="card-value">{jobs.byState.RUNNING.toLocaleString()}</span>
          <span class="card-label">running</span>
        </a>
        <a class="card" href={jobsHref({ state: 'RETRY_WAIT' })}>
          <span class="card-value">{jobs.byState.RETRY_WAIT.toLocaleString()}</span>
          <span class="card-label">waiting to retry</span>
        </a>
        <div class="card">
          <span class="card-value">{activity.totals.completed.toLocaleString()}</span>
          <span class="card-label">completed since start</span>
        </div>
        <div class="card">
          <span class="card-value">{activity.totals.failed.toLocaleString()}</span>
          <span class="card-label">failed since start</span>
        </div>
        <a class="card" href="#/workers">
          <span class="card-value">
            {workers.live - workers.draining}
            {workers.draining > 0 && <small> +{workers.draining} draining</small>}
          </span>
          <span class="card-label">
            workers · {workers.slots - workers.freeSlots}/{workers.slots} slots busy
          </span>
        </a>
      </section>
      <section class="panels">
        <div class="panel">
          <h2>Admission</h2>
          <Bar
            label="active jobs"
            value={admission.activeJobs}
            max={admission.maxActiveJobs}
            colour={COLOURS.running}
          />
          <p class="muted">
            {admission.headroom.toLocaleString()} more jobs can be accepted (limit{' '}
            {admission.maxActiveJobs.toLocaleString()} active jobs).
          </p>
        </div>
        <div class="panel">
          <h2>Queue depth by priority</h2>
          <Bar label="HIGH" value={depth.HIGH} max={maxDepth} colour="#8e44ad" />
          <Bar label="NORMAL" value={depth.NORMAL} max={maxDepth} colour={COLOURS.submitted} />
          <Bar label="LOW" value={depth.LOW} max={maxDepth} colour={COLOURS.queued} />
        </div>
      </section>
      <section class="charts">
        <LineChart
          title="Throughput, last hour"
          testId="chart-throughput"
          unit="jobs per second, 10 s buckets"
          startMillis={activity.startMillis}
          bucketMillis={activity.bucketMillis}
          series={[
            {
              name: 'completed',
              values: perSecond(activity, 'completed'),
              colour: COLOURS.completed,
            },
            {
              name: 'submitted',
              values: perSecond(activity, 'submitted'),
              colour: COLOURS.submitted,
            },
          ]}
        />
        <LineChart
          title="Failure rate, last hour"
          testId="chart-failures"
          unit="% of ended jobs that failed; retries per second in orange"
          startMillis={activity.startMillis}
          bucketMillis={activity.bucketMillis}
          yMax={100}
          series={[
            { name: 'failed %', values: failureRate(activity), colour: COLOURS.failed },
            { name: 'retries/s', values: perSecond(activity, 'retried'), colour: COLOURS.retried },
          ]}
        />
      </section>
      <p class="muted note" data-testid="charts-note">
        Charts and totals are counted in the coordinator's memory since it started (
        {formatTime(since)}); they start empty after a restart. Job history itself is in the store.
      </p>
    </div>
  );
}
