/** `submit-many --file <jobs.ndjson | ->`: see ../submit-many.ts for the lines and the batches. */
import { MAX_BATCH_JOBS } from '../../protocol/messages.js';
import { UsageError } from '../flags.js';
import { errorDocument, exitCodeFor, formatErrorText } from '../output.js';
import {
  LINE_FIELDS,
  describeStop,
  parseJobLines,
  stopFields,
  submitInBatches,
} from '../submit-many.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { SUBMIT_FLAGS } from './submit.js';
import { describeRetry } from './shared.js';

async function runSubmitMany(ctx: CommandContext): Promise<CommandOutput> {
  const { values } = ctx;
  const file = values.string('file');
  let text: string;
  try {
    text = await ctx.readInput(file);
  } catch (err) {
    throw new UsageError(`cannot read --file ${file}: ${(err as Error).message}`);
  }
  const jobs = parseJobLines(text, values.optionalInt('from-line') ?? 1);
  const outcome = await submitInBatches(await ctx.client(), jobs, {
    retries: values.int('submit-retries'),
    baseDelayMs: values.int('submit-retry-base-millis'),
    maxDelayMs: values.int('submit-retry-max-millis'),
    onRetry: (event, batch) =>
      ctx.note(`Lines ${batch.fromLine}..${batch.toLine}: ${describeRetry(event)}`),
  });
  const ids = outcome.jobIds.map((id) => `${id}\n`).join('');
  const deduplicated = outcome.deduplicatedLines;
  if (deduplicated.length > 0) {
    ctx.note(
      `Deduplicated (an existing job's id given, nothing created): lines ${deduplicated.join(', ')}\n`,
    );
  }
  const stopped = outcome.stopped;
  if (stopped === null) return { json: { jobIds: outcome.jobIds }, human: ids };
  const { fromLine, toLine } = stopped.batch;
  const refused = `batch of lines ${fromLine}..${toLine} was refused`;
  ctx.note(`The ${refused}:\n${formatErrorText(stopped.error)}${describeStop(outcome, stopped)}`);
  const { error } = errorDocument(stopped.error);
  return {
    json: {
      error: { ...error, message: `the ${refused}: ${error.message}` },
      jobIds: outcome.jobIds,
      ...stopFields(stopped),
    },
    human: ids,
    exitCode: exitCodeFor(stopped.error),
  };
}

export const SUBMIT_MANY_COMMAND: CommandSpec = {
  name: 'submit-many',
  summary: `submit jobs from a file of JSON lines, ${MAX_BATCH_JOBS.toLocaleString('en')} per atomic batch`,
  args: [],
  flags: [
    {
      name: 'file',
      type: 'string',
      required: true,
      placeholder: 'jobs.ndjson|-',
      help:
        `one job a line: {"taskType": …, "payload": {…}} and optionally ${LINE_FIELDS.slice(2).join(', ')}; ` +
        '- = standard input',
    },
    {
      name: 'from-line',
      type: 'int',
      min: 1,
      max: 1_000_000_000,
      default: 1,
      help: 'start at this line of the file (the earlier ones are skipped): to go on after a refused batch',
    },
    ...SUBMIT_FLAGS.filter((flag) => flag.name.startsWith('submit-retr')),
  ],
  run: runSubmitMany,
};
