import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { MemoryStore } from '../../src/store/memory-store.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

/** Samples of one scrape, keyed as printed: `name` or `name{a="b"}`. */
type Samples = Map<string, number>;

const METRIC_NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
// Values are read with Go's ParseFloat, which ignores case in Inf and NaN
// (prom-client prints `Nan` for an event-loop gauge that has no data yet).
const VALUE = '[-+]?(?:\\d+(?:\\.\\d*)?(?:[eE][-+]?\\d+)?|[iI][nN][fF]|[nN][aA][nN])';
const SAMPLE_LINE = new RegExp(`^(${METRIC_NAME})(\\{(?:${LABEL}(?:,${LABEL})*)?\\})? (${VALUE})$`);
const TYPE_LINE = new RegExp(`^# TYPE (${METRIC_NAME}) (counter|gauge|histogram|summary|untyped)$`);
const HELP_LINE = new RegExp(`^# HELP ${METRIC_NAME} .*$`);

/**
 * Parses the Prometheus text format strictly enough to catch a broken
 * exposition: every line is a HELP, a TYPE or a sample; every sample belongs
 * to a family whose TYPE came first (histograms add _bucket/_sum/_count).
 */
function parseExposition(text: string): { samples: Samples; types: Map<string, string> } {
  const samples: Samples = new Map();
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = TYPE_LINE.exec(line);
    if (type !== null) {
      assert.ok(!types.has(type[1] as string), `TYPE given twice: ${line}`);
      types.set(type[1] as string, type[2] as string);
      continue;
    }
    if (line.startsWith('#')) {
      assert.match(line, HELP_LINE, 'a comment is HELP or TYPE');
      continue;
    }
    const sample = SAMPLE_LINE.exec(line);
    assert.ok(sample !== null, `not a sample line: ${JSON.stringify(line)}`);
    const name = sample[1] as string;
    const family = types.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '');
    assert.ok(types.has(family), `sample before its TYPE: ${line}`);
    samples.set(`${name}${sample[2] ?? ''}`, parseValue(sample[3] as string));
  }
  return { samples, types };
}

function parseValue(text: string): number {
  if (/nan$/i.test(text)) return Number.NaN;
  if (/inf$/i.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
  return Number(text);
}

async function scrape(
  tc: TestCoordinator,
): Promise<{ samples: Samples; types: Map<string, string> }> {
  const response = await fetch(`http://127.0.0.1:${tc.coordinator.metricsPort}/metrics`);
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return parseExposition(await response.text());
}

function value(samples: Samples, key: string): number {
  const found = samples.get(key);
  assert.ok(found !== undefined, `no sample ${key}`);
  return found;
}

async function healthz(tc: TestCoordinator): Promise<{ status: number; body: string }> {
  const response = await fetch(`http://127.0.0.1:${tc.coordinator.metricsPort}/healthz`);
  return { status: response.status, body: await response.text() };
}

describe('coordinator metrics', () => {
  let tc: TestCoordinator | null = null;
  const peers: { close(): Promise<void> }[] = [];

  afterEach(async () => {
    await Promise.all(peers.splice(0).map((p) => p.close()));
    await tc?.close();
    tc = null;
  });

  it('serves a parseable exposition with every dtp metric at zero when nothing happened', async () => {
    tc = await startCoordinator({ metricsPort: 0, maxActiveJobs: 7 });
    assert.ok((tc.coordinator.metricsPort ?? 0) > 0);
    const { samples, types } = await scrape(tc);
    for (const [name, type] of [
      ['dtp_submissions_total', 'counter'],
      ['dtp_jobs', 'gauge'],
      ['dtp_active_jobs', 'gauge'],
      ['dtp_job_queue_wait_seconds', 'histogram'],
      ['dtp_job_run_seconds', 'histogram'],
      ['dtp_job_end_to_end_seconds', 'histogram'],
      ['dtp_store_commit_seconds', 'histogram'],
      ['process_cpu_seconds_total', 'counter'],
    ]) {
      assert.equal(types.get(name as string), type, name);
    }
    assert.equal(value(samples, 'dtp_submissions_total{outcome="accepted"}'), 0);
    assert.equal(value(samples, 'dtp_retries_total{cause="task_failure"}'), 0);
    assert.equal(value(samples, 'dtp_jobs{state="QUEUED"}'), 0);
    assert.equal(value(samples, 'dtp_max_active_jobs'), 7);
    assert.equal(value(samples, 'dtp_workers'), 0);
    assert.equal(value(samples, 'dtp_job_run_seconds_bucket{le="+Inf"}'), 0);
    assert.equal(value(samples, 'dtp_coordinator_failed'), 0);
  });

  it('moves counters, gauges and histograms as jobs complete, retry, are rejected and go stale', async () => {
    tc = await startCoordinator({ metricsPort: 0, maxActiveJobs: 2 });
    const c = await RawClient.connect(tc.coordinator.clientPort);
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, 'metrics-w', 1);
    peers.push(c, w);
    const before = (await scrape(tc)).samples;
    assert.equal(value(before, 'dtp_workers'), 1);
    assert.equal(value(before, 'dtp_free_slots'), 1);

    // A completes at once; its duplicate submission is deduplicated; a late
    // second result for it is stale.
    const a = await c.submit('SHA256', { text: 'a' }, { idempotencyKey: 'metrics-a' });
    const assignA = await w.assignments.next();
    w.succeed(assignA, 'hash a');
    assert.equal((await c.wait(a)).state, 'COMPLETED');
    assert.equal(await c.submit('SHA256', { text: 'a' }, { idempotencyKey: 'metrics-a' }), a);
    w.succeed(assignA, 'hash a again');
    await tc.waitForEvent('result.stale');

    // B fails once, is retried and completes.
    const b = await c.submit('SHA256', { text: 'b' }, { maxAttempts: 2 });
    w.fail(await w.assignments.next(), 'transient');
    w.succeed(await w.assignments.next(), 'hash b');
    assert.equal((await c.wait(b)).state, 'COMPLETED');

    // C runs, D waits, E is over the limit of 2.
    await c.submit('SHA256', { text: 'c' });
    await w.assignments.next();
    await c.submit('SHA256', { text: 'd' });
    const e = await c.request({
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: 'e' },
      maxAttempts: null,
      idempotencyKey: null,
      priority: null,
    });
    assert.equal(e.type, 'SUBMIT_REJECTED');

    const after = (await scrape(tc)).samples;
    const moved = (key: string): number => value(after, key) - value(before, key);
    assert.equal(moved('dtp_submissions_total{outcome="accepted"}'), 4);
    assert.equal(moved('dtp_submissions_total{outcome="rejected"}'), 1);
    assert.equal(moved('dtp_submissions_deduplicated_total'), 1);
    assert.equal(moved('dtp_assignments_total'), 4);
    assert.equal(moved('dtp_retries_total{cause="task_failure"}'), 1);
    assert.equal(moved('dtp_jobs_finished_total{state="COMPLETED"}'), 2);
    assert.equal(moved('dtp_stale_results_total'), 1);
    assert.equal(value(after, 'dtp_jobs{state="RUNNING"}'), 1);
    assert.equal(value(after, 'dtp_jobs{state="QUEUED"}'), 1);
    assert.equal(value(after, 'dtp_active_jobs'), 2);
    assert.equal(value(after, 'dtp_max_active_jobs'), 2);
    assert.equal(value(after, 'dtp_free_slots'), 0);
    assert.equal(value(after, 'dtp_job_queue_wait_seconds_count'), 4);
    assert.equal(value(after, 'dtp_job_queue_wait_seconds_bucket{le="+Inf"}'), 4);
    assert.equal(value(after, 'dtp_job_run_seconds_count'), 2);
    assert.equal(value(after, 'dtp_job_end_to_end_seconds_count'), 2);
    assert.ok(value(after, 'dtp_job_end_to_end_seconds_sum') > 0);
    assert.ok(moved('dtp_store_commit_seconds_count') >= 4);

    // The worker dies: its session counts as lost, C is retried.
    await w.close();
    await tc.waitForEvent('job.retryScheduled', (ev) => ev.cause === 'worker_lost');
    const lost = (await scrape(tc)).samples;
    assert.equal(value(lost, 'dtp_workers_lost_total{reason="connection_closed"}'), 1);
    assert.equal(value(lost, 'dtp_retries_total{cause="worker_lost"}'), 1);
    assert.equal(value(lost, 'dtp_workers'), 0);
  });

  it('counts QUEUED jobs by task type, and says whether any live worker serves the type', async () => {
    tc = await startCoordinator({ metricsPort: 0 });
    const c = await RawClient.connect(tc.coordinator.clientPort);
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, 'metrics-types', 1, {
      taskTypes: ['thumbnail'],
    });
    peers.push(c, w);
    await c.submit('thumbnail', { n: 1 });
    await w.assignments.next(); // the worker is busy from now on
    await c.submit('thumbnail', { n: 2 });
    await c.submit('resize', { n: 1 });
    await c.submit('resize', { n: 2 });
    const { samples } = await scrape(tc);
    assert.equal(value(samples, 'dtp_queued_jobs{task_type="resize",served="no"}'), 2);
    assert.equal(value(samples, 'dtp_queued_jobs{task_type="thumbnail",served="yes"}'), 1);
  });

  it('counts event subscriptions and subscribers, events pushed, and progress reports accepted and ignored', async () => {
    tc = await startCoordinator({ metricsPort: 0 });
    const c = await RawClient.connect(tc.coordinator.clientPort);
    const sub = await RawClient.connect(tc.coordinator.clientPort);
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, 'metrics-progress', 1);
    peers.push(c, sub, w);
    sub.conn.send({ type: 'SUBSCRIBE_JOBS', filter: {} });
    assert.equal((await sub.inbox.next(5_000)).type, 'SUBSCRIBED');
    sub.conn.send({ type: 'SUBSCRIBE_JOBS', filter: { taskType: 'SHA256' } });
    assert.equal((await sub.inbox.next(5_000)).type, 'SUBSCRIBED');
    const subscribed = (await scrape(tc)).samples;
    assert.equal(value(subscribed, 'dtp_event_subscriptions'), 2);
    assert.equal(value(subscribed, 'dtp_event_subscribers'), 1, 'one connection holds both');
    assert.equal(value(subscribed, 'dtp_events_pushed_total{event="state"}'), 0);
    assert.equal(value(subscribed, 'dtp_events_pushed_total{event="progress"}'), 0);
    assert.equal(value(subscribed, 'dtp_events_dropped_total'), 0);
    const jobId = await c.submit('SHA256', { text: 'p' });
    const assign = await w.assignments.next();
    const progress = (attemptId: string, fraction: number) =>
      w.conn.send({
        type: 'TASK_PROGRESS',
        workerId: 'metrics-progress',
        jobId,
        attemptId,
        fraction,
        message: null,
      });
    progress(assign.attemptId, 0.5);
    progress('not-the-lease', 0.6);
    progress(assign.attemptId, 1.5);
    await until(
      async () => {
        const { samples } = await scrape(tc as TestCoordinator);
        return (
          value(samples, 'dtp_progress_reports_total{outcome="accepted"}') === 1 &&
          value(samples, 'dtp_progress_reports_total{outcome="ignored"}') === 2
        );
      },
      { what: 'one progress report accepted, two ignored' },
    );
    // The accepted report is one progress event, pushed to both subscriptions;
    // the job's state events went to both too (the subscriber reads them all).
    const seen = { state: 0, progress: 0 };
    while (seen.progress < 2) {
      const msg = await sub.inbox.next(5_000);
      if (msg.type === 'JOB_EVENT') seen[msg.event]++;
    }
    const pushed = (await scrape(tc)).samples;
    assert.equal(value(pushed, 'dtp_events_pushed_total{event="progress"}'), 2);
    assert.equal(value(pushed, 'dtp_events_pushed_total{event="state"}'), seen.state);
    assert.ok(seen.state >= 2, `state events seen: ${seen.state}`);
    await sub.close();
    await until(
      async () =>
        value((await scrape(tc as TestCoordinator)).samples, 'dtp_event_subscriptions') === 0,
      {
        what: 'the subscriptions gone with their connection',
      },
    );
  });

  it('reports 200 on /healthz while working and 503 with the reason after a store failure', async () => {
    const store = new MemoryStore();
    tc = await startCoordinator({ metricsPort: 0 }, { store });
    const c = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(c);
    assert.deepEqual(await healthz(tc), {
      status: 200,
      body: `${JSON.stringify({ status: 'ok', role: 'leader' })}\n`,
    });
    await c.submit('SHA256', { text: 'stored' });

    store.failCommits('SQLITE_FULL: database or disk is full');
    const reply = await c.request({
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: 'not stored' },
      maxAttempts: null,
      idempotencyKey: null,
      priority: null,
    });
    assert.ok(reply.type === 'ERROR' && reply.code === 'STORE_FAILED');
    const health = await healthz(tc);
    assert.equal(health.status, 503);
    const body = JSON.parse(health.body) as Record<string, unknown>;
    assert.equal(body.status, 'failed');
    assert.equal(body.code, 'STORE_FAILED');
    assert.match(String(body.message), /disk is full/);
    const { samples } = await scrape(tc);
    assert.equal(value(samples, 'dtp_coordinator_failed'), 1);
    // A registry of its own: only this coordinator's one job is counted.
    assert.equal(value(samples, 'dtp_submissions_total{outcome="accepted"}'), 1);
  });

  it('answers 404 for other paths, 405 for other methods, and stops listening on close', async () => {
    tc = await startCoordinator({ metricsPort: 0 });
    const base = `http://127.0.0.1:${tc.coordinator.metricsPort}`;
    assert.equal((await fetch(`${base}/favicon.ico`)).status, 404);
    assert.equal((await fetch(`${base}/metrics/x`)).status, 404);
    const post = await fetch(`${base}/metrics`, { method: 'POST' });
    assert.deepEqual([post.status, post.headers.get('allow')], [405, 'GET']);
    await tc.close();
    await assert.rejects(fetch(`${base}/healthz`));
  });

  it('is off unless a port is given', async () => {
    tc = await startCoordinator();
    assert.equal(tc.coordinator.metricsPort, null);
  });
});
