/** `cancel <job-id>`. */
import { formatCancel } from '../output.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { JOB_ID_ARG, jobId, withQueueFields } from './shared.js';

async function runCancel(ctx: CommandContext): Promise<CommandOutput> {
  const id = jobId(ctx);
  const { cancelled, job } = await (await ctx.client()).cancel(id);
  return {
    json: { cancelled, job: withQueueFields(job) },
    human: formatCancel(cancelled, job, ctx.color),
  };
}

export const CANCEL_COMMAND: CommandSpec = {
  name: 'cancel',
  summary: 'cancel a job that is not terminal yet',
  args: JOB_ID_ARG,
  flags: [],
  run: runCancel,
};
