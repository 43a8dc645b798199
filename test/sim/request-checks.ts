/**
 * What every client request must get back, judged at handle time from the
 * request, the model's state just before it, and the effects.
 *
 * Each request gets exactly one reply in its own input, except a WAIT_JOB on a
 * live job, which arms a timer instead. The reply type must fit the request,
 * and its content must fit the model: an idempotency key answers with its job
 * (or a conflict), admission control refuses only at the limit and never
 * before a known key is answered, a cancel reports truthfully, lists honour
 * their limit, filter and order.
 */
import { StateView } from '../../src/protocol/job-view.js';
import { isDeepStrictEqual } from 'node:util';
import type { CoreConfig, CoreInput, Effect } from '../../src/coordinator/core/types.js';
import type {
  CancelJob,
  ClientReply,
  ClientRequest,
  ListJobs,
  SubmitJob,
  SubmitJobs,
  WaitJob,
} from '../../src/protocol/messages.js';
import type { JobState } from '../../src/protocol/messages.js';
import type { Judge } from './violation.js';
import type { HandledInput } from './world.js';

/** The LIST_JOBS cap, also the page when none is asked for (client-requests.ts). */
const MAX_LIST_LIMIT = 10_000;
const DEFAULT_WAIT_MS = 60_000;
const MAX_WAIT_MS = 3_600_000;

export interface KeyOwner {
  jobId: string;
  /** The submission that created the job. */
  submission: SubmitJob;
}

export interface RequestContext {
  judge: Judge;
  config: CoreConfig;
  invalid: WeakSet<object>;
}

/** The model's facts just before the input. */
export interface Before {
  known: boolean;
  terminal: JobState | undefined;
  keyOwner: KeyOwner | undefined;
  /** WAIT_JOBs pending on the request's connection, and on all connections. */
  waitsOnConnection: number;
  waitsInAll: number;
}

type ClientRequestInput = Extract<CoreInput, { kind: 'clientRequest' }>;

/**
 * True when a request may be answered by a later input: the core asked the
 * store something first (a read effect), or held a keyed submission behind
 * another one's key lookup (no effect at all).
 */
function deferred(input: ClientRequestInput, h: HandledInput): boolean {
  const msg = input.msg;
  const replied = h.effects.some(
    (e) =>
      (e.kind === 'reply' || e.kind === 'armWait') &&
      e.connId === input.connId &&
      e.requestId === input.requestId,
  );
  if (replied) return false;
  const read = h.effects.some((e) => e.kind === 'read');
  switch (msg.type) {
    case 'SUBMIT_JOB':
      return msg.idempotencyKey !== null;
    case 'SUBMIT_JOBS':
      return read;
    case 'GET_JOB_STATUS':
    case 'CANCEL_JOB':
    case 'WAIT_JOB':
    case 'LIST_JOBS':
    case 'PURGE_JOBS':
    case 'RERUN_JOBS':
    case 'LIST_QUEUES':
    case 'SET_QUEUE':
    case 'GET_SCHEDULE':
      return read;
    case 'LIST_WORKERS':
    case 'AUTH':
    case 'SUBSCRIBE_JOBS':
    case 'SET_SCHEDULE':
    case 'LIST_SCHEDULES':
    case 'PAUSE_SCHEDULE':
    case 'RESUME_SCHEDULE':
    case 'DELETE_SCHEDULE':
    case 'TRIGGER_SCHEDULE':
      return false;
  }
}

/** Judges a request answered in its own input; returns false when its answer comes later. */
export function checkRequest(
  ctx: RequestContext,
  input: ClientRequestInput,
  h: HandledInput,
  before: Before,
): boolean {
  if (deferred(input, h)) return false;
  answerNow(ctx, input, h, before);
  return true;
}

function answerNow(
  ctx: RequestContext,
  input: ClientRequestInput,
  h: HandledInput,
  before: Before,
): void {
  const { judge } = ctx;
  const mine = (e: Effect): boolean =>
    (e.kind === 'reply' || e.kind === 'armWait') &&
    e.connId === input.connId &&
    e.requestId === input.requestId;
  const answers = h.effects.filter(mine);
  const isWait = input.msg.type === 'WAIT_JOB';
  judge.check(
    answers.length === 1 && (isWait || answers[0]?.kind === 'reply'),
    () =>
      `${input.msg.type} request ${input.connId}/${input.requestId} got ${answers.length} answers`,
  );
  const answer = answers[0] as Effect;
  const reply = answer.kind === 'reply' ? answer.msg : null;
  const msg = input.msg;
  switch (msg.type) {
    case 'SUBMIT_JOB':
      return checkSubmit(ctx, msg, reply as ClientReply, h, before);
    case 'SUBMIT_JOBS':
      return checkBatch(ctx, msg, reply as ClientReply, h);
    case 'CANCEL_JOB':
      return checkCancel(judge, msg, reply as ClientReply, h, before);
    case 'GET_JOB_STATUS':
      return checkKnownOrUnknown(judge, msg.jobId, reply as ClientReply, before, 'JOB_STATUS');
    case 'WAIT_JOB':
      return checkWait(ctx, msg, answer, before);
    case 'LIST_JOBS':
      return checkList(ctx, msg, reply as ClientReply);
    case 'LIST_WORKERS': {
      const r = reply as ClientReply;
      judge.check(r.type === 'WORKER_LIST', () => `LIST_WORKERS answered with ${r.type}`);
      if (r.type !== 'WORKER_LIST') return;
      const ids = r.workers.map((w) => w.workerId);
      judge.check(
        ids.every((id, i) => i === 0 || (ids[i - 1] as string) < id) &&
          r.workers.every((w) => w.activeTasks <= w.capacity),
        () => `WORKER_LIST not sorted or over capacity: ${JSON.stringify(r.workers)}`,
      );
      return;
    }
    case 'SUBSCRIBE_JOBS': {
      const r = reply as ClientReply;
      judge.check(
        r.type === 'SUBSCRIBED' || (r.type === 'ERROR' && r.code === 'LIMIT_EXCEEDED'),
        () => `SUBSCRIBE_JOBS answered with ${JSON.stringify(r).slice(0, 200)}`,
      );
      return;
    }
    case 'AUTH':
    case 'PURGE_JOBS':
    case 'RERUN_JOBS':
    case 'SET_SCHEDULE':
    case 'LIST_SCHEDULES':
    case 'GET_SCHEDULE':
    case 'PAUSE_SCHEDULE':
    case 'RESUME_SCHEDULE':
    case 'DELETE_SCHEDULE':
    case 'TRIGGER_SCHEDULE':
      return; // the simulation's clients never send these
    case 'LIST_QUEUES':
      throw judge.violation(`${msg.type} was answered without reading the store`);
    case 'SET_QUEUE': {
      // Only a refused change is answered at once (a valid one reads the counts first).
      const r = reply as ClientReply;
      judge.check(
        r.type === 'ERROR' && r.code === 'INVALID_REQUEST' && ctx.invalid.has(msg),
        () => `SET_QUEUE ${JSON.stringify(msg)} answered at once with ${JSON.stringify(r)}`,
      );
      return;
    }
  }
}

/** A batch is answered with one id per job, or with nothing created at all. */
function checkBatch(
  ctx: RequestContext,
  msg: SubmitJobs,
  reply: ClientReply,
  h: HandledInput,
): void {
  const { judge } = ctx;
  const created = h.effects.filter((e) => e.kind === 'event' && e.event.type === 'job.submitted');
  judge.check(
    !ctx.invalid.has(msg) || (reply.type === 'ERROR' && typeof reply.index === 'number'),
    () => `an invalid batch got ${JSON.stringify(reply).slice(0, 200)}`,
  );
  judge.check(
    reply.type !== 'ERROR' ||
      ctx.invalid.has(msg) ||
      reply.code === 'IDEMPOTENCY_CONFLICT' ||
      reply.code === 'STORE_READ_FAILED',
    () => `a valid batch got ERROR ${JSON.stringify(reply).slice(0, 200)}`,
  );
  if (reply.type === 'JOBS_SUBMITTED') {
    judge.check(
      reply.jobIds.length === msg.jobs.length && created.length <= msg.jobs.length,
      () =>
        `SUBMIT_JOBS of ${msg.jobs.length} got ${reply.jobIds.length} ids, created ${created.length}`,
    );
    return;
  }
  judge.check(
    (reply.type === 'ERROR' || reply.type === 'SUBMIT_REJECTED') && created.length === 0,
    () => `a refused SUBMIT_JOBS (${reply.type}) created ${created.length} jobs`,
  );
}

/** The core's notion of "the same submission" (effective maxAttempts and priority). */
export function sameSubmission(a: SubmitJob, b: SubmitJob, config: CoreConfig): boolean {
  const effective = (m: SubmitJob): number =>
    m.maxAttempts === null || m.maxAttempts <= 0 ? config.defaultMaxAttempts : m.maxAttempts;
  return (
    a.taskType === b.taskType &&
    effective(a) === effective(b) &&
    (a.priority ?? 'NORMAL') === (b.priority ?? 'NORMAL') &&
    (a.queue ?? 'default') === (b.queue ?? 'default') &&
    (a.groupKey ?? null) === (b.groupKey ?? null) &&
    // As stored: the JSON round trip (e.g. -0 becomes 0).
    isDeepStrictEqual(JSON.parse(JSON.stringify(a.payload)), JSON.parse(JSON.stringify(b.payload)))
  );
}

function checkSubmit(
  ctx: RequestContext,
  msg: SubmitJob,
  reply: ClientReply,
  h: HandledInput,
  before: Before,
): void {
  const { judge, config } = ctx;
  const invalid = ctx.invalid.has(msg);
  const created = h.effects.filter((e) => e.kind === 'event' && e.event.type === 'job.submitted');
  const createdId =
    created[0]?.kind === 'event' && created[0].event.type === 'job.submitted'
      ? created[0].event.jobId
      : null;
  judge.check(created.length <= 1, () => `one SUBMIT_JOB created ${created.length} jobs`);
  judge.check(
    !invalid || (reply.type === 'ERROR' && createdId === null),
    () => `an invalid submission got ${reply.type}`,
  );
  const owner = before.keyOwner;
  if (owner !== undefined && !invalid) {
    const same = sameSubmission(owner.submission, msg, config);
    const ok = same
      ? reply.type === 'JOB_SUBMITTED' && reply.jobId === owner.jobId
      : reply.type === 'ERROR' && reply.code === 'IDEMPOTENCY_CONFLICT';
    judge.check(
      ok && createdId === null,
      () =>
        `key ${msg.idempotencyKey} of job ${owner.jobId} (same submission: ${same}) answered ${JSON.stringify(reply)}`,
    );
    return;
  }
  // A delayed job counts against the SCHEDULED bound, any other against the
  // active jobs that are not SCHEDULED: both as they were when it was
  // admitted (due jobs were promoted first; nothing else moves them here).
  const delayed = msg.runAtMillis != null && msg.runAtMillis > h.nowMs;
  const made = createdId === null ? 0 : 1;
  const counted = delayed ? h.scheduledAfter - made : h.activeAfter - h.scheduledAfter - made;
  const limit = delayed ? config.maxScheduledJobs : config.maxActiveJobs;
  switch (reply.type) {
    case 'JOB_SUBMITTED':
      judge.check(
        createdId === reply.jobId && counted < limit,
        () =>
          `JOB_SUBMITTED ${reply.jobId} without creating it (created ${createdId}, counted ${counted} of ${limit})`,
      );
      judge.check(
        reply.job === null ||
          (reply.job.state === (delayed ? 'SCHEDULED' : 'QUEUED') && reply.job.attempts === 0),
        () =>
          `new job ${reply.jobId} reported as ${reply.job?.state} with ${reply.job?.attempts} attempts`,
      );
      return;
    case 'SUBMIT_REJECTED':
      judge.check(
        createdId === null &&
          counted >= limit &&
          reply.activeCount === counted &&
          reply.limit === limit &&
          reply.retryable,
        () => `SUBMIT_REJECTED ${JSON.stringify(reply)} with ${counted} counted of ${limit}`,
      );
      return;
    case 'ERROR':
      judge.check(invalid, () => `a valid submission got ERROR ${reply.code}: ${reply.message}`);
      return;
    case 'JOB_STATUS':
    case 'JOB_CANCEL':
    case 'JOB_LIST':
    case 'WORKER_LIST':
    case 'AUTH_OK':
    case 'JOBS_PURGED':
    case 'JOBS_RERUN':
    case 'QUEUE_LIST':
    case 'QUEUE_INFO':
    case 'SUBSCRIBED':
    case 'JOB_EVENT':
    case 'EVENTS_MISSED':
    case 'SCHEDULE_INFO':
    case 'SCHEDULE_LIST':
    case 'SCHEDULE_DELETED':
    case 'JOBS_SUBMITTED':
      throw judge.violation(`SUBMIT_JOB answered with ${reply.type}`);
  }
}

function checkCancel(
  judge: Judge,
  msg: CancelJob,
  reply: ClientReply,
  h: HandledInput,
  before: Before,
): void {
  if (reply.type !== 'JOB_CANCEL')
    return checkKnownOrUnknown(judge, msg.jobId, reply, before, 'JOB_CANCEL');
  const cancelledNow = h.effects.some(
    (e) => e.kind === 'event' && e.event.type === 'job.cancelled' && e.event.jobId === msg.jobId,
  );
  if (reply.cancelled) {
    judge.check(
      before.known &&
        before.terminal === undefined &&
        cancelledNow &&
        reply.job.state === 'CANCELLED',
      () =>
        `CANCEL_JOB ${msg.jobId} said cancelled, job was ${before.terminal ?? 'active'}, now ${reply.job.state}`,
    );
  } else {
    judge.check(
      before.terminal !== undefined && !cancelledNow && reply.job.state === before.terminal,
      () => `CANCEL_JOB ${msg.jobId} said not cancelled, job was ${before.terminal ?? 'active'}`,
    );
  }
}

function checkKnownOrUnknown(
  judge: Judge,
  jobId: string,
  reply: ClientReply,
  before: Before,
  expected: 'JOB_STATUS' | 'JOB_CANCEL',
): void {
  if (reply.type === 'ERROR') {
    judge.check(
      !before.known && reply.code === 'UNKNOWN_JOB',
      () =>
        `request for ${before.known ? 'known' : 'unknown'} job ${jobId} got ERROR ${reply.code}`,
    );
    return;
  }
  judge.check(
    reply.type === expected && before.known && 'job' in reply && reply.job.jobId === jobId,
    () =>
      `request for ${before.known ? 'known' : 'unknown'} job ${jobId} answered ${JSON.stringify(reply)}`,
  );
}

/** A new wait would pass a cap: the connection's or the coordinator's. */
function atWaitCap(ctx: RequestContext, before: Before): boolean {
  return (
    before.waitsOnConnection >= ctx.config.maxWaitsPerConnection ||
    before.waitsInAll >= ctx.config.maxWaits
  );
}

function checkWait(ctx: RequestContext, msg: WaitJob, answer: Effect, before: Before): void {
  const judge = ctx.judge;
  const timeoutMs = Math.min(Math.max(msg.timeoutMillis ?? DEFAULT_WAIT_MS, 0), MAX_WAIT_MS);
  if (
    answer.kind === 'reply' &&
    answer.msg.type === 'ERROR' &&
    answer.msg.code === 'TOO_MANY_WAITS'
  ) {
    judge.check(
      before.known && before.terminal === undefined && atWaitCap(ctx, before),
      () =>
        `WAIT_JOB ${msg.jobId} refused with ${before.waitsOnConnection} waits of ${ctx.config.maxWaitsPerConnection} pending on its connection, ${before.waitsInAll} of ${ctx.config.maxWaits} in all`,
    );
    return;
  }
  if (answer.kind === 'armWait') {
    judge.check(
      before.known &&
        before.terminal === undefined &&
        timeoutMs > 0 &&
        answer.timeoutMs === timeoutMs &&
        !atWaitCap(ctx, before),
      () =>
        `WAIT_JOB ${msg.jobId} armed ${answer.timeoutMs} ms (terminal: ${before.terminal}, wanted ${timeoutMs})`,
    );
    return;
  }
  if (answer.kind !== 'reply')
    throw judge.violation(`WAIT_JOB answered by a ${answer.kind} effect`);
  checkKnownOrUnknown(judge, msg.jobId, answer.msg, before, 'JOB_STATUS');
  if (answer.msg.type === 'JOB_STATUS') {
    judge.check(
      before.terminal !== undefined || timeoutMs === 0,
      () => `WAIT_JOB ${msg.jobId} answered at once while the job is active (timeout ${timeoutMs})`,
    );
  }
}

function checkList(ctx: RequestContext, msg: ListJobs, reply: ClientReply): void {
  const { judge } = ctx;
  if (reply.type === 'ERROR') {
    judge.check(
      ctx.invalid.has(msg) || reply.code === 'STORE_READ_FAILED',
      () => `a valid LIST_JOBS got ERROR ${reply.message}`,
    );
    return;
  }
  judge.check(
    reply.type === 'JOB_LIST' && !ctx.invalid.has(msg),
    () => `LIST_JOBS ${JSON.stringify(msg)} answered ${reply.type}`,
  );
  if (reply.type !== 'JOB_LIST') return;
  const limit = Math.min(msg.limit ?? MAX_LIST_LIMIT, MAX_LIST_LIMIT);
  const jobs = reply.jobs;
  judge.check(jobs.length <= limit, () => `JOB_LIST of ${jobs.length} jobs for limit ${limit}`);
  judge.check(
    // The core answers with real states; the client session shows each as the
    // request's view does (a v1 filter QUEUED also matches SCHEDULED jobs).
    msg.state === null ||
      jobs.every((j) => StateView.of(msg.knownStates).show(j.state) === msg.state),
    () => `JOB_LIST for state ${msg.state} holds other states`,
  );
  judge.check(
    jobs.every((j, i) => i === 0 || (jobs[i - 1] as typeof j).createdAtMillis >= j.createdAtMillis),
    () => `JOB_LIST is not newest first`,
  );
  judge.check(
    reply.nextCursor === null || /^[1-9][0-9]*$/.test(reply.nextCursor),
    () => `JOB_LIST cursor ${reply.nextCursor}`,
  );
}

/** What the model knows after the input that answers a deferred request. */
export interface AfterFacts {
  known(jobId: string): boolean;
  terminal(jobId: string): JobState | undefined;
  keyOwner(key: string): KeyOwner | undefined;
}

/**
 * Judges the reply to a request that was answered by a later input (a read
 * came back, a key lookup settled), against the model after that input.
 * Anything the store was asked about is history: a job not in memory is
 * terminal or unknown, and a key names the one job it created.
 */
export function checkDeferredAnswer(
  ctx: RequestContext,
  msg: ClientRequest,
  reply: ClientReply,
  after: AfterFacts,
): void {
  const { judge, config } = ctx;
  if (reply.type === 'ERROR' && reply.code === 'STORE_READ_FAILED') return;
  const what = `deferred ${msg.type} answered ${JSON.stringify(reply).slice(0, 300)}`;
  switch (msg.type) {
    case 'SUBMIT_JOBS':
      judge.check(
        reply.type === 'JOBS_SUBMITTED'
          ? reply.jobIds.length === msg.jobs.length &&
              reply.jobIds.every((id, i) => {
                const key = msg.jobs[i]?.idempotencyKey;
                return typeof key !== 'string' || after.keyOwner(key)?.jobId === id;
              })
          : reply.type === 'SUBMIT_REJECTED' ||
              (reply.type === 'ERROR' && reply.code === 'IDEMPOTENCY_CONFLICT'),
        () => what,
      );
      return;
    case 'SUBMIT_JOB': {
      const owner = after.keyOwner(msg.idempotencyKey ?? '');
      if (reply.type === 'SUBMIT_REJECTED') return;
      if (reply.type === 'ERROR') {
        judge.check(
          reply.code === 'IDEMPOTENCY_CONFLICT' &&
            owner !== undefined &&
            !sameSubmission(owner.submission, msg, config),
          () => what,
        );
        return;
      }
      judge.check(
        reply.type === 'JOB_SUBMITTED' &&
          owner?.jobId === reply.jobId &&
          sameSubmission(owner.submission, msg, config),
        () => `${what}; the key's job is ${owner?.jobId}`,
      );
      return;
    }
    case 'GET_JOB_STATUS':
    case 'WAIT_JOB':
    case 'CANCEL_JOB': {
      if (reply.type === 'ERROR') {
        judge.check(reply.code === 'UNKNOWN_JOB' && !after.known(msg.jobId), () => what);
        return;
      }
      const expected = msg.type === 'CANCEL_JOB' ? 'JOB_CANCEL' : 'JOB_STATUS';
      const terminal = after.terminal(msg.jobId);
      judge.check(
        reply.type === expected &&
          'job' in reply &&
          reply.job.jobId === msg.jobId &&
          terminal !== undefined &&
          reply.job.state === terminal &&
          (reply.type !== 'JOB_CANCEL' || !reply.cancelled),
        () => `${what}; the job is ${terminal ?? 'not terminal'}`,
      );
      return;
    }
    case 'LIST_JOBS':
      return checkList(ctx, msg, reply);
    case 'PURGE_JOBS':
      judge.check(reply.type === 'JOBS_PURGED' || reply.type === 'ERROR', () => what);
      return;
    case 'RERUN_JOBS':
      judge.check(reply.type === 'JOBS_RERUN' || reply.type === 'ERROR', () => what);
      return;
    case 'LIST_QUEUES':
      judge.check(reply.type === 'QUEUE_LIST' || reply.type === 'ERROR', () => what);
      return;
    case 'SET_QUEUE':
      judge.check(
        (reply.type === 'QUEUE_INFO' && reply.queue.name === msg.name) || reply.type === 'ERROR',
        () => what,
      );
      return;
    case 'LIST_WORKERS':
    case 'AUTH':
    case 'SUBSCRIBE_JOBS':
    case 'SET_SCHEDULE':
    case 'LIST_SCHEDULES':
    case 'GET_SCHEDULE':
    case 'PAUSE_SCHEDULE':
    case 'RESUME_SCHEDULE':
    case 'DELETE_SCHEDULE':
    case 'TRIGGER_SCHEDULE':
      throw judge.violation(`${msg.type} was answered late`);
  }
}
