/**
 * OpenTelemetry, when the user set it up; nothing otherwise.
 *
 * `@opentelemetry/api` is an optional peer dependency: no module of dtp
 * imports it statically. It is imported (once per thread, then cached) only
 * after the user's own setup registered something with it in this thread (a
 * tracer provider, a context manager: the API keeps those in one global,
 * which is what {@link otelRegistered} looks at). Without that setup, or when
 * the package cannot be resolved, every function here is a no-op and nothing
 * is loaded.
 *
 * Trace context travels as W3C `traceparent`/`tracestate` text built from the
 * span context directly (protocol/trace-context.ts), so it does not depend on
 * which propagator the user registered.
 */
import type * as OtelModule from '@opentelemetry/api';
import type { Attributes, Context, Span, SpanContext, SpanKind } from '@opentelemetry/api';
import {
  formatTraceparent,
  MAX_TRACESTATE_LENGTH,
  parseTraceparent,
  type TraceContext,
} from '../protocol/trace-context.js';

type OtelApi = typeof OtelModule;

/** Where version 1 of the API keeps what was registered with it (its own, stable key). */
const API_GLOBAL = Symbol.for('opentelemetry.js.api.1');

let loading: Promise<OtelApi | null> | null = null;
let loaded: OtelApi | null = null;

/** True once code in this thread registered anything with the OpenTelemetry API (v1). */
export function otelRegistered(): boolean {
  return (globalThis as Record<symbol, unknown>)[API_GLOBAL] !== undefined;
}

/**
 * The OpenTelemetry API, or null: when nothing was registered with it in this
 * thread (then nothing is imported), or when it cannot be loaded.
 */
export function loadOtel(): Promise<OtelApi | null> {
  if (loaded !== null) return Promise.resolve(loaded);
  if (!otelRegistered()) return Promise.resolve(null);
  loading ??= import('@opentelemetry/api').then(
    (api) => (loaded = api),
    () => null,
  );
  return loading;
}

/** The trace context of the caller's active span (W3C form); null without one. */
export async function activeTraceContext(): Promise<TraceContext | null> {
  if (loaded === null && !otelRegistered()) return null;
  const api = await loadOtel();
  if (api === null) return null;
  const span = api.trace.getSpanContext(api.context.active());
  if (span === undefined || !api.isSpanContextValid(span)) return null;
  return traceContextOfSpan(span);
}

function traceContextOfSpan(span: SpanContext): TraceContext {
  const state = span.traceState?.serialize() ?? '';
  return {
    traceparent: formatTraceparent(span.traceId, span.spanId, span.traceFlags),
    // An oversized state is dropped rather than refused: the trace still joins.
    tracestate: state === '' || state.length > MAX_TRACESTATE_LENGTH ? null : state,
  };
}

/** A context whose active span is the (remote) one `trace` names; ROOT when it names none. */
function contextOf(api: OtelApi, trace: TraceContext | null): Context {
  const parsed = trace === null ? null : parseTraceparent(trace.traceparent);
  if (trace === null || parsed === null) return api.ROOT_CONTEXT;
  const spanContext: SpanContext = {
    traceId: parsed.traceId,
    spanId: parsed.spanId,
    traceFlags: parsed.flags,
    isRemote: true,
  };
  if (trace.tracestate !== null) spanContext.traceState = api.createTraceState(trace.tracestate);
  return api.trace.setSpanContext(api.ROOT_CONTEXT, spanContext);
}

/** The OpenTelemetry API, as {@link loadOtel} gives it. */
export type { OtelApi };

/**
 * Records a span that starts and ends now, child of the span that `parent`
 * names (a root span when it names none); returns the new span's context.
 * For the coordinator's spans, which mark a moment (a submission accepted,
 * an assignment sent, a schedule's tick).
 */
export function recordMomentSpan(
  api: OtelApi,
  name: string,
  kind: SpanKind,
  parent: TraceContext | null,
  attributes: Attributes,
): TraceContext {
  const span = api.trace
    .getTracer('dtp')
    .startSpan(name, { kind, attributes }, contextOf(api, parent));
  const context = traceContextOfSpan(span.spanContext());
  span.end();
  return context;
}

/** How an attempt ended, as its span's `dtp.attempt.outcome` says it. */
export type AttemptSpanOutcome = 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | 'DEADLINE';

/** The attributes of a `dtp.attempt` span. */
export interface AttemptSpanAttributes {
  jobId: string;
  taskType: string;
  attemptNumber: number;
  /** The job's named queue, when it has one. */
  queue?: string | null;
}

/** A running `dtp.attempt` span. */
export interface AttemptSpan {
  /** The span's own context: the parent of the handler's spans. */
  readonly context: TraceContext;
  /** Ends the span (once; later calls do nothing). */
  end(outcome: AttemptSpanOutcome, error?: string): void;
}

/**
 * Starts the span of one attempt, child of the job's recorded trace context
 * (a root span when the job has none). Null when `api` is null.
 */
export function startAttemptSpan(
  api: OtelApi | null,
  parent: TraceContext | null,
  attributes: AttemptSpanAttributes,
): AttemptSpan | null {
  if (api === null) return null;
  const tracer = api.trace.getTracer('dtp');
  const span: Span = tracer.startSpan(
    'dtp.attempt',
    {
      kind: api.SpanKind.CONSUMER,
      attributes: {
        'dtp.job.id': attributes.jobId,
        'dtp.task.type': attributes.taskType,
        'dtp.attempt.number': attributes.attemptNumber,
        ...(attributes.queue == null ? {} : { 'dtp.queue': attributes.queue }),
      },
    },
    contextOf(api, parent),
  );
  let ended = false;
  return {
    context: traceContextOfSpan(span.spanContext()),
    end(outcome, error) {
      if (ended) return;
      ended = true;
      span.setAttribute('dtp.attempt.outcome', outcome);
      if (outcome !== 'SUCCEEDED') {
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: error ?? outcome });
      }
      span.end();
    },
  };
}

/**
 * Runs `fn` with the span that `trace` names as the active context (in a
 * task thread: the attempt's span, so the handler's own spans nest inside
 * it). Just runs `fn` without a trace context or without OpenTelemetry here.
 */
export async function runInTraceContext<T>(
  trace: TraceContext | null,
  fn: () => T | Promise<T>,
): Promise<T> {
  if (trace === null) return fn();
  const api = await loadOtel();
  if (api === null) return fn();
  return api.context.with(contextOf(api, trace), fn);
}
