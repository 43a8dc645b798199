/** `purge --state S --older-than D`: deletes terminal jobs that finished long enough ago. */
import { parseDuration } from '../../protocol/duration.js';
import { TERMINAL_STATES } from '../../protocol/messages.js';
import { UsageError } from '../flags.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';

/** `purge --state S --older-than D`: terminal states only; D like 30m, 12h, 7d. */
async function runPurge(ctx: CommandContext): Promise<CommandOutput> {
  const state = ctx.values.enum('state', TERMINAL_STATES);
  const text = ctx.values.string('older-than');
  const parsed = parseDuration(text);
  if ('error' in parsed) throw new UsageError(`--older-than: ${parsed.error}`);
  const deleted = await (await ctx.client()).purge(state, parsed.ms);
  return {
    json: { deleted, state, olderThanMillis: parsed.ms },
    human: `Purged ${deleted} ${state} job${deleted === 1 ? '' : 's'} finished more than ${text.trim()} ago\n`,
  };
}

export const PURGE_COMMAND: CommandSpec = {
  name: 'purge',
  summary: 'delete terminal jobs (and their attempts) that finished long enough ago',
  args: [],
  flags: [
    {
      name: 'state',
      type: 'enum',
      values: TERMINAL_STATES,
      required: true,
      help: 'COMPLETED, FAILED or CANCELLED, any case',
    },
    {
      name: 'older-than',
      type: 'string',
      required: true,
      placeholder: 'duration',
      help: 'finished at least this long ago: 30m, 12h, 7d (units ms, s, m, h, d)',
    },
  ],
  run: runPurge,
};
