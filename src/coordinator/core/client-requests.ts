/**
 * Client requests other than SUBMIT_JOB: status, wait, cancel, list jobs,
 * list workers, purge; the answers of the reads they start; and the end of a
 * client connection.
 *
 * A job the core holds (active, or just finished and not yet committed) is
 * answered from memory. Any other job is history: the store is asked, and the
 * request is answered when the read comes back (replies still leave in
 * request order per connection; the shell sees to that).
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import { queueNameProblem } from '../../protocol/queue-names.js';
import { StateView } from '../../protocol/job-view.js';
import { MAX_FRAME_BYTES } from '../../protocol/framing.js';
import {
  isTerminalState,
  type AttemptSnapshot,
  type ClientRequest,
  type JobSnapshot,
  type JobStatus,
  type JsonObject,
  type ListJobs,
  type WorkerSnapshot,
} from '../../protocol/messages.js';
import type { AttemptRecord, JobRecord, ListQuery } from '../../store/store.js';
import {
  attemptSnapshot,
  coreJobSnapshot,
  impliedAttempts,
  jobSnapshot,
  toRecord,
  type CoreJob,
} from './job.js';
import { cancelJob, schedule } from './job-lifecycle.js';
import { loadFar, memoryJob } from './scheduled-window.js';
import { handleScheduleRequest } from './schedule-requests.js';
import type { PendingRead } from './pending-reads.js';
import { purgeOnRequest } from './retention.js';
import type { CoreState } from './state.js';
import { submit } from './submission.js';
import { listQueues, setQueue } from './queue-requests.js';
import { submitFlow } from './flow-submission.js';
import { submitBatch } from './batch-submission.js';
import { rerunJobs } from './rerun.js';
import { subscribe, type Asker } from './subscriber-requests.js';
import { deleteTrigger, listTriggers, publishEvent, setTrigger, signalJob } from './signals.js';

/** Largest LIST_JOBS page; also the page when the request names no limit (the frame cuts it). */
export const MAX_LIST_LIMIT = 10_000;
/** WAIT_JOB timeout when the request names none, and the longest one honoured. */
export const DEFAULT_WAIT_MS = 60_000;
export const MAX_WAIT_MS = 3_600_000;
/** Room left in a JOB_LIST frame for the envelope around the jobs. */
const LIST_ENVELOPE_BYTES = 1_024;

/** One client request; `address` is its peer's (null: the in-process client). */
export function handleClientRequest(
  s: CoreState,
  connId: number,
  requestId: number,
  msg: ClientRequest,
  address: string | null,
): void {
  switch (msg.type) {
    case 'SUBMIT_JOB':
      return submit(s, connId, requestId, msg);
    case 'SUBMIT_JOBS':
      return submitBatch(s, connId, requestId, msg);
    case 'GET_JOB_STATUS':
      return status(s, connId, requestId, msg.jobId, {
        withAttempts: msg.attempts === true,
        withPayload: msg.payload === true,
      });
    case 'WAIT_JOB':
      return wait(s, { connId, requestId, address }, msg.jobId, msg.timeoutMillis);
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
      return purgeOnRequest(s, connId, requestId, msg);
    case 'RERUN_JOBS':
      return rerunJobs(s, connId, requestId, msg);
    case 'LIST_QUEUES':
      return listQueues(s, connId, requestId);
    case 'SET_QUEUE':
      return setQueue(s, connId, requestId, msg);
    case 'SUBMIT_FLOW':
      return submitFlow(s, connId, requestId, msg);
    case 'SUBSCRIBE_JOBS':
      return subscribe(s, { connId, requestId, address }, msg);
    case 'SIGNAL_JOB':
      return signalJob(s, connId, requestId, msg);
    case 'PUBLISH_EVENT':
      return publishEvent(s, connId, requestId, msg);
    case 'SET_TRIGGER':
      return setTrigger(s, connId, requestId, msg);
    case 'LIST_TRIGGERS':
      return listTriggers(s, connId, requestId);
    case 'DELETE_TRIGGER':
      return deleteTrigger(s, connId, requestId, msg);
    case 'LIST_SHARDS':
      // The shell answers it (it knows the leases and addresses); one that gets here is refused.
      return s.reply(connId, requestId, {
        type: 'ERROR',
        code: ErrorCode.UnsupportedRequest,
        message: 'Unsupported request: LIST_SHARDS is answered by the coordinator, not a shard',
      });
    case 'SET_SCHEDULE':
    case 'LIST_SCHEDULES':
    case 'GET_SCHEDULE':
    case 'PAUSE_SCHEDULE':
    case 'RESUME_SCHEDULE':
    case 'DELETE_SCHEDULE':
    case 'TRIGGER_SCHEDULE':
      return handleScheduleRequest(s, connId, requestId, msg);
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

/** The attempts of a job in memory: ended ones, then the running one. */
function attemptsInMemory(job: Readonly<CoreJob>): AttemptSnapshot[] {
  const attempts = job.history.map(attemptSnapshot);
  if (job.lease !== null) {
    attempts.push({
      attemptNumber: job.attempts,
      attemptId: job.lease.attemptId,
      workerId: job.lease.workerId,
      startedAtMillis: job.lease.startedAtMs,
      finishedAtMillis: null,
      outcome: 'RUNNING',
      error: null,
    });
  }
  return attempts;
}

interface StatusOptions {
  withAttempts: boolean;
  withPayload: boolean;
}

/**
 * A JOB_STATUS reply, with the attempts and the payload when asked for. The
 * payload is left out (`payloadOmitted`) when the reply would not fit in one
 * frame; the snapshot and the attempts always come.
 */
function statusReply(
  job: JobSnapshot,
  attempts: AttemptSnapshot[] | null,
  payloadJson: string | null,
): JobStatus {
  const reply: JobStatus = { type: 'JOB_STATUS', job };
  if (attempts !== null) reply.attempts = attempts;
  if (payloadJson === null) return reply;
  const budget = MAX_FRAME_BYTES - LIST_ENVELOPE_BYTES;
  const rest = Buffer.byteLength(JSON.stringify(reply));
  if (rest + Buffer.byteLength(payloadJson) > budget) reply.payloadOmitted = true;
  else reply.payload = JSON.parse(payloadJson) as JsonObject;
  return reply;
}

function status(
  s: CoreState,
  connId: number,
  requestId: number,
  jobId: string,
  options: StatusOptions,
): void {
  const job = s.jobs.get(jobId);
  if (job === undefined) {
    s.read(
      { op: 'job', jobId, withAttempts: options.withAttempts },
      { kind: 'status', connId, requestId, jobId, ...options },
    );
    return;
  }
  s.reply(
    connId,
    requestId,
    statusReply(
      withChildren(coreJobSnapshot(job), s.children.childrenOf(jobId)),
      options.withAttempts ? attemptsInMemory(job) : null,
      options.withPayload ? job.payloadJson : null,
    ),
  );
}

/** A status snapshot with the job's children listed (none: the field stays absent). */
function withChildren(job: JobSnapshot, children: readonly string[]): JobSnapshot {
  return children.length === 0 ? job : { ...job, children: [...children] };
}

function cancel(s: CoreState, connId: number, requestId: number, jobId: string): void {
  const job = memoryJob(s, jobId);
  if (job === undefined) {
    s.read({ op: 'job', jobId, withAttempts: false }, { kind: 'cancel', connId, requestId, jobId });
    return;
  }
  const cancelled = cancelJob(s, job);
  s.reply(connId, requestId, { type: 'JOB_CANCEL', cancelled, job: coreJobSnapshot(job) });
  if (cancelled) schedule(s);
}

function wait(s: CoreState, asker: Asker, jobId: string, timeoutMillis: number | null): void {
  const { connId, requestId, address } = asker;
  const job = memoryJob(s, jobId);
  if (job === undefined) {
    // Ended a moment ago: its snapshot is what the store would answer.
    const ended = s.jobs.recent(jobId);
    if (ended !== undefined) {
      s.reply(connId, requestId, { type: 'JOB_STATUS', job: coreJobSnapshot(ended) });
      return;
    }
    s.read(
      { op: 'job', jobId, withAttempts: false },
      { kind: 'wait', connId, requestId, jobId, timeoutMillis, address },
    );
    return;
  }
  const timeoutMs = Math.min(Math.max(timeoutMillis ?? DEFAULT_WAIT_MS, 0), MAX_WAIT_MS);
  if (isTerminalState(job.state) || timeoutMs === 0) {
    s.reply(connId, requestId, { type: 'JOB_STATUS', job: coreJobSnapshot(job) });
    return;
  }
  const refusal = waitRefusal(s, connId, address);
  if (refusal !== null) {
    s.replyError(connId, requestId, ErrorCode.TooManyWaits, refusal);
    return;
  }
  // The job's own id string: the request's copy would cost a string per wait.
  s.waits.add({ jobId: job.jobId, connId, requestId }, address);
  s.armWait(connId, requestId, timeoutMs);
}

/**
 * Why one more pending wait is refused, or null: a connection holds at most
 * `maxWaitsPerConnection`, the connections of one address together
 * `maxWaitsPerAddress`, the coordinator at most `maxWaits` in all. Only the
 * request is refused; the client may poll instead (ours does).
 */
function waitRefusal(s: CoreState, connId: number, address: string | null): string | null {
  const { maxWaitsPerConnection, maxWaitsPerAddress, maxWaits } = s.config;
  if (s.waits.countFor(connId) >= maxWaitsPerConnection) {
    return `Too many pending WAIT_JOB requests on this connection (limit ${maxWaitsPerConnection}); ask again later or poll GET_JOB_STATUS`;
  }
  if (address !== null && s.waits.countForAddress(address) >= maxWaitsPerAddress) {
    return `Too many pending WAIT_JOB requests from this address (limit ${maxWaitsPerAddress}); ask again later or poll GET_JOB_STATUS`;
  }
  if (s.waits.size >= maxWaits) {
    return `Too many pending WAIT_JOB requests on this coordinator (limit ${maxWaits}); ask again later or poll GET_JOB_STATUS`;
  }
  return null;
}

/** A WAIT_JOB timed out: answer with the job as it is now. */
export function expireWait(s: CoreState, connId: number, requestId: number): void {
  const wait = s.waits.take(connId, requestId);
  if (wait === undefined) return;
  const job = s.jobs.get(wait.jobId);
  if (job === undefined) throw new Error(`waited-for job ${wait.jobId} vanished`);
  s.reply(connId, requestId, { type: 'JOB_STATUS', job: coreJobSnapshot(job) });
}

/**
 * Reading from a client connection stopped behind one of its pending waits
 * (replies leave in request order, so nothing after that wait can): every
 * wait of the connection is answered now with its job as it is, as if its
 * timeout had passed, and the connection flows again.
 */
export function releaseWaits(s: CoreState, connId: number): void {
  for (const wait of s.waits.takeConnection(connId)) {
    const job = s.jobs.get(wait.jobId);
    if (job === undefined) throw new Error(`waited-for job ${wait.jobId} vanished`);
    s.reply(connId, wait.requestId, { type: 'JOB_STATUS', job: coreJobSnapshot(job) });
  }
}

/** A client connection ended: forget its pending waits, also those whose read is out. */
export function clientClosed(s: CoreState, connId: number): void {
  s.waits.dropConnection(connId);
  s.reads.abandonWaits(connId);
  s.subscriptions.dropConnection(connId);
}

/** Parses a cursor (the seq of the last job of the previous page). */
function parseCursor(cursor: string | null): number | null | undefined {
  if (cursor === null) return null;
  if (!/^[1-9][0-9]{0,15}$/.test(cursor)) return undefined;
  return Number(cursor);
}

function listJobs(s: CoreState, connId: number, requestId: number, msg: ListJobs): void {
  const beforeSeq = parseCursor(msg.cursor);
  const invalid = (what: string): void =>
    s.replyError(connId, requestId, ErrorCode.InvalidRequest, `Invalid request: ${what}`);
  if (beforeSeq === undefined) return invalid('malformed cursor');
  if (msg.limit !== null && msg.limit < 1) return invalid('limit must be at least 1');
  const limit = Math.min(msg.limit ?? MAX_LIST_LIMIT, MAX_LIST_LIMIT);
  const view = StateView.of(msg.knownStates);
  if (msg.state !== null && !view.knows(msg.state)) {
    return invalid(`state ${msg.state} is not in this request's knownStates`);
  }
  const states = msg.state === null ? null : view.matchedBy(msg.state);
  const queue = msg.queue ?? null;
  if (queue !== null && queueNameProblem(queue) !== null) {
    return invalid(`queue ${queueNameProblem(queue) as string}`);
  }
  const query: ListQuery = { beforeSeq, states, taskType: msg.taskType ?? null, limit, queue };
  const key = msg.idempotencyKey ?? null;
  if (key !== null) return listByKey(s, connId, requestId, query, key);
  // Every overlay row can hide one stored row, so ask for that many more.
  const fetchLimit = limit + s.jobs.overlaySize + 1;
  s.read(
    { op: 'list', query: { ...query, limit: fetchLimit } },
    { kind: 'list', connId, requestId, query, fetchLimit, seen: new Map() },
  );
}

/**
 * LIST_JOBS with an idempotency key: the one job holding it, if it passes the
 * other filters. Keys of active and just-finished jobs are in memory; any
 * other key is looked up in the store.
 */
function listByKey(
  s: CoreState,
  connId: number,
  requestId: number,
  query: ListQuery,
  key: string,
): void {
  const job = s.jobs.byKey(key);
  if (job === undefined) {
    s.read({ op: 'jobByKey', key }, { kind: 'listKey', connId, requestId, query, key });
    return;
  }
  replyKeyPage(s, connId, requestId, query, toRecord(job));
}

function replyKeyPage(
  s: CoreState,
  connId: number,
  requestId: number,
  query: ListQuery,
  row: Readonly<JobRecord> | null,
): void {
  const jobs = row !== null && matches(row, query) ? [jobSnapshot(row)] : [];
  s.reply(connId, requestId, { type: 'JOB_LIST', jobs, nextCursor: null });
}

/** The store's answer for a key; a job that took the key meanwhile is in memory and wins. */
export function listKeyDone(
  s: CoreState,
  read: Extract<PendingRead, { kind: 'listKey' }>,
  stored: JobRecord | null,
): void {
  const live = s.jobs.byKey(read.key);
  const row = live !== undefined ? toRecord(live) : stored;
  replyKeyPage(s, read.connId, read.requestId, read.query, row);
}

function matches(row: Readonly<JobRecord>, query: ListQuery): boolean {
  if (query.beforeSeq !== null && row.seq >= query.beforeSeq) return false;
  if (query.states !== null && !query.states.includes(row.state)) return false;
  if (query.queue !== undefined && query.queue !== null && row.queue !== query.queue) return false;
  return query.taskType === null || row.taskType === query.taskType;
}

/**
 * Newest first, at most `limit` jobs, and never a frame over 1 MiB: the page
 * ends early (with a cursor) when the next job would not fit.
 */
export function listDone(
  s: CoreState,
  read: Extract<PendingRead, { kind: 'list' }>,
  stored: readonly JobRecord[],
): void {
  const overlay = read.seen;
  for (const [jobId, row] of s.jobs.overlay()) overlay.set(jobId, row);
  const merged = stored.filter((row) => !overlay.has(row.jobId));
  for (const row of overlay.values()) if (matches(row, read.query)) merged.push(row);
  merged.sort((a, b) => b.seq - a.seq);
  const jobs: JobSnapshot[] = [];
  let bytes = LIST_ENVELOPE_BYTES;
  let lastSeq = 0;
  for (const row of merged) {
    if (jobs.length >= read.query.limit) break;
    const snapshot = jobSnapshot(row);
    bytes += Buffer.byteLength(JSON.stringify(snapshot)) + 1;
    if (bytes > MAX_FRAME_BYTES && jobs.length > 0) break;
    jobs.push(snapshot);
    lastSeq = row.seq;
  }
  const more = merged.length > jobs.length || stored.length >= read.fetchLimit;
  s.reply(read.connId, read.requestId, {
    type: 'JOB_LIST',
    jobs,
    nextCursor: more && jobs.length > 0 ? String(lastSeq) : null,
  });
}

/** A job read came back for a status, cancel or wait request. */
export function jobRead(
  s: CoreState,
  read: Extract<PendingRead, { kind: 'status' | 'cancel' | 'wait' }>,
  stored: JobRecord | null,
  attempts: AttemptRecord[] | null,
  children: readonly string[] = [],
): void {
  const { connId, requestId, jobId } = read;
  if (read.kind === 'wait' && read.abandoned === true) return;
  // The job may be active and not in memory (a far delayed job), and so
  // come into memory while the read is out (the window reached it): memory
  // answers then. A row committed while the read was out is newer than the
  // read's. A cancel or a wait of a far job takes it into memory.
  const latest = read.latest ?? stored;
  if (s.jobs.get(jobId) !== undefined) return redo(s, read);
  if (read.kind !== 'status' && latest?.state === 'SCHEDULED') {
    loadFar(s, latest);
    return redo(s, read);
  }
  // Otherwise only history was read, and history never becomes active
  // again: the row is the answer (or there is no such job).
  if (latest === null) return unknownJob(s, connId, requestId, jobId);
  stored = latest;
  const job = jobSnapshot(stored);
  switch (read.kind) {
    case 'status':
      s.reply(
        connId,
        requestId,
        statusReply(
          withChildren(job, children),
          read.withAttempts ? impliedAttempts(stored, attempts ?? []).map(attemptSnapshot) : null,
          read.withPayload ? stored.payloadJson : null,
        ),
      );
      return;
    case 'cancel':
      s.reply(connId, requestId, { type: 'JOB_CANCEL', cancelled: false, job });
      return;
    case 'wait':
      s.reply(connId, requestId, { type: 'JOB_STATUS', job });
      return;
  }
}

/** A status, cancel or wait request again, now that memory holds its job. */
function redo(
  s: CoreState,
  read: Extract<PendingRead, { kind: 'status' | 'cancel' | 'wait' }>,
): void {
  const { connId, requestId, jobId } = read;
  switch (read.kind) {
    case 'status':
      return status(s, connId, requestId, jobId, read);
    case 'cancel':
      return cancel(s, connId, requestId, jobId);
    case 'wait':
      return wait(
        s,
        { connId, requestId, address: read.address ?? null },
        jobId,
        read.timeoutMillis ?? null,
      );
  }
}
