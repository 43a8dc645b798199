/**
 * Client requests other than SUBMIT_JOB: status, wait, cancel, list jobs,
 * list workers; and the end of a client connection.
 */
import { MAX_FRAME_BYTES } from '../../protocol/framing.js';
import {
  isTerminalState,
  type ClientRequest,
  type JobSnapshot,
  type ListJobs,
  type WorkerSnapshot,
} from '../../protocol/messages.js';
import { cancelJob, schedule } from './job-lifecycle.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { jobSnapshot, type CoreState } from './state.js';
import { submit } from './submission.js';

/** LIST_JOBS page size when the request names none. */
export const DEFAULT_LIST_LIMIT = 500;
/** Largest LIST_JOBS page a request may ask for. */
export const MAX_LIST_LIMIT = 10_000;
/** WAIT_JOB timeout when the request names none, and the longest one honoured. */
export const DEFAULT_WAIT_MS = 60_000;
export const MAX_WAIT_MS = 3_600_000;
/** Room left in a JOB_LIST frame for the envelope around the jobs. */
const LIST_ENVELOPE_BYTES = 1_024;

export function handleClientRequest(
  s: CoreState,
  connId: number,
  requestId: number,
  msg: ClientRequest,
): void {
  switch (msg.type) {
    case 'SUBMIT_JOB':
      return submit(s, connId, requestId, msg);
    case 'GET_JOB_STATUS':
      return status(s, connId, requestId, msg.jobId);
    case 'WAIT_JOB':
      return wait(s, connId, requestId, msg.jobId, msg.timeoutMillis);
    case 'CANCEL_JOB':
      return cancel(s, connId, requestId, msg.jobId);
    case 'LIST_JOBS':
      return listJobs(s, connId, requestId, msg);
    case 'LIST_WORKERS':
      return s.reply(connId, requestId, { type: 'WORKER_LIST', workers: workerList(s) });
    case 'AUTH':
      // Tokens are checked by the shell before a request reaches the core; an
      // AUTH that gets here is one more on an open connection: harmless.
      return s.reply(connId, requestId, { type: 'AUTH_OK' });
    case 'PURGE_JOBS':
      return s.replyError(
        connId,
        requestId,
        ErrorCode.UnsupportedRequest,
        'Unsupported request: PURGE_JOBS is not offered by this coordinator yet',
      );
  }
}

/**
 * Live workers sorted by id, within one frame: when the list would not fit,
 * the extension fields `runningJobs`, then `taskTypes`, are left out (a
 * worker may declare up to 1024 names), and as a last resort the list is cut.
 */
function workerList(s: CoreState): WorkerSnapshot[] {
  const workers = s.workers.snapshots();
  const budget = MAX_FRAME_BYTES - LIST_ENVELOPE_BYTES;
  const size = (): number => Buffer.byteLength(JSON.stringify(workers));
  if (size() <= budget) return workers;
  for (const worker of workers) delete worker.runningJobs;
  if (size() <= budget) return workers;
  for (const worker of workers) delete worker.taskTypes;
  let bytes = 2;
  const fitting: WorkerSnapshot[] = [];
  for (const worker of workers) {
    bytes += Buffer.byteLength(JSON.stringify(worker)) + 1;
    if (bytes > budget) break;
    fitting.push(worker);
  }
  return fitting;
}

function unknownJob(s: CoreState, connId: number, requestId: number, jobId: string): void {
  s.replyError(connId, requestId, ErrorCode.UnknownJob, `Unknown job: ${jobId.slice(0, 200)}`);
}

function status(s: CoreState, connId: number, requestId: number, jobId: string): void {
  const job = s.findJob(jobId);
  if (job === undefined) return unknownJob(s, connId, requestId, jobId);
  s.reply(connId, requestId, { type: 'JOB_STATUS', job: jobSnapshot(job) });
}

function cancel(s: CoreState, connId: number, requestId: number, jobId: string): void {
  const active = s.jobs.get(jobId);
  if (active !== undefined) {
    cancelJob(s, active);
    s.reply(connId, requestId, { type: 'JOB_CANCEL', cancelled: true, job: jobSnapshot(active) });
    schedule(s);
    return;
  }
  const job = s.deps.store.getJob(jobId);
  if (job === undefined) return unknownJob(s, connId, requestId, jobId);
  s.reply(connId, requestId, { type: 'JOB_CANCEL', cancelled: false, job: jobSnapshot(job) });
}

function wait(
  s: CoreState,
  connId: number,
  requestId: number,
  jobId: string,
  timeoutMillis: number | null,
): void {
  const job = s.findJob(jobId);
  if (job === undefined) return unknownJob(s, connId, requestId, jobId);
  const timeoutMs = Math.min(Math.max(timeoutMillis ?? DEFAULT_WAIT_MS, 0), MAX_WAIT_MS);
  if (isTerminalState(job.state) || timeoutMs === 0) {
    s.reply(connId, requestId, { type: 'JOB_STATUS', job: jobSnapshot(job) });
    return;
  }
  s.waits.add({ jobId, connId, requestId });
  s.armWait(connId, requestId, timeoutMs);
}

/** A WAIT_JOB timed out: answer with the job as it is now. */
export function expireWait(s: CoreState, connId: number, requestId: number): void {
  const wait = s.waits.take(connId, requestId);
  if (wait === undefined) return;
  const job = s.findJob(wait.jobId);
  if (job === undefined) throw new Error(`waited-for job ${wait.jobId} vanished`);
  s.reply(connId, requestId, { type: 'JOB_STATUS', job: jobSnapshot(job) });
}

/** A client connection ended: forget its pending waits. */
export function clientClosed(s: CoreState, connId: number): void {
  s.waits.dropConnection(connId);
}

/** Parses a cursor (the seq of the last job of the previous page). */
function parseCursor(cursor: string | null): number | null | undefined {
  if (cursor === null) return null;
  if (!/^[1-9][0-9]{0,15}$/.test(cursor)) return undefined;
  return Number(cursor);
}

/**
 * Newest first, at most `limit` jobs, and never a frame over 1 MiB: the page
 * ends early (with a cursor) when the next job would not fit.
 */
function listJobs(s: CoreState, connId: number, requestId: number, msg: ListJobs): void {
  const beforeSeq = parseCursor(msg.cursor);
  if (beforeSeq === undefined) {
    return s.replyError(
      connId,
      requestId,
      ErrorCode.InvalidRequest,
      'Invalid request: malformed cursor',
    );
  }
  if (msg.limit !== null && msg.limit < 1) {
    return s.replyError(
      connId,
      requestId,
      ErrorCode.InvalidRequest,
      'Invalid request: limit must be at least 1',
    );
  }
  const limit = Math.min(msg.limit ?? DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT);
  const rows = s.deps.store.listJobs({ beforeSeq, state: msg.state, limit: limit + 1 });
  const jobs: JobSnapshot[] = [];
  let bytes = LIST_ENVELOPE_BYTES;
  let lastSeq = 0;
  for (const row of rows.slice(0, limit)) {
    const snapshot = jobSnapshot(row);
    bytes += Buffer.byteLength(JSON.stringify(snapshot)) + 1;
    if (bytes > MAX_FRAME_BYTES && jobs.length > 0) break;
    jobs.push(snapshot);
    lastSeq = row.seq;
  }
  const more = rows.length > jobs.length;
  s.reply(connId, requestId, { type: 'JOB_LIST', jobs, nextCursor: more ? String(lastSeq) : null });
}
