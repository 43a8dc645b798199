/** `wait <job-id>`: held until the job is terminal (or the timeout passes). */
import { MAX_TIMER_MS } from '../../common/bounds.js';
import { formatJobBlock } from '../output.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { JOB_ID_ARG, jobId, waitExitCode, withQueueFields } from './shared.js';

async function runWait(ctx: CommandContext): Promise<CommandOutput> {
  const id = jobId(ctx);
  const job = await (await ctx.client()).wait(id, ctx.values.int('timeout-millis'));
  return {
    json: withQueueFields(job),
    human: formatJobBlock(job, { color: ctx.color }),
    exitCode: waitExitCode(job, ctx.values.bool('exit-status')),
  };
}

export const WAIT_COMMAND: CommandSpec = {
  name: 'wait',
  summary: 'wait until a job is terminal (COMPLETED, FAILED or CANCELLED)',
  args: JOB_ID_ARG,
  flags: [
    {
      name: 'timeout-millis',
      type: 'int',
      min: 0,
      max: MAX_TIMER_MS,
      default: 900_000,
      help: 'give up after this long, exit 1',
    },
    {
      name: 'exit-status',
      type: 'boolean',
      help: 'exit 4 when the job ended FAILED or CANCELLED',
    },
  ],
  run: runWait,
};
