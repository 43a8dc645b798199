/**
 * Prometheus metrics of one coordinator, on a registry of its own.
 *
 * Two kinds of source, neither of which touches the core:
 * - counters and histograms follow the core events and commit durations the
 *   shell already publishes (`coordinator.events`); each event costs a
 *   counter increment or one histogram observation, nothing more;
 * - gauges are read only when scraped, from `inspect()`, at most once per
 *   scrape (see {@link CoordinatorMetrics.#snapshot}).
 *
 * A private registry (not prom-client's global one) because a test process
 * runs several coordinators, and each must report only its own numbers.
 */
import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type CollectFunction,
} from 'prom-client';
import { JOB_STATES, isTerminalState, type JobState } from '../../protocol/messages.js';
import type { CoreInspection } from '../core/core.js';
import { registerLeadershipGauges } from './leadership-metrics.js';
import type { RoleStatus } from '../leadership/role.js';
import {
  ATTEMPT_FAILURE_CAUSES,
  WORKER_LOSS_CAUSES,
  type AttemptFailureCause,
  type CoreEvent,
} from '../core/types.js';

/**
 * What the metrics need from a coordinator. Structural, so this module does
 * not import the coordinator (which imports it).
 */
export interface MetricsSource {
  readonly events: {
    on(name: 'event', listener: (event: CoreEvent) => void): unknown;
    on(name: 'commit', listener: (durationMs: number) => void): unknown;
  };
  inspect(): CoreInspection;
  readonly failure: { code: string; message: string } | null;
  /** Problems the background integrity check found; null until it has run. */
  readonly integrityProblems: readonly string[] | null;
  /** Role, epoch and leader (leadership-metrics.ts). */
  status(): RoleStatus;
}

/** Attempt-failure causes that are always exported, at 0 until they happen. */
const RETRY_CAUSES: readonly AttemptFailureCause[] = ATTEMPT_FAILURE_CAUSES.filter(
  (cause) => cause !== 'restart' && cause !== 'non_retryable',
);
const FAILURE_CAUSES: readonly AttemptFailureCause[] = ATTEMPT_FAILURE_CAUSES;

const NON_TERMINAL_STATES: readonly JobState[] = JOB_STATES.filter((s) => !isTerminalState(s));
const TERMINAL_STATES: readonly JobState[] = JOB_STATES.filter(isTerminalState);

/** Waits and run times: from a millisecond to an hour, in seconds. */
const DURATION_BUCKETS_S = [
  0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600, 1800, 3600,
];
/** SQLite commits: 50 µs to 100 ms, in seconds. */
const COMMIT_BUCKETS_S = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
];

const MS_PER_S = 1_000;

export interface CoordinatorMetricsOptions {
  /** The coordinator's `maxActiveJobs`, exported as `dtp_max_active_jobs`. */
  maxActiveJobs: number;
  /** Also export prom-client's process and Node.js metrics (default true). */
  defaultMetrics?: boolean;
}

type EventCounters = {
  [K in CoreEvent['type']]: (m: CoordinatorMetrics, e: Extract<CoreEvent, { type: K }>) => void;
};

/** What each core event moves. The compiler checks that every event type is here. */
const ON_EVENT: EventCounters = {
  'worker.registered': (m) => m.workerRegistrations.inc(),
  'worker.rejected': () => undefined,
  'worker.suspected': () => undefined,
  'worker.lost': (m, e) => m.workersLost.inc({ reason: e.cause }),
  'worker.draining': () => undefined,
  'worker.leasesKept': () => undefined,
  'worker.leasesReclaimed': () => undefined,
  'worker.heldListEnded': () => undefined,
  'job.submitted': (m) => m.submissions.inc({ outcome: 'accepted' }),
  'job.deduplicated': (m) => m.deduplicated.inc(),
  'job.dedupMatched': (m, e) =>
    m.dedupMatched.inc({ mode: e.mode, outcome: e.replaced ? 'replaced' : 'deduplicated' }),
  'job.debounced': () => undefined,
  'job.signalled': (m) => m.signals.inc(),
  'job.resumed': () => undefined,
  'event.published': (m) => m.events.inc(),
  'job.expired': (m) => m.expired.inc(),
  'job.rateLimited': (m, e) => m.rateLimited.inc({ scope: e.scope }),
  'job.due': () => undefined,
  'schedule.fired': (m, e) => {
    m.scheduleTicks.inc({ outcome: 'fired' });
    m.tickStarts.fired(e.jobId, e.lagMs);
  },
  'schedule.skipped': (m, e) => m.scheduleTicks.inc({ outcome: e.reason }),
  'job.rejected': (m) => m.submissions.inc({ outcome: 'rejected' }),
  'job.assigned': (m, e) => {
    m.assignments.inc();
    m.queueWait.observe(e.queuedMs / MS_PER_S);
    const lagMs = m.tickStarts.started(e.jobId, e.queuedMs);
    if (lagMs !== null) m.tickStartLag.observe(lagMs / MS_PER_S);
  },
  'job.retryScheduled': (m, e) => m.retries.inc({ cause: e.cause }),
  'job.requeued': () => undefined,
  'job.attemptRequeued': (m) => m.requeuedAttempts.inc(),
  'job.released': () => undefined,
  'job.suspended': () => undefined,
  'job.completed': (m, e) => {
    m.finished.inc({ state: 'COMPLETED' });
    m.runTime.observe(e.runMs / MS_PER_S);
    m.endToEnd.observe(e.endToEndMs / MS_PER_S);
  },
  'job.failed': (m, e) => {
    m.finished.inc({ state: 'FAILED' });
    m.failed.inc({ cause: e.cause });
    m.tickStarts.ended(e.jobId);
  },
  'job.cancelled': (m, e) => {
    m.finished.inc({ state: 'CANCELLED' });
    m.tickStarts.ended(e.jobId);
  },
  'job.deadlineExceeded': () => undefined,
  'job.recovered': (m, e) => {
    // A job interrupted on its final attempt fails at recovery without a
    // job.failed event; count it like one so the terminal counters add up.
    if (e.to !== 'FAILED') return;
    m.finished.inc({ state: 'FAILED' });
    m.failed.inc({ cause: 'restart' });
  },
  'result.stale': (m) => m.staleResults.inc(),
  'call.stale': () => undefined,
  'job.progress': (m, e) => m.progress.inc({ outcome: e.accepted ? 'accepted' : 'ignored' }),
  'jobs.purged': (m, e) => m.purged.inc({ reason: e.reason }, e.deleted),
  'coordinator.stalled': (m) => m.stalls.inc(),
  'subscriber.dropped': (m, e) => m.subscribersDropped.inc({ budget: e.budget }),
};

/** Outcomes of a schedule's due tick (`dtp_schedule_ticks_total`). */
const TICK_OUTCOMES = ['fired', 'overlap', 'missed', 'limit'] as const;
/** Jobs of fired ticks followed until their first start (older ones are dropped beyond it). */
export const MAX_TICK_JOBS_FOLLOWED = 10_000;

/**
 * The jobs that schedule ticks made and that have not started yet, with how
 * late each was made. A tick's job is QUEUED from its making, so its first
 * assignment's `queuedMs` is the rest of the wait: the lag from the tick's
 * time to the first start is `lagMs + queuedMs`, from core events alone.
 */
class TickStarts {
  readonly #lagByJob = new Map<string, number>();

  fired(jobId: string, lagMs: number): void {
    if (this.#lagByJob.size >= MAX_TICK_JOBS_FOLLOWED) {
      const oldest = this.#lagByJob.keys().next();
      if (oldest.done !== true) this.#lagByJob.delete(oldest.value);
    }
    this.#lagByJob.set(jobId, lagMs);
  }

  /** The lag from its tick to this start, when the job is a tick's and starts for the first time. */
  started(jobId: string, queuedMs: number): number | null {
    const lagMs = this.#lagByJob.get(jobId);
    if (lagMs === undefined) return null;
    this.#lagByJob.delete(jobId);
    return lagMs + queuedMs;
  }

  ended(jobId: string): void {
    this.#lagByJob.delete(jobId);
  }
}

/** The dtp_* metrics of one coordinator. */
export class CoordinatorMetrics {
  readonly registry = new Registry();
  readonly #source: MetricsSource;
  /** inspect() of the current scrape; dropped at the next event-loop turn. */
  #cached: CoreInspection | null = null;

  readonly submissions: Counter<'outcome'>;
  readonly deduplicated: Counter;
  readonly dedupMatched: Counter;
  readonly expired: Counter;
  readonly signals: Counter;
  readonly events: Counter;
  readonly rateLimited: Counter;
  readonly assignments: Counter;
  readonly retries: Counter<'cause'>;
  readonly requeuedAttempts: Counter;
  readonly failed: Counter<'cause'>;
  readonly finished: Counter<'state'>;
  readonly staleResults: Counter;
  readonly workerRegistrations: Counter;
  readonly workersLost: Counter<'reason'>;
  readonly queueWait: Histogram;
  readonly runTime: Histogram;
  readonly endToEnd: Histogram;
  readonly commitTime: Histogram;
  readonly purged: Counter<'reason'>;
  readonly stalls: Counter;
  readonly subscribersDropped: Counter<'budget'>;
  readonly progress: Counter<'outcome'>;
  readonly scheduleTicks: Counter<'outcome'>;
  readonly tickStartLag: Histogram;
  readonly tickStarts = new TickStarts();

  constructor(source: MetricsSource, options: CoordinatorMetricsOptions) {
    this.#source = source;
    const registers = [this.registry];
    const counter = <L extends string>(name: string, help: string, labelNames: L[] = []) =>
      new Counter<L>({ name, help, labelNames, registers });
    const histogram = (name: string, help: string, buckets: number[]) =>
      new Histogram({ name, help, buckets, registers });

    this.submissions = counter(
      'dtp_submissions_total',
      'Submissions by outcome: accepted (a new job) or rejected by admission control',
      ['outcome'],
    );
    this.deduplicated = counter(
      'dtp_submissions_deduplicated_total',
      'Submissions answered with an existing job of the same idempotency key',
    );
    this.dedupMatched = counter(
      'dtp_submissions_dedup_total',
      'Submissions with a deduplication key that created nothing, by mode and outcome (deduplicated, replaced)',
      ['mode', 'outcome'],
    );
    this.signals = counter('dtp_signals_total', 'Signals sent to jobs');
    this.events = counter(
      'dtp_events_published_total',
      'Events published (a repeated event id not counted)',
    );
    this.expired = counter(
      'dtp_jobs_expired_total',
      'Jobs that ended CANCELLED because they expired before an attempt started',
    );
    this.rateLimited = counter(
      'dtp_attempts_rate_limited_total',
      'Attempts their handler ended rate limited (not counted), by scope',
      ['scope'],
    );
    this.assignments = counter('dtp_assignments_total', 'Attempts assigned to workers');
    this.retries = counter('dtp_retries_total', 'Retries scheduled, by cause', ['cause']);
    this.requeuedAttempts = counter(
      'dtp_attempts_requeued_total',
      'Attempts their worker requeued (cut off through no fault of their own), queued again without counting',
    );
    this.failed = counter('dtp_jobs_failed_total', 'Jobs that ended FAILED, by cause', ['cause']);
    this.finished = counter('dtp_jobs_finished_total', 'Jobs that reached a terminal state', [
      'state',
    ]);
    this.staleResults = counter(
      'dtp_stale_results_total',
      'Results rejected because they did not carry the current lease',
    );
    this.workerRegistrations = counter(
      'dtp_worker_registrations_total',
      'Worker sessions registered',
    );
    this.workersLost = counter('dtp_workers_lost_total', 'Worker sessions ended, by reason', [
      'reason',
    ]);
    this.queueWait = histogram(
      'dtp_job_queue_wait_seconds',
      'Time from becoming QUEUED to assignment, per attempt',
      DURATION_BUCKETS_S,
    );
    this.runTime = histogram(
      'dtp_job_run_seconds',
      'Time from assignment to a successful result (successful attempts only)',
      DURATION_BUCKETS_S,
    );
    this.endToEnd = histogram(
      'dtp_job_end_to_end_seconds',
      'Time from submission to COMPLETED',
      DURATION_BUCKETS_S,
    );
    this.commitTime = histogram(
      'dtp_store_commit_seconds',
      'Time from handing a batch of writes to the store until it is durable',
      COMMIT_BUCKETS_S,
    );
    this.purged = counter(
      'dtp_jobs_purged_total',
      'Terminal jobs deleted (with their attempts), by retention or on request',
      ['reason'],
    );
    this.stalls = counter(
      'dtp_coordinator_stalls_total',
      'Times the coordinator found its own loop had not run for several sweep periods',
    );
    this.subscribersDropped = counter(
      'dtp_subscribers_dropped_total',
      'Subscribers that had left their job events unread, disconnected to make room in a full budget',
      ['budget'],
    );
    this.progress = counter(
      'dtp_progress_reports_total',
      'TASK_PROGRESS reports: accepted, or ignored (stale lease, value out of range)',
      ['outcome'],
    );
    this.scheduleTicks = counter(
      'dtp_schedule_ticks_total',
      'Schedule ticks that fell due, by outcome: fired (made a job), overlap (the previous job was not done), missed (passed while no coordinator led, with --catch-up none), limit (the active-job limit was reached)',
      ['outcome'],
    );
    this.tickStartLag = histogram(
      'dtp_schedule_start_lag_seconds',
      "Time from a schedule tick's due time to its job's first start",
      DURATION_BUCKETS_S,
    );
    this.#zeroLabels();
    this.#registerGauges(options.maxActiveJobs);
    registerLeadershipGauges(this.registry, source);
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    source.events.on('event', (event) => this.record(event));
    source.events.on('commit', (durationMs) => this.commitTime.observe(durationMs / MS_PER_S));
  }

  /** Counts one core event. */
  record(event: CoreEvent): void {
    const count = ON_EVENT[event.type] as (m: CoordinatorMetrics, e: CoreEvent) => void;
    count(this, event);
  }

  /** The Prometheus text exposition of every metric. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Known label values appear at 0 from the start, so rates work from the first scrape. */
  #zeroLabels(): void {
    for (const outcome of ['accepted', 'rejected']) this.submissions.inc({ outcome }, 0);
    for (const cause of RETRY_CAUSES) this.retries.inc({ cause }, 0);
    for (const cause of FAILURE_CAUSES) this.failed.inc({ cause }, 0);
    for (const state of TERMINAL_STATES) this.finished.inc({ state }, 0);
    for (const reason of WORKER_LOSS_CAUSES) this.workersLost.inc({ reason }, 0);
    for (const reason of ['retention', 'request']) this.purged.inc({ reason }, 0);
    for (const outcome of ['accepted', 'ignored']) this.progress.inc({ outcome }, 0);
    for (const outcome of TICK_OUTCOMES) this.scheduleTicks.inc({ outcome }, 0);
  }

  #registerGauges(maxActiveJobs: number): void {
    const registers = [this.registry];
    const gauge = <L extends string>(
      name: string,
      help: string,
      collect: CollectFunction<Gauge<L>>,
      labelNames: L[] = [],
    ) => new Gauge<L>({ name, help, labelNames, registers, collect });
    const snapshot = () => this.#snapshot();

    gauge(
      'dtp_jobs',
      'Non-terminal jobs by state',
      function () {
        const byState = snapshot().activeByState;
        for (const state of NON_TERMINAL_STATES) this.set({ state }, byState[state] ?? 0);
      },
      ['state'],
    );
    gauge(
      'dtp_queued_jobs',
      'QUEUED jobs by task type, and whether some live worker declared that type',
      function () {
        this.reset();
        const { queuedByTaskType, servedTaskTypes } = snapshot();
        const served = new Set(servedTaskTypes);
        for (const [taskType, n] of queuedByTaskType) {
          this.set({ task_type: taskType, served: served.has(taskType) ? 'yes' : 'no' }, n);
        }
      },
      ['task_type', 'served'],
    );
    gauge('dtp_active_jobs', 'Non-terminal jobs (admission control counts these)', function () {
      this.set(snapshot().activeCount);
    });
    gauge('dtp_max_active_jobs', 'Limit on non-terminal jobs (--max-active-jobs)', function () {
      this.set(maxActiveJobs);
    });
    gauge('dtp_workers', 'Registered worker sessions, draining ones included', function () {
      this.set(snapshot().workers.length);
    });
    gauge('dtp_workers_draining', 'Registered workers that announced a drain', function () {
      this.set(snapshot().workers.filter((w) => w.draining).length);
    });
    gauge('dtp_worker_slots', 'Task slots of registered workers (sum of capacity)', function () {
      this.set(snapshot().workers.reduce((sum, w) => sum + w.capacity, 0));
    });
    gauge('dtp_free_slots', 'Task slots free for an assignment now', function () {
      this.set(snapshot().freeSlots);
    });
    gauge(
      'dtp_pending_waits',
      'WAIT_JOB requests held until their job ends or they time out',
      function () {
        this.set(snapshot().pendingWaits);
      },
    );
    gauge(
      'dtp_scheduled_jobs',
      'Delayed jobs waiting for their time (SCHEDULED; bounded by --max-scheduled-jobs)',
      function () {
        this.set(snapshot().scheduledCount);
      },
    );
    gauge('dtp_event_subscriptions', 'SUBSCRIBE_JOBS subscriptions open', function () {
      this.set(snapshot().subscriptions);
    });
    gauge(
      'dtp_event_subscribers',
      'Client connections holding at least one SUBSCRIBE_JOBS subscription',
      function () {
        this.set(snapshot().subscribers);
      },
    );
    gauge(
      'dtp_event_subscribers_stalled',
      'Subscribers leaving more job events unread than they may (their events are dropped)',
      function () {
        this.set(snapshot().stalledSubscribers);
      },
    );
    const source = this.#source;
    gauge(
      'dtp_store_integrity_problems',
      'Problems the background integrity check found in the database (0 = sound or not checked yet)',
      function () {
        this.set(source.integrityProblems?.length ?? 0);
      },
    );
    gauge(
      'dtp_coordinator_failed',
      '1 once the coordinator stopped working (see /healthz)',
      function () {
        this.set(source.failure === null ? 0 : 1);
      },
    );
  }

  /**
   * One inspect() per scrape: prom-client calls every collect() of a scrape
   * within one event-loop turn, and the core changes only in other turns, so
   * a copy dropped at the next turn is consistent and never stale.
   */
  #snapshot(): CoreInspection {
    if (this.#cached === null) {
      this.#cached = this.#source.inspect();
      setImmediate(() => (this.#cached = null));
    }
    return this.#cached;
  }
}
