/**
 * `schedule set|list|show|pause|resume|delete|trigger`: recurring schedules
 * through the client library (`client.schedules`). Bad input the CLI can
 * check (a malformed duration or cron expression, an unknown time zone, a
 * missing name) is exit 2 before anything is sent.
 */
import { createCronEvaluator, isTimeZone } from '../../coordinator/cron.js';
import {
  MIN_SCHEDULE_EVERY_MS,
  SCHEDULE_NAME_PATTERN,
} from '../../coordinator/core/schedule-requests.js';
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_DELAY_MS,
  MAX_TASK_TIMEOUT_MS,
  MIN_TASK_TIMEOUT_MS,
} from '../../protocol/limits.js';
import {
  PRIORITIES,
  SCHEDULE_CATCH_UPS,
  SCHEDULE_OVERLAPS,
  type ScheduleSnapshot,
} from '../../protocol/messages.js';
import { queueNameProblem } from '../../protocol/queue-names.js';
import type { ScheduleOptions } from '../../client/schedules.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { waveDurationMs } from './shared.js';
import { PAYLOAD_FLAGS, payloadOf } from './submit.js';
import { UsageError } from '../flags.js';
import { formatJobBlock } from '../output.js';

const ACTIONS = ['set', 'list', 'show', 'pause', 'resume', 'delete', 'trigger'] as const;
type Action = (typeof ACTIONS)[number];

function nameArg(ctx: CommandContext): string {
  const name = ctx.args[1];
  if (name === undefined || name === '') throw new UsageError('missing <name>');
  if (!SCHEDULE_NAME_PATTERN.test(name)) {
    throw new UsageError(
      `<name> must match ${String(SCHEDULE_NAME_PATTERN)}, got ${JSON.stringify(name.slice(0, 80))}`,
    );
  }
  return name;
}

function human(schedule: ScheduleSnapshot): string {
  const cadence =
    schedule.cron !== null
      ? `cron "${schedule.cron}" (${schedule.timezone ?? 'UTC'})`
      : `every ${schedule.everyMillis} ms`;
  const next =
    schedule.nextRunAtMillis === null ? 'paused' : new Date(schedule.nextRunAtMillis).toISOString();
  const queue =
    schedule.queue == null || schedule.queue === 'default' ? '' : `  queue: ${schedule.queue}`;
  return `${schedule.name}  ${schedule.taskType}  ${cadence}${queue}  next: ${next}  last job: ${schedule.lastJobId ?? '-'}\n`;
}

/** The definition `set` sends, checked here first (exit 2 names the flag). */
async function optionsOf(ctx: CommandContext, taskType: string): Promise<ScheduleOptions> {
  const { values } = ctx;
  const cron = values.optionalString('cron');
  const every = values.optionalString('every');
  const timezone = values.optionalString('timezone');
  if ((cron === undefined) === (every === undefined))
    throw new UsageError('give --cron or --every (exactly one)');
  const options: ScheduleOptions = {};
  if (cron !== undefined) {
    const fields = cron.trim().split(/\s+/).length;
    if (fields !== 5 && fields !== 6)
      throw new UsageError(`--cron: expected 5 or 6 fields, got ${fields}`);
    const zone = timezone ?? 'UTC';
    if (!isTimeZone(zone))
      throw new UsageError(`--timezone: unknown time zone ${JSON.stringify(zone)}`);
    const problem = createCronEvaluator().problem(cron, zone);
    if (problem !== null) throw new UsageError(`--cron: ${problem}`);
    options.cron = cron.trim();
    options.timezone = zone;
  } else {
    if (timezone !== undefined) throw new UsageError('--timezone is for --cron only');
    const ms = waveDurationMs(every as string, '--every');
    if (ms < MIN_SCHEDULE_EVERY_MS || ms > MAX_DELAY_MS)
      throw new UsageError('--every must be 1s..366d');
    options.everyMs = ms;
  }
  if (values.has('payload') || values.has('payload-file'))
    options.payload = await payloadOf(ctx, taskType);
  const maxAttempts = values.optionalInt('max-attempts');
  if (maxAttempts !== undefined) options.maxAttempts = maxAttempts;
  const priority = values.optionalEnum('priority', PRIORITIES);
  if (priority !== undefined) options.priority = priority;
  const timeout = values.optionalInt('task-timeout-millis');
  if (timeout !== undefined) options.timeoutMillis = timeout;
  const overlap = values.optionalEnum('overlap', SCHEDULE_OVERLAPS);
  if (overlap !== undefined) options.overlap = overlap;
  const catchUp = values.optionalEnum('catch-up', SCHEDULE_CATCH_UPS);
  if (catchUp !== undefined) options.catchUp = catchUp;
  if (values.bool('paused')) options.paused = true;
  const queue = values.optionalString('queue');
  if (queue !== undefined) {
    const problem = queueNameProblem(queue);
    if (problem !== null) throw new UsageError(`--queue: queue name ${problem}`);
    options.queue = queue;
  }
  return options;
}

async function runSchedule(ctx: CommandContext): Promise<CommandOutput> {
  const action = ctx.args[0] as Action | undefined;
  if (action === undefined || !ACTIONS.includes(action)) {
    throw new UsageError(`schedule needs one of ${ACTIONS.join(', ')}`);
  }
  if (action === 'list') {
    const schedules = await (await ctx.client()).schedules.list();
    return { json: { schedules }, human: schedules.map(human).join('') || 'No schedules\n' };
  }
  const name = nameArg(ctx);
  if (action === 'set') {
    const taskType = ctx.args[2];
    if (taskType === undefined || taskType === '') throw new UsageError('missing <TYPE>');
    const options = await optionsOf(ctx, taskType);
    const schedule = await (await ctx.client()).schedules.set(name, taskType, options);
    return { json: schedule, human: human(schedule) };
  }
  const schedules = (await ctx.client()).schedules;
  switch (action) {
    case 'show': {
      const shown = await schedules.get(name);
      const jobs = shown.recentJobs.map((j) => `  ${j.jobId}  ${j.state}\n`).join('');
      return { json: shown, human: human(shown) + jobs };
    }
    case 'pause':
    case 'resume': {
      const schedule = await (action === 'pause' ? schedules.pause(name) : schedules.resume(name));
      return { json: schedule, human: human(schedule) };
    }
    case 'delete':
      await schedules.delete(name);
      return { json: { deleted: name }, human: `Deleted schedule ${name}\n` };
    case 'trigger': {
      const job = await schedules.trigger(name);
      return {
        json: { jobId: job.jobId, job: job.snapshot },
        human: formatJobBlock(job.snapshot, { submitted: true, color: ctx.color }),
      };
    }
  }
}

export const SCHEDULE_COMMAND: CommandSpec = {
  name: 'schedule',
  summary: 'recurring schedules: set, list, show, pause, resume, delete, trigger',
  args: [
    { name: 'action', help: ACTIONS.join('|') },
    { name: 'name', help: 'the schedule (not for list)', optional: true },
    { name: 'type', help: 'the task type (set only)', optional: true },
  ],
  flags: [
    ...PAYLOAD_FLAGS,
    {
      name: 'cron',
      type: 'string',
      placeholder: 'expr',
      help: 'cron expression: 5 fields, or 6 with seconds first',
    },
    {
      name: 'timezone',
      type: 'string',
      placeholder: 'IANA',
      help: 'time zone of --cron (default UTC)',
    },
    { name: 'every', type: 'string', placeholder: 'duration', help: 'fixed interval, at least 1s' },
    {
      name: 'max-attempts',
      type: 'int',
      min: 1,
      max: MAX_ATTEMPTS_LIMIT,
      help: 'attempts of each job',
    },
    { name: 'priority', type: 'enum', values: PRIORITIES, help: 'priority of each job' },
    {
      name: 'task-timeout-millis',
      type: 'int',
      min: MIN_TASK_TIMEOUT_MS,
      max: MAX_TASK_TIMEOUT_MS,
      help: 'execution deadline of each attempt',
    },
    {
      name: 'overlap',
      type: 'enum',
      values: SCHEDULE_OVERLAPS,
      help: 'allow (default) or skip a tick while the last job runs',
    },
    {
      name: 'catch-up',
      type: 'enum',
      values: SCHEDULE_CATCH_UPS,
      help: 'latest (default) or none: ticks missed in an outage',
    },
    { name: 'paused', type: 'boolean', help: 'create it paused' },
    {
      name: 'queue',
      type: 'string',
      placeholder: 'name',
      defaultLabel: 'default',
      help: 'the named queue of its jobs',
    },
  ],
  run: runSchedule,
};
