/**
 * OpenTelemetry end to end, in-process: the test sets up tracing in its own
 * thread as a user's `--import ./otel.js` would (an in-memory exporter), the
 * worker (in this process) runs each attempt in a `dtp.attempt` span, and
 * the task module (test/fixtures/traced-tasks.ts) sets up tracing in its
 * task thread and returns the spans its handler made. One trace runs from
 * the client's span through the attempt into the handler.
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
import { until } from '../helpers/until.js';

const TRACED_TASKS = fileURLToPath(new URL('../fixtures/traced-tasks.js', import.meta.url));

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

/** The `dtp.attempt` spans of a job, by attempt number (they end a moment after the result). */
async function attemptSpans(jobId: string, count: number): Promise<ReadableSpan[]> {
  const spans = await until(
    () => {
      const found = exporter
        .getFinishedSpans()
        .filter((s) => s.name === 'dtp.attempt' && s.attributes['dtp.job.id'] === jobId);
      return found.length >= count ? found : null;
    },
    { what: `${count} dtp.attempt span(s) of ${jobId}` },
  );
  return spans.sort(
    (a, b) =>
      Number(a.attributes['dtp.attempt.number']) - Number(b.attributes['dtp.attempt.number']),
  );
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
    tc = await startCoordinator();
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

  it('runs one trace from the client span through dtp.attempt into the handler', async () => {
    await worker('w-trace');
    const { value: handle, span: clientSpan } = await inClientSpan(() =>
      client.submit({ taskType: 'traced.work', payload: {} }),
    );
    const job = await client.wait(handle.jobId, 10_000);
    const [attempt] = await attemptSpans(handle.jobId, 1);
    assert.ok(attempt !== undefined);
    assertChildOf(attempt, clientSpan);
    assert.deepEqual(
      {
        jobId: attempt.attributes['dtp.job.id'],
        taskType: attempt.attributes['dtp.task.type'],
        attemptNumber: attempt.attributes['dtp.attempt.number'],
        outcome: attempt.attributes['dtp.attempt.outcome'],
      },
      { jobId: handle.jobId, taskType: 'traced.work', attemptNumber: 1, outcome: 'SUCCEEDED' },
    );
    assert.notEqual(attempt.status.code, SpanStatusCode.ERROR);
    assertNestedIn(handlerSpans(job), attempt);
  });

  it('gives every attempt of a retried job its own span under the same parent', async () => {
    await worker('w-retry');
    const { value: handle, span: clientSpan } = await inClientSpan(() =>
      client.submit({ taskType: 'traced.flaky', payload: {}, maxAttempts: 2 }),
    );
    const job = await client.wait(handle.jobId, 10_000);
    const [first, second] = await attemptSpans(handle.jobId, 2);
    assert.ok(first !== undefined && second !== undefined);
    assertChildOf(first, clientSpan);
    assertChildOf(second, clientSpan);
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
      const [attempt] = await attemptSpans(jobId, 1);
      assert.ok(attempt !== undefined);
      assertChildOf(attempt, clientSpan);
      assertNestedIn(handlerSpans(job), attempt);
    }
  });

  it('makes the attempt a root span for a job submitted outside any span', async () => {
    await worker('w-root');
    const handle = await client.submit({ taskType: 'traced.work', payload: {} });
    const job = await client.wait(handle.jobId, 10_000);
    const [attempt] = await attemptSpans(handle.jobId, 1);
    assert.ok(attempt !== undefined);
    assert.equal(attempt.parentSpanContext, undefined);
    assertNestedIn(handlerSpans(job), attempt);
  });

  it('keeps the trace context in the store across a coordinator restart', async () => {
    const dir = tempDir();
    try {
      const databasePath = join(dir.dir, 'dtp.db');
      const first = await startCoordinator({ databasePath });
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
      const second = await startCoordinator({ databasePath });
      const late = await DtpClient.connect({
        host: '127.0.0.1',
        port: second.coordinator.clientPort,
      });
      try {
        await worker('w-restart', second.coordinator.workerPort);
        const job = await late.wait(handle.jobId, 10_000);
        const [attempt] = await attemptSpans(handle.jobId, 1);
        assert.ok(attempt !== undefined);
        assertChildOf(attempt, clientSpan);
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
