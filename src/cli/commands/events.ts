/** `events [--queue q] [--type T]`: every matching job's changes, until interrupted. */
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { eventDoc, eventLine, gapNote } from './shared.js';

async function runEvents(ctx: CommandContext): Promise<CommandOutput> {
  const client = await ctx.client();
  const queue = ctx.values.optionalString('queue');
  const taskType = ctx.values.optionalString('type');
  const filter = {
    ...(queue !== undefined && { queue }),
    ...(taskType !== undefined && { taskType }),
  };
  for await (const item of client.events(filter, { onGap: (gap) => ctx.warn(gapNote(gap)) })) {
    ctx.emit(eventDoc(item), eventLine(item));
  }
  return { json: null, human: '', streamed: true };
}

export const EVENTS_COMMAND: CommandSpec = {
  name: 'events',
  summary: "stream every matching job's changes (a new job is a state event) until interrupted",
  args: [],
  flags: [
    { name: 'queue', type: 'string', placeholder: 'queue', help: 'only jobs of this queue' },
    {
      name: 'type',
      type: 'string',
      placeholder: 'task-type',
      help: 'only jobs of this task type, as stored (e.g. WORD_COUNT)',
    },
  ],
  run: runEvents,
};
