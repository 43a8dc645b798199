/**
 * `publish <name> [--payload <json>] [--key <k>] [--event-id <id>]`: an
 * event, through the client library (`client.publish`): its triggers create
 * their jobs and the jobs waiting for it wake. Bad input is exit 2 before
 * connecting. An event id published before does nothing again: the first
 * reply is printed, with a note on stderr.
 */
import { eventIdProblem, signalNameProblem, type PublishResult } from '../../client/signals.js';
import { UsageError, type FlagValues } from '../flags.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { JSON_VALUE_FLAGS, jsonValueOf } from './shared.js';

/** The `--json` document: `eventId`, `jobIds`, `resumed`, and `duplicate` only when true. */
export function publishJson(result: PublishResult): Record<string, unknown> {
  return {
    eventId: result.eventId,
    jobIds: result.jobIds,
    resumed: result.resumed,
    ...(result.duplicate && { duplicate: true }),
  };
}

const count = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`;

export function publishText(result: PublishResult): string {
  const created =
    result.jobIds.length === 0
      ? 'no job created'
      : `${count(result.jobIds.length, 'job', 'jobs')} created (${result.jobIds.join(', ')})`;
  const woke = `${count(result.resumed, 'waiting job', 'waiting jobs')} woken`;
  return `Published event ${result.eventId}: ${created}, ${woke}\n`;
}

function idFlag(values: FlagValues, flag: string): string | undefined {
  const value = values.optionalString(flag);
  const problem = value === undefined ? null : eventIdProblem(value);
  if (problem !== null) throw new UsageError(`--${flag} ${problem}`);
  return value;
}

async function runPublish(ctx: CommandContext): Promise<CommandOutput> {
  const name = ctx.args[0];
  if (name === undefined || name === '') throw new UsageError('publish: missing <name>');
  const problem = signalNameProblem(name);
  if (problem !== null) throw new UsageError(`publish: <name> ${problem}`);
  const key = idFlag(ctx.values, 'key');
  const eventId = idFlag(ctx.values, 'event-id');
  const payload = await jsonValueOf(ctx);
  const result = await (
    await ctx.client()
  ).publish(name, payload, {
    ...(key !== undefined && { key }),
    ...(eventId !== undefined && { eventId }),
  });
  if (result.duplicate) {
    ctx.note(
      `Note: event ${result.eventId} was published before; nothing was done again (its first reply follows)\n`,
    );
  }
  return { json: publishJson(result), human: publishText(result) };
}

export const PUBLISH_COMMAND: CommandSpec = {
  name: 'publish',
  summary: 'publish an event: its triggers create jobs, jobs waiting for it wake',
  args: [{ name: 'name', help: 'the event name (as a queue name)' }],
  flags: [
    ...JSON_VALUE_FLAGS,
    {
      name: 'key',
      type: 'string',
      placeholder: 'k',
      help: 'wake only waits for this key (and those for any key); 1..256 characters',
    },
    {
      name: 'event-id',
      type: 'string',
      placeholder: 'id',
      defaultLabel: 'one the coordinator makes',
      help: 'the event id, 1..256 characters; the same id again does nothing',
    },
  ],
  run: runPublish,
};
