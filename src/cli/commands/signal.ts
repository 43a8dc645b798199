/**
 * `signal <job-id> <name> [--payload <json>]`: a signal to one job, through
 * the client library (`client.signal`). A bad name or payload is exit 2
 * before connecting; an unknown or terminal job, or one that holds too many
 * signals, is the coordinator's `ERROR` (exit 1).
 */
import { signalNameProblem, type SignalResult } from '../../client/signals.js';
import { UsageError } from '../flags.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { JSON_VALUE_FLAGS, jobId, jsonValueOf } from './shared.js';

/** The `--json` document: exactly the reply's four fields. */
export function signalJson(result: SignalResult): Record<string, unknown> {
  return {
    jobId: result.jobId,
    name: result.name,
    resumed: result.resumed,
    signalsHeld: result.signalsHeld,
  };
}

export function signalText(result: SignalResult): string {
  const sent = `Signal ${result.name} sent to job ${result.jobId}`;
  if (result.resumed) return `${sent}: the job was waiting for it and runs again\n`;
  const held = result.signalsHeld === 1 ? '1 signal' : `${result.signalsHeld} signals`;
  return `${sent}: held until the job waits for it (${held} held)\n`;
}

async function runSignal(ctx: CommandContext): Promise<CommandOutput> {
  const id = jobId(ctx);
  const name = ctx.args[1];
  if (name === undefined || name === '') throw new UsageError('signal: missing <name>');
  const problem = signalNameProblem(name);
  if (problem !== null) throw new UsageError(`signal: <name> ${problem}`);
  const payload = await jsonValueOf(ctx);
  const result = await (await ctx.client()).signal(id, name, payload);
  return { json: signalJson(result), human: signalText(result) };
}

export const SIGNAL_COMMAND: CommandSpec = {
  name: 'signal',
  summary: 'send a signal to a job (its handler takes it with ctx.waitForSignal)',
  args: [
    { name: 'job-id', help: 'the job' },
    { name: 'name', help: 'the signal name (as a queue name)' },
  ],
  flags: JSON_VALUE_FLAGS,
  run: runSignal,
};
