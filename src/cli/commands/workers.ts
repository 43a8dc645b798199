/** `workers`: the live workers, and the leader that answered when coordinators share PostgreSQL. */
import { formatWorkerTable } from '../output.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';

async function runWorkers(ctx: CommandContext): Promise<CommandOutput> {
  const { workers, leader, epoch } = await (await ctx.client()).workerList();
  // `leader` and `epoch` only where coordinators share PostgreSQL (additive).
  const led = leader !== null && epoch !== null;
  return {
    json: { workers, ...(led && { leader, epoch }) },
    human: formatWorkerTable(workers) + (led ? `Leader: ${leader} (epoch ${epoch})\n` : ''),
  };
}

export const WORKERS_COMMAND: CommandSpec = {
  name: 'workers',
  summary: 'list live workers',
  args: [],
  flags: [],
  run: runWorkers,
};
