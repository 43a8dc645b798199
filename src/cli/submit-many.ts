/**
 * `submit-many --file <jobs.ndjson | ->`: one job per line (a JSON object
 * with the wire fields of SUBMIT_JOB), sent as SUBMIT_JOBS batches of at most
 * 1,000 jobs, in file order. Each batch is atomic; a file of more lines goes
 * in several batches, one after the other, and a refused batch stops the
 * command (the batches before it stay created; the error says which lines).
 * Every line is checked before anything is sent: a bad line is exit 2.
 */
import type { BatchJob, DtpClient } from '../client/client.js';
import { MAX_BATCH_JOBS, PRIORITIES, type JsonObject } from '../protocol/messages.js';
import type { Priority } from '../protocol/messages.js';
import { UsageError } from './flags.js';

/** The fields a line may have (the wire names of SUBMIT_JOB). */
const LINE_FIELDS = [
  'taskType',
  'payload',
  'maxAttempts',
  'priority',
  'idempotencyKey',
  'timeoutMillis',
] as const;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** One line as a job, or a UsageError naming the line. */
export function parseJobLine(text: string, lineNumber: number): BatchJob {
  const bad = (what: string): UsageError => new UsageError(`line ${lineNumber}: ${what}`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw bad(`not JSON (${(err as Error).message})`);
  }
  if (!isObject(value)) throw bad('expected a JSON object');
  const unknown = Object.keys(value).filter(
    (key) => !(LINE_FIELDS as readonly string[]).includes(key),
  );
  if (unknown.length > 0) {
    throw bad(`unknown field ${JSON.stringify(unknown[0])} (fields: ${LINE_FIELDS.join(', ')})`);
  }
  const { taskType, payload, maxAttempts, priority, idempotencyKey, timeoutMillis } = value;
  if (typeof taskType !== 'string' || taskType === '') throw bad('taskType must be a string');
  if (!isObject(payload)) throw bad('payload must be a JSON object');
  const job: BatchJob = { taskType, payload: payload as JsonObject };
  if (maxAttempts !== undefined && maxAttempts !== null) {
    if (!Number.isSafeInteger(maxAttempts)) throw bad('maxAttempts must be an integer');
    job.maxAttempts = maxAttempts as number;
  }
  if (priority !== undefined && priority !== null) {
    if (!(PRIORITIES as readonly unknown[]).includes(priority)) {
      throw bad(`priority must be one of ${PRIORITIES.join(', ')}`);
    }
    job.priority = priority as Priority;
  }
  if (idempotencyKey !== undefined && idempotencyKey !== null) {
    if (typeof idempotencyKey !== 'string') throw bad('idempotencyKey must be a string');
    job.idempotencyKey = idempotencyKey;
  }
  if (timeoutMillis !== undefined && timeoutMillis !== null) {
    if (!Number.isSafeInteger(timeoutMillis)) throw bad('timeoutMillis must be an integer');
    job.timeoutMillis = timeoutMillis as number;
  }
  return job;
}

/** Every non-blank line of the file as a job (with its line number). */
export function parseJobLines(text: string): { job: BatchJob; line: number }[] {
  const jobs: { job: BatchJob; line: number }[] = [];
  for (const [i, raw] of text.split('\n').entries()) {
    if (raw.trim() === '') continue;
    jobs.push({ job: parseJobLine(raw, i + 1), line: i + 1 });
  }
  if (jobs.length === 0) throw new UsageError('the file has no jobs (one JSON object a line)');
  return jobs;
}

/**
 * Sends the jobs in batches of at most {@link MAX_BATCH_JOBS}, in order;
 * resolves with every id in order. A refused batch rejects with its error,
 * the message saying which lines it held and what was created before it
 * (`created` is told those ids).
 */
export async function submitInBatches(
  client: Pick<DtpClient, 'submitMany'>,
  jobs: readonly { job: BatchJob; line: number }[],
  created: (ids: readonly string[]) => void,
): Promise<string[]> {
  const jobIds: string[] = [];
  for (let start = 0; start < jobs.length; start += MAX_BATCH_JOBS) {
    const part = jobs.slice(start, start + MAX_BATCH_JOBS);
    try {
      jobIds.push(...(await client.submitMany(part.map((entry) => entry.job))));
    } catch (err) {
      if (jobIds.length > 0) created(jobIds);
      throw inBatch(err, part, jobIds.length);
    }
  }
  return jobIds;
}

function inBatch(err: unknown, part: readonly { line: number }[], created: number): unknown {
  if (!(err instanceof Error)) return err;
  const first = part[0]?.line ?? 0;
  const last = part[part.length - 1]?.line ?? 0;
  const before =
    created === 0
      ? 'no job was created'
      : `the ${created} jobs of the lines before it were created`;
  err.message = `the batch of lines ${first}..${last} was refused (${before}): ${err.message}`;
  return err;
}
