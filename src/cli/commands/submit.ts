/**
 * `submit`: a task type, one of the built-in shortcuts with its own flag
 * (`submit sha256 --text abc`, shortcuts.ts), or any task type with a JSON
 * payload (`submit resize --payload '{"width":80}'`, `--payload-file f`,
 * `-` = stdin), and the options of the job as flags, each checked before
 * anything is sent (exit 2 naming the flag).
 */
import { checkSubmitSize } from '../../client/client.js';
import type { SubmitResult } from '../../client/client.js';
import {
  DEFAULT_SUBMIT_RETRY_BASE_DELAY_MS,
  DEFAULT_SUBMIT_RETRY_MAX_DELAY_MS,
} from '../../client/submit-retry.js';
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_PARENTS,
  MAX_TASK_TIMEOUT_MS,
  MIN_TASK_TIMEOUT_MS,
} from '../../protocol/limits.js';
import { PARENT_FAILURE_POLICIES, PRIORITIES } from '../../protocol/messages.js';
import type { JsonObject } from '../../protocol/messages.js';
import { DEFAULT_QUEUE } from '../../protocol/queue-names.js';
import { UsageError, type FlagSpec } from '../flags.js';
import { formatJobBlock } from '../output.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';
import { describeRetry, withQueueFields } from './shared.js';
import { suggestShortcut, type TaskSpec } from './shortcuts.js';
import { DEDUP_FLAGS, requestOfFlags } from './job-flags.js';

export const SUBMIT_FLAGS: readonly FlagSpec[] = [
  {
    name: 'max-attempts',
    type: 'int',
    min: 1,
    max: MAX_ATTEMPTS_LIMIT,
    defaultLabel: "the coordinator's",
    help: 'attempts allowed',
  },
  {
    name: 'priority',
    type: 'enum',
    values: PRIORITIES,
    defaultLabel: 'NORMAL',
    help: 'base priority, any case',
  },
  {
    name: 'idempotency-key',
    type: 'string',
    placeholder: 'key',
    help: 'resubmitting the same key returns the original job',
  },
  {
    name: 'task-timeout-millis',
    type: 'int',
    min: MIN_TASK_TIMEOUT_MS,
    max: MAX_TASK_TIMEOUT_MS,
    defaultLabel: "the coordinator's",
    help: "this job's execution deadline per attempt",
  },
  {
    name: 'depends-on',
    type: 'string',
    placeholder: 'id[,id...]',
    help: `WAITING until these jobs (at most ${MAX_PARENTS}) COMPLETED`,
  },
  {
    name: 'on-parent-failure',
    type: 'enum',
    values: PARENT_FAILURE_POLICIES,
    defaultLabel: 'cancel',
    help: 'what a parent that FAILED or was CANCELLED does to the job',
  },
  {
    name: 'submit-retries',
    type: 'int',
    min: 0,
    max: 1000,
    default: 0,
    help: 'retries of a retryable SUBMIT_REJECTED',
  },
  {
    name: 'submit-retry-base-millis',
    type: 'int',
    min: 0,
    max: 3_600_000,
    default: DEFAULT_SUBMIT_RETRY_BASE_DELAY_MS,
    help: 'back-off ceiling of the first retry',
  },
  {
    name: 'submit-retry-max-millis',
    type: 'int',
    min: 0,
    max: 3_600_000,
    default: DEFAULT_SUBMIT_RETRY_MAX_DELAY_MS,
    help: 'back-off ceiling of every retry',
  },
  {
    name: 'queue',
    type: 'string',
    placeholder: 'name',
    defaultLabel: 'default',
    help: 'the named queue',
  },
  {
    name: 'group',
    type: 'string',
    placeholder: 'key',
    help: 'group key within the queue (tenant, customer): fairness and group limits',
  },
  {
    name: 'delay',
    type: 'string',
    placeholder: 'duration',
    help: 'run no earlier than this from now: 500ms, 30s, 5m, 2h, 1d (a bare number is ms; at most 366d)',
  },
  {
    name: 'run-at',
    type: 'string',
    placeholder: 'time',
    help: 'run no earlier than this time: ISO 8601 with an offset, or epoch ms (past = now)',
  },
  ...DEDUP_FLAGS,
  { name: 'quiet', type: 'boolean', help: 'print only the job id (human output)' },
];

/** `submit <TYPE>`: the payload of a task type without a shortcut. */
export const PAYLOAD_FLAGS: readonly FlagSpec[] = [
  { name: 'payload', type: 'string', placeholder: 'json', help: 'the payload, a JSON object' },
  {
    name: 'payload-file',
    type: 'string',
    placeholder: 'file',
    help: 'read the payload from a file; - = standard input',
  },
];

/** The JSON object of `--payload` / `--payload-file` for a task type without a shortcut. */
export async function payloadOf(ctx: CommandContext, taskType: string): Promise<JsonObject> {
  const inline = ctx.values.optionalString('payload');
  const file = ctx.values.optionalString('payload-file');
  if (inline !== undefined && file !== undefined) {
    throw new UsageError('give --payload or --payload-file, not both');
  }
  let source: string;
  let text: string;
  if (inline !== undefined) {
    [source, text] = ['--payload', inline];
  } else if (file !== undefined) {
    source = `--payload-file ${file === '-' ? '(standard input)' : file}`;
    try {
      text = await ctx.readInput(file);
    } catch (err) {
      throw new UsageError(`cannot read ${source}: ${(err as Error).message}`);
    }
  } else {
    throw new UsageError(
      `unknown task ${JSON.stringify(taskType)}${suggestShortcut(taskType)}; a task type ` +
        'without a shortcut needs --payload or --payload-file',
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${source} is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UsageError(`${source} must be a JSON object`);
  }
  return value as JsonObject;
}

/**
 * What may keep a job accepted just now from starting soon: no live worker
 * serves its type, or its queue is paused. One stderr line each; the
 * `--json` `warning` holds them all.
 */
function submitWarnings(result: SubmitResult): string[] {
  const warnings: string[] = [];
  if (result.servingWorkers === 0) {
    warnings.push(
      `no live worker serves task type ${result.snapshot.taskType}; ` +
        'the job stays QUEUED until one registers',
    );
  }
  if (result.queuePaused) {
    const queue = result.snapshot.queue ?? DEFAULT_QUEUE;
    warnings.push(
      `queue ${queue} is paused; the job waits until it is resumed (queue resume ${queue})`,
    );
  }
  return warnings;
}

/**
 * The line under the job block when the submission created nothing: the
 * block is the existing job its deduplication key named.
 */
function dedupLine(result: SubmitResult): string {
  if (!result.deduplicated) return '';
  const how = result.replaced
    ? 'its payload and run time replaced (debounce)'
    : 'nothing new was created';
  return `Deduplicated: existing job ${result.jobId}; ${how}\n`;
}

/** `submit`: `task` is the shortcut used, or null for `submit <TYPE> --payload`. */
async function runSubmit(ctx: CommandContext, task: TaskSpec | null): Promise<CommandOutput> {
  const { values } = ctx;
  const taskType = task?.taskType ?? ctx.args[0] ?? '';
  if (task !== null && (values.has('payload') || values.has('payload-file'))) {
    throw new UsageError(
      `${task.name} takes its own flags; for a raw payload use submit ${task.taskType} --payload`,
    );
  }
  const payload = task === null ? await payloadOf(ctx, taskType) : task.payload(values);
  const request = requestOfFlags(values, taskType, payload);
  // Too large for a frame is bad input: say so before connecting at all.
  checkSubmitSize(request);
  const client = await ctx.client();
  const result = await client.submit(request, {
    retries: values.int('submit-retries'),
    baseDelayMs: values.int('submit-retry-base-millis'),
    maxDelayMs: values.int('submit-retry-max-millis'),
    onRetry: (event) => ctx.note(describeRetry(event)),
  });
  const warnings = submitWarnings(result);
  for (const warning of warnings) ctx.note(`Warning: ${warning}\n`);
  const human = values.bool('quiet')
    ? `${result.jobId}\n`
    : formatJobBlock(result.snapshot, { submitted: true, color: ctx.color }) + dedupLine(result);
  return {
    json: {
      jobId: result.jobId,
      job: withQueueFields(result.snapshot),
      deduplicated: result.deduplicated,
      replaced: result.replaced,
      ...(warnings.length > 0 && { warning: warnings.join('; ') }),
      ...(result.queuePaused && { queuePaused: true }),
    },
    human,
  };
}

/** `submit <TYPE>`; the shortcuts (TASKS) become its subcommands. */
export const SUBMIT_COMMAND: CommandSpec = {
  name: 'submit',
  summary: 'submit a job: a built-in shortcut with its flags, or any task type with --payload',
  args: [
    { name: 'task', help: 'a shortcut below, or a task type (custom names exactly as given)' },
  ],
  flags: [...PAYLOAD_FLAGS, ...SUBMIT_FLAGS],
  run: (ctx) => runSubmit(ctx, null),
};

/** What a shortcut subcommand runs. */
export function runShortcut(task: TaskSpec, ctx: CommandContext): Promise<CommandOutput> {
  return runSubmit(ctx, task);
}
