/**
 * OpenTelemetry end to end, in-process: the test sets up tracing in its own
 * thread as a user's `--import ./otel.js` would (an in-memory exporter), so
 * the coordinator (in this process) records `dtp.submit`, `dtp.assign` and
 * `dtp.schedule.tick`, the worker (in this process too) runs each attempt in
 * a `dtp.attempt` span, and the task module (test/fixtures/traced-tasks.ts)
 * sets up tracing in its task thread and returns the spans its handler
 * made. One trace runs from the client's span through the coordinator's and
 * the attempt's into the handler.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, afterEach, before, describe, it } from 'node:test';
import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { DtpClient } from '../../src/client/index.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import type { Worker } from '../../src/worker/worker.js';
import type { SpanSeen } from '../fixtures/traced-tasks.js';
import {
  startCoordinator,
  startTaskWorker,
  tempDir,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { scheduleDefinition } from '../helpers/schedules.js';
import { until } from '../helpers/until.js';

const TRACED_TASKS = fileURLToPath(new URL('../fixtures/traced-tasks.js', import.meta.url));
/**
 * These tests judge spans, not liveness: a worker in this process is not
 * declared lost when the process stalls on a loaded machine (a second
 * attempt would add spans the tests do not expect).
 */
const PATIENT = { heartbeatTimeoutMs: 10_000 } as const;

const exporter = new InMemorySpanExporter();
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(
  new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
);
const tracer = trace.getTracer('tracing-test');

/** Runs `fn` inside a client span of its own; resolves with its result and the span's ids. */
async function inClientSpan<T>(fn: () => Promise<T>): Promise<{ value: T; span: ReadableSpan }> {
  let spanId = '';
  const value = await tracer.startActiveSpan('client.request', async (span) => {
    spanId = span.spanContext().spanId;
    try {
      return await fn();
    } finally {
      span.end();
    }
  });
  const span = exporter.getFinishedSpans().find((s) => s.spanContext().spanId === spanId);
  assert.ok(span !== undefined, 'the client span was exported');
  return { value, span };
}

/** The finished spans called `name` of a job, at least `count`, by attempt number. */
async function spansOf(name: string, jobId: string, count: number): Promise<ReadableSpan[]> {
  const spans = await until(
    () => {
      const found = exporter
        .getFinishedSpans()
        .filter((s) => s.name === name && s.attributes['dtp.job.id'] === jobId);
      return found.length >= count ? found : null;
    },
    { what: `${count} ${name} span(s) of ${jobId}` },
  );
  return spans.sort(
    (a, b) =>
      Number(a.attributes['dtp.attempt.number']) - Number(b.attributes['dtp.attempt.number']),
  );
}

/** The `dtp.attempt` spans of a job, by attempt number (they end a moment after the result). */
function attemptSpans(jobId: string, count: number): Promise<ReadableSpan[]> {
  return spansOf('dtp.attempt', jobId, count);
}

/** The coordinator's span of a job's submission. */
async function submitSpan(jobId: string): Promise<ReadableSpan> {
  const [span] = await spansOf('dtp.submit', jobId, 1);
  assert.ok(span !== undefined);
  return span;
}

/**
 * The spans between a job's submission and its attempts: `dtp.assign` per
 * attempt, each child of `parent` (the job's `dtp.submit`, or its recorded
 * context when this coordinator did not see it submitted), each attempt
 * child of its assignment. Returns the attempts.
 */
async function assignedUnder(
  jobId: string,
  parent: ReadableSpan,
  count = 1,
): Promise<ReadableSpan[]> {
  const attempts = await attemptSpans(jobId, count);
  const assigns = await spansOf('dtp.assign', jobId, count);
  assert.equal(assigns.length, attempts.length);
  attempts.forEach((attempt, i) => {
    const assign = assigns[i];
    assert.ok(assign !== undefined);
    assertChildOf(assign, parent);
    assertChildOf(attempt, assign);
    assert.equal(assign.attributes['dtp.attempt.number'], i + 1);
  });
  return attempts;
}

function handlerSpans(job: JobSnapshot): SpanSeen[] {
  assert.equal(job.state, 'COMPLETED', job.error ?? '');
  return JSON.parse(job.result ?? '[]') as SpanSeen[];
}

/** The handler's spans nest in `attempt`: handler.work under it, handler.step under that. */
function assertNestedIn(spans: SpanSeen[], attempt: ReadableSpan): void {
  const work = spans.find((s) => s.name === 'handler.work');
  const step = spans.find((s) => s.name === 'handler.step');
  assert.ok(work !== undefined && step !== undefined, JSON.stringify(spans));
  assert.equal(work.traceId, attempt.spanContext().traceId);
  assert.equal(work.parentSpanId, attempt.spanContext().spanId);
  assert.equal(step.traceId, attempt.spanContext().traceId);
  assert.equal(step.parentSpanId, work.spanId);
}

function assertChildOf(span: ReadableSpan, parent: ReadableSpan): void {
  assert.equal(span.spanContext().traceId, parent.spanContext().traceId);
  assert.equal(span.parentSpanContext?.spanId, parent.spanContext().spanId);
}

describe('OpenTelemetry traces', { timeout: 60_000 }, () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  const workers: Worker[] = [];

  async function worker(id: string, port = tc.coordinator.workerPort): Promise<Worker> {
    const started = await startTaskWorker(port, id, { tasks: [TRACED_TASKS] });
    workers.push(started);
    return started;
  }

  before(async () => {
    tc = await startCoordinator(PATIENT);
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
    exporter.reset();
  });
  after(async () => {
    await client.close();
    await tc.close();
  });

  it('runs one trace from the client span through the coordinator and dtp.attempt into the handler', async () => {
    await worker('w-trace');
    const { value: handle, span: clientSpan } = await inClientSpan(() =>
      client.submit({ taskType: 'traced.work', payload: {} }),
    );
    const job = await client.wait(handle.jobId, 10_000);
    const submit = await submitSpan(handle.jobId);
    assertChildOf(submit, clientSpan);
    assert.deepEqual(submit.attributes, {
      'dtp.job.id': handle.jobId,
      'dtp.task.type': 'traced.work',
      'dtp.queue': 'default',
    });
    const [attempt] = await assignedUnder(handle.jobId, submit);
    const [assign] = await spansOf('dtp.assign', handle.jobId, 1);
    assert.ok(attempt !== undefined && assign !== undefined);
    assert.deepEqual(assign.attributes, {
      'dtp.job.id': handle.jobId,
      'dtp.task.type': 'traced.work',
      'dtp.attempt.number': 1,
      'dtp.worker.id': 'w-trace',
    });
    assert.deepEqual(attempt.attributes, {
      'dtp.job.id': handle.jobId,
      'dtp.task.type': 'traced.work',
      'dtp.attempt.number': 1,
      'dtp.queue': 'default',
      'dtp.attempt.outcome': 'SUCCEEDED',
    });
    assert.notEqual(attempt.status.code, SpanStatusCode.ERROR);
    assertNestedIn(handlerSpans(job), attempt);
  });

  it('names the queue of a job of a named queue on its submit and attempt spans', async () => {
    await worker('w-queue');
    const handle = await client.submit({ taskType: 'traced.work', payload: {}, queue: 'traced-q' });
    const job = await client.wait(handle.jobId, 10_000);
    const submit = await submitSpan(handle.jobId);
    assert.equal(submit.attributes['dtp.queue'], 'traced-q');
    const [attempt] = await assignedUnder(handle.jobId, submit);
    assert.ok(attempt !== undefined);
    assert.equal(attempt.attributes['dtp.queue'], 'traced-q');
    assertNestedIn(handlerSpans(job), attempt);
  });

  it('gives every attempt of a retried job its own assignment and span under the submission', async () => {
    await worker('w-retry');
    const { value: handle, span: clientSpan } = await inClientSpan(() =>
      client.submit({ taskType: 'traced.flaky', payload: {}, maxAttempts: 2 }),
    );
    const job = await client.wait(handle.jobId, 10_000);
    const submit = await submitSpan(handle.jobId);
    assertChildOf(submit, clientSpan);
    const [first, second] = await assignedUnder(handle.jobId, submit, 2);
    assert.ok(first !== undefined && second !== undefined);
    assert.equal(first.attributes['dtp.attempt.outcome'], 'FAILED');
    assert.equal(first.status.code, SpanStatusCode.ERROR);
    assert.equal(second.attributes['dtp.attempt.number'], 2);
    assert.equal(second.attributes['dtp.attempt.outcome'], 'SUCCEEDED');
    assertNestedIn(handlerSpans(job), second);
  });

  it('carries the context of submitMany and submitFlow jobs', async () => {
    await worker('w-batch');
    const { value: ids, span: clientSpan } = await inClientSpan(async () => {
      const many = await client.submitMany([{ taskType: 'traced.work', payload: {} }]);
      const flow = await client.submitFlow({
        jobs: [{ ref: 'a', taskType: 'traced.work', payload: {} }],
      });
      return [...many, flow.jobs.a ?? ''];
    });
    for (const jobId of ids) {
      const job = await client.wait(jobId, 10_000);
      const submit = await submitSpan(jobId);
      assertChildOf(submit, clientSpan);
      const [attempt] = await assignedUnder(jobId, submit);
      assert.ok(attempt !== undefined);
      assertNestedIn(handlerSpans(job), attempt);
    }
  });

  it('makes dtp.submit a root span for a job submitted outside any span', async () => {
    await worker('w-root');
    const handle = await client.submit({ taskType: 'traced.work', payload: {} });
    const job = await client.wait(handle.jobId, 10_000);
    const submit = await submitSpan(handle.jobId);
    assert.equal(submit.parentSpanContext, undefined);
    const [attempt] = await assignedUnder(handle.jobId, submit);
    assert.ok(attempt !== undefined);
    assertNestedIn(handlerSpans(job), attempt);
  });

  it('starts the trace of a schedule tick at dtp.schedule.tick', async () => {
    await worker('w-tick');
    const set = await client.scheduleRequest({
      type: 'SET_SCHEDULE',
      schedule: scheduleDefinition('traced-tick', 'traced.work', { everyMillis: 1_000 }),
    });
    assert.equal(set.type, 'SCHEDULE_INFO', JSON.stringify(set));
    const tick = await until(
      () =>
        exporter
          .getFinishedSpans()
          .find(
            (s) =>
              s.name === 'dtp.schedule.tick' && s.attributes['dtp.schedule.name'] === 'traced-tick',
          ) ?? null,
      { what: 'a dtp.schedule.tick span', timeoutMs: 15_000 },
    );
    await client.scheduleRequest({ type: 'DELETE_SCHEDULE', name: 'traced-tick' });
    const jobId = String(tick.attributes['dtp.job.id']);
    assert.equal(tick.parentSpanContext, undefined);
    const job = await client.wait(jobId, 10_000);
    const [attempt] = await assignedUnder(jobId, tick);
    assert.ok(attempt !== undefined);
    assertNestedIn(handlerSpans(job), attempt);
    assert.equal(
      exporter
        .getFinishedSpans()
        .filter((s) => s.name === 'dtp.submit' && s.attributes['dtp.job.id'] === jobId).length,
      0,
      'a tick is no submission',
    );
  });

  it('keeps the trace context in the store across a coordinator restart', async () => {
    const dir = tempDir();
    try {
      const databasePath = join(dir.dir, 'dtp.db');
      const first = await startCoordinator({ ...PATIENT, databasePath });
      const early = await DtpClient.connect({
        host: '127.0.0.1',
        port: first.coordinator.clientPort,
      });
      // No worker yet: the job waits, and only the store remembers its context.
      const { value: handle, span: clientSpan } = await inClientSpan(() =>
        early.submit({ taskType: 'traced.work', payload: {} }),
      );
      await early.close();
      await first.close();
      const second = await startCoordinator({ ...PATIENT, databasePath });
      const late = await DtpClient.connect({
        host: '127.0.0.1',
        port: second.coordinator.clientPort,
      });
      try {
        await worker('w-restart', second.coordinator.workerPort);
        const job = await late.wait(handle.jobId, 10_000);
        // The first coordinator recorded the submission; the second one
        // knows only the recorded context, and assigns under it.
        assertChildOf(await submitSpan(handle.jobId), clientSpan);
        const [attempt] = await assignedUnder(handle.jobId, clientSpan);
        assert.ok(attempt !== undefined);
        assertNestedIn(handlerSpans(job), attempt);
      } finally {
        await Promise.all(workers.splice(0).map((w) => w.close()));
        await late.close();
        await second.close();
      }
    } finally {
      dir.remove();
    }
  });
});
