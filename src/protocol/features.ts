/**
 * Negotiation: which extensions a peer may use with which other peer.
 *
 * The rule: every extension is either an optional field that a v1 peer
 * ignores, or a message (or a behaviour) used only after the other side
 * offered it. A coordinator lists what it offers in
 * `WORKER_REGISTERED.features`; a worker uses an extension only if it is
 * listed there (absent = none, a v1 coordinator). A client cannot be told in
 * advance, so it probes on a connection of its own and downgrades only on an
 * answer that means "not understood" ({@link isNotUnderstood}).
 */
import { ErrorCode } from './error-codes.js';
import type { ErrorMessage, WorkerCall } from './messages.js';

/** Feature names, as they appear in `WORKER_REGISTERED.features`. */
export const FEATURES = [
  'drain',
  'heartbeatAck',
  'taskTypes',
  'retryable',
  'assignLimits',
  'prefetch',
  'reattach',
  'queues',

  'parents',
  /** The worker may send TASK_PROGRESS. */
  'progress',
  /** The worker may send ENQUEUE_CHILD (answered CHILD_ENQUEUED). */
  'children',
  /** Durable steps: RECORD_STEP, GET_STEPS, TASK_SUSPEND, `TASK_ASSIGN.steps`. */
  'steps',
  /** `WORKER_REGISTER.slots`: a capacity above 1,024 (the session's capacity is `slots`). */
  'slots',
  /** `TASK_RESULT.requeue`: an attempt cut off through no fault of its own goes back without counting. */
  'requeue',
  /** `WORKER_REGISTER.moreHeld` and HELD_ATTEMPTS: held attempts beyond what the registration lists. */
  'moreHeld',
  /**
   * Several attempts in one frame each way: TASK_ASSIGNS to a worker that
   * registered with `batches: true`, TASK_RESULTS from the worker.
   */
  'batches',
  /** `TASK_RESULT.rateLimited`: a handler rate limited its job, group or queue. */
  'rateLimits',
  /** `TASK_SUSPEND.waitForSignal` / `.waitForEvent` (ctx.waitForSignal, ctx.waitForEvent). */
  'signals',
] as const;
export type Feature = (typeof FEATURES)[number];

const KNOWN: ReadonlySet<string> = new Set(FEATURES);

/** The known features in a peer's list (unknown names are ignored; null = none). */
export function parseFeatures(list: readonly string[] | null | undefined): ReadonlySet<Feature> {
  const out = new Set<Feature>();
  for (const name of list ?? []) if (KNOWN.has(name)) out.add(name as Feature);
  return out;
}

/**
 * True when an `ERROR` reply means the peer did not understand the request
 * (a v1 coordinator answering an extension message) rather than answering it.
 * A v1 peer sends no codes, so this is the one place that reads message text;
 * everything else decides on `ERROR.code`.
 */
export function isNotUnderstood(reply: Pick<ErrorMessage, 'message' | 'code'>): boolean {
  if (reply.code === ErrorCode.UnsupportedRequest || reply.code === ErrorCode.MalformedRequest)
    return true;
  if (reply.code !== null && reply.code !== undefined) return false;
  const text = reply.message;
  return (
    text.includes('Malformed request') ||
    text.includes('Undecodable') ||
    text.includes('Unsupported request')
  );
}

/** The feature a call (a worker message with `requestId`) needs the coordinator to offer. */
export const CALL_FEATURES: { readonly [T in WorkerCall['type']]: Feature } = {
  ENQUEUE_CHILD: 'children',
  RECORD_STEP: 'steps',
  GET_STEPS: 'steps',
};
