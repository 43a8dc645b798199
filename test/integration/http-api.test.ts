/**
 * The HTTP API under /api/ on a real coordinator: every endpoint, paging with
 * cursors, filters, search, actions, bad parameters (400 with a message),
 * methods and media types, and the live event stream.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import type {
  CancelResult,
  FlowView,
  JobDetails,
  JobPage,
  Overview,
  PurgeResult,
  RerunResult,
  WorkersResult,
} from '../../src/http/api.js';
import type { JobsMessage } from '../../src/http/live.js';
import type { FlowJob, QueueInfo } from '../../src/protocol/messages.js';
import { EventStream, HttpApi, type SseEvent } from '../helpers/http-api.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

let tc: TestCoordinator;
let api: HttpApi;
let client: RawClient;

before(async () => {
  tc = await startCoordinator({ metricsPort: 0, maxActiveJobs: 1_000 });
  api = new HttpApi(tc.coordinator.httpPort as number);
  client = await RawClient.connect(tc.coordinator.clientPort);
});

after(async () => {
  await client.close();
  await tc.close();
});

/** Submits `n` jobs of a task type nobody serves (they stay QUEUED). */
async function submitIdle(n: number, taskType = 'IDLE_TYPE'): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await client.submit(taskType, { i }));
  return ids;
}

let finishedCount = 0;

/**
 * A job run to an end by a scripted worker: completed, or failed with one
 * attempt. Its task type is RUN_ONCE_<n>, served by that worker only, so
 * that jobs other tests leave queued are never assigned to it.
 */
async function finishedJob(
  success: boolean,
  extra: { idempotencyKey?: string; payload?: Record<string, unknown> } = {},
): Promise<string> {
  const taskType = `RUN_ONCE_${++finishedCount}`;
  const worker = await ScriptedWorker.register(tc.coordinator.workerPort, `w-${taskType}`, 1, {
    taskTypes: [taskType],
  });
  try {
    const jobId = await client.submit(taskType, extra.payload ?? { n: 1 }, {
      maxAttempts: 1,
      ...(extra.idempotencyKey !== undefined && { idempotencyKey: extra.idempotencyKey }),
    });
    const assign = await worker.assignments.next();
    if (success) worker.succeed(assign, 'done');
    else worker.fail(assign, 'it broke');
    await client.wait(jobId);
    return jobId;
  } finally {
    await worker.close();
  }
}

describe('HTTP API: GET /api/jobs', () => {
  it('pages newest first through cursors, each job exactly once', async () => {
    const ids = await submitIdle(120, 'PAGED_TYPE');
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = `/api/jobs?type=PAGED_TYPE&limit=50${cursor === null ? '' : `&cursor=${cursor}`}`;
      const page = await api.ok<JobPage>(query);
      pages++;
      assert.ok(page.jobs.length <= 50);
      seen.push(...page.jobs.map((j) => j.jobId));
      cursor = page.nextCursor;
    } while (cursor !== null && pages < 10);
    assert.equal(pages, 3);
    assert.deepEqual(seen, [...ids].reverse());
  });

  it('filters by state and by task type', async () => {
    const done = await finishedJob(true);
    const failed = await finishedJob(false);
    const doneType = (await api.ok<JobDetails>(`/api/jobs/${done}`)).job.taskType;
    const completedPage = await api.ok<JobPage>(`/api/jobs?state=COMPLETED&type=${doneType}`);
    assert.deepEqual(
      completedPage.jobs.map((j) => j.jobId),
      [done],
    );
    assert.deepEqual((await api.ok<JobPage>(`/api/jobs?state=FAILED&type=${doneType}`)).jobs, []);
    const failedPage = await api.ok<JobPage>('/api/jobs?state=failed');
    assert.deepEqual(
      failedPage.jobs.map((j) => j.jobId),
      [failed],
    );
    const none = await api.ok<JobPage>('/api/jobs?type=NO_SUCH_TYPE');
    assert.deepEqual(none, { jobs: [], nextCursor: null });
  });

  it('finds a job by id and by idempotency key, active or finished', async () => {
    const [queued] = await submitIdle(1, 'SEARCH_TYPE');
    const keyed = await client.submit('SEARCH_TYPE', { k: 1 }, { idempotencyKey: 'order-4711' });
    const finished = await finishedJob(true, { idempotencyKey: 'order-old' });
    const byId = await api.ok<JobPage>(`/api/jobs?search=${queued}`);
    assert.deepEqual(
      byId.jobs.map((j) => j.jobId),
      [queued],
    );
    const byKey = await api.ok<JobPage>('/api/jobs?search=order-4711');
    assert.deepEqual(
      byKey.jobs.map((j) => j.jobId),
      [keyed],
    );
    assert.equal(byKey.jobs[0]?.idempotencyKey, 'order-4711');
    const old = await api.ok<JobPage>('/api/jobs?search=order-old');
    assert.deepEqual(
      old.jobs.map((j) => j.jobId),
      [finished],
    );
    const filteredOut = await api.ok<JobPage>('/api/jobs?search=order-4711&state=COMPLETED');
    assert.deepEqual(filteredOut.jobs, []);
    assert.deepEqual((await api.ok<JobPage>('/api/jobs?search=nothing-like-it')).jobs, []);
  });

  it('answers 400 with a message for bad parameters', async () => {
    for (const query of [
      'state=DONE',
      'limit=0',
      'limit=501',
      'limit=ten',
      'cursor=abc',
      'colour=red',
      'limit=5&limit=6',
      `search=${'x'.repeat(300)}`,
      'search=a&cursor=5',
      `type=${'T'.repeat(200)}`,
    ]) {
      const message = await api.fails('GET', `/api/jobs?${query}`, 400);
      assert.ok(message.length > 5, query);
    }
    assert.match(await api.fails('GET', '/api/jobs?state=DONE', 400), /state must be one of/);
    assert.match(
      await api.fails('GET', '/api/jobs?colour=red', 400),
      /unknown query parameter "colour"/,
    );
    // A job id whose escape is no UTF-8: the request's fault, not a 500.
    assert.match(await api.fails('GET', '/api/jobs/%E0%A4', 400), /percent escape/);
  });
});

describe('HTTP API: one job', () => {
  it('shows payload, result, error and attempts', async () => {
    const jobId = await finishedJob(false, { payload: { text: 'hello', n: [1, 2] } });
    const details = await api.ok<JobDetails>(`/api/jobs/${jobId}`);
    assert.equal(details.job.jobId, jobId);
    assert.equal(details.job.state, 'FAILED');
    assert.match(details.job.error ?? '', /^it broke/);
    assert.deepEqual(details.payload, { text: 'hello', n: [1, 2] });
    assert.equal(details.attempts?.length, 1);
    assert.equal(details.attempts[0]?.outcome, 'FAILED');
    assert.equal(typeof details.attempts[0]?.startedAtMillis, 'number');
  });

  it('answers 404 for an unknown job and 405 for a wrong method', async () => {
    assert.match(await api.fails('GET', '/api/jobs/no-such-job', 404), /Unknown job/);
    await api.fails('DELETE', '/api/jobs/no-such-job', 405);
    await api.fails('POST', '/api/jobs/x/explode', 404, {});
    await api.fails('GET', '/api/nothing-here', 404);
    await api.fails('GET', '/api/jobs/x?extra=1', 400);
  });

  it('cancels a queued job, and says so when it was already over', async () => {
    const [jobId] = await submitIdle(1, 'CANCEL_TYPE');
    const first = await api.expect<CancelResult>('POST', `/api/jobs/${jobId}/cancel`, 200, {});
    assert.equal(first.cancelled, true);
    assert.equal(first.job.state, 'CANCELLED');
    const again = await api.expect<CancelResult>('POST', `/api/jobs/${jobId}/cancel`, 200, {});
    assert.equal(again.cancelled, false);
    await api.fails('POST', '/api/jobs/nope/cancel', 404, {});
    await api.fails('GET', `/api/jobs/${jobId}/cancel`, 405);
    await api.fails('POST', `/api/jobs/${jobId}/cancel`, 415, 'x', {
      'content-type': 'text/plain',
    });
    await api.fails('POST', `/api/jobs/${jobId}/cancel`, 400, '{not json');
    await api.fails('POST', `/api/jobs/${jobId}/cancel`, 400, { force: true });
  });

  it('re-runs a FAILED or CANCELLED job as a new job without its idempotency key', async () => {
    const failed = await finishedJob(false, { idempotencyKey: 'rerun-key', payload: { x: 42 } });
    const res = await api.expect<RerunResult>('POST', `/api/jobs/${failed}/rerun`, 201, {});
    assert.notEqual(res.jobId, failed);
    assert.equal(res.rerunOf, failed);
    const fresh = await api.ok<JobDetails>(`/api/jobs/${res.jobId}`);
    assert.deepEqual(fresh.payload, { x: 42 });
    assert.match(fresh.job.taskType, /^RUN_ONCE_/);
    assert.equal(fresh.job.maxAttempts, 1);
    assert.equal(fresh.job.idempotencyKey, undefined);
    assert.equal(fresh.job.state, 'QUEUED');
    // The key still names the original job.
    assert.deepEqual(
      (await api.ok<JobPage>('/api/jobs?search=rerun-key')).jobs.map((j) => j.jobId),
      [failed],
    );
    const [queued] = await submitIdle(1, 'RERUN_TYPE');
    assert.match(
      await api.fails('POST', `/api/jobs/${queued}/rerun`, 409, {}),
      /only FAILED or CANCELLED/,
    );
    const cancelled = await api.expect<CancelResult>('POST', `/api/jobs/${queued}/cancel`, 200, {});
    assert.equal(cancelled.cancelled, true);
    await api.expect<RerunResult>('POST', `/api/jobs/${queued}/rerun`, 201, {});
    const done = await finishedJob(true);
    await api.fails('POST', `/api/jobs/${done}/rerun`, 409, {});
  });
});

describe('HTTP API: GET /api/jobs/:id/flow', () => {
  const idle = (ref: string, dependsOn: string[] = []): FlowJob => ({
    ref,
    taskType: 'FLOW_VIEW_TYPE',
    payload: {},
    dependsOn,
  });
  async function submitFlow(jobs: FlowJob[]): Promise<Map<string, string>> {
    const reply = await client.request({ type: 'SUBMIT_FLOW', jobs });
    assert.equal(reply.type, 'FLOW_SUBMITTED', JSON.stringify(reply));
    return new Map(reply.type === 'FLOW_SUBMITTED' ? reply.jobs.map((j) => [j.ref, j.jobId]) : []);
  }
  const levels = (view: FlowView, id: (ref: string) => string, refs: string[]): unknown =>
    view.nodes.map((n) => [refs.find((r) => id(r) === n.jobId), n.level, n.state]);

  it('shows ancestors above and dependents not yet ended below, and WAITING jobs in lists', async () => {
    const ids = await submitFlow([
      idle('a'),
      idle('b', ['a']),
      idle('c', ['a']),
      idle('d', ['b', 'c']),
    ]);
    const id = (ref: string): string => ids.get(ref) as string;
    const refs = ['a', 'b', 'c', 'd'];
    const fromB = await api.ok<FlowView>(`/api/jobs/${id('b')}/flow`);
    assert.deepEqual(levels(fromB, id, refs), [
      ['a', -1, 'QUEUED'],
      ['b', 0, 'WAITING'],
      ['d', 1, 'WAITING'],
    ]);
    assert.equal(fromB.truncated, false);
    assert.deepEqual(fromB.nodes[2]?.dependsOn, [id('b'), id('c')]);
    const fromA = await api.ok<FlowView>(`/api/jobs/${id('a')}/flow`);
    assert.deepEqual(levels(fromA, id, refs), [
      ['a', 0, 'QUEUED'],
      ['b', 1, 'WAITING'],
      ['c', 1, 'WAITING'],
      ['d', 2, 'WAITING'],
    ]);
    const waiting = await api.ok<JobPage>('/api/jobs?state=WAITING&type=FLOW_VIEW_TYPE');
    assert.deepEqual(
      new Set(waiting.jobs.map((j) => j.jobId)),
      new Set([id('b'), id('c'), id('d')]),
    );
    // An ended dependent is not indexed: only the ancestors stay in view.
    await api.expect<CancelResult>('POST', `/api/jobs/${id('d')}/cancel`, 200, {});
    const afterCancel = await api.ok<FlowView>(`/api/jobs/${id('c')}/flow`);
    assert.deepEqual(levels(afterCancel, id, refs), [
      ['a', -1, 'QUEUED'],
      ['c', 0, 'WAITING'],
    ]);
    await api.expect<CancelResult>('POST', `/api/jobs/${id('a')}/cancel`, 200, {});
    await api.fails('GET', '/api/jobs/no-such-job/flow', 404);
    await api.fails('POST', `/api/jobs/${id('a')}/flow`, 405, {});
  });

  it('shows at most 200 jobs and says it cut the view', async () => {
    const fan = [
      idle('root'),
      ...Array.from({ length: 250 }, (_, i) => idle(`leaf-${i}`, ['root'])),
    ];
    const ids = await submitFlow(fan);
    const view = await api.ok<FlowView>(`/api/jobs/${ids.get('root') as string}/flow`);
    assert.equal(view.nodes.length, 200);
    assert.equal(view.truncated, true);
    await api.expect<CancelResult>(
      'POST',
      `/api/jobs/${ids.get('root') as string}/cancel`,
      200,
      {},
    );
  });
});

describe('HTTP API: POST /api/purge', () => {
  it('deletes terminal jobs older than a duration', async () => {
    const done = await finishedJob(true);
    const kept = await api.expect<PurgeResult>('POST', '/api/purge', 200, {
      state: 'COMPLETED',
      olderThan: '7d',
    });
    assert.equal(kept.deleted, 0);
    await until(async () => (await api.get(`/api/jobs/${done}`)).status === 200, {
      timeoutMs: 2_000,
    });
    const purged = await api.expect<PurgeResult>('POST', '/api/purge', 200, {
      state: 'completed',
      olderThanMillis: 0,
    });
    assert.ok(purged.deleted >= 1);
    await api.fails('GET', `/api/jobs/${done}`, 404);
  });

  it('refuses non-terminal states and bad durations with 400', async () => {
    assert.match(
      await api.fails('POST', '/api/purge', 400, { state: 'RUNNING', olderThan: '1h' }),
      /only terminal jobs/,
    );
    await api.fails('POST', '/api/purge', 400, { state: 'QUEUED', olderThanMillis: 0 });
    assert.match(
      await api.fails('POST', '/api/purge', 400, { state: 'FAILED', olderThan: '7 days' }),
      /olderThan/,
    );
    await api.fails('POST', '/api/purge', 400, { state: 'FAILED' });
    await api.fails('POST', '/api/purge', 400, {
      state: 'FAILED',
      olderThan: '1h',
      olderThanMillis: 5,
    });
    await api.fails('POST', '/api/purge', 400, { state: 'FAILED', olderThanMillis: -1 });
    await api.fails('POST', '/api/purge', 400, { olderThan: '1h' });
    await api.fails('POST', '/api/purge', 400, { state: 'FAILED', olderThan: '1h', why: 1 });
    await api.fails('GET', '/api/purge', 405);
  });
});

describe('HTTP API: workers and overview', () => {
  it('lists workers with slots, running jobs, heartbeat age, draining and task types', async () => {
    const worker = await ScriptedWorker.register(tc.coordinator.workerPort, 'w-listed', 3, {
      taskTypes: ['LISTED_TYPE'],
    });
    try {
      const jobId = await client.submit('LISTED_TYPE', {});
      await worker.assignments.next();
      const body = await api.ok<WorkersResult>('/api/workers');
      const listed = body.workers.find((w) => w.workerId === 'w-listed');
      assert.ok(listed !== undefined);
      assert.equal(listed.capacity, 3);
      assert.equal(listed.activeTasks, 1);
      assert.deepEqual(listed.runningJobs, [jobId]);
      assert.deepEqual(listed.taskTypes, ['LISTED_TYPE']);
      assert.equal(listed.draining, false);
      assert.ok(listed.heartbeatAgeMillis >= 0 && listed.heartbeatAgeMillis < 5_000);
      await api.fails('GET', '/api/workers?x=1', 400);
    } finally {
      await worker.close();
    }
  });

  it('reports jobs by state, queue depth by priority, headroom and activity', async () => {
    await client.submit('OVERVIEW_TYPE', {}, { priority: 'HIGH' });
    await client.submit('OVERVIEW_TYPE', {}, { priority: 'LOW' });
    const body = await api.ok<Overview>('/api/overview');
    assert.ok(body.jobs.byState.QUEUED >= 2);
    assert.ok(body.queueDepthByPriority.HIGH >= 1);
    assert.ok(body.queueDepthByPriority.LOW >= 1);
    assert.equal(body.admission.maxActiveJobs, 1_000);
    assert.equal(body.admission.headroom, 1_000 - body.admission.activeJobs);
    assert.equal(body.activity.buckets.length, 360);
    assert.ok(body.activity.totals.submitted >= 2);
    assert.equal(typeof body.activity.buckets.at(-1)?.completed, 'number');
    assert.equal(body.failure, null);
    await api.fails('POST', '/api/overview', 405);
  });
});

describe('HTTP API: the live stream', () => {
  it('pushes job changes, overviews and workers as they happen', async () => {
    const stream = new EventStream(tc.coordinator.httpPort as number);
    try {
      assert.equal(await stream.status, 200);
      await stream.next((e) => e.event === 'overview');
      await stream.next((e) => e.event === 'workers');
      const jobId = await client.submit('LIVE_TYPE', {});
      const changeOf = (e: SseEvent, state: string) =>
        e.event === 'jobs' &&
        (e.data as JobsMessage).changes.find((c) => c.jobId === jobId && c.state === state);
      const queued = await stream.next((e) => Boolean(changeOf(e, 'QUEUED')));
      const mine = changeOf(queued, 'QUEUED');
      assert.ok(mine !== false && mine !== undefined);
      assert.equal(mine.taskType, 'LIVE_TYPE');
      await api.post(`/api/jobs/${jobId}/cancel`);
      await stream.next((e) => Boolean(changeOf(e, 'CANCELLED')));
    } finally {
      stream.close();
    }
  });
});

describe('HTTP port: the page and the rest', () => {
  it('serves the page shell, /healthz and /metrics, and 404 elsewhere', async () => {
    const page = await fetch(`${api.base}/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'self'/);
    assert.match(await page.text(), /<title>dtp/);
    assert.equal((await fetch(`${api.base}/healthz`)).status, 200);
    assert.equal((await fetch(`${api.base}/metrics`)).status, 200);
    assert.equal((await fetch(`${api.base}/nope`)).status, 404);
    assert.equal((await fetch(`${api.base}/assets/missing.js`)).status, 404);
  });
});

describe('HTTP API: /api/queues', () => {
  it('pauses, limits, lists and resumes a queue, and refuses bad limits with 400', async () => {
    const paused = await api.expect<QueueInfo>('POST', '/api/queues/http-q/pause', 200, {});
    assert.equal(paused.paused, true);
    const limited = await api.expect<QueueInfo>('POST', '/api/queues/http-q', 200, {
      concurrency: 5,
      rate: '10/1s',
    });
    assert.deepEqual(
      [limited.paused, limited.concurrency, limited.rateLimit],
      [true, 5, { max: 10, intervalMillis: 1_000 }],
    );
    const cleared = await api.expect<QueueInfo>('POST', '/api/queues/http-q', 200, {
      concurrency: null,
    });
    assert.deepEqual([cleared.concurrency, cleared.rateLimit?.max], [null, 10]);
    const { queues } = await api.expect<{ queues: QueueInfo[] }>('GET', '/api/queues', 200);
    assert.equal(queues.find((q) => q.name === 'http-q')?.paused, true);
    const resumed = await api.expect<QueueInfo>('POST', '/api/queues/http-q/resume', 200, {});
    assert.equal(resumed.paused, false);
    assert.match(await api.fails('POST', '/api/queues/http-q', 400, { rate: '0/1s' }), /rate/);
    assert.match(
      await api.fails('POST', '/api/queues/http-q', 400, { concurrency: -1 }),
      /concurrency/,
    );
    await api.fails('POST', '/api/queues/1bad/pause', 400, {});
    await api.fails('GET', '/api/queues/http-q/pause', 405);
  });
});
