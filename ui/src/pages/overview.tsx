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

/** Shown at least: one minute of buckets. */
const MIN_BUCKETS = 6;

/**
 * The buckets to draw: the last hour, or, when the coordinator started less
 * than an hour ago, only the time since then (earlier buckets have no data,
 * and drawing them would squeeze the rest into a corner). The last one is
 * the bucket still filling.
 */
function counted(series: ActivitySeries): ActivitySeries {
  const firstCounted = Math.floor((series.sinceMillis - series.startMillis) / series.bucketMillis);
  const from = Math.max(0, Math.min(firstCounted, series.buckets.length - MIN_BUCKETS));
  return {
    ...series,
    startMillis: series.startMillis + from * series.bucketMillis,
    buckets: series.buckets.slice(from),
  };
}

/**
 * Events per second in each bucket; none for the bucket still filling (its
 * rate would read as a drop). A failure rate is a ratio: it has no such bias,
 * so {@link failureRate} shows that bucket too.
 */
function perSecond(series: ActivitySeries, kind: keyof ActivityCounts): (number | null)[] {
  const last = series.buckets.length - 1;
  return series.buckets.map((b, i) =>
    i === last ? null : b[kind] / (series.bucketMillis / 1_000),
  );
}

const rateLabel = (perS: number): string => `${Math.round(perS * 10) / 10}/s`;

/** Failed / (completed + failed) per bucket, in %; null where nothing ended. */
function failureRate(series: ActivitySeries): (number | null)[] {
  return series.buckets.map((b) => {
    const ended = b.completed + b.failed;
    return ended === 0 ? null : (100 * b.failed) / ended;
  });
}

export function OverviewPage() {
  const { value: overview, error } = useLiveValue('overview', api.overview);
  if (error !== null) return <p class="error">{error}</p>;
  if (overview === undefined) return <p class="muted">Loading…</p>;
  const { jobs, admission, workers, queueDepthByPriority: depth } = overview;
  const activity = counted(overview.activity);
  const since = activity.sinceMillis;
  const span = activity.buckets.length >= 359 ? 'last hour' : 'since start';
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
          title={`Throughput, ${span}`}
          testId="chart-throughput"
          unit="jobs per second, 10 s buckets"
          startMillis={activity.startMillis}
          bucketMillis={activity.bucketMillis}
          series={[
            {
              name: 'submitted',
              values: perSecond(activity, 'submitted'),
              format: rateLabel,
              colour: COLOURS.submitted,
              dashed: true,
            },
            {
              name: 'completed',
              values: perSecond(activity, 'completed'),
              format: rateLabel,
              colour: COLOURS.completed,
            },
          ]}
        />
        <LineChart
          title={`Failure rate, ${span}`}
          testId="chart-failures"
          unit="% of ended jobs that failed; retries per second in orange"
          startMillis={activity.startMillis}
          bucketMillis={activity.bucketMillis}
          yFloor={10}
          series={[
            {
              name: 'failed %',
              values: failureRate(activity),
              colour: COLOURS.failed,
              format: (v) => `${Math.round(v * 10) / 10} %`,
            },
            {
              name: 'retries/s',
              values: perSecond(activity, 'retried'),
              colour: COLOURS.retried,
              format: rateLabel,
            },
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
