/**
 * `queue list|pause|resume|set <name>`: the named queues and their settings,
 * through the client library (`client.queues`). A pause or resume of a name
 * that no job or setting has yet may be refused by the coordinator
 * (`UNKNOWN_QUEUE`, exit 1) unless `--create`; a pause that makes a new
 * queue says so on stderr. Bad limits are exit 2 before anything is sent.
 */
import type { ChangedQueue, QueueInfo, QueueLimits, RateLimit } from '../../client/queues.js';
import { formatDurationMs } from '../../protocol/duration.js';
import {
  MAX_QUEUE_CONCURRENCY,
  concurrencyProblem,
  parseRate,
  queueNameProblem,
} from '../../protocol/queue-names.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { UsageError, type FlagValues } from '../flags.js';

const QUEUE_ACTIONS = ['list', 'pause', 'resume', 'set'] as const;
type QueueAction = (typeof QUEUE_ACTIONS)[number];

/** `--concurrency n|none` and the like: a value, null (`none`: clear), or undefined (left out). */
function limitFlag(values: FlagValues, flag: string): number | null | undefined {
  const text = values.optionalString(flag);
  if (text === undefined) return undefined;
  if (text.trim().toLowerCase() === 'none') return null;
  const n = /^-?[0-9]{1,7}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (concurrencyProblem(n) !== null) {
    throw new UsageError(
      `--${flag}: expected an integer 1..${MAX_QUEUE_CONCURRENCY} or none, got ${JSON.stringify(text.slice(0, 40))}`,
    );
  }
  return n;
}

function rateFlag(values: FlagValues, flag: string): RateLimit | null | undefined {
  const text = values.optionalString(flag);
  if (text === undefined) return undefined;
  if (text.trim().toLowerCase() === 'none') return null;
  const parsed = parseRate(text);
  if ('error' in parsed) throw new UsageError(`--${flag}: ${parsed.error}`);
  return parsed.rate;
}

/** The `--json` object of a queue (the contract's fields, then the extra ones). */
function queueJson(q: ChangedQueue): Record<string, unknown> {
  return {
    name: q.name,
    paused: q.paused,
    concurrency: q.concurrency,
    rateLimit: q.rateLimit,
    groupConcurrency: q.groupConcurrency,
    groupRateLimit: q.groupRateLimit,
    counts: q.counts,
    ...(q.running !== undefined && q.running !== null && { running: q.running }),
    ...(q.groups !== undefined && q.groups !== null && { groups: q.groups }),
    ...(q.created === true && { created: true }),
  };
}

const rateText = (r: RateLimit | null): string =>
  r === null ? '-' : `${r.max}/${formatDurationMs(r.intervalMillis).replace(' ', '')}`;

function queueLine(q: QueueInfo): string {
  const counts = Object.entries(q.counts)
    .map(([state, n]) => `${state}=${n}`)
    .join(' ');
  const limits = [
    `concurrency ${q.concurrency ?? '-'}`,
    `rate ${rateText(q.rateLimit)}`,
    `group-concurrency ${q.groupConcurrency ?? '-'}`,
    `group-rate ${rateText(q.groupRateLimit)}`,
  ].join(', ');
  return `${q.name}${q.paused ? ' (paused)' : ''}: ${limits}; ${counts === '' ? 'no jobs' : counts}\n`;
}

/** `queue list|pause|resume|set <name>`. */
async function runQueue(ctx: CommandContext): Promise<CommandOutput> {
  const action = ctx.args[0];
  if (action === undefined || !(QUEUE_ACTIONS as readonly string[]).includes(action)) {
    throw new UsageError(
      `queue: expected one of ${QUEUE_ACTIONS.join(', ')}, got ${JSON.stringify(action ?? '')}`,
    );
  }
  const { values } = ctx;
  const limitFlags = ['concurrency', 'rate', 'group-concurrency', 'group-rate'];
  if (action !== 'set') {
    const stray = limitFlags.find((flag) => values.has(flag));
    if (stray !== undefined) throw new UsageError(`--${stray} goes with queue set only`);
  }
  if (values.bool('create') && action !== 'pause' && action !== 'resume') {
    throw new UsageError('--create goes with queue pause and queue resume only');
  }
  if (action === 'list') {
    if (ctx.args.length > 1) throw new UsageError('queue list takes no name');
    const queues = await (await ctx.client()).queues.list();
    return {
      json: { queues: queues.map(queueJson) },
      human: queues.length === 0 ? 'No queues\n' : queues.map(queueLine).join(''),
    };
  }
  const name = ctx.args[1];
  if (name === undefined) throw new UsageError(`queue ${action}: missing <name>`);
  const problem = queueNameProblem(name);
  if (problem !== null) throw new UsageError(`queue ${action}: queue name ${problem}`);
  if (ctx.args.length > 2) throw new UsageError(`queue ${action} takes one name`);
  const q = await changeQueue(ctx, action as Exclude<QueueAction, 'list'>, name);
  if (q.created === true) {
    ctx.note(`Note: queue ${name} had no jobs and no settings; it is a new queue now\n`);
  }
  return { json: queueJson(q), human: queueLine(q) };
}

async function changeQueue(
  ctx: CommandContext,
  action: Exclude<QueueAction, 'list'>,
  name: string,
): Promise<ChangedQueue> {
  // Bad limits are exit 2 before connecting.
  const limits = action === 'set' ? limitsOf(ctx.values) : {};
  const queues = (await ctx.client()).queues;
  const options = { create: ctx.values.bool('create') };
  if (action === 'pause') return queues.pause(name, options);
  if (action === 'resume') return queues.resume(name, options);
  return queues.set(name, limits);
}

function limitsOf(values: FlagValues): QueueLimits {
  const concurrency = limitFlag(values, 'concurrency');
  const rateLimit = rateFlag(values, 'rate');
  const groupConcurrency = limitFlag(values, 'group-concurrency');
  const groupRateLimit = rateFlag(values, 'group-rate');
  return {
    ...(concurrency !== undefined && { concurrency }),
    ...(rateLimit !== undefined && { rateLimit }),
    ...(groupConcurrency !== undefined && { groupConcurrency }),
    ...(groupRateLimit !== undefined && { groupRateLimit }),
  };
}

export const QUEUE_COMMAND: CommandSpec = {
  name: 'queue',
  summary: 'named queues: list, pause, resume, or set limits (queue set <name> --rate 10/1s)',
  args: [
    { name: 'action', help: 'list, pause, resume or set' },
    { name: 'name', help: 'the queue (not for list)', optional: true },
  ],
  flags: [
    {
      name: 'concurrency',
      type: 'string',
      placeholder: 'n|none',
      help: 'at most n attempts of the queue hold a lease at once (1..100000)',
    },
    {
      name: 'rate',
      type: 'string',
      placeholder: 'n/duration|none',
      help: 'at most n attempt starts in any window of the duration (10/1s, 200/500ms, 1000/1h)',
    },
    {
      name: 'group-concurrency',
      type: 'string',
      placeholder: 'n|none',
      help: 'the same as --concurrency, for each group key',
    },
    {
      name: 'group-rate',
      type: 'string',
      placeholder: 'n/duration|none',
      help: 'the same as --rate, for each group key',
    },
    {
      name: 'create',
      type: 'boolean',
      help: 'pause or resume a queue that has no job and no setting yet',
    },
  ],
  run: runQueue,
};
