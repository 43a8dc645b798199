/**
 * SUBMIT_JOBS: up to {@link MAX_BATCH_JOBS} jobs created together, in one
 * commit, or none of them.
 *
 * Order, as for one SUBMIT_JOB but over the whole batch: (1) the batch's size
 * and every job are validated, and one idempotency key twice in the batch is
 * refused; the first fault is answered with its 0-based index; (2) keys the
 * core knows are settled (the same submission: its original id; a different
 * one: the batch fails); keys it does not know are looked up in the store,
 * all at once, and the batch waits for the last answer and then looks at the
 * keys again (a job made meanwhile, by another request, is seen in memory);
 * (3) admission control counts the batch's new jobs as a whole; (4) the new
 * jobs are created in the order given, all in the core's current write batch,
 * so the reply (ids in order) leaves after the one commit that holds them.
 */
import { decodeSubmitElement } from '../../protocol/codec.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { describeError } from '../../protocol/errors.js';
import {
  MAX_BATCH_JOBS,
  type SubmitJobs,
  type SubmitJobsElement,
} from '../../protocol/messages.js';
import type { JobRecord } from '../../store/store.js';
import { toRecord } from './job.js';
import { schedule } from './job-lifecycle.js';
import type { HeldBatch, NormalizedSubmission } from './pending-reads.js';
import type { CoreState } from './state.js';
import {
  checkSubmission,
  createJob,
  dueAt,
  isProblem,
  matchDedup,
  newJobOf,
  sameSubmission,
} from './submission.js';

type Checked = HeldBatch['jobs'][number];

/** Handles one SUBMIT_JOBS. */
export function submitBatch(
  s: CoreState,
  connId: number,
  requestId: number,
  msg: SubmitJobs,
): void {
  const count = msg.jobs.length;
  if (count === 0 || count > MAX_BATCH_JOBS) {
    s.replyError(
      connId,
      requestId,
      ErrorCode.InvalidRequest,
      `Invalid request: SUBMIT_JOBS takes 1..${MAX_BATCH_JOBS} jobs, got ${count}`,
    );
    return;
  }
  const jobs = checkAll(s, connId, requestId, msg);
  if (jobs === null) return;
  const batch: HeldBatch = {
    connId,
    requestId,
    jobs,
    stored: new Map(),
    lookedUp: [],
    waiting: 0,
    failed: false,
  };
  const unknown: string[] = [];
  for (const { msg: element } of jobs) {
    const key = element.idempotencyKey;
    if (key === null) continue;
    const known = s.jobs.byKey(key);
    // Kept as found: a job that ends and leaves memory while the batch waits
    // for its other keys still answers for its key.
    if (known !== undefined) batch.stored.set(key, toRecord(known));
    else unknown.push(key);
  }
  if (unknown.length === 0) return settle(s, batch);
  batch.waiting = unknown.length;
  for (const key of unknown) {
    // A job another submission makes with the key meanwhile stays known until the batch settles.
    s.jobs.pinKey(key);
    batch.lookedUp.push(key);
    s.read({ op: 'jobByKey', key }, { kind: 'batchKey', batch, key });
  }
}

/** Every job validated, keys unique in the batch; null once the batch was refused. */
function checkAll(
  s: CoreState,
  connId: number,
  requestId: number,
  msg: SubmitJobs,
): Checked[] | null {
  const jobs: Checked[] = [];
  const keys = new Map<string, number>();
  for (const [index, raw] of msg.jobs.entries()) {
    let element: SubmitJobsElement;
    try {
      element = decodeSubmitElement(raw, `jobs[${index}]`);
    } catch (err) {
      refuse(s, connId, requestId, index, ErrorCode.InvalidRequest, describeError(err));
      return null;
    }
    if ((element.dependsOn ?? []).length > 0 || (element.onParentFailure ?? null) !== null) {
      const text =
        'dependsOn is not supported in SUBMIT_JOBS; submit jobs with parents one by one or as a flow (SUBMIT_FLOW)';
      refuse(s, connId, requestId, index, ErrorCode.InvalidRequest, text);
      return null;
    }
    const wanted = checkSubmission(s, element);
    if (isProblem(wanted)) {
      refuse(s, connId, requestId, index, wanted.code, wanted.message);
      return null;
    }
    const key = element.idempotencyKey;
    if (key !== null) {
      const first = keys.get(key);
      if (first !== undefined) {
        const text = `idempotency key ${JSON.stringify(key)} is also the key of job ${first}`;
        refuse(s, connId, requestId, index, ErrorCode.InvalidRequest, text);
        return null;
      }
      keys.set(key, index);
    }
    jobs.push({ msg: element, wanted });
  }
  return jobs;
}

/** The batch is refused because of its job at `index`: nothing is created. */
function refuse(
  s: CoreState,
  connId: number,
  requestId: number,
  index: number,
  code: ErrorCode,
  what: string,
): void {
  s.reply(connId, requestId, {
    type: 'ERROR',
    code,
    message: `Job at index ${index} of the batch: ${what}; no job of the batch was created`,
    index,
  });
}

/** One key lookup of a held batch was answered. */
export function batchKeyLookedUp(
  s: CoreState,
  batch: HeldBatch,
  key: string,
  stored: JobRecord | null,
): void {
  batch.stored.set(key, stored);
  batch.waiting -= 1;
  if (batch.waiting === 0 && !batch.failed) settle(s, batch);
  if (batch.waiting === 0) unpinAll(s, batch);
}

/** The batch no longer waits for the store: its keys need not stay pinned. */
function unpinAll(s: CoreState, batch: HeldBatch): void {
  for (const key of batch.lookedUp) s.jobs.unpinKey(key);
}

/** One key lookup of a held batch failed: the batch gets an error (once); nothing is created. */
export function batchKeyLookupFailed(s: CoreState, batch: HeldBatch, message: string): void {
  batch.waiting -= 1;
  if (batch.waiting === 0) unpinAll(s, batch);
  if (batch.failed) return;
  batch.failed = true;
  s.replyError(
    batch.connId,
    batch.requestId,
    ErrorCode.StoreReadFailed,
    `Could not check idempotency keys: ${message}; no job of the batch was created`,
  );
}

/** Known keys answered, admission for the rest as a whole, then the new jobs in order. */
function settle(s: CoreState, batch: HeldBatch): void {
  const { connId, requestId } = batch;
  const existing: (JobRecord | null)[] = [];
  for (const [index, job] of batch.jobs.entries()) {
    const found = knownJob(s, batch, job.msg.idempotencyKey);
    if (found !== null && !sameSubmission(found, job.msg, job.wanted)) {
      const key = JSON.stringify(job.msg.idempotencyKey);
      const text = `idempotency key ${key} is already used by job ${found.jobId} with a different submission`;
      refuse(s, connId, requestId, index, ErrorCode.IdempotencyConflict, text);
      return;
    }
    existing.push(found);
  }
  // New jobs due now count toward the active limit, delayed ones toward the
  // scheduled limit (as for SUBMIT_JOB); the batch must fit both whole.
  let freshNow = 0;
  let freshDelayed = 0;
  for (const [index, job] of batch.jobs.entries()) {
    if (existing[index] !== null) continue;
    const runAtMs = dueAt(s, job.wanted);
    if (runAtMs !== null && runAtMs > s.nowMs) freshDelayed++;
    else freshNow++;
  }
  const bounds = [
    {
      fresh: freshNow,
      count: s.jobs.activeCount - s.scheduledCount,
      limit: s.config.maxActiveJobs,
      what: 'active jobs',
    },
    {
      fresh: freshDelayed,
      count: s.scheduledCount + s.window.farCount,
      limit: s.config.maxScheduledJobs,
      what: 'scheduled jobs',
    },
  ];
  for (const { fresh, count: activeCount, limit, what } of bounds) {
    if (fresh === 0 || activeCount + fresh <= limit) continue;
    s.emit({ type: 'job.rejected', activeCount, limit });
    s.reply(connId, requestId, {
      type: 'SUBMIT_REJECTED',
      reason: `too many ${what} for a batch of ${fresh} new jobs (${activeCount} of ${limit}); retry later`,
      activeCount,
      limit,
      retryable: true,
    });
    return;
  }
  // Keyed jobs are decided one by one in the order given, after admission
  // (which counted them as new): a key used twice in the batch names, the
  // second time, the job the first made.
  const jobIds: string[] = [];
  const deduplicated: boolean[] = [];
  const replaced: boolean[] = [];
  let anyMatched = false;
  for (const [index, job] of batch.jobs.entries()) {
    const found = existing[index] ?? null;
    const matched = found === null ? matchDedup(s, job.msg, job.wanted) : null;
    if (matched !== null) anyMatched = true;
    jobIds.push(matched?.jobId ?? idOf(s, job, found));
    deduplicated.push(matched !== null);
    replaced.push(matched?.replaced ?? false);
  }
  s.reply(connId, requestId, {
    type: 'JOBS_SUBMITTED',
    jobIds,
    ...(anyMatched && { deduplicated, replaced }),
  });
  schedule(s);
}

/** The job a key already names (in memory first, then what the store said), or null. */
function knownJob(s: CoreState, batch: HeldBatch, key: string | null): JobRecord | null {
  if (key === null) return null;
  const inMemory = s.jobs.byKey(key);
  if (inMemory !== undefined) return toRecord(inMemory);
  return batch.stored.get(key) ?? null;
}

function idOf(
  s: CoreState,
  job: { readonly msg: SubmitJobsElement; readonly wanted: NormalizedSubmission },
  found: JobRecord | null,
): string {
  if (found === null)
    return createJob(s, newJobOf(job.msg, job.wanted, dueAt(s, job.wanted), s.nowMs)).jobId;
  s.emit({
    type: 'job.deduplicated',
    jobId: found.jobId,
    idempotencyKey: job.msg.idempotencyKey as string,
  });
  return found.jobId;
}
