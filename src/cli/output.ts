/**
 * What the client CLI prints: human output, `--json` output and exit codes
 * (docs/OPERATIONS.md). Pure string building: the caller decides where text goes and
 * whether colour is allowed (only when stdout is a terminal).
 *
 * Job blocks put labels two spaces in and every value at column 13:
 *
 *     Job <job-id>
 *       Type:     SHA256
 *       State:    COMPLETED
 */
import { LocalErrorCode } from '../protocol/error-codes.js';
import {
  RemoteError,
  RequestTooLargeError,
  SubmitRejectedError,
  WaitTimeoutError,
} from '../client/errors.js';
import { DtpError, describeError } from '../protocol/errors.js';
import { formatDurationMs } from '../protocol/duration.js';
import type {
  AttemptOutcome,
  AttemptSnapshot,
  JobSnapshot,
  JobState,
  WorkerSnapshot,
} from '../protocol/messages.js';
import { BUILTIN_TASK_TYPES, isBuiltinTaskType } from '../protocol/task-types.js';
import { UsageError } from './flags.js';

/** Process exit codes (docs/OPERATIONS.md). */
export const EXIT_CODES = {
  ok: 0,
  /** Runtime failure or error reply: unknown job, connection refused, wait timed out. */
  failure: 1,
  usage: 2,
  /** Submission rejected by admission control. */
  rejected: 3,
  /** `wait --exit-status`: the job ended FAILED or CANCELLED. */
  jobFailed: 4,
} as const;
export type ExitCode = (typeof EXIT_CODES)[keyof typeof EXIT_CODES];

/** Width of `  <Label>:` padding, so that values start at column 13. */
const LABEL_WIDTH = 12;

const ANSI = { reset: '\x1b[0m', green: '\x1b[32m', red: '\x1b[31m', yellow: '\x1b[33m' };

const STATE_COLOURS: Record<JobState, string | null> = {
  SCHEDULED: null,
  WAITING: null,
  QUEUED: null,
  RUNNING: ANSI.yellow,
  RETRY_WAIT: ANSI.yellow,
  COMPLETED: ANSI.green,
  FAILED: ANSI.red,
  CANCELLED: ANSI.red,
};

/** The state, coloured when allowed. */
export function paintState(state: JobState, color: boolean): string {
  const colour = STATE_COLOURS[state];
  return color && colour !== null ? `${colour}${state}${ANSI.reset}` : state;
}

/** `  Label:    value`; continuation lines of a multi-line value are indented too. */
export function labelLine(label: string, value: string): string {
  const indent = ' '.repeat(LABEL_WIDTH);
  const body = value.split('\n').join(`\n${indent}`);
  return `  ${`${label}:`.padEnd(LABEL_WIDTH - 2)}${body}`;
}

export interface JobBlockOptions {
  /** `Job submitted` + an `ID:` line instead of `Job <id>`. */
  submitted?: boolean;
  color?: boolean;
  /** States of (some of) the jobs it depends on, shown beside their ids. */
  parentStates?: ReadonlyMap<string, JobState | null>;
}

/**
 * `n/max` of a job: the attempts that count toward its `maxAttempts`, so
 * not those that ended in a suspension (`ctx.sleep`, `ctx.waitFor`), those
 * its worker requeued, nor those its handler ended rate limited.
 */
export function attemptText(job: JobSnapshot): string {
  const uncounted = (job.suspensions ?? 0) + (job.requeues ?? 0) + (job.rateLimited ?? 0);
  return `${job.attempts - uncounted}/${job.maxAttempts}`;
}

/** `id (STATE)` per parent, one a line; `(gone)` for a parent no longer known. */
function parentLines(job: JobSnapshot, states: JobBlockOptions['parentStates']): string {
  return (job.dependsOn ?? [])
    .map((id) => {
      if (states === undefined || !states.has(id)) return id;
      return `${id} (${states.get(id) ?? 'gone'})`;
    })
    .join('\n');
}

/**
 * A job block; Worker only while RUNNING, Run at only while SCHEDULED,
 * Result and Error only when set; Suspends for a job whose attempts ended
 * in sleeps or waits, Requeues for one whose worker requeued attempts, Limited
 * for one whose handler ended attempts rate limited, Depends (one id a line) for a job with parents,
 * Parent for a child job, Children (one id a line) for a job that made
 * some, Steps (one name a line) for a job whose handler recorded some.
 */
export function formatJobBlock(job: JobSnapshot, options: JobBlockOptions = {}): string {
  const lines =
    options.submitted === true
      ? ['Job submitted', labelLine('ID', job.jobId)]
      : [`Job ${job.jobId}`];
  lines.push(
    labelLine('Type', job.taskType),
    labelLine('Priority', job.priority),
    labelLine('State', paintState(job.state, options.color ?? false)),
    labelLine('Attempt', attemptText(job)),
  );
  const suspensions = job.suspensions ?? 0;
  if (suspensions > 0) {
    lines.push(
      labelLine('Suspends', `${suspensions} (ctx.sleep, ctx.waitFor: not counted as attempts)`),
    );
  }
  const requeues = job.requeues ?? 0;
  if (requeues > 0) {
    lines.push(
      labelLine('Requeues', `${requeues} (cut off through no fault of their own: not counted)`),
    );
  }
  const rateLimited = job.rateLimited ?? 0;
  if (rateLimited > 0) {
    lines.push(labelLine('Limited', `${rateLimited} (rate limited by the handler: not counted)`));
  }
  if (job.state === 'SCHEDULED' && job.runAtMillis != null) {
    lines.push(labelLine('Run at', new Date(job.runAtMillis).toISOString()));
  }
  if (job.dedupKey != null) {
    lines.push(labelLine('Dedup', `${job.dedupKey} (${job.dedupMode ?? 'active'})`));
  }
  if (job.expiresAtMillis != null) {
    const at = new Date(job.expiresAtMillis).toISOString();
    lines.push(labelLine(job.expired === true ? 'Expired' : 'Expires', at));
  }
  if (job.state === 'RUNNING' && job.workerId !== null)
    lines.push(labelLine('Worker', job.workerId));
  if (job.result !== null) lines.push(labelLine('Result', job.result));
  if (job.error !== null) lines.push(labelLine('Error', job.error));
  if (job.dependsOn != null && job.dependsOn.length > 0) {
    lines.push(labelLine('Depends', parentLines(job, options.parentStates)));
  }
  if (job.parentJobId !== undefined && job.parentJobId !== null) {
    lines.push(labelLine('Parent', job.parentJobId));
  }
  if (job.children !== undefined && job.children !== null && job.children.length > 0) {
    lines.push(labelLine('Children', job.children.join('\n')));
  }
  if (job.steps !== undefined && job.steps !== null && job.steps.length > 0) {
    lines.push(labelLine('Steps', job.steps.map((step) => step.name).join('\n')));
  }
  return lines.join('\n') + '\n';
}

/** The first line of an error text, cut for a table cell. */
function cellText(text: string | null, max = 60): string {
  if (text === null || text === '') return '-';
  const line = text.split('\n')[0] ?? '';
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/**
 * `status --attempts`: the job block, then one row per attempt (oldest
 * first); times as ISO-8601 UTC, the running attempt without an end.
 */
export function formatAttempts(
  job: JobSnapshot,
  attempts: readonly AttemptSnapshot[] | null,
  color = false,
): string {
  const block = formatJobBlock(job, { color });
  if (attempts === null) return `${block}Attempts: not kept by this coordinator\n`;
  if (attempts.length === 0) return `${block}Attempts: none yet\n`;
  const rows = attempts.map((a): Cell[] => [
    { text: String(a.attemptNumber) },
    { text: a.workerId },
    { text: new Date(a.startedAtMillis).toISOString() },
    {
      text:
        a.finishedAtMillis === null
          ? '-'
          : formatDurationMs(a.finishedAtMillis - a.startedAtMillis),
    },
    { text: a.outcome, colour: color ? OUTCOME_COLOURS[a.outcome] : null },
    { text: cellText(a.error) },
  ]);
  const table = formatTable(['#', 'WORKER', 'STARTED', 'DURATION', 'OUTCOME', 'ERROR'], rows);
  return `${block}Attempts:\n${table.replace(/^/gm, '  ').replace(/ +$/, '')}`;
}

const OUTCOME_COLOURS: Record<AttemptOutcome, string | null> = {
  RUNNING: ANSI.yellow,
  SUCCEEDED: ANSI.green,
  FAILED: ANSI.red,
  WORKER_LOST: ANSI.red,
  DEADLINE: ANSI.red,
  CANCELLED: ANSI.red,
  RELEASED: ANSI.yellow,
  INTERRUPTED: ANSI.yellow,
  SUSPENDED: ANSI.yellow,
  REQUEUED: ANSI.yellow,
  RATE_LIMITED: ANSI.yellow,
};

/** The first line of `cancel`, then the job block. */
export function formatCancel(cancelled: boolean, job: JobSnapshot, color = false): string {
  const head = cancelled ? 'Cancelled' : `Not cancelled: the job is already ${job.state}`;
  return `${head}\n${formatJobBlock(job, { color })}`;
}

/** A cell with its display text and, optionally, a colour applied after padding. */
export interface Cell {
  text: string;
  colour?: string | null;
}

/** Left-aligned columns two spaces apart, header first; no trailing blanks. */
export function formatTable(
  headers: readonly string[],
  rows: readonly (readonly Cell[])[],
): string {
  const widths = headers.map((h, i) =>
    Math.max(h.length, ...rows.map((row) => row[i]?.text.length ?? 0)),
  );
  const render = (cells: readonly Cell[]): string =>
    cells
      .map((cell, i) => {
        const padded = i === cells.length - 1 ? cell.text : cell.text.padEnd(widths[i] ?? 0);
        return cell.colour != null ? `${cell.colour}${padded}${ANSI.reset}` : padded;
      })
      .join('  ')
      .trimEnd();
  return [render(headers.map((text) => ({ text }))), ...rows.map(render)].join('\n') + '\n';
}

/** `list`: one row per job, newest first as given; a cursor hint when more exist. */
export function formatJobTable(
  jobs: readonly JobSnapshot[],
  nextCursor: string | null,
  color = false,
): string {
  const rows = jobs.map((job): Cell[] => [
    { text: job.jobId },
    { text: job.taskType },
    { text: job.state, colour: color ? STATE_COLOURS[job.state] : null },
    { text: job.priority },
    { text: attemptText(job) },
    { text: job.workerId ?? '-' },
  ]);
  const table = formatTable(['JOB ID', 'TYPE', 'STATE', 'PRIORITY', 'ATTEMPT', 'WORKER'], rows);
  return nextCursor === null ? table : `${table}(more: list --cursor ${nextCursor})\n`;
}

/**
 * A worker's task types for the table: `built-ins` for the five built-ins
 * (a worker that declared none, or all five), then its own types.
 */
export function describeTaskTypes(taskTypes: readonly string[] | null | undefined): string {
  if (taskTypes === null || taskTypes === undefined) return 'built-ins';
  const custom = taskTypes.filter((t) => !isBuiltinTaskType(t));
  const allBuiltins = BUILTIN_TASK_TYPES.every((t) => taskTypes.includes(t));
  const builtins = allBuiltins ? ['built-ins'] : taskTypes.filter((t) => isBuiltinTaskType(t));
  const all = [...builtins, ...custom];
  return all.length === 0 ? '-' : all.join(', ');
}

/**
 * `workers`: one row per live worker; the heartbeat as an ISO-8601 UTC time.
 * QUEUED (attempts waiting on a worker under prefetch) appears when any
 * worker has some; TASK TYPES and DRAINING when the coordinator reports them.
 */
export function formatWorkerTable(workers: readonly WorkerSnapshot[]): string {
  const withTypes = workers.some((w) => w.taskTypes !== undefined && w.taskTypes !== null);
  const withDraining = workers.some((w) => w.draining === true);
  const withQueued = workers.some((w) => (w.queuedTasks ?? 0) > 0);
  const headers = ['WORKER ID', 'CAPACITY', 'ACTIVE'];
  if (withQueued) headers.push('QUEUED');
  headers.push('LAST HEARTBEAT');
  if (withDraining) headers.push('DRAINING');
  if (withTypes) headers.push('TASK TYPES');
  const rows = workers.map((w): Cell[] => {
    const row: Cell[] = [
      { text: w.workerId },
      { text: String(w.capacity) },
      { text: String(w.activeTasks) },
      ...(withQueued ? [{ text: String(w.queuedTasks ?? 0) }] : []),
      { text: new Date(w.lastHeartbeatMillis).toISOString() },
    ];
    if (withDraining) row.push({ text: w.draining === true ? 'yes' : 'no' });
    if (withTypes) row.push({ text: describeTaskTypes(w.taskTypes) });
    return row;
  });
  return formatTable(headers, rows);
}

/** The stable code of any thrown value (`INTERNAL` for bugs). */
export function errorCode(err: unknown): string {
  return err instanceof DtpError ? err.code : LocalErrorCode.Internal;
}

export interface ErrorDocument {
  error: {
    code: string;
    message: string;
    activeCount?: number;
    limit?: number;
    retryable?: boolean;
    job?: JobSnapshot;
  };
}

/** The `--json` document of a failure. */
export function errorDocument(err: unknown): ErrorDocument {
  const error: ErrorDocument['error'] = { code: errorCode(err), message: describeError(err) };
  if (err instanceof SubmitRejectedError) {
    error.activeCount = err.activeCount;
    error.limit = err.limit;
    error.retryable = err.retryable;
  } else if (err instanceof WaitTimeoutError) {
    error.job = err.job;
  }
  return { error };
}

/** The human stderr text of a failure. */
export function formatErrorText(err: unknown): string {
  if (err instanceof SubmitRejectedError) {
    return (
      `Submission rejected: ${err.reason}\n` +
      `  Active jobs: ${err.activeCount}\n` +
      `  Limit:       ${err.limit}\n` +
      `  Retryable:   ${err.retryable ? 'yes' : 'no'}\n`
    );
  }
  if (err instanceof UsageError) return `Usage error: ${err.message}\n`;
  if (err instanceof RemoteError) return `Error (${err.code}): ${err.message}\n`;
  return `Error: ${describeError(err)}\n`;
}

/**
 * Exit code of a failure: 2 usage (a bad flag, or input that cannot be sent
 * at all, like a payload over a frame), 3 rejected, else 1.
 */
export function exitCodeFor(err: unknown): ExitCode {
  if (err instanceof UsageError || err instanceof RequestTooLargeError) return EXIT_CODES.usage;
  if (err instanceof SubmitRejectedError) return EXIT_CODES.rejected;
  return EXIT_CODES.failure;
}

/** One JSON document on one line. */
export function toJsonLine(doc: unknown): string {
  return `${JSON.stringify(doc)}\n`;
}
