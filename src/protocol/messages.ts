/**
 * Every message of wire protocol v1 (see docs/PROTOCOL.md), as one
 * discriminated union on `type`.
 *
 * Worker port:  WORKER_REGISTER, WORKER_REGISTERED, HEARTBEAT, TASK_ASSIGN,
 *               TASK_CANCEL, TASK_RESULT, ERROR; extension WORKER_DRAINING.
 * Client port:  SUBMIT_JOB, JOB_SUBMITTED, SUBMIT_REJECTED, GET_JOB_STATUS,
 *               JOB_STATUS, LIST_JOBS, JOB_LIST, LIST_WORKERS, WORKER_LIST,
 *               CANCEL_JOB, JOB_CANCEL, ERROR; extension WAIT_JOB.
 *
 * Optional fields are always present after decoding, as `null` when the peer
 * left them out or sent an explicit `null` (the two mean the same thing).
 */

/** The six job states. */
export const JOB_STATES = [
  'QUEUED',
  'RUNNING',
  'RETRY_WAIT',
  'COMPLETED',
  'FAILED',
  'CANCELLED',
] as const;
export type JobState = (typeof JOB_STATES)[number];

/** Base priorities, highest first. */
export const PRIORITIES = ['HIGH', 'NORMAL', 'LOW'] as const;
export type Priority = (typeof PRIORITIES)[number];

export type JsonValue = string | number | boolean | null | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

/** A job as reported to clients. */
export interface JobSnapshot {
  jobId: string;
  taskType: string;
  state: JobState;
  attempts: number;
  maxAttempts: number;
  /** Only while RUNNING. */
  workerId: string | null;
  /** Only once COMPLETED. */
  result: string | null;
  /** The latest attempt's error; kept after a later success. */
  error: string | null;
  createdAtMillis: number;
  updatedAtMillis: number;
  /** Base priority (aging is not shown). */
  priority: Priority;
}

/** A live worker as reported to clients. */
export interface WorkerSnapshot {
  workerId: string;
  capacity: number;
  activeTasks: number;
  lastHeartbeatMillis: number;
}

// ---- worker port ----------------------------------------------------------

export interface WorkerRegister {
  type: 'WORKER_REGISTER';
  workerId: string;
  capacity: number;
  /** Extension: task types this worker runs; null = the five built-ins. */
  taskTypes: string[] | null;
}
export interface WorkerRegistered {
  type: 'WORKER_REGISTERED';
  workerId: string;
}
export interface Heartbeat {
  type: 'HEARTBEAT';
  workerId: string;
}
export interface TaskAssign {
  type: 'TASK_ASSIGN';
  jobId: string;
  /** The lease: a fresh UUID per assignment. */
  attemptId: string;
  /** 1-based. */
  attemptNumber: number;
  taskType: string;
  payload: JsonObject;
}
export interface TaskCancel {
  type: 'TASK_CANCEL';
  jobId: string;
  attemptId: string;
}
export interface TaskResult {
  type: 'TASK_RESULT';
  workerId: string;
  jobId: string;
  attemptId: string;
  success: boolean;
  result: string | null;
  error: string | null;
}
/** Extension: the worker takes no new assignments from now on. */
export interface WorkerDraining {
  type: 'WORKER_DRAINING';
  workerId: string;
}
export interface ErrorMessage {
  type: 'ERROR';
  message: string;
  /** Extension: a stable error code (e.g. `UNKNOWN_JOB`). */
  code: string | null;
}

// ---- client port ----------------------------------------------------------

export interface SubmitJob {
  type: 'SUBMIT_JOB';
  taskType: string;
  payload: JsonObject;
  /** <= 0 or null: the server default. */
  maxAttempts: number | null;
  idempotencyKey: string | null;
  /** null = NORMAL. */
  priority: Priority | null;
}
export interface JobSubmitted {
  type: 'JOB_SUBMITTED';
  jobId: string;
  /** Extension: the job right after submission (saves a status round trip). */
  job: JobSnapshot | null;
}
export interface SubmitRejected {
  type: 'SUBMIT_REJECTED';
  reason: string;
  activeCount: number;
  limit: number;
  retryable: boolean;
}
export interface GetJobStatus {
  type: 'GET_JOB_STATUS';
  jobId: string;
}
export interface JobStatus {
  type: 'JOB_STATUS';
  job: JobSnapshot;
}
export interface ListJobs {
  type: 'LIST_JOBS';
  /** Extension: page size. */
  limit: number | null;
  /** Extension: only jobs in this state. */
  state: JobState | null;
  /** Extension: continue after the page that returned this cursor. */
  cursor: string | null;
}
export interface JobList {
  type: 'JOB_LIST';
  /** Newest first. */
  jobs: JobSnapshot[];
  /** Extension: null on the last page. */
  nextCursor: string | null;
}
export interface ListWorkers {
  type: 'LIST_WORKERS';
}
export interface WorkerList {
  type: 'WORKER_LIST';
  workers: WorkerSnapshot[];
}
export interface CancelJob {
  type: 'CANCEL_JOB';
  jobId: string;
}
export interface JobCancel {
  type: 'JOB_CANCEL';
  cancelled: boolean;
  job: JobSnapshot;
}
/** Extension: reply as soon as the job is terminal, or after timeoutMillis. */
export interface WaitJob {
  type: 'WAIT_JOB';
  jobId: string;
  /** null: the server default. */
  timeoutMillis: number | null;
}

export type WorkerToCoordinator = WorkerRegister | Heartbeat | TaskResult | WorkerDraining;
export type CoordinatorToWorker = WorkerRegistered | TaskAssign | TaskCancel | ErrorMessage;
export type ClientRequest = SubmitJob | GetJobStatus | ListJobs | ListWorkers | CancelJob | WaitJob;
export type ClientReply =
  JobSubmitted | SubmitRejected | JobStatus | JobList | WorkerList | JobCancel | ErrorMessage;

export type Message = WorkerToCoordinator | CoordinatorToWorker | ClientRequest | ClientReply;
export type MessageType = Message['type'];
export type MessageOf<T extends MessageType> = Extract<Message, { type: T }>;

const CLIENT_REQUEST_TYPES: ReadonlySet<string> = new Set<ClientRequest['type']>([
  'SUBMIT_JOB',
  'GET_JOB_STATUS',
  'LIST_JOBS',
  'LIST_WORKERS',
  'CANCEL_JOB',
  'WAIT_JOB',
]);
const WORKER_TO_COORDINATOR_TYPES: ReadonlySet<string> = new Set<WorkerToCoordinator['type']>([
  'WORKER_REGISTER',
  'HEARTBEAT',
  'TASK_RESULT',
  'WORKER_DRAINING',
]);

export function isClientRequest(msg: Message): msg is ClientRequest {
  return CLIENT_REQUEST_TYPES.has(msg.type);
}

export function isWorkerToCoordinator(msg: Message): msg is WorkerToCoordinator {
  return WORKER_TO_COORDINATOR_TYPES.has(msg.type);
}

const TERMINAL: ReadonlySet<JobState> = new Set<JobState>(['COMPLETED', 'FAILED', 'CANCELLED']);

/** COMPLETED, FAILED and CANCELLED have no exits. */
export function isTerminalState(state: JobState): boolean {
  return TERMINAL.has(state);
}
