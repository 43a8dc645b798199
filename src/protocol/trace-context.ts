/**
 * W3C trace context (`traceparent`, `tracestate`) as the protocol carries it:
 * recorded on a job at submission and handed to the worker with each
 * assignment, so that the attempt's span joins the submitter's trace.
 *
 * Only the shape is checked here (version 00 of the header, lower-case hex,
 * neither id all zeros; `tracestate` bounded); what the ids mean is the
 * tracing library's business.
 */

/** The trace context of one job. */
export interface TraceContext {
  /** `00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>`. */
  traceparent: string;
  /** Vendor entries, as the header carries them; null = none. */
  tracestate: string | null;
}

/** Longest accepted `tracestate`, in characters (the header's own bound: 32 entries of at most 256 is more than any real one). */
export const MAX_TRACESTATE_LENGTH = 512;

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);

/** The parts of a valid `traceparent`; null when it is not one. */
export function parseTraceparent(
  value: string,
): { traceId: string; spanId: string; flags: number } | null {
  const match = TRACEPARENT.exec(value);
  if (match === null) return null;
  const [, traceId, spanId, flags] = match as unknown as [string, string, string, string];
  if (traceId === ZERO_TRACE_ID || spanId === ZERO_SPAN_ID) return null;
  return { traceId, spanId, flags: Number.parseInt(flags, 16) };
}

/** The `traceparent` of a span context. */
export function formatTraceparent(traceId: string, spanId: string, flags: number): string {
  return `00-${traceId}-${spanId}-${(flags & 0xff).toString(16).padStart(2, '0')}`;
}

/** What is wrong with a request's trace fields (for its ERROR); null when nothing is. */
export function traceContextProblem(fields: {
  traceparent?: string | null;
  tracestate?: string | null;
}): string | null {
  const { traceparent = null, tracestate = null } = fields;
  if (traceparent === null) {
    return tracestate === null ? null : 'tracestate is given without traceparent';
  }
  if (parseTraceparent(traceparent) === null) {
    return `traceparent is not a W3C trace context (00-<trace id>-<span id>-<flags>): ${JSON.stringify(traceparent.slice(0, 80))}`;
  }
  if (tracestate !== null && tracestate.length > MAX_TRACESTATE_LENGTH) {
    return `tracestate must be at most ${MAX_TRACESTATE_LENGTH} characters, got ${tracestate.length}`;
  }
  return null;
}

/** The trace context of checked request fields; null when they carry none. */
export function traceContextOf(fields: {
  traceparent?: string | null;
  tracestate?: string | null;
}): TraceContext | null {
  const traceparent = fields.traceparent ?? null;
  if (traceparent === null) return null;
  const tracestate = fields.tracestate ?? null;
  return { traceparent, tracestate: tracestate === '' ? null : tracestate };
}

/** The wire fields of a trace context (none for null), to spread into a message. */
export function traceFields(context: TraceContext | null | undefined): {
  traceparent?: string;
  tracestate?: string;
} {
  if (context === null || context === undefined) return {};
  return context.tracestate === null
    ? { traceparent: context.traceparent }
    : { traceparent: context.traceparent, tracestate: context.tracestate };
}
