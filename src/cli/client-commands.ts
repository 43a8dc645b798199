/**
 * The client CLI's commands as a table: each declares its positional
 * arguments and flags (which also drive `--help`) and a `run` that talks to
 * the coordinator and returns both renderings of its result. Parsing lives in
 * client-cli.ts; printing and exit codes in output.ts.
 *
 * `submit` takes a task type: one of the built-in shortcuts with its own
 * flags (`submit sha256 --text abc`), or any task type with a JSON payload
 * (`submit resize --payload '{"width":80}'`, `--payload-file f`, `-` = stdin).
 */
import { MAX_TIMER_MS } from '../common/bounds.js';
import { MAX_DELAY_MS, MAX_FLOW_JOBS, MAX_PARENTS, MAX_PORT } from '../protocol/limits.js';
import { checkSubmitSize, flowMessage } from '../client/client.js';
import type {
  DtpClient,
  FlowJobSpec,
  SubmitRequest,
  SubmitResult,
  WatchEvent,
} from '../client/client.js';
import type { EventGap } from '../client/subscription.js';
import { requestFrame } from '../client/connection.js';
import { RemoteError } from '../client/errors.js';
import { ErrorCode } from '../protocol/error-codes.js';
import {
  DEFAULT_SUBMIT_RETRY_BASE_DELAY_MS,
  DEFAULT_SUBMIT_RETRY_MAX_DELAY_MS,
} from '../client/submit-retry.js';
import type { RetryEvent } from '../client/submit-retry.js';
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_TASK_TIMEOUT_MS,
  MIN_TASK_TIMEOUT_MS,
} from '../protocol/limits.js';
import { parseDuration } from '../protocol/duration.js';
import { DEFAULT_QUEUE, groupKeyProblem, queueNameProblem } from '../protocol/queue-names.js';
import {
  JOB_STATES,
  PARENT_FAILURE_POLICIES,
  PRIORITIES,
  TERMINAL_STATES,
} from '../protocol/messages.js';
import type { JobSnapshot, JobState, JsonObject } from '../protocol/messages.js';
import {
  BUILTIN_TASK_LIST,
  builtinPayload,
  type PayloadFieldSpec,
} from '../protocol/task-types.js';
import { BENCH_FLAGS, runBenchCommand } from './bench.js';
import {
  LINE_FIELDS,
  describeStop,
  parseJobLines,
  stopFields,
  submitInBatches,
} from './submit-many.js';
import { UsageError, splitList } from './flags.js';
import { DIALLER_SECURITY_FLAGS } from './security-flags.js';
import type { ConnectionSecurity } from '../client/connection.js';
import type { FlagSpec, FlagValues } from './flags.js';
import {
  EXIT_CODES,
  attemptText,
  errorDocument,
  exitCodeFor,
  formatAttempts,
  formatErrorText,
  formatCancel,
  formatJobBlock,
  formatJobTable,
  formatWorkerTable,
} from './output.js';
import type { ExitCode } from './output.js';
import { MAX_BATCH_JOBS } from '../protocol/messages.js';

/** A command's result: the `--json` document, the human text, and the exit code (default 0). */
export interface CommandOutput {
  json: unknown;
  human: string;
  exitCode?: ExitCode;
  /** The command printed its output itself, as it went ({@link CommandContext.emit}). */
  streamed?: boolean;
}

export interface CommandContext {
  values: FlagValues;
  /** Positional arguments after the command name (for `submit`: the task type first). */
  args: readonly string[];
  /** Connects on first use. */
  client(): Promise<DtpClient>;
  /** TLS and token of every connection, from the flags (for commands that open their own). */
  security(): ConnectionSecurity;
  color: boolean;
  /** Progress notes and warnings for a person (stderr); silent under `--json`. */
  note(text: string): void;
  /** Live progress (stderr); null unless stdout is a terminal and not `--json`. */
  progress: ((text: string) => void) | null;
  /** The text of a file; `-` = standard input. */
  readInput(path: string): Promise<string>;
  /** Prints one item of a streaming command now: `doc` as a JSON line under `--json`, else `human`. */
  emit(doc: unknown, human: string): void;
  /** A warning on stderr, also under `--json` (stdout stays machine-readable). */
  warn(text: string): void;
}

/** A positional argument: `<name>` in the usage line. */
export interface ArgSpec {
  readonly name: string;
  readonly help: string;
  /** May be left out (`[name]` in the usage line). */
  readonly optional?: boolean;
}

export interface CommandSpec {
  readonly name: string;
  readonly summary: string;
  readonly args: readonly ArgSpec[];
  /** Flags of this command (the global ones live on the program). */
  readonly flags: readonly FlagSpec[];
  run(ctx: CommandContext): Promise<CommandOutput>;
}

/**
 * Connection and output settings: the only client flags that may also come
 * from the environment (DTP_HOST, DTP_PORT, DTP_JSON).
 */
export const GLOBAL_FLAGS: readonly FlagSpec[] = [
  {
    name: 'host',
    type: 'string',
    default: 'localhost',
    placeholder: 'h1[:p1],h2[:p2],…',
    help: 'coordinator host, or several coordinators sharing PostgreSQL (the client follows the leader)',
  },
  {
    name: 'port',
    type: 'int',
    min: 1,
    max: MAX_PORT,
    default: 7071,
    help: 'coordinator client port',
  },
  { name: 'json', type: 'boolean', help: 'print exactly one JSON document on stdout' },
  ...DIALLER_SECURITY_FLAGS,
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

/** A built-in task's CLI shortcut: its name, wire type, flags and payload. */
export interface TaskSpec {
  readonly name: string;
  readonly taskType: string;
  /** One line for `--help`. */
  readonly summary: string;
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
  summary: task.summary,
  flags: [fieldFlag(task.field)],
  payload: (v: FlagValues): JsonObject =>
    builtinPayload(
      task,
      task.field.kind === 'integer' ? v.int(task.field.flag) : v.string(task.field.flag),
    ),
}));

/** Levenshtein distance, for "did you mean" on task shortcuts. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row.push(
        Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost),
      );
    }
    previous = row;
  }
  return previous[b.length] ?? 0;
}

/** ` (did you mean sha256?)` when `name` is a near miss of a shortcut, else ``. */
export function suggestShortcut(name: string): string {
  const near = TASKS.map((t) => t.name).find(
    (shortcut) => shortcut !== name && editDistance(shortcut, name.toLowerCase()) <= 2,
  );
  return near === undefined ? '' : ` (did you mean ${near}?)`;
}

function describeRetry(event: RetryEvent): string {
  return `Submission failed (${event.error.message}); retry ${event.retry} in ${event.delayMs} ms\n`;
}

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

/** `--depends-on` and `--on-parent-failure`, checked before anything is sent. */
function parentsOf(
  values: CommandContext['values'],
): Pick<SubmitRequest, 'dependsOn' | 'onParentFailure'> {
  const given = values.optionalString('depends-on');
  const policy = values.optionalEnum('on-parent-failure', PARENT_FAILURE_POLICIES) ?? null;
  if (given === undefined) {
    if (policy !== null) throw new UsageError('--on-parent-failure needs --depends-on');
    return {};
  }
  const dependsOn = splitList(given);
  if (dependsOn.length === 0) throw new UsageError('--depends-on must name at least one job id');
  if (new Set(dependsOn).size > MAX_PARENTS) {
    throw new UsageError(`--depends-on names ${dependsOn.length} jobs; at most ${MAX_PARENTS}`);
  }
  return { dependsOn, onParentFailure: policy };
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
  const key = values.optionalString('idempotency-key');
  if (key !== undefined && key.trim() === '') {
    throw new UsageError('--idempotency-key must not be empty');
  }
  const request: SubmitRequest = {
    taskType,
    payload,
    maxAttempts: values.optionalInt('max-attempts') ?? null,
    idempotencyKey: key ?? null,
    priority: values.optionalEnum('priority', PRIORITIES) ?? null,
    timeoutMillis: values.optionalInt('task-timeout-millis') ?? null,
    ...parentsOf(values),
  };
  const queue = queueFlag(values, 'queue');
  const groupKey = groupFlag(values);
  if (queue !== undefined) request.queue = queue;
  if (groupKey !== undefined) request.groupKey = groupKey;
  const runAtMillis = runAtFlag(values);
  if (runAtMillis !== null) request.runAtMillis = runAtMillis;
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
    : formatJobBlock(result.snapshot, { submitted: true, color: ctx.color });
  return {
    json: {
      jobId: result.jobId,
      job: withQueueFields(result.snapshot),
      ...(warnings.length > 0 && { warning: warnings.join('; ') }),
      ...(result.queuePaused && { queuePaused: true }),
    },
    human,
  };
}

/** `--delay`/`--run-at` as a due time (epoch ms), or null; bad input is exit 2. */
function runAtFlag(values: FlagValues): number | null {
  const delay = values.optionalString('delay');
  const runAt = values.optionalString('run-at');
  if (delay !== undefined && runAt !== undefined) {
    throw new UsageError('--delay and --run-at cannot be used together');
  }
  const nowMs = Date.now();
  if (delay !== undefined) {
    const ms = waveDurationMs(delay, '--delay');
    if (ms > MAX_DELAY_MS) throw new UsageError('--delay must be at most 366d');
    return nowMs + ms;
  }
  if (runAt === undefined) return null;
  const atMs = timeMs(runAt, '--run-at');
  if (atMs > nowMs + MAX_DELAY_MS) throw new UsageError('--run-at must be at most 366 days ahead');
  return atMs;
}

/** A duration of this wave's flags: `<n>ms|s|m|h|d`, or a bare integer (ms). */
export function waveDurationMs(text: string, flag: string): number {
  const trimmed = text.trim();
  if (/^[0-9]{1,15}$/.test(trimmed)) return Number(trimmed);
  const parsed = parseDuration(trimmed);
  if ('error' in parsed) throw new UsageError(`${flag}: ${parsed.error}`);
  return parsed.ms;
}

/** A time: ISO 8601 with an offset (`…Z`, `…+01:00`) or epoch milliseconds. */
export function timeMs(text: string, flag: string): number {
  const trimmed = text.trim();
  if (/^[0-9]{1,15}$/.test(trimmed)) return Number(trimmed);
  const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/i;
  const ms = iso.test(trimmed) ? Date.parse(trimmed) : Number.NaN;
  if (!Number.isFinite(ms)) {
    throw new UsageError(
      `${flag}: expected ISO 8601 with an offset (2026-12-24T18:00:00+01:00) or epoch ms, got ${JSON.stringify(trimmed.slice(0, 40))}`,
    );
  }
  return ms;
}

function jobId(ctx: CommandContext): string {
  const id = ctx.args[0];
  if (id === undefined || id === '') throw new UsageError('missing <job-id>');
  return id;
}

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

/**
 * `submit-flow <file|->`: the flow document checked here first (shape,
 * duplicate refs, cycles: exit 2, nothing sent), then sent as one request.
 */
async function runSubmitFlow(ctx: CommandContext): Promise<CommandOutput> {
  const file = ctx.args[0] ?? '';
  const source = file === '-' ? '(standard input)' : file;
  let text: string;
  try {
    text = await ctx.readInput(file);
  } catch (err) {
    throw new UsageError(`cannot read ${source}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${source} is not JSON: ${(err as Error).message}`);
  }
  const flow = checkFlowDocument(doc, source);
  let msg: ReturnType<typeof flowMessage>;
  try {
    msg = flowMessage(flow);
  } catch (err) {
    throw new UsageError(`${source}: ${(err as Error).message}`);
  }
  requestFrame(msg); // too large for a frame: said before connecting
  const { jobs } = await (await ctx.client()).submitFlow(flow);
  const human = Object.entries(jobs)
    .map(([ref, jobId]) => `${ref}\t${jobId}\n`)
    .join('');
  return { json: { jobs }, human };
}

/** The flow document's shape, refs and acyclicity; a UsageError (exit 2) for what is wrong. */
function checkFlowDocument(doc: unknown, source: string): { jobs: FlowJobSpec[] } {
  const bad = (detail: string): UsageError => new UsageError(`${source}: ${detail}`);
  if (!isPlainRecord(doc) || !Array.isArray(doc.jobs)) throw bad('expected {"jobs": [...]}');
  const jobs: unknown[] = doc.jobs;
  if (jobs.length === 0) throw bad('the flow has no jobs');
  if (jobs.length > MAX_FLOW_JOBS) throw bad(`at most ${MAX_FLOW_JOBS} jobs, got ${jobs.length}`);
  const refs = new Set<string>();
  for (const [index, job] of jobs.entries()) {
    if (!isPlainRecord(job)) throw bad(`jobs[${index}] is not an object`);
    if (typeof job.ref !== 'string' || job.ref === '')
      throw bad(`jobs[${index}].ref must be a non-empty string`);
    if (refs.has(job.ref)) throw bad(`ref ${JSON.stringify(job.ref)} is used twice`);
    refs.add(job.ref);
    if (typeof job.taskType !== 'string') throw bad(`jobs[${index}].taskType must be a string`);
    if (!isPlainRecord(job.payload)) throw bad(`jobs[${index}].payload must be a JSON object`);
    const dependsOn: unknown = job.dependsOn;
    if (
      dependsOn !== undefined &&
      dependsOn !== null &&
      (!Array.isArray(dependsOn) || dependsOn.some((d) => typeof d !== 'string'))
    ) {
      throw bad(`jobs[${index}].dependsOn must be an array of refs or job ids`);
    }
    const key: unknown = job.idempotencyKey;
    if (key !== undefined && key !== null && (typeof key !== 'string' || key === '')) {
      throw bad(`jobs[${index}].idempotencyKey must be a non-empty string`);
    }
  }
  const typed = jobs as FlowJobSpec[];
  const cycle = findCycle(typed);
  if (cycle !== null) throw bad(`the dependencies form a cycle: ${cycle.join(' -> ')}`);
  return { jobs: typed };
}

/** A cycle among the refs (as a path that ends where it starts), or null. */
function findCycle(jobs: readonly FlowJobSpec[]): string[] | null {
  const parentsOf = new Map(jobs.map((job) => [job.ref, job.dependsOn ?? []]));
  const state = new Map<string, 'open' | 'done'>();
  for (const start of parentsOf.keys()) {
    if (state.has(start)) continue;
    // Depth-first with an explicit stack: a 10,000-job chain must not overflow.
    const path: string[] = [];
    const stack: { ref: string; next: number }[] = [{ ref: start, next: 0 }];
    state.set(start, 'open');
    path.push(start);
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as { ref: string; next: number };
      const parents = parentsOf.get(top.ref) ?? [];
      if (top.next >= parents.length) {
        state.set(top.ref, 'done');
        stack.pop();
        path.pop();
        continue;
      }
      const parent = parents[top.next++] as string;
      if (!parentsOf.has(parent)) continue; // an existing job's id
      if (state.get(parent) === 'open') return [...path.slice(path.indexOf(parent)), parent];
      if (state.get(parent) === 'done') continue;
      state.set(parent, 'open');
      path.push(parent);
      stack.push({ ref: parent, next: 0 });
    }
  }
  return null;
}

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Exit 4 under `--exit-status` when the job ended FAILED or CANCELLED. */
function waitExitCode(job: JobSnapshot, exitStatus: boolean): ExitCode {
  if (!exitStatus) return EXIT_CODES.ok;
  return job.state === 'FAILED' || job.state === 'CANCELLED' ? EXIT_CODES.jobFailed : EXIT_CODES.ok;
}

async function runWait(ctx: CommandContext): Promise<CommandOutput> {
  const id = jobId(ctx);
  const job = await (await ctx.client()).wait(id, ctx.values.int('timeout-millis'));
  return {
    json: withQueueFields(job),
    human: formatJobBlock(job, { color: ctx.color }),
    exitCode: waitExitCode(job, ctx.values.bool('exit-status')),
  };
}

/** One line of `watch` / `events` for a person. */
function eventLine(item: WatchEvent): string {
  const job = item.job;
  const at = new Date(item.atMillis).toISOString();
  const progress =
    job.progress == null
      ? ''
      : ` ${Math.round(job.progress.fraction * 100)}%${job.progress.message === null ? '' : ` ${job.progress.message}`}`;
  return `${at} ${item.event} ${job.jobId} ${job.taskType} ${job.state} attempt ${attemptText(job)}${progress}\n`;
}

/** What a gap in the events means for the reader, on stderr. */
function gapNote(gap: EventGap): string {
  return gap.reason === 'missed'
    ? `Warning: ${gap.missed ?? 'some'} events were missed (this reader fell behind)\n`
    : 'Warning: reconnected to the coordinator; changes made while disconnected were not seen\n';
}

/** The JSON line of a watch or events item: exactly the contract's three fields. */
function eventDoc(item: WatchEvent): unknown {
  return { event: item.event, atMillis: item.atMillis, job: item.job };
}

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

async function runCancel(ctx: CommandContext): Promise<CommandOutput> {
  const id = jobId(ctx);
  const { cancelled, job } = await (await ctx.client()).cancel(id);
  return {
    json: { cancelled, job: withQueueFields(job) },
    human: formatCancel(cancelled, job, ctx.color),
  };
}

async function runList(ctx: CommandContext): Promise<CommandOutput> {
  const { values } = ctx;
  const limit = values.optionalInt('limit');
  const state = values.optionalEnum('state', JOB_STATES);
  const cursor = values.optionalString('cursor');
  const queue = queueFlag(values, 'queue');
  const page = await (
    await ctx.client()
  ).listPage({
    ...(limit !== undefined && { limit }),
    ...(state !== undefined && { state }),
    ...(cursor !== undefined && { cursor }),
    ...(queue !== undefined && { queue }),
  });
  return {
    json: { jobs: page.jobs.map(withQueueFields), nextCursor: page.nextCursor },
    human: formatJobTable(page.jobs, page.nextCursor, ctx.color),
  };
}

async function runWorkers(ctx: CommandContext): Promise<CommandOutput> {
  const { workers, leader, epoch } = await (await ctx.client()).workerList();
  // `leader` and `epoch` only where coordinators share PostgreSQL (additive).
  const led = leader !== null && epoch !== null;
  return {
    json: { workers, ...(led && { leader, epoch }) },
    human: formatWorkerTable(workers) + (led ? `Leader: ${leader} (epoch ${epoch})\n` : ''),
  };
}

/**
 * A snapshot as `--json` shows it: `queue` always (a coordinator leaves out
 * `default`), `groupKey` null when the job has none.
 */
function withQueueFields(job: JobSnapshot): JobSnapshot {
  return { ...job, queue: job.queue ?? DEFAULT_QUEUE, groupKey: job.groupKey ?? null };
}

function queueFlag(values: FlagValues, flag: string): string | undefined {
  const name = values.optionalString(flag);
  const problem = name === undefined ? null : queueNameProblem(name);
  if (problem !== null) throw new UsageError(`--${flag}: queue name ${problem}`);
  return name;
}

function groupFlag(values: FlagValues): string | undefined {
  const key = values.optionalString('group');
  const problem = key === undefined ? null : groupKeyProblem(key);
  if (problem !== null) throw new UsageError(`--group: group key ${problem}`);
  return key;
}

const JOB_ID_ARG: readonly ArgSpec[] = [{ name: 'job-id', help: 'the id submit printed' }];

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

const SUBMIT_MANY_COMMAND: CommandSpec = {
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

export const COMMANDS: readonly CommandSpec[] = [
  SUBMIT_COMMAND,
  {
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
  },
  {
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
  },
  {
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
  },
  {
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
  },
  {
    name: 'cancel',
    summary: 'cancel a job that is not terminal yet',
    args: JOB_ID_ARG,
    flags: [],
    run: runCancel,
  },
  {
    name: 'list',
    summary: 'list jobs, newest first',
    args: [],
    flags: [
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
      { name: 'queue', type: 'string', placeholder: 'name', help: 'only jobs of this queue' },
    ],
    run: runList,
  },
  { name: 'workers', summary: 'list live workers', args: [], flags: [], run: runWorkers },
  {
    name: 'submit-flow',
    summary: 'submit many jobs that depend on each other by ref, all at once or none',
    args: [{ name: 'file', help: 'the flow document, {"jobs": [...]}, or - for standard input' }],
    flags: [],
    run: runSubmitFlow,
  },
  {
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
  },
  SUBMIT_MANY_COMMAND,
  {
    name: 'bench',
    summary: 'load generator: submits jobs and measures latency (never retries rejections)',
    args: [],
    flags: BENCH_FLAGS,
    run: (ctx) => runBenchCommand(ctx.values, ctx.progress, ctx.security()),
  },
];
