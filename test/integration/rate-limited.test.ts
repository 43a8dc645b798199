/**
 * A handler that throws RateLimitedError, on a real worker against a raw
 * fake coordinator: on a shared task thread, on an isolated one, on the
 * program's own thread (handlers given in code) and after a durable step,
 * the attempt's TASK_RESULT fails with `RATE_LIMITED: ...` and carries
 * `rateLimited` (also inside TASK_RESULTS) when the coordinator offers
 * `rateLimits`; without the feature it is an ordinary retryable failure
 * saying so.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, it } from 'node:test';
import type { RateLimitedResult, TaskResult } from '../../src/protocol/messages.js';
import { startWorker } from '../../src/worker/start-worker.js';
import { FakeCoordinator, HOST, type FakeSession } from '../helpers/fake-coordinator.js';
import { testLogger } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';
import { rateLimited, type RateLimitedPayload } from '../fixtures/io-tasks.js';

const IO_TASKS = fileURLToPath(new URL('../fixtures/io-tasks.js', import.meta.url));

/** The attempts each test assigns: where the handler runs, what it throws, what should come back. */
const CASES: readonly {
  jobId: string;
  taskType: string;
  payload: RateLimitedPayload;
  error: string;
  rateLimited: RateLimitedResult;
}[] = [
  {
    jobId: 'job-shared',
    taskType: 'io.rateLimited',
    payload: { retryAfterMs: 2_000, scope: 'queue', message: '429 from the API' },
    error: 'RATE_LIMITED: 429 from the API',
    rateLimited: { retryAfterMillis: 2_000, scope: 'queue' },
  },
  {
    jobId: 'job-isolated',
    taskType: 'io.rateLimitedIsolated',
    payload: { retryAfterMs: 500 },
    error: 'RATE_LIMITED: retry after 500 ms (scope job)',
    rateLimited: { retryAfterMillis: 500, scope: 'job' },
  },
  {
    jobId: 'job-local',
    taskType: 'local.rateLimited',
    payload: { retryAfterMs: 86_400_000, scope: 'group' },
    error: 'RATE_LIMITED: retry after 86400000 ms (scope group)',
    rateLimited: { retryAfterMillis: 86_400_000, scope: 'group' },
  },
  {
    jobId: 'job-durable',
    taskType: 'io.rateLimited',
    payload: { retryAfterMs: 1, scope: 'group', step: true },
    error: 'RATE_LIMITED: retry after 1 ms (scope group)',
    rateLimited: { retryAfterMillis: 1, scope: 'group' },
  },
];

describe('a handler that throws RateLimitedError', { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setUp(features: string[]): Promise<FakeSession> {
    const fake = await FakeCoordinator.listen();
    cleanups.push(() => fake.close());
    const w = await startWorker({
      coordinatorHost: HOST,
      coordinatorPort: fake.port,
      workerId: 'w-limited',
      capacity: 16,
      threads: 1,
      heartbeatIntervalMs: 100,
      reconnectDelayMs: 50,
      tasks: [IO_TASKS],
      handlers: { 'local.rateLimited': rateLimited },
      logger: testLogger('worker'),
    });
    cleanups.push(() => w.close());
    const registered = once(w.events, 'registered');
    const session = await fake.acceptNext(features);
    await registered;
    return session;
  }

  /** Assigns every case (the durable one with its step recorded); their results by job. */
  async function runCases(session: FakeSession): Promise<Map<string, TaskResult>> {
    const results = new Map<string, TaskResult>();
    const leases = CASES.map(({ jobId, taskType, payload }) => {
      const attemptId = `${jobId}-attempt-1`;
      session.send({
        type: 'TASK_ASSIGN',
        jobId,
        attemptId,
        attemptNumber: 1,
        taskType,
        payload: { ...payload },
        steps:
          payload.step === true ? [{ name: 'lookup', result: '"looked up"', atMillis: 1 }] : [],
        stepCount: payload.step === true ? 1 : 0,
      });
      return [jobId, attemptId] as const;
    });
    for (const [jobId, attemptId] of leases) {
      results.set(jobId, await session.resultFor(attemptId, 10_000));
    }
    return results;
  }

  it('sends rateLimited with the failed result to a coordinator that offers rateLimits', async () => {
    const session = await setUp(['rateLimits', 'retryable', 'steps', 'batches']);
    const results = await runCases(session);
    for (const { jobId, error, rateLimited: expected } of CASES) {
      const result = results.get(jobId);
      assert.deepEqual(
        [result?.success, result?.error, result?.rateLimited, result?.retryable],
        [false, error, expected, undefined],
        jobId,
      );
    }
    assert.deepEqual(session.all('TASK_SUSPEND'), [], 'a rate limit after a step is a result');
  });

  it('sends an ordinary retryable failure saying so to a coordinator without rateLimits', async () => {
    const session = await setUp(['retryable', 'requeue', 'steps', 'batches']);
    const results = await runCases(session);
    for (const { jobId, error } of CASES) {
      const result = results.get(jobId);
      assert.deepEqual(
        [result?.success, result?.error, result?.retryable, result?.requeue],
        [false, error, undefined, undefined],
        jobId,
      );
      assert.equal(result !== undefined && 'rateLimited' in result, false, jobId);
    }
  });

  it('carries rateLimited in each result of a TASK_RESULTS batch', async () => {
    const session = await setUp(['rateLimits', 'batches']);
    const payload = { retryAfterMs: 250, scope: 'group' };
    for (let i = 0; i < 8; i++) session.assign(`job-${i}`, 'io.rateLimited', payload);
    await until(() => session.results().length === 8, { what: 'eight results' });
    const batched = session.all('TASK_RESULTS').flatMap((batch) => batch.results);
    assert.ok(batched.length >= 2, 'eight results of one turn, none batched');
    for (const result of session.results()) {
      assert.deepEqual(result.rateLimited, { retryAfterMillis: 250, scope: 'group' });
    }
  });
});
