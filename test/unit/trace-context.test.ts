/**
 * W3C trace context on the wire: the `traceparent` shape, its formatting
 * from a span context, and the optional fields of SUBMIT_JOB, SUBMIT_JOBS
 * elements, SUBMIT_FLOW jobs, WORKER_REGISTER and TASK_ASSIGN (left out when
 * absent, so a v1 peer never sees them).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeSubmitElement, decodeValue, messageToJson } from '../../src/protocol/codec.js';
import type { Message } from '../../src/protocol/messages.js';
import {
  formatTraceparent,
  parseTraceparent,
  traceContextOf,
  traceContextProblem,
  traceFields,
} from '../../src/protocol/trace-context.js';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const SPAN_ID = 'b7ad6b7169203331';
const TRACEPARENT = `00-${TRACE_ID}-${SPAN_ID}-01`;

function roundTrip(msg: Message): Record<string, unknown> {
  const json = messageToJson(msg);
  assert.deepEqual(decodeValue(JSON.parse(json)), msg);
  return JSON.parse(json) as Record<string, unknown>;
}

describe('trace context', () => {
  it('parses a version-00 traceparent and formats one from a span context', () => {
    assert.deepEqual(parseTraceparent(TRACEPARENT), {
      traceId: TRACE_ID,
      spanId: SPAN_ID,
      flags: 1,
    });
    assert.equal(formatTraceparent(TRACE_ID, SPAN_ID, 1), TRACEPARENT);
    assert.equal(formatTraceparent(TRACE_ID, SPAN_ID, 0), `00-${TRACE_ID}-${SPAN_ID}-00`);
    for (const bad of [
      '',
      TRACEPARENT.toUpperCase(),
      `${TRACEPARENT}-x`,
      `ff${TRACEPARENT.slice(2)}`,
    ]) {
      assert.equal(parseTraceparent(bad), null, bad);
    }
  });

  it('names what is wrong with the request fields, and nothing when they are absent', () => {
    assert.equal(traceContextProblem({}), null);
    assert.equal(traceContextProblem({ traceparent: TRACEPARENT, tracestate: 'a=1' }), null);
    assert.match(traceContextProblem({ traceparent: 'x' }) ?? '', /traceparent/);
    assert.match(traceContextProblem({ tracestate: 'a=1' }) ?? '', /without traceparent/);
    assert.deepEqual(traceContextOf({ traceparent: TRACEPARENT, tracestate: '' }), {
      traceparent: TRACEPARENT,
      tracestate: null,
    });
    assert.equal(traceContextOf({}), null);
    assert.deepEqual(traceFields(null), {});
  });

  it('carries the fields on SUBMIT_JOB, SUBMIT_JOBS elements, flows, registration and assignments', () => {
    const submit = roundTrip({
      type: 'SUBMIT_JOB',
      taskType: 'SLEEP',
      payload: {},
      maxAttempts: null,
      idempotencyKey: null,
      priority: null,
      traceparent: TRACEPARENT,
      tracestate: 'vendor=1',
    });
    assert.equal(submit.traceparent, TRACEPARENT);
    const element = decodeSubmitElement(
      { taskType: 'SLEEP', payload: {}, traceparent: TRACEPARENT },
      'jobs[0]',
    );
    assert.equal(element.traceparent, TRACEPARENT);
    roundTrip({
      type: 'SUBMIT_FLOW',
      jobs: [{ ref: 'a', taskType: 'SLEEP', payload: {}, traceparent: TRACEPARENT }],
    });
    roundTrip({
      type: 'WORKER_REGISTER',
      workerId: 'w',
      capacity: 1,
      taskTypes: null,
      traceContext: true,
    });
    const assign = roundTrip({
      type: 'TASK_ASSIGN',
      jobId: 'j',
      attemptId: 'a',
      attemptNumber: 1,
      taskType: 'SLEEP',
      payload: {},
      traceparent: TRACEPARENT,
    });
    assert.equal(assign.tracestate, undefined, 'absent fields stay off the wire');
  });

  it('leaves the fields out of a message without a trace context', () => {
    const json = roundTrip({
      type: 'TASK_ASSIGN',
      jobId: 'j',
      attemptId: 'a',
      attemptNumber: 1,
      taskType: 'SLEEP',
      payload: {},
      ...traceFields(null),
    });
    assert.equal('traceparent' in json, false);
  });
});
