/**
 * The schedule requests (SET/LIST/GET/PAUSE/RESUME/DELETE/TRIGGER_SCHEDULE)
 * and the firing of due ticks (see schedules.ts for the rules).
 */
import { isDeepStrictEqual } from 'node:util';
import { ErrorCode } from '../../protocol/error-codes.js';
import { describeError } from '../../protocol/errors.js';
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_DELAY_MS,
  MAX_TASK_TIMEOUT_MS,
  MIN_TASK_TIMEOUT_MS,
} from '../../protocol/limits.js';
import type {
  JsonObject,
  ScheduleDefinition,
  ScheduleRequest,
  ScheduleSnapshot,
} from '../../protocol/messages.js';
import { isBuiltinTaskType, isValidTaskType } from '../../protocol/task-types.js';
import type { JobRecord, ScheduleRecord } from '../../store/store.js';
import { coreJobSnapshot, toRecord } from './job.js';
import { isTerminalState } from './job-state.js';
import { schedule as assignReady } from './job-lifecycle.js';
import { firstTick, latestDueTick, tickAfter } from './schedules.js';
import type { CoreState } from './state.js';
import { createJob, pausedQueueField, rejected } from './submission.js';
import { DEFAULT_QUEUE, queueNameProblem } from '../../protocol/queue-names.js';

/** A schedule's name. */
export const SCHEDULE_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;
/** Shortest interval of `everyMillis`. */
export const MIN_SCHEDULE_EVERY_MS = 1_000;
/** Jobs `GET_SCHEDULE` lists. */
const RECENT_JOBS = 10;

export function handleScheduleRequest(
  s: CoreState,
  connId: number,
  requestId: number,
  msg: ScheduleRequest,
): void {
  if (msg.type === 'SET_SCHEDULE') return setSchedule(s, connId, requestId, msg.schedule);
  if (msg.type === 'LIST_SCHEDULES') {
    const schedules = s.schedules.sorted().map(scheduleSnapshot);
    return s.reply(connId, requestId, { type: 'SCHEDULE_LIST', schedules });
  }
  const found = s.schedules.get(msg.name);
  if (found === undefined) {
    return s.replyError(
      connId,
      requestId,
      ErrorCode.UnknownSchedule,
      `Unknown schedule: ${msg.name.slice(0, 80)}`,
    );
  }
  switch (msg.type) {
    case 'GET_SCHEDULE':
      s.read(
        { op: 'scheduleJobs', scheduleName: found.name, limit: RECENT_JOBS },
        { kind: 'scheduleJobs', connId, requestId, name: found.name },
      );
      return;
    case 'PAUSE_SCHEDULE':
    case 'RESUME_SCHEDULE': {
      const paused = msg.type === 'PAUSE_SCHEDULE';
      if (found.paused !== paused) {
        const changed: ScheduleRecord = { ...found, paused, updatedAtMs: s.nowMs };
        changed.nextRunAtMs = firstTick(s, changed);
        save(s, changed);
      }
      return replyInfo(s, connId, requestId, msg.name);
    }
    case 'DELETE_SCHEDULE':
      s.schedules.delete(found.name);
      s.jobs.deleteSchedule(found.name);
      return s.reply(connId, requestId, { type: 'SCHEDULE_DELETED', name: found.name });
    case 'TRIGGER_SCHEDULE': {
      // A trigger is a submission: the active-jobs limit holds for it as for SUBMIT_JOB.
      if (rejected(s, connId, requestId, false)) return;
      const job = makeJob(s, found, s.nowMs);
      s.reply(connId, requestId, {
        type: 'JOB_SUBMITTED',
        jobId: job.jobId,
        job: coreJobSnapshot(job),
        servingWorkers: s.workers.servingCount(job.taskType),
        ...pausedQueueField(s, job.queue),
      });
      assignReady(s);
      return;
    }
  }
}

/** The store answered a GET_SCHEDULE: its newest jobs, merged with what memory has newer. */
export function scheduleJobsRead(
  s: CoreState,
  read: { connId: number; requestId: number; name: string },
  stored: JobRecord[],
): void {
  const schedule = s.schedules.get(read.name);
  if (schedule === undefined) {
    s.replyError(
      read.connId,
      read.requestId,
      ErrorCode.UnknownSchedule,
      `Unknown schedule: ${read.name}`,
    );
    return;
  }
  const rows = new Map<string, JobRecord>();
  for (const row of stored) rows.set(row.jobId, row);
  for (const row of s.jobs.overlay().values()) {
    if (row.scheduleName === read.name) rows.set(row.jobId, row);
  }
  for (const job of s.jobs.activeJobs()) {
    if (job.scheduleName === read.name) rows.set(job.jobId, toRecord(job));
  }
  const recentJobs = [...rows.values()]
    .sort((a, b) => b.seq - a.seq)
    .slice(0, RECENT_JOBS)
    .map((row) => ({ jobId: row.jobId, state: row.state, runAtMillis: row.runAtMs }));
  s.reply(read.connId, read.requestId, {
    type: 'SCHEDULE_INFO',
    schedule: scheduleSnapshot(schedule),
    recentJobs,
  });
}

/** Fires every due tick (one job per schedule per input at most); returns the jobs made. */
export function fireDueTicks(s: CoreState): number {
  let made = 0;
  for (
    let due = s.schedules.takeDue(s.nowMs);
    due !== undefined;
    due = s.schedules.takeDue(s.nowMs)
  ) {
    const dueMs = due.nextRunAtMs as number;
    const tickMs = latestDueTick(s, due, dueMs, s.nowMs);
    const skip = skipReason(s, due, tickMs);
    const advanced: ScheduleRecord = { ...due, nextRunAtMs: tickMs };
    advanced.nextRunAtMs = tickAfter(s, advanced, tickMs);
    if (advanced.nextRunAtMs !== null && advanced.nextRunAtMs <= s.nowMs) {
      advanced.nextRunAtMs = tickAfter(s, advanced, s.nowMs); // never due twice in one input
    }
    if (skip !== null) {
      s.emit({ type: 'schedule.skipped', name: due.name, tickMs, reason: skip });
      save(s, advanced);
      continue;
    }
    const job = makeJob(s, advanced, tickMs);
    s.emit({
      type: 'schedule.fired',
      name: due.name,
      jobId: job.jobId,
      tickMs,
      lagMs: s.nowMs - tickMs,
    });
    made++;
  }
  return made;
}

function skipReason(
  s: CoreState,
  schedule: ScheduleRecord,
  tickMs: number,
): 'overlap' | 'missed' | 'limit' | null {
  // A tick that fell due before this core started passed while no coordinator led.
  if (tickMs < s.startedAtMs && schedule.catchUp === 'none') return 'missed';
  if (schedule.overlap === 'skip' && schedule.lastJobId !== null) {
    const last = s.jobs.get(schedule.lastJobId);
    if (last !== undefined && !isTerminalState(last.state)) return 'overlap';
  }
  if (s.jobs.activeCount - s.scheduledCount >= s.config.maxActiveJobs) return 'limit';
  return null;
}

/** The job of a tick (or a trigger) at `tickMs`, and the schedule's record of it: one batch. */
function makeJob(s: CoreState, schedule: ScheduleRecord, tickMs: number) {
  const job = createJob(s, {
    taskType: schedule.taskType,
    payloadJson: schedule.payloadJson,
    priority: schedule.priority ?? 'NORMAL',
    maxAttempts: schedule.maxAttempts ?? s.config.defaultMaxAttempts,
    timeoutMs: schedule.timeoutMs ?? s.config.taskTimeoutMs,
    idempotencyKey: null,
    runAtMs: tickMs,
    scheduleName: schedule.name,
    queue: schedule.queue,
    groupKey: null,
    dependsOn: null,
    onParentFailure: null,
  });
  save(s, { ...schedule, lastRunAtMs: tickMs, lastJobId: job.jobId, updatedAtMs: s.nowMs });
  return job;
}

function save(s: CoreState, schedule: ScheduleRecord): void {
  s.schedules.put(schedule);
  s.jobs.saveSchedule(schedule);
}

function replyInfo(s: CoreState, connId: number, requestId: number, name: string): void {
  const schedule = s.schedules.get(name);
  if (schedule === undefined) throw new Error(`schedule ${name} vanished`);
  s.reply(connId, requestId, { type: 'SCHEDULE_INFO', schedule: scheduleSnapshot(schedule) });
}

/** What SET_SCHEDULE defines, as the fields that make a definition, or what is wrong. */
type Definition = Pick<
  ScheduleRecord,
  | 'name'
  | 'taskType'
  | 'cron'
  | 'everyMs'
  | 'timezone'
  | 'payloadJson'
  | 'maxAttempts'
  | 'priority'
  | 'timeoutMs'
  | 'overlap'
  | 'catchUp'
  | 'paused'
  | 'queue'
>;

function definitionOf(s: CoreState, d: ScheduleDefinition): Definition | string {
  if (!SCHEDULE_NAME_PATTERN.test(d.name)) {
    return `name must match ${String(SCHEDULE_NAME_PATTERN)}, got ${JSON.stringify(d.name.slice(0, 80))}`;
  }
  if (!isValidTaskType(d.taskType))
    return `taskType is not a valid task type: ${JSON.stringify(d.taskType.slice(0, 80))}`;
  if ((d.cron === null) === (d.everyMillis === null))
    return 'exactly one of cron and everyMillis must be given';
  if (d.everyMillis !== null) {
    if (d.everyMillis < MIN_SCHEDULE_EVERY_MS || d.everyMillis > MAX_DELAY_MS) {
      return `everyMillis must be ${MIN_SCHEDULE_EVERY_MS}..${MAX_DELAY_MS}, got ${d.everyMillis}`;
    }
    if (d.timezone !== null) return 'timezone is for cron only';
  }
  const timezone = d.cron === null ? null : (d.timezone ?? 'UTC');
  if (d.cron !== null) {
    const fields = d.cron.trim().split(/\s+/).length;
    if (fields !== 5 && fields !== 6) return `cron must have 5 or 6 fields, got ${fields}`;
    const problem = s.deps.cron.problem(d.cron, timezone ?? 'UTC');
    if (problem !== null) return problem;
    // Also while paused: a schedule that could never make a job is refused.
    if (s.deps.cron.next(d.cron, timezone ?? 'UTC', s.nowMs) === null) {
      return `cron ${JSON.stringify(d.cron.slice(0, 80))} has no next run`;
    }
  }
  if (d.maxAttempts !== null && (d.maxAttempts < 1 || d.maxAttempts > MAX_ATTEMPTS_LIMIT)) {
    return `maxAttempts must be 1..${MAX_ATTEMPTS_LIMIT}, got ${d.maxAttempts}`;
  }
  const timeoutMs = d.timeoutMillis;
  if (timeoutMs !== null && (timeoutMs < MIN_TASK_TIMEOUT_MS || timeoutMs > MAX_TASK_TIMEOUT_MS)) {
    return `timeoutMillis must be ${MIN_TASK_TIMEOUT_MS}..${MAX_TASK_TIMEOUT_MS}, got ${timeoutMs}`;
  }
  const queue = d.queue ?? DEFAULT_QUEUE;
  const badQueue = queueNameProblem(queue);
  if (badQueue !== null) return `queue ${badQueue}`;
  if (isBuiltinTaskType(d.taskType)) {
    try {
      s.deps.validator.validate(d.taskType, d.payload);
    } catch (err) {
      return describeError(err);
    }
  }
  return {
    name: d.name,
    taskType: d.taskType,
    cron: d.cron === null ? null : d.cron.trim(),
    everyMs: d.everyMillis,
    timezone,
    payloadJson: JSON.stringify(d.payload satisfies JsonObject),
    maxAttempts: d.maxAttempts,
    priority: d.priority,
    timeoutMs,
    overlap: d.overlap ?? 'allow',
    catchUp: d.catchUp ?? 'latest',
    paused: d.paused ?? false,
    queue,
  };
}

function sameDefinition(a: Definition, b: ScheduleRecord): boolean {
  return (
    a.taskType === b.taskType &&
    a.cron === b.cron &&
    a.everyMs === b.everyMs &&
    a.timezone === b.timezone &&
    a.maxAttempts === b.maxAttempts &&
    a.priority === b.priority &&
    a.timeoutMs === b.timeoutMs &&
    a.overlap === b.overlap &&
    a.catchUp === b.catchUp &&
    a.paused === b.paused &&
    a.queue === b.queue &&
    isDeepStrictEqual(JSON.parse(a.payloadJson), JSON.parse(b.payloadJson))
  );
}

function setSchedule(s: CoreState, connId: number, requestId: number, d: ScheduleDefinition): void {
  const definition = definitionOf(s, d);
  if (typeof definition === 'string') {
    s.replyError(connId, requestId, ErrorCode.InvalidSchedule, `Invalid schedule: ${definition}`);
    return;
  }
  const existing = s.schedules.get(definition.name);
  // The same definition again changes nothing, not even the next run.
  if (existing !== undefined && sameDefinition(definition, existing)) {
    return replyInfo(s, connId, requestId, definition.name);
  }
  const record: ScheduleRecord = {
    ...definition,
    nextRunAtMs: null,
    lastRunAtMs: existing?.lastRunAtMs ?? null,
    lastJobId: existing?.lastJobId ?? null,
    createdAtMs: existing?.createdAtMs ?? s.nowMs,
    updatedAtMs: s.nowMs,
  };
  record.nextRunAtMs = firstTick(s, record);
  save(s, record);
  replyInfo(s, connId, requestId, definition.name);
}

export function scheduleSnapshot(schedule: Readonly<ScheduleRecord>): ScheduleSnapshot {
  return {
    name: schedule.name,
    taskType: schedule.taskType,
    cron: schedule.cron,
    everyMillis: schedule.everyMs,
    timezone: schedule.timezone,
    payload: JSON.parse(schedule.payloadJson) as JsonObject,
    paused: schedule.paused,
    overlap: schedule.overlap,
    catchUp: schedule.catchUp,
    nextRunAtMillis: schedule.paused ? null : schedule.nextRunAtMs,
    lastRunAtMillis: schedule.lastRunAtMs,
    lastJobId: schedule.lastJobId,
    maxAttempts: schedule.maxAttempts,
    priority: schedule.priority,
    timeoutMillis: schedule.timeoutMs,
    queue: schedule.queue,
  };
}
