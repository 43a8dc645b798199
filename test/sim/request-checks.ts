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
  QueueInfo,
  SubmitFlow,
  SubmitJob,
  SubmitJobs,
  WaitJob,
} from '../../src/protocol/messages.js';
import { isTerminalState } from '../../src/protocol/messages.js';
import type { JobState, ScheduleRequest, ScheduleSnapshot } from '../../src/protocol/messages.js';
import { createCronEvaluator } from '../../src/coordinator/cron.js';
import type { ModelSchedule } from './schedule-checks.js';
import type { Judge } from './violation.js';
import type { HandledInput } from './world.js';
import { batchParts } from './clients.js';

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
  /**
   * A job another shard's flow made: it keeps the flow's creation time, so
   * a listing places it by when its shard made it (default: none).
   */
  madeElsewhere?: (jobId: string) => boolean;
}

/** The model's facts just before the input. */
export interface Before {
  known: boolean;
  terminal: JobState | undefined;
  keyOwner: KeyOwner | undefined;
  /** WAIT_JOBs pending on the request's connection, and on all connections. */
  waitsOnConnection: number;
  waitsInAll: number;
  /** WAIT_JOBs pending on the connections of the request's address; null without one. */
  waitsFromAddress: number | null;
  /** For a schedule request: the model's schedule of that name, and every schedule. */
  schedule?: ModelSchedule | undefined;
  scheduleModels?: ReadonlyMap<string, ModelSchedule>;
}

type ClientRequestInput = Extract<CoreInput, { kind: 'clientRequest' }>;

/**
 * True when a request may be answered by a later input: the core asked the
 * store something first (a read effect), or held a keyed submission behind
 * another one's key lookup, or a queue's change behind an earlier held
 * change of that queue (no effect at all).
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
      return msg.idempotencyKey !== null || read;
    case 'SUBMIT_FLOW':
    case 'SUBMIT_JOBS':
      return read;
    case 'GET_JOB_STATUS':
    case 'CANCEL_JOB':
    case 'WAIT_JOB':
    case 'LIST_JOBS':
    case 'PURGE_JOBS':
    case 'RERUN_JOBS':
    case 'LIST_QUEUES':
    case 'GET_SCHEDULE':
    case 'SIGNAL_JOB':
      return read;
    case 'PUBLISH_EVENT':
      // An event id is looked up in the store; a publish of the same id meanwhile waits for that.
      return msg.eventId != null || read;
    case 'SET_QUEUE':
      // After a read, or waiting (no effect) behind a held change of the same queue.
      return true;
    case 'LIST_WORKERS':
    case 'AUTH':
    case 'SUBSCRIBE_JOBS':
    case 'SET_SCHEDULE':
    case 'LIST_SCHEDULES':
    case 'PAUSE_SCHEDULE':
    case 'RESUME_SCHEDULE':
    case 'DELETE_SCHEDULE':
    case 'TRIGGER_SCHEDULE':
    case 'SET_TRIGGER':
    case 'LIST_TRIGGERS':
    case 'DELETE_TRIGGER':
    case 'LIST_SHARDS':
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
    case 'SUBMIT_FLOW':
      return checkFlow(ctx, msg, reply as ClientReply, h);
    case 'LIST_SHARDS':
      // The shell answers it, never the core (the simulation's clients do not send it).
      return;
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
        r.type === 'SUBSCRIBED' || (r.type === 'ERROR' && r.code === 'TOO_MANY_SUBSCRIPTIONS'),
        () => `SUBSCRIBE_JOBS answered with ${JSON.stringify(r).slice(0, 200)}`,
      );
      return;
    }
    case 'SET_SCHEDULE':
    case 'LIST_SCHEDULES':
    case 'GET_SCHEDULE':
    case 'PAUSE_SCHEDULE':
    case 'RESUME_SCHEDULE':
    case 'DELETE_SCHEDULE':
    case 'TRIGGER_SCHEDULE':
      return checkSchedule(ctx, msg, reply as ClientReply, h, before);
    case 'AUTH':
    case 'PURGE_JOBS':
    case 'RERUN_JOBS':
      return; // the simulation's clients never send these
    case 'SIGNAL_JOB':
    case 'PUBLISH_EVENT':
    case 'SET_TRIGGER':
    case 'LIST_TRIGGERS':
    case 'DELETE_TRIGGER':
      return checkSignalReply(judge, msg, reply as ClientReply);
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

/**
 * True when the coordinator must refuse the submission for its expiry at
 * `nowMs` (the time it reads the request): the expiry has passed, or comes
 * at or before the job's run time.
 */
export function expiryRefused(msg: SubmitJob, nowMs: number): boolean {
  const at = msg.expiresAtMillis ?? null;
  return at !== null && at <= Math.max(nowMs, msg.runAtMillis ?? 0);
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
  const invalid =
    ctx.invalid.has(msg) || batchParts(msg).some((part) => expiryRefused(part, h.nowMs));
  judge.check(
    !invalid || (reply.type === 'ERROR' && typeof reply.index === 'number'),
    () => `an invalid batch got ${JSON.stringify(reply).slice(0, 200)}`,
  );
  judge.check(
    reply.type !== 'ERROR' ||
      invalid ||
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

/**
 * A flow is answered with every job's id, in the request's order (the jobs
 * created in the input among them), or refused with nothing created: for a
 * parent that is no job, the limit, a failed read, or a flow built invalid.
 * `h` is null for a flow answered by a later input.
 */
function checkFlow(
  ctx: RequestContext,
  msg: SubmitFlow,
  reply: ClientReply,
  h: HandledInput | null,
): void {
  const created = (h?.effects ?? []).flatMap((e) =>
    e.kind === 'event' && e.event.type === 'job.submitted' ? [e.event.jobId] : [],
  );
  const what = (): string =>
    `SUBMIT_FLOW of ${msg.jobs.length} created ${created.length} and got ${JSON.stringify(reply).slice(0, 300)}`;
  if (reply.type === 'FLOW_SUBMITTED') {
    ctx.judge.check(
      reply.jobs.length === msg.jobs.length &&
        reply.jobs.every((job, i) => job.ref === msg.jobs[i]?.ref) &&
        created.every((id) => reply.jobs.some((job) => job.jobId === id)),
      what,
    );
    return;
  }
  ctx.judge.check(
    created.length === 0 &&
      (reply.type === 'SUBMIT_REJECTED' ||
        (reply.type === 'ERROR' &&
          (ctx.invalid.has(msg) ||
            reply.code === 'UNKNOWN_JOB' ||
            reply.code === 'STORE_READ_FAILED'))),
    what,
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
  const invalid = ctx.invalid.has(msg) || expiryRefused(msg, h.nowMs);
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
  // (A job with parents is WAITING, an active job, even when also delayed.)
  const delayed =
    msg.runAtMillis != null && msg.runAtMillis > h.nowMs && (msg.dependsOn ?? []).length === 0;
  const made = createdId === null ? 0 : 1;
  const counted = delayed ? h.scheduledAfter - made : h.activeAfter - h.scheduledAfter - made;
  const limit = delayed ? config.maxScheduledJobs : config.maxActiveJobs;
  switch (reply.type) {
    case 'JOB_SUBMITTED':
      if (reply.deduplicated === true) {
        // Its key's job answered (judged with the model of keys, tracker.ts): nothing is made.
        judge.check(
          createdId === null && msg.dedupKey != null,
          () => `JOB_SUBMITTED ${reply.jobId} deduplicated, created ${createdId}`,
        );
        return;
      }
      judge.check(
        (msg.dedupKey == null) === (reply.deduplicated === undefined),
        () =>
          `JOB_SUBMITTED ${reply.jobId} says deduplicated ${reply.deduplicated}, key ${msg.dedupKey}`,
      );
      judge.check(
        createdId === reply.jobId && counted < limit,
        () =>
          `JOB_SUBMITTED ${reply.jobId} without creating it (created ${createdId}, counted ${counted} of ${limit})`,
      );
      judge.check(
        reply.job === null ||
          (reply.job.attempts === 0 &&
            (reply.job.state === (delayed ? 'SCHEDULED' : 'QUEUED') ||
              ((msg.dependsOn ?? null) !== null &&
                (reply.job.state === 'WAITING' ||
                  reply.job.state === 'SCHEDULED' ||
                  reply.job.state === 'CANCELLED')))),
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
      judge.check(
        invalid || (reply.code === 'UNKNOWN_JOB' && (msg.dependsOn ?? null) !== null),
        () => `a valid submission got ERROR ${reply.code}: ${reply.message}`,
      );
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
    case 'FLOW_SUBMITTED':
    case 'SUBSCRIBED':
    case 'JOB_EVENT':
    case 'EVENTS_MISSED':
    case 'SCHEDULE_INFO':
    case 'SCHEDULE_LIST':
    case 'SCHEDULE_DELETED':
    case 'JOB_SIGNALLED':
    case 'EVENT_PUBLISHED':
    case 'TRIGGER_INFO':
    case 'TRIGGER_LIST':
    case 'TRIGGER_DELETED':
    case 'SHARD_LIST':
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

/** A new wait would pass a cap: the connection's, its address's or the coordinator's. */
function atWaitCap(ctx: RequestContext, before: Before): boolean {
  return (
    before.waitsOnConnection >= ctx.config.maxWaitsPerConnection ||
    (before.waitsFromAddress ?? 0) >= ctx.config.maxWaitsPerAddress ||
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
        `WAIT_JOB ${msg.jobId} refused with ${before.waitsOnConnection} waits of ${ctx.config.maxWaitsPerConnection} pending on its connection, ${before.waitsFromAddress} of ${ctx.config.maxWaitsPerAddress} from its address, ${before.waitsInAll} of ${ctx.config.maxWaits} in all`,
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
  const own = jobs.filter((j) => ctx.madeElsewhere?.(j.jobId) !== true);
  judge.check(
    own.every((j, i) => i === 0 || (own[i - 1] as typeof j).createdAtMillis >= j.createdAtMillis),
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
  schedule(name: string): ModelSchedule | undefined;
  terminal(jobId: string): JobState | undefined;
  keyOwner(key: string): KeyOwner | undefined;
  /** Submitted with a due time ahead (so perhaps active in the store only). */
  delayed(jobId: string): boolean;
  /**
   * Made by another shard's flow: it may come into being while its store
   * is read (its outbox message applied meanwhile).
   */
  madeElsewhere(jobId: string): boolean;
  /** The request named a job the model did not know when it was read. */
  unknownWhenAsked?: boolean;
  /** The clock when the answer was made. */
  nowMs: number;
  /** Until when a handler's rate limit holds the queue (or one group of it) back; 0 = never. */
  heldUntil(queue: string, group?: string | null): number;
}

/**
 * The rate limits handlers set, as a queue list shows them: the queue's
 * hold while it lasts (else null), and each group hold shown as the model
 * has it.
 */
function checkHeldQueues(
  ctx: RequestContext,
  queues: readonly QueueInfo[],
  after: AfterFacts,
): void {
  for (const q of queues) {
    const until = after.heldUntil(q.name);
    const expected = until > after.nowMs ? until : null;
    ctx.judge.check(
      (q.rateLimitedUntilMillis ?? null) === expected,
      () =>
        `queue ${q.name} listed as rate limited until ${q.rateLimitedUntilMillis}, the model says ${expected}`,
    );
    for (const held of q.heldGroups ?? []) {
      const group = after.heldUntil(q.name, held.groupKey);
      ctx.judge.check(
        held.untilMillis === group && group > after.nowMs,
        () =>
          `group ${held.groupKey} of ${q.name} listed as held until ${held.untilMillis}, the model says ${group}`,
      );
    }
  }
}

/**
 * Judges the reply to a request that was answered by a later input (a read
 * came back, a key lookup settled), against the model after that input.
 * Anything the store was asked about is history, but for delayed jobs
 * beyond the near window and jobs other shards' flows made: a job not in
 * memory is terminal, unknown, or one of those; and a key names the one
 * job it created.
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
    case 'LIST_SHARDS':
      return; // answered by the shell, never deferred by the core
    case 'SUBMIT_JOBS':
      judge.check(
        reply.type === 'JOBS_SUBMITTED'
          ? reply.jobIds.length === msg.jobs.length &&
              reply.jobIds.every((id, i) => {
                const key = msg.jobs[i]?.idempotencyKey;
                // A job its dedup key matched took no idempotency key.
                if (reply.deduplicated?.[i] === true) return true;
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
      if (msg.idempotencyKey === null) {
        // Held only for its parents' lookup: created, or one parent is unknown.
        judge.check(
          reply.type === 'JOB_SUBMITTED' ||
            (reply.type === 'ERROR' && reply.code === 'UNKNOWN_JOB'),
          () => what,
        );
        return;
      }
      if (reply.type === 'ERROR') {
        judge.check(
          reply.code === 'IDEMPOTENCY_CONFLICT' &&
            owner !== undefined &&
            !sameSubmission(owner.submission, msg, config),
          () => what,
        );
        return;
      }
      // A job its dedup key matched (judged with the model of keys) took no idempotency key.
      if (reply.type === 'JOB_SUBMITTED' && reply.deduplicated === true) return;
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
      const expected = msg.type === 'CANCEL_JOB' ? 'JOB_CANCEL' : 'JOB_STATUS';
      const terminal = after.terminal(msg.jobId);
      // A job another shard's flow made is unknown until its message is
      // applied: so it stays for a read asked before that.
      const arriving = after.unknownWhenAsked === true && after.madeElsewhere(msg.jobId);
      if (arriving && reply.type === 'ERROR' && reply.code === 'UNKNOWN_JOB') return;
      // A delayed job beyond the near window is active in the store only: the
      // read's row (SCHEDULED), or memory's answer once it took the job in.
      // So is one another shard's flow made, once its message is applied.
      if (after.delayed(msg.jobId) || after.madeElsewhere(msg.jobId)) {
        judge.check(
          (reply.type === 'ERROR' && reply.code === 'TOO_MANY_WAITS') ||
            (reply.type === expected &&
              'job' in reply &&
              reply.job.jobId === msg.jobId &&
              (terminal === undefined || reply.job.state === terminal)),
          () => `${what}; a delayed job, ${terminal ?? 'not terminal'}`,
        );
        return;
      }
      if (reply.type === 'ERROR') {
        judge.check(reply.code === 'UNKNOWN_JOB' && !after.known(msg.jobId), () => what);
        return;
      }
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
      if (reply.type === 'QUEUE_LIST') checkHeldQueues(ctx, reply.queues, after);
      return;
    case 'SET_QUEUE':
      // Only a pause or resume that did not ask to create may find no queue.
      if (reply.type === 'ERROR' && reply.code === 'UNKNOWN_QUEUE') {
        judge.check(msg.paused != null && msg.create !== true, () => what);
        return;
      }
      judge.check(
        (reply.type === 'QUEUE_INFO' && reply.queue.name === msg.name) || reply.type === 'ERROR',
        () => what,
      );
      return;
    case 'SUBMIT_FLOW':
      return checkFlow(ctx, msg, reply, null);
    case 'GET_SCHEDULE':
      return checkScheduleInfo(ctx, msg.name, reply, after);
    case 'SIGNAL_JOB':
    case 'PUBLISH_EVENT':
    case 'SET_TRIGGER':
    case 'LIST_TRIGGERS':
    case 'DELETE_TRIGGER':
      return checkSignalReply(judge, msg, reply);
    case 'LIST_WORKERS':
    case 'AUTH':
    case 'SUBSCRIBE_JOBS':
    case 'SET_SCHEDULE':
    case 'LIST_SCHEDULES':
    case 'PAUSE_SCHEDULE':
    case 'RESUME_SCHEDULE':
    case 'DELETE_SCHEDULE':
    case 'TRIGGER_SCHEDULE':
      throw judge.violation(`${msg.type} was answered late`);
  }
}

const CRON = createCronEvaluator();

/**
 * The reply's kind for a signal, event or trigger request (what it did is
 * judged by SignalChecks, signal-checks.ts). A signal is refused only for a
 * job that ended or is unknown (or a full job); a publish only for a full
 * coordinator; the clients' trigger definitions are valid.
 */
function checkSignalReply(
  judge: Judge,
  msg: Extract<
    ClientRequest,
    { type: 'SIGNAL_JOB' | 'PUBLISH_EVENT' | 'SET_TRIGGER' | 'LIST_TRIGGERS' | 'DELETE_TRIGGER' }
  >,
  reply: ClientReply,
): void {
  const expected = {
    SIGNAL_JOB: 'JOB_SIGNALLED',
    PUBLISH_EVENT: 'EVENT_PUBLISHED',
    SET_TRIGGER: 'TRIGGER_INFO',
    LIST_TRIGGERS: 'TRIGGER_LIST',
    DELETE_TRIGGER: 'TRIGGER_DELETED',
  }[msg.type];
  const refusable =
    reply.type === 'ERROR' &&
    (reply.code === 'STORE_READ_FAILED' ||
      (msg.type === 'SIGNAL_JOB' &&
        (reply.code === 'UNKNOWN_JOB' ||
          reply.code === 'INVALID_REQUEST' ||
          reply.code === 'LIMIT_EXCEEDED')) ||
      (msg.type === 'PUBLISH_EVENT' && reply.code === 'LIMIT_EXCEEDED'));
  judge.check(
    reply.type === expected || refusable,
    () => `${msg.type} answered ${JSON.stringify(reply).slice(0, 300)}`,
  );
}

/** The first field in which a schedule as shown differs from the model, or null. */
function scheduleMismatch(m: ModelSchedule, snap: ScheduleSnapshot): string | null {
  const fields: [string, unknown, unknown][] = [
    ['name', m.name, snap.name],
    ['taskType', m.taskType, snap.taskType],
    ['cron', m.cron, snap.cron],
    ['everyMillis', m.everyMs, snap.everyMillis],
    ['timezone', m.timezone, snap.timezone],
    ['maxAttempts', m.maxAttempts, snap.maxAttempts],
    ['priority', m.priority, snap.priority],
    ['timeoutMillis', m.timeoutMs, snap.timeoutMillis],
    ['overlap', m.overlap, snap.overlap],
    ['catchUp', m.catchUp, snap.catchUp],
    ['paused', m.paused, snap.paused],
    ['queue', m.queue, snap.queue],
    ['lastJobId', m.lastJobId, snap.lastJobId],
    ['lastRunAtMillis', m.lastRunAtMs, snap.lastRunAtMillis],
  ];
  for (const [field, want, got] of fields) {
    if (want !== got)
      return `${field} is ${JSON.stringify(got)}, the model says ${JSON.stringify(want)}`;
  }
  if (!isDeepStrictEqual(m.payload, snap.payload)) return `payload ${JSON.stringify(snap.payload)}`;
  if ((snap.nextRunAtMillis === null) !== snap.paused) {
    return `nextRunAtMillis ${snap.nextRunAtMillis} with paused ${snap.paused}`;
  }
  return null;
}

/** The core's notion of an unchanged definition (SET_SCHEDULE changes nothing then). */
function sameDefinition(a: ModelSchedule, b: ModelSchedule): boolean {
  const fields = [
    'taskType',
    'cron',
    'everyMs',
    'timezone',
    'maxAttempts',
    'priority',
    'timeoutMs',
    'overlap',
    'catchUp',
    'paused',
    'queue',
  ] as const;
  return fields.every((f) => a[f] === b[f]) && isDeepStrictEqual(a.payload, b.payload);
}

/** What a SET_SCHEDULE defines, as the schedule it must show (run-time fields from `known`). */
function definedSchedule(
  msg: Extract<ScheduleRequest, { type: 'SET_SCHEDULE' }>,
  known: ModelSchedule | undefined,
): ModelSchedule {
  const d = msg.schedule;
  return {
    name: d.name,
    taskType: d.taskType,
    cron: d.cron === null ? null : d.cron.trim(),
    everyMs: d.everyMillis,
    timezone: d.cron === null ? null : (d.timezone ?? 'UTC'),
    payload: JSON.parse(JSON.stringify(d.payload)) as ModelSchedule['payload'],
    maxAttempts: d.maxAttempts,
    priority: d.priority,
    timeoutMs: d.timeoutMillis,
    overlap: d.overlap ?? 'allow',
    catchUp: d.catchUp ?? 'latest',
    paused: d.paused ?? false,
    queue: d.queue ?? 'default',
    lastJobId: known?.lastJobId ?? null,
    lastRunAtMs: known?.lastRunAtMs ?? null,
    createdAtMs: known?.createdAtMs ?? 0,
    anchorMs: null,
    lastTickMs: null,
  };
}

/** The first tick of a schedule that starts now (set, resumed): an interval starts now. */
function firstTick(m: ModelSchedule, nowMs: number): number | null {
  if (m.paused) return null;
  if (m.everyMs !== null) return nowMs + m.everyMs;
  return m.cron === null ? null : CRON.next(m.cron, m.timezone ?? 'UTC', nowMs);
}

/**
 * Schedule requests: SET answers with the schedule as defined (the same
 * definition again changes nothing, a new or changed one starts its cadence
 * now), or INVALID_SCHEDULE for the definitions built invalid; a request
 * naming a schedule the model does not hold gets UNKNOWN_SCHEDULE; PAUSE and
 * RESUME show the schedule paused or not; DELETE confirms; TRIGGER makes
 * exactly one job now, carrying the schedule's name and `runAtMillis` = now;
 * LIST shows every schedule of the model, sorted by name.
 */
function checkSchedule(
  ctx: RequestContext,
  msg: ScheduleRequest,
  reply: ClientReply,
  h: HandledInput,
  before: Before,
): void {
  const { judge } = ctx;
  const what = (): string =>
    `${msg.type} ${JSON.stringify(msg).slice(0, 300)} answered ${JSON.stringify(reply).slice(0, 400)}`;
  const known = before.schedule;
  if (msg.type === 'SET_SCHEDULE') {
    if (ctx.invalid.has(msg)) {
      judge.check(reply.type === 'ERROR' && reply.code === 'INVALID_SCHEDULE', what);
      return;
    }
    if (reply.type !== 'SCHEDULE_INFO') throw judge.violation(what());
    const defined = definedSchedule(msg, known);
    const problem = scheduleMismatch(defined, reply.schedule);
    judge.check(problem === null, () => `${what()}: ${problem}`);
    const same = known !== undefined && sameDefinition(known, defined);
    if (!same) {
      const first = firstTick(defined, h.nowMs);
      judge.check(
        reply.schedule.nextRunAtMillis === first,
        () => `${what()}: a new definition's first tick should be ${first}`,
      );
    }
    return;
  }
  if (msg.type === 'LIST_SCHEDULES') {
    if (reply.type !== 'SCHEDULE_LIST') throw judge.violation(what());
    const names = reply.schedules.map((x) => x.name);
    const modelNames = [...(before.scheduleModels?.keys() ?? [])].sort();
    judge.check(
      isDeepStrictEqual(names, modelNames),
      () => `SCHEDULE_LIST shows ${names.join(',')}, the model holds ${modelNames.join(',')}`,
    );
    for (const snap of reply.schedules) {
      const m = before.scheduleModels?.get(snap.name);
      const problem = m === undefined ? 'not in the model' : scheduleMismatch(m, snap);
      judge.check(problem === null, () => `SCHEDULE_LIST: ${snap.name}: ${problem}`);
    }
    return;
  }
  if (known === undefined) {
    judge.check(reply.type === 'ERROR' && reply.code === 'UNKNOWN_SCHEDULE', what);
    return;
  }
  switch (msg.type) {
    case 'PAUSE_SCHEDULE':
    case 'RESUME_SCHEDULE': {
      if (reply.type !== 'SCHEDULE_INFO') throw judge.violation(what());
      const paused = msg.type === 'PAUSE_SCHEDULE';
      const problem = scheduleMismatch({ ...known, paused }, reply.schedule);
      judge.check(problem === null, () => `${what()}: ${problem}`);
      if (!paused && known.paused) {
        const first = firstTick({ ...known, paused: false }, h.nowMs);
        judge.check(
          reply.schedule.nextRunAtMillis === first,
          () => `${what()}: a resumed schedule's first tick should be ${first}`,
        );
      }
      return;
    }
    case 'DELETE_SCHEDULE':
      judge.check(reply.type === 'SCHEDULE_DELETED' && reply.name === msg.name, what);
      return;
    case 'TRIGGER_SCHEDULE': {
      const created = h.effects.filter(
        (e) => e.kind === 'event' && e.event.type === 'job.submitted',
      );
      if (reply.type === 'SUBMIT_REJECTED') {
        // Admission control holds for a trigger as for a submission.
        const counted = h.activeAfter - h.scheduledAfter;
        const limit = ctx.config.maxActiveJobs;
        judge.check(
          created.length === 0 && counted >= limit && reply.limit === limit && reply.retryable,
          () => `${what()}; ${created.length} job(s) created, ${counted} counted of ${limit}`,
        );
        return;
      }
      judge.check(
        reply.type === 'JOB_SUBMITTED' &&
          reply.job !== null &&
          created.length === 1 &&
          created[0]?.kind === 'event' &&
          created[0].event.type === 'job.submitted' &&
          created[0].event.jobId === reply.jobId &&
          reply.job.jobId === reply.jobId &&
          reply.job.scheduleName === msg.name &&
          reply.job.runAtMillis === h.nowMs &&
          reply.job.taskType === known.taskType &&
          reply.job.attempts === 0 &&
          reply.job.state === 'QUEUED',
        () => `${what()}; ${created.length} job(s) created`,
      );
      return;
    }
    case 'GET_SCHEDULE':
      // A known schedule's recent jobs are read from the store first.
      throw judge.violation(`${what()} without reading the store`);
  }
}

/** A GET_SCHEDULE answered after its read: the schedule as the model holds it, or unknown. */
function checkScheduleInfo(
  ctx: RequestContext,
  name: string,
  reply: ClientReply,
  after: AfterFacts,
): void {
  const { judge } = ctx;
  const m = after.schedule(name);
  const what = `deferred GET_SCHEDULE ${name} answered ${JSON.stringify(reply).slice(0, 400)}`;
  if (m === undefined) {
    judge.check(reply.type === 'ERROR' && reply.code === 'UNKNOWN_SCHEDULE', () => what);
    return;
  }
  if (reply.type !== 'SCHEDULE_INFO') throw judge.violation(what);
  const problem = scheduleMismatch(m, reply.schedule);
  judge.check(problem === null, () => `${what}: ${problem}`);
  for (const job of reply.recentJobs ?? []) {
    const terminal = after.terminal(job.jobId);
    judge.check(
      after.known(job.jobId) &&
        (terminal === undefined ? !isTerminalState(job.state) : job.state === terminal),
      () => `${what}: recent job ${job.jobId} is ${terminal ?? 'not terminal'}`,
    );
  }
}
