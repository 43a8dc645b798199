/** `list [--state S] [--queue q] [--limit n] [--cursor c]`: one page of jobs, newest first. */
import { JOB_STATES } from '../../protocol/messages.js';
import { formatJobTable } from '../output.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { queueFlag, withQueueFields } from './shared.js';

async function runList(ctx: CommandContext): Promise<CommandOutput> {
  const { values } = ctx;
  const limit = values.optionalInt('limit');
  const state = values.optionalEnum('state', JOB_STATES);
  const cursor = values.optionalString('cursor');
  const queue = queueFlag(values, 'queue');
  const page = await (
    await ctx.client()
  ).listPage({
    ...(limit !== undefined && { limit }),
    ...(state !== undefined && { state }),
    ...(cursor !== undefined && { cursor }),
    ...(queue !== undefined && { queue }),
  });
  return {
    json: { jobs: page.jobs.map(withQueueFields), nextCursor: page.nextCursor },
    human: formatJobTable(page.jobs, page.nextCursor, ctx.color),
  };
}

export const LIST_COMMAND: CommandSpec = {
  name: 'list',
  summary: 'list jobs, newest first',
  args: [],
  flags: [
    {
      name: 'limit',
      type: 'int',
      min: 1,
      max: 100_000,
      defaultLabel: "the coordinator's page",
      help: 'page size',
    },
    { name: 'state', type: 'enum', values: JOB_STATES, help: 'only jobs in this state' },
    {
      name: 'cursor',
      type: 'string',
      placeholder: 'cursor',
      help: 'continue after a previous page',
    },
    { name: 'queue', type: 'string', placeholder: 'name', help: 'only jobs of this queue' },
  ],
  run: runList,
};
