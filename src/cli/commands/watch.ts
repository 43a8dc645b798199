/** `watch <job-id>`: the job now, then each change pushed by the coordinator until it ends. */
import type { JobSnapshot } from '../../protocol/messages.js';
import { EXIT_CODES, formatJobBlock } from '../output.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { JOB_ID_ARG, eventDoc, eventLine, gapNote, jobId, waitExitCode } from './shared.js';

async function runWatch(ctx: CommandContext): Promise<CommandOutput> {
  const id = jobId(ctx);
  const client = await ctx.client();
  let last: JobSnapshot | null = null;
  for await (const item of client.watch(id, { onGap: (gap) => ctx.warn(gapNote(gap)) })) {
    last = item.job;
    const human =
      item.event === 'current' ? formatJobBlock(item.job, { color: ctx.color }) : eventLine(item);
    ctx.emit(eventDoc(item), human);
  }
  return {
    json: null,
    human: '',
    streamed: true,
    exitCode: last === null ? EXIT_CODES.ok : waitExitCode(last, ctx.values.bool('exit-status')),
  };
}

export const WATCH_COMMAND: CommandSpec = {
  name: 'watch',
  summary: 'show a job now, then each change (state, attempt, progress) until it is terminal',
  args: JOB_ID_ARG,
  flags: [
    {
      name: 'exit-status',
      type: 'boolean',
      help: 'exit 4 when the job ended FAILED or CANCELLED',
    },
  ],
  run: runWatch,
};
