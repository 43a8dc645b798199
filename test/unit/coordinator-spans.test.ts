/**
 * The coordinator's spans (src/coordinator/observability/spans.ts), fed by
 * hand with the events and assignments the shell would release: which span
 * an assignment descends from, which workers get its context, and the bound
 * on the jobs remembered.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import * as api from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { CoordinatorSpans } from '../../src/coordinator/observability/spans.js';
import type { CoreEvent } from '../../src/coordinator/core/types.js';
import type { TaskAssign } from '../../src/protocol/messages.js';
import { parseTraceparent } from '../../src/protocol/trace-context.js';

const exporter = new InMemorySpanExporter();
api.trace.setGlobalTracerProvider(
  new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
);

const CLIENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

function registered(workerId: string, connId: number, traceContext: boolean): CoreEvent {
  return {
    type: 'worker.registered',
    workerId,
    capacity: 1,
    connId,
    taskTypes: null,
    traceContext,
  };
}

function submitted(jobId: string, traceparent: string | null): CoreEvent {
  return {
    type: 'job.submitted',
    jobId,
    state: 'QUEUED',
    taskType: 'T',
    priority: 'NORMAL',
    maxAttempts: 3,
    idempotencyKey: null,
    queue: 'default',
    scheduleName: null,
    traceContext: traceparent === null ? null : { traceparent, tracestate: 'v=1' },
  };
}

function assignOf(jobId: string, attemptNumber = 1, traceparent?: string): TaskAssign {
  return {
    type: 'TASK_ASSIGN',
    jobId,
    attemptId: `${jobId}-${attemptNumber}`,
    attemptNumber,
    taskType: 'T',
    payload: {},
    ...(traceparent === undefined ? {} : { traceparent, tracestate: 'v=1' }),
  };
}

function spanNamed(name: string, jobId: string): ReadableSpan[] {
  return exporter
    .getFinishedSpans()
    .filter((s) => s.name === name && s.attributes['dtp.job.id'] === jobId);
}

function spanIdOf(traceparent: string | null | undefined): string | undefined {
  return parseTraceparent(traceparent ?? '')?.spanId;
}

describe('coordinator spans', () => {
  afterEach(() => exporter.reset());

  it('assigns under the submission and hands a worker that asked the assignment span', () => {
    const spans = new CoordinatorSpans(api);
    spans.event(registered('w1', 7, true));
    spans.event(submitted('j1', CLIENT));
    const sent = spans.assigning(7, assignOf('j1', 1, CLIENT));
    const [submit] = spanNamed('dtp.submit', 'j1');
    const [assign] = spanNamed('dtp.assign', 'j1');
    assert.ok(submit !== undefined && assign !== undefined);
    assert.equal(submit.parentSpanContext?.spanId, spanIdOf(CLIENT));
    assert.equal(assign.parentSpanContext?.spanId, submit.spanContext().spanId);
    assert.equal(assign.attributes['dtp.worker.id'], 'w1');
    assert.equal(spanIdOf(sent.traceparent), assign.spanContext().spanId);
    assert.equal(sent.tracestate, 'v=1', 'the trace state goes on down the trace');
  });

  it('leaves the assignment of a worker that did not ask as it was', () => {
    const spans = new CoordinatorSpans(api);
    spans.event(registered('old', 3, false));
    spans.event(submitted('j2', CLIENT));
    const msg = assignOf('j2');
    assert.equal(spans.assigning(3, msg), msg);
    assert.equal(spanNamed('dtp.assign', 'j2').length, 1, 'the assignment is still recorded');
  });

  it('falls back to the recorded context for a job it did not see submitted, and forgets ended jobs', () => {
    const spans = new CoordinatorSpans(api);
    spans.event(registered('w1', 1, true));
    spans.assigning(1, assignOf('earlier', 1, CLIENT));
    const [assign] = spanNamed('dtp.assign', 'earlier');
    assert.equal(assign?.parentSpanContext?.spanId, spanIdOf(CLIENT));

    spans.event(submitted('j3', null));
    assert.equal(spans.remembered, 1);
    spans.event({ type: 'job.cancelled', jobId: 'j3', from: 'QUEUED' });
    assert.equal(spans.remembered, 0);
  });

  it('remembers at most its limit of jobs, forgetting the oldest first', () => {
    const spans = new CoordinatorSpans(api, 2);
    for (const jobId of ['a', 'b', 'c']) spans.event(submitted(jobId, null));
    assert.equal(spans.remembered, 2);
    spans.event(registered('w1', 1, true));
    spans.assigning(1, assignOf('a'));
    const [forgotten] = spanNamed('dtp.assign', 'a');
    assert.equal(forgotten?.parentSpanContext, undefined, 'a is forgotten: a root span');
    spans.assigning(1, assignOf('c'));
    const [kept] = spanNamed('dtp.assign', 'c');
    assert.equal(
      kept?.parentSpanContext?.spanId,
      spanNamed('dtp.submit', 'c')[0]?.spanContext().spanId,
    );
    spans.reset();
    assert.equal(spans.remembered, 0);
  });
});
