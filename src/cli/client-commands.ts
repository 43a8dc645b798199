/**
 * The client CLI's commands as a table: each declares its positional
 * arguments and flags (which also drive `--help`) and a `run` that talks to
 * the coordinator and returns both renderings of its result. Printing and
 * exit codes live in `client-main.ts`.
 */
import type { DtpClient } from '../client/client.js';
import {
  DEFAULT_SUBMIT_RETRY_BASE_DELAY_MS,
  DEFAULT_SUBMIT_RETRY_MAX_DELAY_MS,
} from '../client/submit-retry.js';
import type { RetryEvent } from '../client/submit-retry.js';
import { MAX_ATTEMPTS_LIMIT } from '../protocol/limits.js';
import { JOB_STATES, PRIORITIES } from '../protocol/messages.js';
import {
  BUILTIN_TASK_LIST,
  builtinPayload,
  type PayloadFieldSpec,
} from '../protocol/task-types.js';
import type { JsonObject } from '../protocol/messages.js';
import { BENCH_FLAGS, runBenchCommand } from './bench.js';
import { UsageError } from './flags.js';
import type { FlagSpec, FlagValues } from './flags.js';
import { formatCancel, formatJobBlock, formatJobTable, formatWorkerTable } from './output.js';

/** A command's result: the `--json` document and the human text. */
export interface CommandOutput {
  json: unknown;
  human: string;
}

export interface CommandContext {
  values: FlagValues;
  /** Positional arguments after the command name. */
  args: readonly string[];
  /** Connects on first use. */
  client(): Promise<DtpClient>;
  color: boolean;
  /** Progress notes for a person (stderr); silent under `--json`. */
  note(text: string): void;
  /** Live progress (stderr); null unless stdout is a terminal and not `--json`. */
  progress: ((text: string) => void) | null;
}

export interface CommandSpec {
  readonly name: string;
  readonly summary: string;
  /** Positional placeholders for the usage line, e.g. `<job-id>`. */
  readonly args: readonly string[];
  /** Flags of this command (the global ones are added by the caller). */
  flags(args: readonly string[]): readonly FlagSpec[];
  run(ctx: CommandContext): Promise<CommandOutput>;
}

export const GLOBAL_FLAGS: readonly FlagSpec[] = [
  {
    name: 'host',
    type: 'string',
    default: 'localhost',
    placeholder: 'host',
    help: 'coordinator host',
  },
  {
    name: 'port',
    type: 'int',
    min: 1,
    max: 65_535,
    default: 7071,
    help: 'coordinator client port',
  },
  { name: 'json', type: 'boolean', help: 'print exactly one JSON document on stdout' },
];

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
];

/** A built-in task: its CLI name, wire type, flags and payload. */
export interface TaskSpec {
  readonly name: string;
  readonly taskType: string;
  readonly flags: readonly FlagSpec[];
  payload(values: FlagValues): JsonObject;
}

/** The flag that sets a built-in task's one payload field. */
function fieldFlag(field: PayloadFieldSpec): FlagSpec {
  return field.kind === 'integer'
    ? {
        name: field.flag,
        type: 'int',
        min: field.min,
        max: field.max,
        required: true,
        help: field.help,
      }
    : { name: field.flag, type: 'string', required: true, help: field.help };
}

/** The built-in tasks' shortcuts, read from the one table of built-ins. */
export const TASKS: readonly TaskSpec[] = BUILTIN_TASK_LIST.map((task) => ({
  name: task.shortcut,
  taskType: task.taskType,
  flags: [fieldFlag(task.field)],
  payload: (v: FlagValues): JsonObject =>
    builtinPayload(
      task,
      task.field.kind === 'integer' ? v.int(task.field.flag) : v.string(task.field.flag),
    ),
}));

export function findTask(name: string | undefined): TaskSpec {
  const task = TASKS.find((t) => t.name === name);
  if (task === undefined) {
    const known = TASKS.map((t) => t.name).join(', ');
    const what = name === undefined ? 'missing task' : `unknown task ${JSON.stringify(name)}`;
    throw new UsageError(`${what}; tasks: ${known}`);
  }
  return task;
}

function describeRetry(event: RetryEvent): string {
  return `Submission failed (${event.error.message}); retry ${event.retry} in ${event.delayMs} ms\n`;
}

async function runSubmit(ctx: CommandContext): Promise<CommandOutput> {
  const task = findTask(ctx.args[0]);
  const { values } = ctx;
  const key = values.optionalString('idempotency-key');
  if (key !== undefined && key.trim() === '') {
    throw new UsageError('--idempotency-key must not be empty');
  }
  const client = await ctx.client();
  const result = await client.submit(
    {
      taskType: task.taskType,
      payload: task.payload(values),
      maxAttempts: values.optionalInt('max-attempts') ?? null,
      idempotencyKey: key ?? null,
      priority: values.optionalEnum('priority', PRIORITIES) ?? null,
    },
    {
      retries: values.int('submit-retries'),
      baseDelayMs: values.int('submit-retry-base-millis'),
      maxDelayMs: values.int('submit-retry-max-millis'),
      onRetry: (event) => ctx.note(describeRetry(event)),
    },
  );
  return {
    json: { jobId: result.jobId, job: result.job },
    human: formatJobBlock(result.job, { submitted: true, color: ctx.color }),
  };
}

function jobId(ctx: CommandContext): string {
  const id = ctx.args[0];
  if (id === undefined || id === '') throw new UsageError('missing <job-id>');
  return id;
}

async function runStatus(ctx: CommandContext): Promise<CommandOutput> {
  const id = jobId(ctx);
  const job = await (await ctx.client()).status(id);
  return { json: job, human: formatJobBlock(job, { color: ctx.color }) };
}

async function runWait(ctx: CommandContext): Promise<CommandOutput> {
  const id = jobId(ctx);
  const job = await (await ctx.client()).wait(id, ctx.values.int('timeout-millis'));
  return { json: job, human: formatJobBlock(job, { color: ctx.color }) };
}

async function runCancel(ctx: CommandContext): Promise<CommandOutput> {
  const id = jobId(ctx);
  const { cancelled, job } = await (await ctx.client()).cancel(id);
  return { json: { cancelled, job }, human: formatCancel(cancelled, job, ctx.color) };
}

async function runList(ctx: CommandContext): Promise<CommandOutput> {
  const { values } = ctx;
  const limit = values.optionalInt('limit');
  const state = values.optionalEnum('state', JOB_STATES);
  const cursor = values.optionalString('cursor');
  const page = await (
    await ctx.client()
  ).list({
    ...(limit !== undefined && { limit }),
    ...(state !== undefined && { state }),
    ...(cursor !== undefined && { cursor }),
  });
  return {
    json: { jobs: page.jobs, nextCursor: page.nextCursor },
    human: formatJobTable(page.jobs, page.nextCursor, ctx.color),
  };
}

async function runWorkers(ctx: CommandContext): Promise<CommandOutput> {
  const workers = await (await ctx.client()).workers();
  return { json: { workers }, human: formatWorkerTable(workers) };
}

const NO_FLAGS = (): readonly FlagSpec[] => [];

export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'submit',
    summary: 'submit a job (tasks: sleep, word-count, sha256, prime-count, fail)',
    args: ['<task>'],
    flags: (args) => [...findTask(args[0]).flags, ...SUBMIT_FLAGS],
    run: runSubmit,
  },
  {
    name: 'status',
    summary: "show a job's current state",
    args: ['<job-id>'],
    flags: NO_FLAGS,
    run: runStatus,
  },
  {
    name: 'wait',
    summary: 'wait until a job is terminal (COMPLETED, FAILED or CANCELLED)',
    args: ['<job-id>'],
    flags: () => [
      {
        name: 'timeout-millis',
        type: 'int',
        min: 0,
        max: 2_147_483_647,
        default: 900_000,
        help: 'give up after this long, exit 1',
      },
    ],
    run: runWait,
  },
  {
    name: 'cancel',
    summary: 'cancel a job that is not terminal yet',
    args: ['<job-id>'],
    flags: NO_FLAGS,
    run: runCancel,
  },
  {
    name: 'list',
    summary: 'list jobs, newest first',
    args: [],
    flags: () => [
      {
        name: 'limit',
        type: 'int',
        min: 1,
        max: 100_000,
        defaultLabel: "the coordinator's page",
        help: 'page size',
      },
      { name: 'state', type: 'enum', values: JOB_STATES, help: 'only jobs in this state' },
      {
        name: 'cursor',
        type: 'string',
        placeholder: 'cursor',
        help: 'continue after a previous page',
      },
    ],
    run: runList,
  },
  { name: 'workers', summary: 'list live workers', args: [], flags: NO_FLAGS, run: runWorkers },
  {
    name: 'bench',
    summary: 'load generator: submits jobs and measures latency (never retries rejections)',
    args: [],
    flags: () => BENCH_FLAGS,
    run: (ctx) => runBenchCommand(ctx.values, ctx.progress),
  },
];

export function findCommand(name: string): CommandSpec {
  const command = COMMANDS.find((c) => c.name === name);
  if (command === undefined) {
    const known = COMMANDS.map((c) => c.name).join(', ');
    throw new UsageError(`unknown command ${JSON.stringify(name)}; commands: ${known}`);
  }
  return command;
}

/** Every flag any command knows, for reading positionals before the command is known. */
export function allClientFlags(): FlagSpec[] {
  const all = [...GLOBAL_FLAGS, ...SUBMIT_FLAGS, ...TASKS.flatMap((t) => t.flags)];
  for (const command of COMMANDS) {
    if (command.name !== 'submit') all.push(...command.flags([]));
  }
  const byName = new Map(all.map((spec) => [spec.name, spec]));
  return [...byName.values()];
}
