/**
 * `submit-many --file <jobs.ndjson | -> [--from-line N]`: one job per line
 * (a JSON object with the fields of a job of SUBMIT_JOBS: the wire names of
 * SUBMIT_JOB), sent as SUBMIT_JOBS batches of at most 1,000 jobs, in file
 * order. Each batch is atomic; a file of more lines goes in several batches,
 * one after the other. A refused batch stops the command: the batches before
 * it stay created, and the outcome says which lines were created, which were
 * not, and the line to resume from (`--from-line`). Every line is checked
 * before anything is sent: a bad line is exit 2.
 */
import type { BatchJob, BatchSubmission, DtpClient } from '../client/client.js';
import { TransportError } from '../client/errors.js';
import { isRetryableSubmitError, submitWithRetry } from '../client/submit-retry.js';
import type { RetryEvent, SubmitRetryPolicy } from '../client/submit-retry.js';
import { LocalErrorCode } from '../protocol/error-codes.js';
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_DELAY_MS,
  MAX_TASK_TIMEOUT_MS,
  MIN_TASK_TIMEOUT_MS,
} from '../protocol/limits.js';
import { DEDUP_MODES, MAX_BATCH_JOBS, PRIORITIES, type JsonObject } from '../protocol/messages.js';
import type { DedupMode, Priority } from '../protocol/messages.js';
import { dedupProblem } from '../client/requests.js';
import { groupKeyProblem, queueNameProblem } from '../protocol/queue-names.js';
import { UsageError } from './flags.js';

/** The fields a line may have: those of a job of SUBMIT_JOBS (the wire names of SUBMIT_JOB). */
export const LINE_FIELDS = [
  'taskType',
  'payload',
  'maxAttempts',
  'priority',
  'idempotencyKey',
  'timeoutMillis',
  'queue',
  'groupKey',
  'runAtMillis',
  'dedupKey',
  'dedupMode',
  'dedupWindowMillis',
  'expiresAtMillis',
] as const;

/** Fields of a flow's jobs that a batch cannot take: a line with one says where it belongs. */
const FLOW_ONLY_FIELDS: ReadonlySet<string> = new Set(['ref', 'dependsOn', 'onParentFailure']);

/** A job of the file and the line it came from. */
export interface JobLine {
  job: BatchJob;
  line: number;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const given = (value: unknown): boolean => value !== undefined && value !== null;

/** An integer field within bounds, or what is wrong with it. */
function intIn(value: unknown, name: string, min: number, max: number): number | string {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    return `${name} must be an integer ${min}..${max}`;
  }
  return value;
}

/** The fields beyond taskType and payload, checked; a string says what is wrong. */
function optionsOf(value: Record<string, unknown>, nowMs: number): Partial<BatchJob> | string {
  const job: Partial<BatchJob> = {};
  const { maxAttempts, priority, idempotencyKey, timeoutMillis } = value;
  if (given(maxAttempts)) {
    const n = intIn(maxAttempts, 'maxAttempts', 1, MAX_ATTEMPTS_LIMIT);
    if (typeof n === 'string') return n;
    job.maxAttempts = n;
  }
  if (given(priority)) {
    if (!(PRIORITIES as readonly unknown[]).includes(priority)) {
      return `priority must be one of ${PRIORITIES.join(', ')}`;
    }
    job.priority = priority as Priority;
  }
  if (given(idempotencyKey)) {
    if (typeof idempotencyKey !== 'string' || idempotencyKey === '') {
      return 'idempotencyKey must be a non-empty string';
    }
    job.idempotencyKey = idempotencyKey;
  }
  if (given(timeoutMillis)) {
    const n = intIn(timeoutMillis, 'timeoutMillis', MIN_TASK_TIMEOUT_MS, MAX_TASK_TIMEOUT_MS);
    if (typeof n === 'string') return n;
    job.timeoutMillis = n;
  }
  const placement = placementOf(value, nowMs);
  if (typeof placement === 'string') return placement;
  const dedup = dedupOf(value, placement.runAt ?? null, nowMs);
  return typeof dedup === 'string' ? dedup : { ...job, ...placement, ...dedup };
}

/** `dedupKey`, `dedupMode`, `dedupWindowMillis` and `expiresAtMillis`, checked as the client checks them. */
function dedupOf(
  value: Record<string, unknown>,
  runAtMillis: number | Date | null,
  nowMs: number,
): Partial<BatchJob> | string {
  const job: Partial<BatchJob> = {};
  const { dedupKey, dedupMode, dedupWindowMillis, expiresAtMillis } = value;
  if (given(dedupKey)) {
    if (typeof dedupKey !== 'string') return 'dedupKey must be a string';
    job.dedupKey = dedupKey;
  }
  if (given(dedupMode)) {
    if (!(DEDUP_MODES as readonly unknown[]).includes(dedupMode)) {
      return `dedupMode must be one of ${DEDUP_MODES.join(', ')}`;
    }
    job.dedupMode = dedupMode as DedupMode;
  }
  if (given(dedupWindowMillis)) {
    if (typeof dedupWindowMillis !== 'number') return 'dedupWindowMillis must be an integer';
    job.dedupWindowMillis = dedupWindowMillis;
  }
  if (given(expiresAtMillis)) {
    const n = intIn(expiresAtMillis, 'expiresAtMillis (epoch ms)', 0, Number.MAX_SAFE_INTEGER);
    if (typeof n === 'string') return n;
    if (n <= nowMs) return 'expiresAtMillis is in the past';
    job.expiresAtMillis = n;
  }
  const problem = dedupProblem({
    dedupKey: job.dedupKey ?? null,
    dedupMode: job.dedupMode ?? null,
    dedupWindowMillis: job.dedupWindowMillis ?? null,
    expiresAtMillis: job.expiresAtMillis ?? null,
    runAtMillis: runAtMillis === null ? null : Number(runAtMillis),
  });
  return problem === null ? job : problem.error.message;
}

/** `queue`, `groupKey` and `runAtMillis`, checked. */
function placementOf(value: Record<string, unknown>, nowMs: number): Partial<BatchJob> | string {
  const job: Partial<BatchJob> = {};
  const { queue, groupKey, runAtMillis } = value;
  if (given(queue)) {
    if (typeof queue !== 'string') return 'queue must be a string';
    const problem = queueNameProblem(queue);
    if (problem !== null) return `queue name ${problem}`;
    job.queue = queue;
  }
  if (given(groupKey)) {
    if (typeof groupKey !== 'string') return 'groupKey must be a string';
    const problem = groupKeyProblem(groupKey);
    if (problem !== null) return `group key ${problem}`;
    job.groupKey = groupKey;
  }
  if (given(runAtMillis)) {
    const n = intIn(runAtMillis, 'runAtMillis (epoch ms)', 0, nowMs + MAX_DELAY_MS);
    if (typeof n === 'string') return `${n}: at most 366 days ahead`;
    job.runAt = n;
  }
  return job;
}

/** One line as a job, or a UsageError naming the line. */
export function parseJobLine(text: string, lineNumber: number, nowMs = Date.now()): BatchJob {
  const bad = (what: string): UsageError => new UsageError(`line ${lineNumber}: ${what}`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw bad(`not JSON (${(err as Error).message})`);
  }
  if (!isObject(value)) throw bad('expected a JSON object');
  for (const key of Object.keys(value)) {
    if (FLOW_ONLY_FIELDS.has(key)) {
      throw bad(`${JSON.stringify(key)} is for jobs with parents: submit those with submit-flow`);
    }
    if (!(LINE_FIELDS as readonly string[]).includes(key)) {
      throw bad(`unknown field ${JSON.stringify(key)} (fields: ${LINE_FIELDS.join(', ')})`);
    }
  }
  const { taskType, payload } = value;
  if (typeof taskType !== 'string' || taskType === '') throw bad('taskType must be a string');
  if (!isObject(payload)) throw bad('payload must be a JSON object');
  const options = optionsOf(value, nowMs);
  if (typeof options === 'string') throw bad(options);
  return { taskType, payload: payload as JsonObject, ...options };
}

/**
 * Every non-blank line of the file from line `fromLine` (1-based; the lines
 * before it are neither read nor sent) as a job, with its line number.
 */
export function parseJobLines(text: string, fromLine = 1): JobLine[] {
  const lines = text.split('\n');
  if (fromLine > 1 && fromLine > lines.length) {
    throw new UsageError(`--from-line ${fromLine}: the file has only ${lines.length} lines`);
  }
  const nowMs = Date.now();
  const jobs: JobLine[] = [];
  for (let i = fromLine - 1; i < lines.length; i++) {
    const raw = lines[i] as string;
    if (raw.trim() === '') continue;
    jobs.push({ job: parseJobLine(raw, i + 1, nowMs), line: i + 1 });
  }
  if (jobs.length === 0) {
    const where = fromLine > 1 ? ` from line ${fromLine} on` : '';
    throw new UsageError(`the file has no jobs${where} (one JSON object a line)`);
  }
  return jobs;
}

/** Where a run of batches stopped: the batch refused, and what that leaves to submit. */
export interface StoppedBatch {
  /** Why (a rejection, an ERROR reply, a transport failure). */
  error: unknown;
  /** The lines of the batch that was refused. */
  batch: { fromLine: number; toLine: number };
  /**
   * The lines left to submit: from the refused batch to the end of the file
   * (none of them was created, unless `uncertain`).
   */
  remaining: { fromLine: number; toLine: number; jobs: number };
  /**
   * The connection broke while the batch was out: it may have been created
   * (resending it creates its jobs again, except those with an idempotency key).
   */
  uncertain: boolean;
}

/** What {@link submitInBatches} did: the ids created, in order, and where it stopped (if it did). */
export interface BulkOutcome {
  jobIds: string[];
  /** The lines whose `dedupKey` named an existing job (nothing created for them), in order. */
  deduplicatedLines: number[];
  /** The last line whose job was created (null: none). */
  lastCreatedLine: number | null;
  stopped: StoppedBatch | null;
}

/** How hard to resend a batch that admission control refused (retryable ones only). */
export interface BatchRetry extends SubmitRetryPolicy {
  onRetry?: (event: RetryEvent, batch: { fromLine: number; toLine: number }) => void;
}

/**
 * Sends the jobs in batches of at most {@link MAX_BATCH_JOBS}, in order, and
 * stops at the first batch that is refused (after its retries). Never
 * rejects for a refusal: the outcome says what was created and what not.
 */
export async function submitInBatches(
  client: Pick<DtpClient, 'submitBatch'>,
  jobs: readonly JobLine[],
  retry: BatchRetry = {},
): Promise<BulkOutcome> {
  const jobIds: string[] = [];
  const deduplicatedLines: number[] = [];
  let lastCreatedLine: number | null = null;
  for (let start = 0; start < jobs.length; start += MAX_BATCH_JOBS) {
    const part = jobs.slice(start, start + MAX_BATCH_JOBS);
    const batch = { fromLine: lineAt(part, 0), toLine: lineAt(part, part.length - 1) };
    try {
      const sent = await sendBatch(client, part, batch, retry);
      jobIds.push(...sent.jobIds);
      part.forEach(
        (entry, i) => sent.deduplicated[i] === true && deduplicatedLines.push(entry.line),
      );
      lastCreatedLine = batch.toLine;
    } catch (err) {
      const remaining = {
        fromLine: batch.fromLine,
        toLine: lineAt(jobs, jobs.length - 1),
        jobs: jobs.length - start,
      };
      const uncertain = err instanceof TransportError && err.code === LocalErrorCode.ConnectionLost;
      const stopped = { error: err, batch, remaining, uncertain };
      return { jobIds, deduplicatedLines, lastCreatedLine, stopped };
    }
  }
  return { jobIds, deduplicatedLines, lastCreatedLine, stopped: null };
}

function lineAt(jobs: readonly JobLine[], index: number): number {
  return jobs[index]?.line ?? 0;
}

/** One batch, resent after a retryable rejection as the retry policy allows. */
function sendBatch(
  client: Pick<DtpClient, 'submitBatch'>,
  part: readonly JobLine[],
  batch: { fromLine: number; toLine: number },
  retry: BatchRetry,
): Promise<BatchSubmission> {
  const jobs = part.map((entry) => entry.job);
  if ((retry.retries ?? 0) === 0) return client.submitBatch(jobs);
  return submitWithRetry(() => client.submitBatch(jobs), {
    ...retry,
    // A batch refused by admission control created nothing: resending it is
    // safe. A lost connection is not resent (the batch may have been created).
    hasIdempotencyKey: false,
    onRetry: (event) => retry.onRetry?.(event, batch),
  });
}

/** The people's account of a stopped run (stderr), after the error itself. */
export function describeStop(outcome: BulkOutcome, stopped: StoppedBatch): string {
  const created =
    outcome.lastCreatedLine === null
      ? 'No job was created.'
      : `Created ${outcome.jobIds.length} jobs (up to line ${outcome.lastCreatedLine}; their ids are on stdout).`;
  const { fromLine, toLine, jobs } = stopped.remaining;
  const lines = `lines ${fromLine}..${toLine} (${jobs} ${jobs === 1 ? 'job' : 'jobs'})`;
  const rest = stopped.uncertain
    ? `Left to submit: ${lines}; the connection broke while lines ${stopped.batch.fromLine}..${stopped.batch.toLine} were out, so those may have been created (a resend makes them again, except jobs with an idempotency key).`
    : `Not created: ${lines}.`;
  const again = isRetryableSubmitError(stopped.error, false)
    ? ' once the coordinator has room (or add --submit-retries n to wait for it)'
    : ' once the cause is fixed';
  return `${created}\n${rest}\nTo go on, run the same command with --from-line ${fromLine}${again}.\n`;
}

/** The `--json` fields of a stopped run, beside `error` and `jobIds`. */
export function stopFields(stopped: StoppedBatch): Record<string, unknown> {
  return {
    remaining: stopped.remaining,
    resumeFromLine: stopped.remaining.fromLine,
    ...(stopped.uncertain && { uncertainLines: stopped.batch }),
  };
}
