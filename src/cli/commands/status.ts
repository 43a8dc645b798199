/** `status <job-id> [--attempts]`: a job's snapshot, and its attempts on demand. */
import type { DtpClient } from '../../client/client.js';
import { RemoteError } from '../../client/errors.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { JobSnapshot, JobState } from '../../protocol/messages.js';
import { formatAttempts, formatJobBlock } from '../output.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { JOB_ID_ARG, jobId, withQueueFields } from './shared.js';

/**
 * `status`; with `--attempts` the `--json` snapshot's `attempts` becomes the
 * array of attempts (as documented) and `attemptCount` keeps the number.
 */
async function runStatus(ctx: CommandContext): Promise<CommandOutput> {
  const id = jobId(ctx);
  const client = await ctx.client();
  if (!ctx.values.bool('attempts')) {
    const job = await client.status(id);
    const parentStates = await parentStatesOf(client, job);
    return {
      json: withQueueFields(job),
      human: formatJobBlock(job, { color: ctx.color, parentStates }),
    };
  }
  const { job, attempts } = await client.status(id, { attempts: true });
  return {
    json: { ...withQueueFields(job), attemptCount: job.attempts, attempts },
    human: formatAttempts(job, attempts, ctx.color),
  };
}

/** Parents whose states a WAITING job's block shows (the first ones, one request each). */
const PARENT_STATES_SHOWN = 10;

/** The states of a WAITING job's first parents (null: no longer known); empty otherwise. */
async function parentStatesOf(
  client: DtpClient,
  job: JobSnapshot,
): Promise<Map<string, JobState | null>> {
  const states = new Map<string, JobState | null>();
  if (job.state !== 'WAITING') return states;
  const shown = (job.dependsOn ?? []).slice(0, PARENT_STATES_SHOWN);
  const found = await Promise.all(
    shown.map((parent) =>
      client.status(parent).then(
        (snapshot) => snapshot.state,
        (err: unknown) => {
          if (err instanceof RemoteError && err.code === ErrorCode.UnknownJob) return null;
          throw err;
        },
      ),
    ),
  );
  for (const [i, parent] of shown.entries()) states.set(parent, found[i] ?? null);
  return states;
}

export const STATUS_COMMAND: CommandSpec = {
  name: 'status',
  summary: "show a job's current state",
  args: JOB_ID_ARG,
  flags: [
    {
      name: 'attempts',
      type: 'boolean',
      help: 'also show every attempt: worker, start, duration, outcome, error',
    },
  ],
  run: runStatus,
};
