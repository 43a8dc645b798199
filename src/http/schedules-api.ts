/**
 * The recurring schedules under `/api/schedules` (docs/HTTP.md): their list,
 * one with its recent jobs, and pause, resume and trigger, each as a client
 * request (LIST/GET/PAUSE/RESUME/TRIGGER_SCHEDULE) answered after its
 * commit, exactly like a TCP client's.
 *
 * Beside the schedule object of the CLI's `--json`, each schedule here has
 * its next few runs (computed with the coordinator's cron evaluator from the
 * next run the core holds) and the state of its last job.
 */
import { KNOWN_STATES } from '../protocol/job-view.js';
import type { JobSnapshot, JobState, ScheduleJob, ScheduleSnapshot } from '../protocol/messages.js';
import { expect, type ApiContext } from './api.js';

/** Next runs shown per schedule (the first is the core's own next run). */
export const NEXT_RUNS_SHOWN = 5;
/** Schedules of one list whose last job's state is looked up (one core request each). */
export const MAX_LAST_JOB_LOOKUPS = 100;

/** A schedule as the API shows it. */
export interface ScheduleView extends ScheduleSnapshot {
  /** The next runs, soonest first; empty while paused. */
  nextRunsAtMillis: number[];
  /** The state of `lastJobId`; null without one, once purged, or past the lookup bound. */
  lastJobState: JobState | null;
  /** Whether a live, non-draining worker declared its task type (its jobs wait until one does). */
  served: boolean;
}

export interface ScheduleList {
  nowMillis: number;
  schedules: ScheduleView[];
}

export interface ScheduleDetails extends ScheduleView {
  /** Its newest jobs first (at most 10). */
  recentJobs: ScheduleJob[];
}

export interface TriggerResult {
  jobId: string;
  job: JobSnapshot;
}

/** The schedule's next runs: its next one, then the cadence after it. */
export function nextRuns(ctx: ApiContext, schedule: ScheduleSnapshot, count: number): number[] {
  const runs: number[] = [];
  let at = schedule.nextRunAtMillis;
  while (at !== null && runs.length < count) {
    runs.push(at);
    if (schedule.everyMillis !== null) at += schedule.everyMillis;
    else if (schedule.cron !== null)
      at = ctx.cron.next(schedule.cron, schedule.timezone ?? 'UTC', at);
    else at = null;
  }
  return runs;
}

function viewOf(
  ctx: ApiContext,
  schedule: ScheduleSnapshot,
  lastJobState: JobState | null,
  served: ReadonlySet<string>,
): ScheduleView {
  return {
    ...schedule,
    nextRunsAtMillis: nextRuns(ctx, schedule, NEXT_RUNS_SHOWN),
    lastJobState,
    served: served.has(schedule.taskType),
  };
}

/** The task types live workers serve now (one look at the core's state per answer). */
function servedTypes(ctx: ApiContext): ReadonlySet<string> {
  return new Set(ctx.source.inspect().servedTaskTypes);
}

async function lastJobStateOf(ctx: ApiContext, jobId: string | null): Promise<JobState | null> {
  if (jobId === null) return null;
  const reply = await ctx.source.request({
    type: 'GET_JOB_STATUS',
    jobId,
    knownStates: [...KNOWN_STATES],
  });
  return reply.type === 'JOB_STATUS' ? reply.job.state : null;
}

/** `GET /api/schedules`: every schedule by name, with its next runs and last job's state. */
export async function listSchedules(ctx: ApiContext): Promise<ScheduleList> {
  const { schedules } = expect(
    await ctx.source.request({ type: 'LIST_SCHEDULES' }),
    'SCHEDULE_LIST',
  );
  const states = await Promise.all(
    schedules.map((s, i) =>
      i < MAX_LAST_JOB_LOOKUPS ? lastJobStateOf(ctx, s.lastJobId) : Promise.resolve(null),
    ),
  );
  const served = servedTypes(ctx);
  return {
    nowMillis: ctx.now(),
    schedules: schedules.map((s, i) => viewOf(ctx, s, states[i] ?? null, served)),
  };
}

/** `GET /api/schedules/<name>`: one schedule with its recent jobs, newest first. */
export async function scheduleDetails(ctx: ApiContext, name: string): Promise<ScheduleDetails> {
  const reply = await ctx.source.request({
    type: 'GET_SCHEDULE',
    name,
    knownStates: [...KNOWN_STATES],
  });
  const { schedule, recentJobs } = expect(reply, 'SCHEDULE_INFO');
  const jobs = recentJobs ?? [];
  const last = jobs.find((j) => j.jobId === schedule.lastJobId);
  const lastState =
    schedule.lastJobId === null
      ? null
      : (last?.state ?? (await lastJobStateOf(ctx, schedule.lastJobId)));
  return { ...viewOf(ctx, schedule, lastState, servedTypes(ctx)), recentJobs: jobs };
}

/** `POST /api/schedules/<name>/pause` and `/resume`: the schedule afterwards. */
export async function pauseSchedule(
  ctx: ApiContext,
  name: string,
  paused: boolean,
): Promise<ScheduleView> {
  const reply = await ctx.source.request({
    type: paused ? 'PAUSE_SCHEDULE' : 'RESUME_SCHEDULE',
    name,
  });
  const { schedule } = expect(reply, 'SCHEDULE_INFO');
  const lastState = await lastJobStateOf(ctx, schedule.lastJobId);
  return viewOf(ctx, schedule, lastState, servedTypes(ctx));
}

/** `POST /api/schedules/<name>/trigger`: one job now, outside the cadence (also while paused). */
export async function triggerSchedule(ctx: ApiContext, name: string): Promise<TriggerResult> {
  const reply = await ctx.source.request({
    type: 'TRIGGER_SCHEDULE',
    name,
    knownStates: [...KNOWN_STATES],
  });
  const submitted = expect(reply, 'JOB_SUBMITTED');
  const job =
    submitted.job ??
    expect(
      await ctx.source.request({
        type: 'GET_JOB_STATUS',
        jobId: submitted.jobId,
        knownStates: [...KNOWN_STATES],
      }),
      'JOB_STATUS',
    ).job;
  return { jobId: submitted.jobId, job };
}
