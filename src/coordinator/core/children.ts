/**
 * ENQUEUE_CHILD: a running attempt's handler submits a child job
 * (`ctx.enqueue`). The call has passed the lease fence (calls.ts).
 *
 * - The same (parent, key) gives the same child, whichever attempt asks:
 *   the child made first is the answer (`created: false`), and nothing
 *   changes. Keys are `k:<explicit key>` or `o:<ordinal>` (the n-th call
 *   without a key in the attempt), two namespaces that never meet.
 * - Otherwise the child is validated like a SUBMIT_JOB (the same code:
 *   task type, payload of a built-in, limits, queue, group, due time) and
 *   admitted like one (the active and scheduled limits); a refusal is an
 *   ERROR for that call only. A parent has at most
 *   {@link MAX_CHILDREN_PER_JOB} children (LIMIT_EXCEEDED beyond).
 * - The child is an ordinary, independent job: it does not wait for its
 *   parent, nor the parent for it. It records `parentJobId` and its key.
 * - CHILD_ENQUEUED leaves after the commit of the child's row, like every
 *   effect: a child acknowledged to a worker is durable.
 * - On a sharded database the child is made in its parent's shard, where
 *   its key is unique: a child whose queue (`default` when none is given)
 *   is in another shard is refused (INVALID_REQUEST), as a job of a queue
 *   lives in that queue's shard only.
 *
 * An idempotency key on a child is refused: the child key is its dedupe.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import { MAX_CHILD_KEY_LENGTH, MAX_CHILDREN_PER_JOB } from '../../protocol/limits.js';
import type { EnqueueChild, SubmitJobsElement } from '../../protocol/messages.js';
import { shardOfQueue } from '../../protocol/shards.js';
import type { ChildLink } from '../../store/store.js';
import { fenceCall, refuseCall, type FencedCall } from './calls.js';
import { schedule } from './job-lifecycle.js';
import type { CoreState } from './state.js';
import { checkSubmission, createJob, dueAt, isProblem, newJobOf, refusalOf } from './submission.js';

/** Longest ordinal a key `o:<n>` may carry (far beyond the children a parent may have). */
const MAX_ORDINAL_DIGITS = 9;

/** What is wrong with a child key; null when it is one. */
export function childKeyProblem(key: string): string | null {
  if (key.startsWith('k:')) {
    const given = key.slice(2);
    return given.length >= 1 && given.length <= MAX_CHILD_KEY_LENGTH
      ? null
      : `an explicit key must be 1..${MAX_CHILD_KEY_LENGTH} characters`;
  }
  if (key.startsWith('o:')) {
    const ordinal = key.slice(2);
    return new RegExp(`^(0|[1-9][0-9]{0,${MAX_ORDINAL_DIGITS - 1}})$`).test(ordinal)
      ? null
      : 'an ordinal key must be o:<n>, n a non-negative integer';
  }
  return `key must be k:<key> or o:<n>, got ${JSON.stringify(key.slice(0, 40))}`;
}

export function enqueueChild(s: CoreState, call: FencedCall<EnqueueChild>): void {
  const { session, job: parent, msg } = call;
  const refuse = (code: ErrorCode, message: string): void =>
    refuseCall(s, session, msg.requestId, code, `ENQUEUE_CHILD: ${message}`);
  const badKey = childKeyProblem(msg.key);
  if (badKey !== null) return refuse(ErrorCode.InvalidRequest, badKey);
  if (s.children.isUnloaded(parent.jobId)) {
    // Its stored children first: a re-run parent may have made this one before.
    if (s.children.hold(parent.jobId, { connId: session.connId, msg })) {
      const parentJobIds = [parent.jobId];
      s.read({ op: 'children', parentJobIds }, { kind: 'children', parentJobId: parent.jobId });
    }
    return;
  }
  const existing = s.children.find(parent.jobId, msg.key);
  if (existing !== undefined) {
    s.send(session.connId, {
      type: 'CHILD_ENQUEUED',
      requestId: msg.requestId,
      jobId: existing,
      created: false,
    });
    return;
  }
  if (msg.idempotencyKey !== undefined && msg.idempotencyKey !== null) {
    return refuse(
      ErrorCode.InvalidRequest,
      'idempotencyKey is not taken for a child: its key deduplicates it',
    );
  }
  if (s.children.count(parent.jobId) >= MAX_CHILDREN_PER_JOB) {
    return refuse(
      ErrorCode.LimitExceeded,
      `job ${parent.jobId} has ${MAX_CHILDREN_PER_JOB} children, the most a job may have`,
    );
  }
  const element: SubmitJobsElement = {
    taskType: msg.taskType,
    payload: msg.payload,
    maxAttempts: msg.maxAttempts ?? null,
    idempotencyKey: null,
    priority: msg.priority ?? null,
    timeoutMillis: msg.timeoutMillis ?? null,
    runAtMillis: msg.runAtMillis ?? null,
    queue: msg.queue ?? null,
    groupKey: msg.groupKey ?? null,
  };
  const wanted = checkSubmission(s, element);
  if (isProblem(wanted)) return refuse(wanted.code, wanted.message);
  const place = s.links.place;
  const shard = place === null ? null : shardOfQueue(wanted.queue, place.shards);
  if (place !== null && shard !== place.shard) {
    return refuse(
      ErrorCode.InvalidRequest,
      `its queue ${JSON.stringify(wanted.queue)} is in shard ${shard}, its parent in shard ${place.shard}; ` +
        "a child is made in its parent's shard: give it a queue of that shard",
    );
  }
  const runAtMs = dueAt(s, wanted);
  const refusal = refusalOf(s, runAtMs !== null && runAtMs > s.nowMs);
  if (refusal !== null) {
    const { activeCount, limit, what } = refusal;
    s.emit({ type: 'job.rejected', activeCount, limit });
    return refuse(
      ErrorCode.LimitExceeded,
      `too many ${what} (${activeCount} of ${limit}); retry later`,
    );
  }
  const child = createJob(s, {
    ...newJobOf(element, wanted, runAtMs, s.nowMs),
    parentJobId: parent.jobId,
    childKey: msg.key,
  });
  s.children.add({ parentJobId: parent.jobId, childKey: msg.key, jobId: child.jobId });
  s.send(session.connId, {
    type: 'CHILD_ENQUEUED',
    requestId: msg.requestId,
    jobId: child.jobId,
    created: true,
  });
  schedule(s);
}

/** The stored children of a re-run parent came back: its held calls go on, in order. */
export function childrenLoaded(s: CoreState, parentJobId: string, links: ChildLink[]): void {
  for (const held of s.children.loaded(parentJobId, links)) {
    const session = s.workers.byConnection(held.connId);
    if (session === undefined) continue; // its worker is gone: nobody to answer
    const job = fenceCall(s, session, held.msg);
    if (job !== null) enqueueChild(s, { session, job, msg: held.msg });
  }
}

/** The read of a re-run parent's children failed: its held calls are refused (it is tried again). */
export function childrenLoadFailed(s: CoreState, parentJobId: string, message: string): void {
  for (const held of s.children.loadFailed(parentJobId)) {
    const session = s.workers.byConnection(held.connId);
    if (session === undefined) continue;
    refuseCall(
      s,
      session,
      held.msg.requestId,
      ErrorCode.StoreReadFailed,
      `ENQUEUE_CHILD: could not read the children of ${parentJobId}: ${message}`,
    );
  }
}
