/**
 * `rerun --queue q [--state FAILED] [--type T] [--since D] [--limit n]
 * [--max-attempts n]`: a redrive of dead letters. The FAILED jobs of the
 * queue are queued again as the same jobs, with a fresh attempt budget and
 * their attempts kept, newest first, at most `--limit` per call; the output
 * says how many and whether more remain. Every flag is checked before
 * anything is sent (exit 2, naming the flag).
 */
import { parseDuration } from '../../protocol/duration.js';
import { DEFAULT_RERUN_LIMIT, MAX_ATTEMPTS_LIMIT, MAX_RERUN_LIMIT } from '../../protocol/limits.js';
import { queueNameProblem } from '../../protocol/queue-names.js';
import type { RerunOptions } from '../../client/rerun.js';
import type { CommandOutput, CommandContext, CommandSpec } from './command.js';
import { timeMs } from './shared.js';
import { UsageError } from '../flags.js';

/** `--since`: a time (ISO 8601 with an offset, or epoch ms), or a duration with a unit (that long ago). */
function sinceMs(text: string, nowMs: number): number {
  const trimmed = text.trim();
  if (/^[0-9]{1,15}(ms|s|m|h|d)$/.test(trimmed)) {
    const parsed = parseDuration(trimmed);
    if ('error' in parsed) throw new UsageError(`--since: ${parsed.error}`);
    return Math.max(0, nowMs - parsed.ms);
  }
  return timeMs(trimmed, '--since');
}

async function runRerun(ctx: CommandContext): Promise<CommandOutput> {
  const { values } = ctx;
  if (ctx.args.length > 0) throw new UsageError('rerun takes no arguments; select with flags');
  const queue = values.string('queue');
  const problem = queueNameProblem(queue);
  if (problem !== null) throw new UsageError(`--queue: queue name ${problem}`);
  const state = values.optionalString('state')?.trim().toUpperCase() ?? 'FAILED';
  if (state !== 'FAILED') {
    throw new UsageError(`--state: only FAILED jobs can be re-run, got ${JSON.stringify(state)}`);
  }
  const taskType = values.optionalString('type');
  if (taskType !== undefined && taskType.length === 0) {
    throw new UsageError('--type: a task type is 1 or more characters');
  }
  const since = values.optionalString('since');
  const limit = values.optionalInt('limit');
  const maxAttempts = values.optionalInt('max-attempts');
  const options: RerunOptions = {
    queue,
    state: 'FAILED',
    ...(taskType !== undefined && { taskType }),
    ...(since !== undefined && { since: sinceMs(since, Date.now()) }),
    ...(limit !== undefined && { limit }),
    ...(maxAttempts !== undefined && { maxAttempts }),
  };
  const result = await (await ctx.client()).rerun(options);
  const jobs = `${result.rerun} FAILED job${result.rerun === 1 ? '' : 's'}`;
  const rest = result.more ? '; more remain: run it again for the next ones' : '';
  return {
    json: { rerun: result.rerun, jobIds: result.jobIds, more: result.more, queue },
    human: `Re-ran ${jobs} of queue ${queue}${rest}\n${result.jobIds.map((id) => `${id}\n`).join('')}`,
  };
}

export const RERUN_COMMAND: CommandSpec = {
  name: 'rerun',
  summary: 're-run the FAILED jobs of a queue (fresh attempts, history kept), newest first',
  args: [],
  flags: [
    { name: 'queue', type: 'string', required: true, placeholder: 'name', help: 'the queue' },
    {
      name: 'state',
      type: 'string',
      placeholder: 'FAILED',
      defaultLabel: 'FAILED',
      help: 'the state to re-run: only FAILED',
    },
    {
      name: 'type',
      type: 'string',
      placeholder: 'task-type',
      help: 'only jobs of this task type, as stored (e.g. SHA256)',
    },
    {
      name: 'since',
      type: 'string',
      placeholder: 'time|duration',
      help: 'only jobs that failed at or after this time (ISO 8601 with an offset, epoch ms), or within this long (30m, 12h, 7d)',
    },
    {
      name: 'limit',
      type: 'int',
      min: 1,
      max: MAX_RERUN_LIMIT,
      default: DEFAULT_RERUN_LIMIT,
      help: 'at most this many jobs in this call',
    },
    {
      name: 'max-attempts',
      type: 'int',
      min: 1,
      max: MAX_ATTEMPTS_LIMIT,
      defaultLabel: "the coordinator's",
      help: 'attempts each job may make from now',
    },
  ],
  run: runRerun,
};
