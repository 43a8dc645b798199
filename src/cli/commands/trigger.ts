/**
 * `trigger set|list|delete`: the triggers that turn each event of a name into
 * a job, through the client library (`client.triggers`). Bad input (an
 * unknown action, a bad name, a missing `--event` or `--task`, a definition
 * flag with anything but `set`) is exit 2 before connecting.
 */
import type { TriggerOptions, TriggerSnapshot } from '../../client/signals.js';
import { MAX_ATTEMPTS_LIMIT } from '../../protocol/limits.js';
import { PRIORITIES } from '../../protocol/messages.js';
import { queueNameProblem } from '../../protocol/queue-names.js';
import { UsageError } from '../flags.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { queueFlag } from './shared.js';

const ACTIONS = ['set', 'list', 'delete'] as const;
type Action = (typeof ACTIONS)[number];
const SET_FLAGS = ['event', 'task', 'queue', 'priority', 'max-attempts'] as const;

/** The `--json` object of a trigger: the definition, then when it was made and changed. */
export function triggerJson(t: TriggerSnapshot): Record<string, unknown> {
  return {
    name: t.name,
    event: t.event,
    taskType: t.taskType,
    queue: t.queue,
    priority: t.priority,
    maxAttempts: t.maxAttempts,
    createdAtMillis: t.createdAtMillis,
    updatedAtMillis: t.updatedAtMillis,
  };
}

export function triggerLine(t: TriggerSnapshot): string {
  const extra = [
    t.priority === null ? '' : `  priority ${t.priority}`,
    t.maxAttempts === null ? '' : `  max-attempts ${t.maxAttempts}`,
  ].join('');
  return `${t.name}  event ${t.event}  task ${t.taskType}  queue ${t.queue}${extra}\n`;
}

function nameArg(ctx: CommandContext, action: Action): string {
  const name = ctx.args[1];
  if (name === undefined || name === '') throw new UsageError(`trigger ${action}: missing <name>`);
  const problem = queueNameProblem(name);
  if (problem !== null) throw new UsageError(`trigger ${action}: <name> ${problem}`);
  return name;
}

/** The definition `set` sends, checked here first (exit 2 names the flag). */
function definitionOf(ctx: CommandContext, name: string): TriggerOptions {
  const { values } = ctx;
  const event = values.optionalString('event');
  if (event === undefined) throw new UsageError('trigger set: missing --event <name>');
  const eventProblem = queueNameProblem(event);
  if (eventProblem !== null) throw new UsageError(`--event: event name ${eventProblem}`);
  const taskType = values.optionalString('task');
  if (taskType === undefined || taskType === '') {
    throw new UsageError('trigger set: missing --task <type>');
  }
  const queue = queueFlag(values, 'queue');
  const priority = values.optionalEnum('priority', PRIORITIES);
  const maxAttempts = values.optionalInt('max-attempts');
  return {
    name,
    event,
    taskType,
    ...(queue !== undefined && { queue }),
    ...(priority !== undefined && { priority }),
    ...(maxAttempts !== undefined && { maxAttempts }),
  };
}

async function runTrigger(ctx: CommandContext): Promise<CommandOutput> {
  const action = ctx.args[0] as Action | undefined;
  if (action === undefined || !ACTIONS.includes(action)) {
    throw new UsageError(
      `trigger: expected one of ${ACTIONS.join(', ')}, got ${JSON.stringify(action ?? '')}`,
    );
  }
  if (action !== 'set') {
    const stray = SET_FLAGS.find((flag) => ctx.values.has(flag));
    if (stray !== undefined) throw new UsageError(`--${stray} goes with trigger set only`);
  }
  if (action === 'list') {
    if (ctx.args.length > 1) throw new UsageError('trigger list takes no name');
    const triggers = await (await ctx.client()).triggers.list();
    return {
      json: { triggers: triggers.map(triggerJson) },
      human: triggers.length === 0 ? 'No triggers\n' : triggers.map(triggerLine).join(''),
    };
  }
  const name = nameArg(ctx, action);
  if (action === 'set') {
    // Checked before connecting: bad input is exit 2 with nothing sent.
    const definition = definitionOf(ctx, name);
    const trigger = await (await ctx.client()).triggers.set(definition);
    return { json: triggerJson(trigger), human: triggerLine(trigger) };
  }
  const deleted = await (await ctx.client()).triggers.delete(name);
  return {
    json: { name, deleted },
    human: deleted ? `Deleted trigger ${name}\n` : `No trigger ${name}; nothing deleted\n`,
  };
}

export const TRIGGER_COMMAND: CommandSpec = {
  name: 'trigger',
  summary: 'triggers: each event of a name creates a job (trigger set <name> --event e --task t)',
  args: [
    { name: 'action', help: ACTIONS.join('|') },
    { name: 'name', help: 'the trigger (not for list)', optional: true },
  ],
  flags: [
    { name: 'event', type: 'string', placeholder: 'name', help: 'set: the event it listens to' },
    {
      name: 'task',
      type: 'string',
      placeholder: 'type',
      help: "set: the task type of the jobs it creates (their payload is the event's)",
    },
    {
      name: 'queue',
      type: 'string',
      placeholder: 'q',
      defaultLabel: 'default',
      help: 'set: the named queue of its jobs',
    },
    { name: 'priority', type: 'enum', values: PRIORITIES, help: 'set: priority of its jobs' },
    {
      name: 'max-attempts',
      type: 'int',
      min: 1,
      max: MAX_ATTEMPTS_LIMIT,
      help: "set: attempts of each job (default: the coordinator's)",
    },
  ],
  run: runTrigger,
};
