/**
 * The JSON API under `/api/` (docs/HTTP.md), as functions of a
 * {@link DashboardSource}. Everything about jobs goes through client requests
 * ({@link DashboardSource.request}), handled by the core exactly like a TCP
 * client's and answered after their commit; history is read by the core
 * through its store reads, never here. Only the overview's gauges come from
 * `inspect()`, the read-only view the metrics use too, and a flow view's
 * dependents from `dependentsOf()` (read-only as well).
 */
import type { CoordinatorView, CoreInspection, CronEvaluator } from '../coordinator/view.js';
import { parseDuration } from '../protocol/duration.js';
import { ErrorCode, remoteCode } from '../protocol/error-codes.js';
import { KNOWN_STATES } from '../protocol/job-view.js';
import type { ClientReply, JobSnapshot, JobState, WorkerSnapshot } from '../protocol/messages.js';
import type { ActivityLog, ActivitySeries } from './activity.js';
import { onlyFields, terminalState, type QueryParams } from './params.js';
import { HttpError, HttpErrorCode, badRequest } from './responses.js';

/** What the API needs of a coordinator: its view (the coordinator implements it). */
export type DashboardSource = CoordinatorView;

export interface ApiContext {
  source: DashboardSource;
  activity: ActivityLog;
  maxActiveJobs: number;
  /** The coordinator's cron evaluator (a schedule's next runs). */
  cron: CronEvaluator;
  now(): number;
}

/** Default and largest page of `GET /api/jobs`. */
export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 500;

type ReplyOf<T extends ClientReply['type']> = Extract<ClientReply, { type: T }>;

/** HTTP status for an `ERROR` code of the core; any other code is the request's fault (400). */
const STATUS_OF_CODE: Partial<Record<string, number>> = {
  [ErrorCode.UnknownJob]: 404,
  [ErrorCode.UnknownSchedule]: 404,
  [ErrorCode.LimitExceeded]: 503,
  [ErrorCode.StoreFailed]: 503,
  [ErrorCode.InternalError]: 503,
  [ErrorCode.NotLeader]: 503,
  [ErrorCode.StoreReadFailed]: 500,
};

function statusOf(code: string | null): number {
  return (code === null ? undefined : STATUS_OF_CODE[code]) ?? 400;
}

/** The reply if it has the wanted type; an `ERROR` becomes an {@link HttpError}. */
export function expect<T extends ClientReply['type']>(reply: ClientReply, type: T): ReplyOf<T> {
  if (reply.type === type) return reply as ReplyOf<T>;
  if (reply.type === 'ERROR') {
    // Every ERROR of our own core has a code; one without would be a bug.
    const code = remoteCode(reply.code) ?? ErrorCode.InternalError;
    throw new HttpError(statusOf(reply.code), code, reply.message);
  }
  throw new HttpError(500, ErrorCode.InternalError, `expected ${type}, got ${reply.type}`);
}

export interface Overview {
  nowMillis: number;
  failure: { code: string; message: string } | null;
  jobs: {
    active: number;
    byState: Record<'QUEUED' | 'RUNNING' | 'RETRY_WAIT', number>;
  };
  queueDepthByPriority: CoreInspection['queuedByPriority'];
  queuedByTaskType: Record<string, number>;
  admission: { activeJobs: number; maxActiveJobs: number; headroom: number };
  workers: { live: number; draining: number; slots: number; freeSlots: number };
  activity: ActivitySeries;
}

export function overview(ctx: ApiContext): Overview {
  const view = ctx.source.inspect();
  const nowMs = ctx.now();
  const live = view.workers.filter((w) => !w.draining);
  return {
    nowMillis: nowMs,
    failure: ctx.source.failure,
    jobs: {
      active: view.activeCount,
      byState: {
        QUEUED: view.activeByState.QUEUED ?? 0,
        RUNNING: view.activeByState.RUNNING ?? 0,
        RETRY_WAIT: view.activeByState.RETRY_WAIT ?? 0,
      },
    },
    queueDepthByPriority: view.queuedByPriority,
    queuedByTaskType: Object.fromEntries(view.queuedByTaskType),
    admission: {
      activeJobs: view.activeCount,
      maxActiveJobs: ctx.maxActiveJobs,
      headroom: Math.max(0, ctx.maxActiveJobs - view.activeCount),
    },
    workers: {
      live: view.workers.length,
      draining: view.workers.length - live.length,
      slots: view.workers.reduce((sum, w) => sum + w.capacity, 0),
      freeSlots: view.freeSlots,
    },
    activity: ctx.activity.series(nowMs),
  };
}

export interface JobPage {
  jobs: JobSnapshot[];
  nextCursor: string | null;
}

interface JobFilters {
  state: JobState | null;
  taskType: string | null;
}

function passes(job: JobSnapshot, filters: JobFilters): boolean {
  if (filters.state !== null && job.state !== filters.state) return false;
  return filters.taskType === null || job.taskType === filters.taskType;
}

/** `GET /api/jobs`: a page newest first, filtered; or the jobs matching `search`. */
export async function listJobs(ctx: ApiContext, query: QueryParams): Promise<JobPage> {
  const filters: JobFilters = {
    state: query.state('state') ?? null,
    taskType: query.string('type', 128) ?? null,
  };
  const limit = query.int('limit', 1, MAX_PAGE) ?? DEFAULT_PAGE;
  const cursor = query.string('cursor', 32) ?? null;
  const search = query.string('search', 256);
  if (search !== undefined) {
    if (cursor !== null) throw badRequest('search and cursor cannot be combined');
    return { jobs: await searchJobs(ctx, search.trim(), filters), nextCursor: null };
  }
  const reply = await ctx.source.request({
    type: 'LIST_JOBS',
    limit,
    state: filters.state,
    cursor,
    taskType: filters.taskType,
    knownStates: [...KNOWN_STATES],
  });
  const { jobs, nextCursor } = expect(reply, 'JOB_LIST');
  return { jobs, nextCursor };
}

/** The job with this id and the job with this idempotency key (at most two). */
async function searchJobs(
  ctx: ApiContext,
  text: string,
  filters: JobFilters,
): Promise<JobSnapshot[]> {
  const [byId, byKey] = await Promise.all([
    ctx.source.request({ type: 'GET_JOB_STATUS', jobId: text }),
    ctx.source.request({
      type: 'LIST_JOBS',
      limit: 1,
      state: filters.state,
      cursor: null,
      taskType: filters.taskType,
      idempotencyKey: text,
      knownStates: [...KNOWN_STATES],
    }),
  ]);
  const found: JobSnapshot[] = [];
  if (byId.type === 'JOB_STATUS' && passes(byId.job, filters)) found.push(byId.job);
  else if (byId.type === 'ERROR' && byId.code !== ErrorCode.UnknownJob) expect(byId, 'JOB_STATUS');
  for (const job of expect(byKey, 'JOB_LIST').jobs) {
    if (!found.some((f) => f.jobId === job.jobId)) found.push(job);
  }
  return found;
}

/** `GET /api/jobs/:id`: the JOB_STATUS reply with attempts and payload. */
export type JobDetails = ReplyOf<'JOB_STATUS'>;
export interface CancelResult {
  cancelled: boolean;
  job: JobSnapshot;
}
export interface RerunResult {
  jobId: string;
  job: JobSnapshot;
  rerunOf: string;
}
export interface PurgeResult {
  deleted: number;
}
export interface WorkersResult {
  nowMillis: number;
  workers: WorkerView[];
}

/** `GET /api/jobs/:id`: snapshot, payload, attempts. */
export async function jobDetails(ctx: ApiContext, jobId: string): Promise<JobDetails> {
  const reply = await ctx.source.request({
    type: 'GET_JOB_STATUS',
    jobId,
    attempts: true,
    payload: true,
  });
  const { job, attempts, payload, payloadOmitted } = expect(reply, 'JOB_STATUS');
  return {
    type: 'JOB_STATUS',
    job,
    attempts: attempts ?? [],
    ...(payload != null && { payload }),
    ...(payloadOmitted === true && { payloadOmitted }),
  };
}

/** Most jobs `GET /api/jobs/:id/flow` shows. */
export const MAX_FLOW_NODES = 200;

/** One job of a flow view, placed relative to the job asked about. */
export interface FlowNode {
  jobId: string;
  taskType: string;
  state: JobState;
  /** Negative: an ancestor that many levels up; 0: the job asked about; positive: a dependent. */
  level: number;
  /** Its parents' ids (`dependsOn`), empty when none. */
  dependsOn: string[];
}

/** `GET /api/jobs/:id/flow`: the job's ancestors and its dependents not yet ended. */
export interface FlowView {
  /** Ancestors (nearest first by level), the job, then its dependents, level by level. */
  nodes: FlowNode[];
  /** True when {@link MAX_FLOW_NODES} cut the view short. */
  truncated: boolean;
}

function flowNode(job: JobSnapshot, level: number): FlowNode {
  return {
    jobId: job.jobId,
    taskType: job.taskType,
    state: job.state,
    level,
    dependsOn: job.dependsOn ?? [],
  };
}

/** The job's snapshot, or null when it is unknown (purged); other errors throw. */
async function snapshotOf(ctx: ApiContext, jobId: string): Promise<JobSnapshot | null> {
  const reply = await ctx.source.request({ type: 'GET_JOB_STATUS', jobId });
  if (reply.type === 'ERROR' && reply.code === ErrorCode.UnknownJob) return null;
  return expect(reply, 'JOB_STATUS').job;
}

/**
 * Walks up through `dependsOn` (parents of parents...) and down through the
 * core's index of dependents that have not ended (ended dependents are not
 * indexed, so a flow that has finished shows its ancestors only), level by
 * level, at most {@link MAX_FLOW_NODES} jobs in all; each job is one
 * GET_JOB_STATUS through the core, a level's at once.
 */
export async function jobFlow(ctx: ApiContext, jobId: string): Promise<FlowView> {
  const root = await snapshotOf(ctx, jobId);
  if (root === null) throw new HttpError(404, ErrorCode.UnknownJob, `Unknown job: ${jobId}`);
  const seen = new Map<string, FlowNode>([[root.jobId, flowNode(root, 0)]]);
  let truncated = false;
  const take = (ids: Iterable<string>): string[] => {
    const fresh = [...new Set(ids)].filter((id) => !seen.has(id));
    const room = MAX_FLOW_NODES - seen.size;
    if (fresh.length > room) truncated = true;
    return fresh.slice(0, Math.max(0, room));
  };
  const walk = async (step: -1 | 1, next: (node: FlowNode) => string[]): Promise<void> => {
    let frontier = [seen.get(root.jobId) as FlowNode];
    for (let level = step; frontier.length > 0 && !truncated; level += step) {
      const ids = take(frontier.flatMap(next));
      const jobs = await Promise.all(ids.map((id) => snapshotOf(ctx, id)));
      frontier = [];
      for (const job of jobs) {
        if (job === null || seen.has(job.jobId)) continue;
        const node = flowNode(job, level);
        seen.set(job.jobId, node);
        frontier.push(node);
      }
    }
  };
  await walk(-1, (node) => node.dependsOn);
  await walk(1, (node) => ctx.source.dependentsOf(node.jobId, MAX_FLOW_NODES));
  const nodes = [...seen.values()].sort((a, b) => a.level - b.level);
  return { nodes, truncated };
}

export async function cancelJob(ctx: ApiContext, jobId: string): Promise<CancelResult> {
  const { cancelled, job } = expect(
    await ctx.source.request({ type: 'CANCEL_JOB', jobId }),
    'JOB_CANCEL',
  );
  return { cancelled, job };
}

/**
 * `POST /api/jobs/:id/rerun`: a FAILED or CANCELLED job submitted again as a
 * new job with the same task type, payload, priority, attempts and timeout,
 * and never its idempotency key (that would return the original job).
 */
export async function rerunJob(ctx: ApiContext, jobId: string): Promise<RerunResult> {
  const original = await jobDetails(ctx, jobId);
  const { job } = original;
  if (job.state !== 'FAILED' && job.state !== 'CANCELLED') {
    throw new HttpError(
      409,
      HttpErrorCode.Conflict,
      `only FAILED or CANCELLED jobs can be re-run; ${jobId} is ${job.state}`,
    );
  }
  if (original.payload == null) {
    throw new HttpError(
      409,
      HttpErrorCode.Conflict,
      `the payload of ${jobId} is too large to re-run here`,
    );
  }
  const reply = await ctx.source.request({
    type: 'SUBMIT_JOB',
    taskType: job.taskType,
    payload: original.payload,
    maxAttempts: job.maxAttempts,
    idempotencyKey: null,
    priority: job.priority,
    timeoutMillis: job.timeoutMillis ?? null,
  });
  if (reply.type === 'SUBMIT_REJECTED') {
    throw new HttpError(429, HttpErrorCode.SubmitRejected, reply.reason, {
      activeCount: reply.activeCount,
      limit: reply.limit,
      retryable: reply.retryable,
    });
  }
  const submitted = expect(reply, 'JOB_SUBMITTED');
  const snapshot =
    submitted.job ??
    expect(
      await ctx.source.request({ type: 'GET_JOB_STATUS', jobId: submitted.jobId }),
      'JOB_STATUS',
    ).job;
  return { jobId: submitted.jobId, job: snapshot, rerunOf: jobId };
}

/** `POST /api/purge {state, olderThan | olderThanMillis}`: terminal states only. */
export async function purge(ctx: ApiContext, body: Record<string, unknown>): Promise<PurgeResult> {
  onlyFields(body, ['state', 'olderThan', 'olderThanMillis']);
  if (typeof body.state !== 'string')
    throw badRequest('state is required: COMPLETED, FAILED or CANCELLED');
  const state = terminalState('state', body.state);
  const olderThanMillis = olderThanOf(body);
  const reply = await ctx.source.request({ type: 'PURGE_JOBS', state, olderThanMillis });
  return { deleted: expect(reply, 'JOBS_PURGED').deleted };
}

function olderThanOf(body: Record<string, unknown>): number {
  const { olderThan, olderThanMillis } = body;
  if ((olderThan === undefined) === (olderThanMillis === undefined)) {
    throw badRequest('give exactly one of olderThan (like "7d") or olderThanMillis');
  }
  if (olderThan !== undefined) {
    if (typeof olderThan !== 'string')
      throw badRequest('olderThan must be a string like "30m", "12h" or "7d"');
    const parsed = parseDuration(olderThan);
    if ('error' in parsed) throw badRequest(`olderThan: ${parsed.error}`);
    return parsed.ms;
  }
  if (
    typeof olderThanMillis !== 'number' ||
    !Number.isSafeInteger(olderThanMillis) ||
    olderThanMillis < 0
  ) {
    throw badRequest('olderThanMillis must be a non-negative integer');
  }
  return olderThanMillis;
}

export interface WorkerView extends WorkerSnapshot {
  heartbeatAgeMillis: number;
}

/** `GET /api/workers`: live workers with the age of their last heartbeat. */
export async function workers(ctx: ApiContext): Promise<WorkersResult> {
  const list = expect(await ctx.source.request({ type: 'LIST_WORKERS' }), 'WORKER_LIST').workers;
  const nowMs = ctx.now();
  return {
    nowMillis: nowMs,
    workers: list.map((w) => ({
      ...w,
      heartbeatAgeMillis: Math.max(0, nowMs - w.lastHeartbeatMillis),
    })),
  };
}
