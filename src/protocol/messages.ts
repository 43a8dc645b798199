/**
 * Every message of wire protocol v1 (see docs/PROTOCOL.md), as one
 * discriminated union on `type`.
 *
 * Worker port:  WORKER_REGISTER, WORKER_REGISTERED, HEARTBEAT, TASK_ASSIGN,
 *               TASK_CANCEL, TASK_RESULT, ERROR; extensions WORKER_DRAINING,
 *               HEARTBEAT_ACK, HELD_ATTEMPTS.
 * Client port:  SUBMIT_JOB, JOB_SUBMITTED, SUBMIT_REJECTED, GET_JOB_STATUS,
 *               JOB_STATUS, LIST_JOBS, JOB_LIST, LIST_WORKERS, WORKER_LIST,
 *               CANCEL_JOB, JOB_CANCEL, ERROR; extensions WAIT_JOB, AUTH,
 *               AUTH_OK, PURGE_JOBS, JOBS_PURGED, RERUN_JOBS, JOBS_RERUN,
 *               SUBMIT_JOBS, JOBS_SUBMITTED,
 *               and the schedule requests SET_SCHEDULE, LIST_SCHEDULES,
 *               GET_SCHEDULE, PAUSE_SCHEDULE, RESUME_SCHEDULE, DELETE_SCHEDULE,
 *               TRIGGER_SCHEDULE with their replies SCHEDULE_INFO,
 *               SCHEDULE_LIST, SCHEDULE_DELETED; SUBMIT_FLOW, FLOW_SUBMITTED.
 *
 * Extensions on both ports: TASK_PROGRESS, the calls ENQUEUE_CHILD ->
 * CHILD_ENQUEUED (worker); SUBSCRIBE_JOBS,
 * SUBSCRIBED, JOB_EVENT, EVENTS_MISSED (client).
 *
 * Optional v1 fields are always present after decoding, as `null` when the
 * peer left them out or sent an explicit `null` (the two mean the same thing).
 * Extension fields (beyond version 1) are declared optional (`?:`):
 * null and absent still mean the same, but such a field is simply absent after
 * decoding when the peer left it out or sent null, and the encoder leaves it
 * out when it is null, so a v1 peer never sees it unless it carries a value.
 */

/**
 * The job states. The first six are version 1's; `SCHEDULED` (waiting for
 * its time) and `WAITING` (waiting for other jobs) are extensions, shown only
 * to clients that list them in `knownStates` (see job-view.ts).
 */
export const JOB_STATES = [
  'QUEUED',
  'RUNNING',
  'RETRY_WAIT',
  'COMPLETED',
  'FAILED',
  'CANCELLED',
  'SCHEDULED',
  'WAITING',
] as const;
export type JobState = (typeof JOB_STATES)[number];

/** The states of wire protocol v1: every client understands these. */
export const V1_JOB_STATES = [
  'QUEUED',
  'RUNNING',
  'RETRY_WAIT',
  'COMPLETED',
  'FAILED',
  'CANCELLED',
] as const satisfies readonly JobState[];
export type V1JobState = (typeof V1_JOB_STATES)[number];

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
  /** Extension: when the latest attempt started (null before the first). */
  startedAtMillis?: number | null;
  /** Extension: when the job became terminal (null while it is not). */
  finishedAtMillis?: number | null;
  /**
   * Extension: how to read `result`. `json` = the handler returned a JSON
   * value other than a string and `result` is its JSON text; absent or
   * `text` = `result` is the handler's string as it is.
   */
  resultFormat?: ResultFormat | null;
  /** Extension: this job's per-attempt execution deadline, in ms. */
  timeoutMillis?: number | null;
  /** Extension: the idempotency key it was submitted with. */
  idempotencyKey?: string | null;
  /** Extension: the named queue it belongs to (`default` when none was given). */
  queue?: string | null;
  /** Extension: its group key within the queue (fairness and group limits); absent = none. */
  groupKey?: string | null;

  /** Extension: the jobs this one waits for (their ids, in the order given); absent = none. */
  dependsOn?: string[] | null;
  /** Extension: when a delayed job becomes due (epoch ms); absent for a job that was not delayed. */
  runAtMillis?: number | null;
  /** Extension: the schedule whose tick made this job; absent otherwise. */
  scheduleName?: string | null;
  /** Extension: the latest progress its handler reported (kept once it ends). */
  progress?: JobProgress | null;
  /** Extension: the job whose handler enqueued this one (`ctx.enqueue`); absent = none. */
  parentJobId?: string | null;
  /**
   * Extension (GET_JOB_STATUS only): the jobs this one's handler enqueued,
   * oldest first; absent = none.
   */
  children?: string[] | null;
  /** Extension (durable steps): the steps its handler recorded, in order; absent = none. */
  steps?: StepSummary[] | null;
  /**
   * Extension (durable steps): how many of its `attempts` ended in a
   * suspension (`ctx.sleep`, `ctx.waitFor`). They do not count toward
   * `maxAttempts`: the attempts that do are `attempts - suspensions`. Absent
   * = none, or a snapshot without its steps (a listing of stored jobs).
   */
  suspensions?: number | null;
  /**
   * Extension (`requeue`): how many of its `attempts` ended REQUEUED and were
   * not counted toward `maxAttempts` (at most MAX_FREE_REQUEUES): the
   * attempts that count are `attempts - suspensions - requeues`. Absent =
   * none, or a listing of stored jobs (as `steps`).
   */
  requeues?: number | null;
  /**
   * Extension (`rateLimits`): how many of its `attempts` its handler ended
   * rate limited; they did not count toward `maxAttempts` either: the
   * attempts that count are `attempts - suspensions - requeues -
   * rateLimited`. Absent = none, or a listing of stored jobs (as `steps`).
   */
  rateLimited?: number | null;
  /** Extension: the job's deduplication key and mode (absent = none). */
  dedupKey?: string | null;
  dedupMode?: DedupMode | null;
  /** Extension: when the job expires unless an attempt has started (absent = never). */
  expiresAtMillis?: number | null;
  /** Extension: `true` on a job that ended CANCELLED because it expired. */
  expired?: boolean | null;
  /** Extension: what a WAITING job's handler waits for (`ctx.waitFor`, `waitForSignal`, `waitForEvent`). */
  waitingFor?: WaitingFor | null;
  /** Extension: signals sent to the job that no `waitForSignal` has taken yet (absent = none). */
  signalsHeld?: number | null;
}

/** One recorded step of a job, as its snapshot lists it. */
export interface StepSummary {
  name: string;
  /** When it was recorded (coordinator clock). */
  atMillis: number;
  /** Extension: the size of its recorded JSON in bytes (absent from a coordinator that does not say). */
  resultBytes?: number | null;
}

/** Extension (`steps`): one recorded step as an assignment or a STEPS reply carries it. */
export interface RecordedStep {
  name: string;
  /** The step's JSON text; null only for a wait that has not ended (never sent). */
  result: string | null;
  atMillis: number;
}

/** Progress a handler reported with `ctx.progress(fraction, message?)`. */
export interface JobProgress {
  /** 0..1. */
  fraction: number;
  message: string | null;
  /** When the coordinator received it. */
  atMillis: number;
}

/** What a dependent does when a parent ends FAILED or CANCELLED: `cancel` (the default) or `run`. */
export const PARENT_FAILURE_POLICIES = ['cancel', 'run'] as const;
export type ParentFailurePolicy = (typeof PARENT_FAILURE_POLICIES)[number];

/** Extension (`parents`): one parent of an assigned job, as its handler reads it. */
export interface ParentResult {
  jobId: string;
  taskType: string;
  /** The parent's final state (COMPLETED, or FAILED/CANCELLED for a dependent that runs anyway). */
  state: JobState;
  /** Its result text; null when it did not complete, or when `omitted`. */
  result: string | null;
  resultFormat?: ResultFormat | null;
  /** True when the result was left out to keep the assignment within its bound. */
  omitted?: boolean | null;
}

/** `text` (the default) or `json`: see {@link JobSnapshot.resultFormat}. */
export const RESULT_FORMATS = ['text', 'json'] as const;
export type ResultFormat = (typeof RESULT_FORMATS)[number];

/** How an attempt ended (`RUNNING` while it has not). */
export const ATTEMPT_OUTCOMES = [
  'RUNNING',
  'SUCCEEDED',
  'FAILED',
  'WORKER_LOST',
  'DEADLINE',
  'CANCELLED',
  'RELEASED',
  'INTERRUPTED',
  /** Extension (durable steps): the handler slept or waited; the job goes on in a later attempt. */
  'SUSPENDED',
  /**
   * Extension (`requeue`): cut off through no doing of its own; the job was
   * queued again at once and the attempt did not count toward maxAttempts.
   */
  'REQUEUED',
  /**
   * Extension (`rateLimits`): its handler was rate limited; the job was
   * scheduled again and the attempt did not count toward maxAttempts.
   */
  'RATE_LIMITED',
] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/** One attempt of a job (job history). */
export interface AttemptSnapshot {
  /** 1-based. */
  attemptNumber: number;
  attemptId: string;
  workerId: string;
  startedAtMillis: number;
  /** Null while the attempt runs. */
  finishedAtMillis: number | null;
  outcome: AttemptOutcome;
  error: string | null;
}

/** A live worker as reported to clients. */
export interface WorkerSnapshot {
  workerId: string;
  capacity: number;
  activeTasks: number;
  lastHeartbeatMillis: number;
  /** Extension: the task types it declared; null = the five built-ins. */
  taskTypes?: string[] | null;
  /** Extension: true once it announced WORKER_DRAINING. */
  draining?: boolean | null;
  /** Extension: the jobs leased to it now (running, or queued there by prefetch). */
  runningJobs?: string[] | null;
  /** Extension: leased attempts waiting on the worker for a slot (prefetch); absent = none asked. */
  queuedTasks?: number | null;
  /** Extension: the named queues it takes from; absent = every queue. */
  queues?: string[] | null;
}

// ---- worker port ----------------------------------------------------------

export interface WorkerRegister {
  type: 'WORKER_REGISTER';
  workerId: string;
  capacity: number;
  /** Extension: task types this worker runs; null = the five built-ins. */
  taskTypes: string[] | null;
  /** Extension: the worker token, when the coordinator requires one. Never logged. */
  authToken?: string | null;
  /** Extension: answer every HEARTBEAT with HEARTBEAT_ACK. */
  heartbeatAck?: boolean | null;
  /**
   * Extension: how many attempts beyond `capacity` it takes and queues until
   * a slot is free (0..capacity); absent or 0 = none.
   */
  prefetch?: number | null;
  /**
   * Extension: attempts this worker still holds from an earlier connection
   * (running, queued, or finished with the result not sent yet); absent =
   * not said. A coordinator that offers `reattach` gives the ones whose lease
   * is still current to this session and cancels the others.
   */
  heldAttempts?: HeldAttempt[] | null;
  /**
   * Extension (feature `queues`): take attempts of these named queues only;
   * absent = every queue. Sent only to a coordinator that offers `queues`.
   */
  queues?: string[] | null;

  /** Extension: send the parents' results with each assignment (`TASK_ASSIGN.parents`). */
  parents?: boolean | null;
  /** Extension: send a job's trace context with its assignments (`TASK_ASSIGN.traceparent`). */
  traceContext?: boolean | null;
  /** Extension (feature `steps`): send recorded steps with assignments (`TASK_ASSIGN.steps`). */
  steps?: boolean | null;
  /** Extension: this worker's handlers may enqueue child jobs (ENQUEUE_CHILD, feature `children`). */
  children?: boolean | null;
  /**
   * Extension (feature `slots`): the worker runs this many attempts at once,
   * MAX_CAPACITY + 1..MAX_SLOTS; sent only with `capacity` = MAX_CAPACITY,
   * and then the session's capacity everywhere.
   */
  slots?: number | null;
  /**
   * Extension (feature `moreHeld`): `heldAttempts` is not all the worker
   * holds; the rest follow in HELD_ATTEMPTS messages.
   */
  moreHeld?: boolean | null;
  /**
   * Extension (feature `batches`): this worker takes several assignments in
   * one frame (TASK_ASSIGNS); a coordinator that does not offer `batches`
   * ignores it.
   */
  batches?: boolean | null;
}
/**
 * Extension (feature `moreHeld`): more attempts a worker that registered
 * with `moreHeld: true` still holds, sent right after WORKER_REGISTERED; the
 * last one has `more: false`. Until then the session is assigned nothing.
 */
export interface HeldAttempts {
  type: 'HELD_ATTEMPTS';
  workerId: string;
  heldAttempts: HeldAttempt[];
  /** True when another HELD_ATTEMPTS follows. */
  more: boolean;
}

/** One attempt a re-registering worker still holds. */
export interface HeldAttempt {
  jobId: string;
  attemptId: string;
}
export interface WorkerRegistered {
  type: 'WORKER_REGISTERED';
  workerId: string;
  /** Extension: what this coordinator supports (see features.ts); absent = none. */
  features?: string[] | null;
}
export interface Heartbeat {
  type: 'HEARTBEAT';
  workerId: string;
}
/** Extension: answers a HEARTBEAT when the worker asked for it and the coordinator offered it. */
export interface HeartbeatAck {
  type: 'HEARTBEAT_ACK';
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
  /** Extension (`assignLimits`): this attempt's deadline, in ms from receipt. */
  timeoutMillis?: number | null;
  /** Extension (`assignLimits`): the job's attempt limit. */
  maxAttempts?: number | null;
  /** Extension (`parents`, to a worker that asked): the job's parents, in `dependsOn` order. */
  parents?: ParentResult[] | null;
  /** Extension (to a worker that asked with `traceContext`): the job's recorded trace context. */
  traceparent?: string | null;
  tracestate?: string | null;
  /**
   * Extension (to a worker that asked with `traceContext`): the job's named
   * queue; absent = `default` (or a coordinator that does not send it).
   */
  queue?: string | null;
  /**
   * Extension (`steps`, to a worker that asked): the job's recorded steps
   * from the first, as many as fit the assignment's bound.
   */
  steps?: RecordedStep[] | null;
  /** Extension (`steps`): how many steps are recorded in all (more than `steps` holds: GET_STEPS). */
  stepCount?: number | null;
}
/**
 * Extension (feature `batches`, to a worker that registered with
 * `batches: true`): several assignments in one frame, each a complete
 * TASK_ASSIGN, handled in order as if each had come alone. A turn's single
 * assignment still goes as a plain TASK_ASSIGN.
 */
export interface TaskAssigns {
  type: 'TASK_ASSIGNS';
  attempts: TaskAssign[];
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
  /** Extension (`retryable`): false = retrying cannot help; absent = true. */
  retryable?: boolean | null;
  /** Extension: `json` when `result` is the JSON text of a non-string value. */
  resultFormat?: ResultFormat | null;
  /**
   * Extension (`requeue`), with `success: false`: the attempt was cut off
   * through no doing of its own (the thread or process it shared was ended
   * for another attempt, crashed, or went over its memory budget). The job
   * is queued again at once and the attempt does not count toward
   * maxAttempts, up to MAX_FREE_REQUEUES such attempts per job.
   */
  requeue?: boolean | null;
  /**
   * Extension (`rateLimits`), with `success: false`: the handler was rate
   * limited (RateLimitedError). The attempt does not count; the job is
   * SCHEDULED again after `retryAfterMillis`, and for `group` or `queue`
   * nothing more of that group or queue starts before then.
   */
  rateLimited?: RateLimitedResult | null;
}
export const RATE_LIMIT_SCOPES = ['job', 'group', 'queue'] as const;
export type RateLimitScope = (typeof RATE_LIMIT_SCOPES)[number];
export interface RateLimitedResult {
  /** 1 ms..1 d. */
  retryAfterMillis: number;
  scope: RateLimitScope;
}
/**
 * Extension (feature `batches`): several results in one frame, each a
 * complete TASK_RESULT of this worker, handled in order as if each had come
 * alone.
 */
export interface TaskResults {
  type: 'TASK_RESULTS';
  workerId: string;
  results: TaskResult[];
}
/**
 * Extension (`progress`): the handler of a running attempt reported
 * progress. Ignored unless `attemptId` is the job's current lease.
 */
export interface TaskProgress {
  type: 'TASK_PROGRESS';
  workerId: string;
  jobId: string;
  attemptId: string;
  /** 0..1. */
  fraction: number;
  /** At most 1 KiB of UTF-8 (limits.ts MAX_PROGRESS_MESSAGE_BYTES). */
  message: string | null;
}
/**
 * Extension (`steps`): the handler recorded a step. Fenced by the lease;
 * `index` must be the number of steps recorded so far. Answered with
 * STEP_RECORDED once durable, or ERROR carrying the same `requestId`.
 */
export interface RecordStep extends AttemptCall {
  type: 'RECORD_STEP';
  index: number;
  name: string;
  /** The step's value as JSON text. */
  result: string;
}
export interface StepRecorded {
  type: 'STEP_RECORDED';
  requestId: number;
  jobId: string;
  index: number;
}
/** Extension (`steps`): the recorded steps from `fromIndex` (those an assignment left out). */
export interface GetSteps extends AttemptCall {
  type: 'GET_STEPS';
  fromIndex: number;
}
export interface StepsReply {
  type: 'STEPS';
  requestId: number;
  jobId: string;
  steps: RecordedStep[];
  /** True when steps after these are recorded (ask again from the next index). */
  more: boolean;
}
/**
 * Extension (`steps`): the handler sleeps (`sleepMillis`) or waits for
 * another job's end (`waitForJobId`); exactly one is given. Ends the attempt
 * without failing it, like a TASK_RESULT ends it; ignored unless the lease
 * is current.
 */
export interface TaskSuspend {
  type: 'TASK_SUSPEND';
  workerId: string;
  jobId: string;
  attemptId: string;
  sleepMillis?: number | null;
  waitForJobId?: string | null;
  /** Extension (`signals`): wait for a signal of this name sent to the job (`ctx.waitForSignal`). */
  waitForSignal?: SignalWait | null;
  /** Extension (`signals`): wait for an event of this name (and key) published from now on. */
  waitForEvent?: EventWait | null;
}
/** TASK_SUSPEND.waitForSignal. */
export interface SignalWait {
  name: string;
  /** Give up after this long (then the wait's value is null); absent or null = never. */
  timeoutMillis?: number | null;
}
/** TASK_SUSPEND.waitForEvent. */
export interface EventWait {
  name: string;
  /** Only an event published with this key; absent or null = any key. */
  key?: string | null;
  timeoutMillis?: number | null;
}
/** What a WAITING job waits for (its snapshot's `waitingFor`): one of `jobId`, `signal`, `event`. */
export interface WaitingFor {
  jobId?: string | null;
  signal?: string | null;
  event?: string | null;
  /** With `event`: the key it must carry; null = any. */
  key?: string | null;
  /** When the wait gives up; null = never. */
  untilMillis: number | null;
}
/** Extension: the worker takes no new assignments from now on. */
export interface WorkerDraining {
  type: 'WORKER_DRAINING';
  workerId: string;
}
export interface ErrorMessage {
  type: 'ERROR';
  message: string;
  /** Extension: a stable error code (see error-codes.ts). */
  code: string | null;
  /** Extension (with `NOT_LEADER`): the leader's `host:port` of the same port kind, when known. */
  leader?: string | null;
  /** Extension (a refused SUBMIT_JOBS): the 0-based index of the job at fault. */
  index?: number | null;
  /**
   * Extension (worker port): the `requestId` of the call this refuses. Such an
   * ERROR fails that call only; the session goes on.
   */
  requestId?: number | null;
  /**
   * Extension (with `NOT_LEADER`, on a sharded coordinator's public worker
   * port): every shard of the database and where its leader takes workers.
   * A worker that gets it registers with those shards' own worker ports
   * instead (one session per address), and keeps the map current with
   * LIST_SHARDS.
   */
  shards?: ShardInfo[] | null;
}

/**
 * Extension: the fields every call from a running attempt carries (the
 * worker-port call mechanism). `requestId` is a positive integer, unique
 * among the calls of one worker connection; the coordinator answers each
 * call once, with a reply that carries it or with an ERROR that does. A call
 * is fenced by the attempt's lease: `attemptId` must be the job's current
 * lease, held by this worker, else the answer is ERROR `STALE_ATTEMPT`.
 */
export interface AttemptCall {
  workerId: string;
  jobId: string;
  attemptId: string;
  requestId: number;
}

/**
 * Extension (feature `children`): the handler of a running attempt submits
 * a child job. `key` names the call among the parent's calls (an explicit
 * key `k:<key>`, or the ordinal of an unkeyed call `o:<n>`): the same key of
 * the same parent gives the child made the first time.
 */
export interface EnqueueChild extends AttemptCall {
  type: 'ENQUEUE_CHILD';
  key: string;
  taskType: string;
  payload: JsonObject;
  maxAttempts?: number | null;
  priority?: Priority | null;
  timeoutMillis?: number | null;
  idempotencyKey?: string | null;
  queue?: string | null;
  groupKey?: string | null;
  runAtMillis?: number | null;
}

/** Extension: the answer to ENQUEUE_CHILD: the child's id, and whether this call made it. */
export interface ChildEnqueued {
  type: 'CHILD_ENQUEUED';
  requestId: number;
  jobId: string;
  created: boolean;
}

/** The calls a running attempt makes (worker → coordinator, each with a `requestId`). */
export type WorkerCall = EnqueueChild | RecordStep | GetSteps;
/** Their non-error answers (coordinator → worker, each with the call's `requestId`). */
export type CallReply = ChildEnqueued | StepRecorded | StepsReply;

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
  /** Extension: per-attempt execution deadline, 1..86400000 ms; null = the coordinator's. */
  timeoutMillis?: number | null;
  /**
   * Extension: the job states beyond v1's six that this client understands
   * (job-view.ts); a state it does not list is shown as its v1 equivalent.
   */
  knownStates?: string[] | null;
  /** Extension: the named queue (a name, see queue-names.ts); absent = `default`. */
  queue?: string | null;
  /** Extension: a group key (tenant, customer), 1..128 characters without control characters. */
  groupKey?: string | null;

  /** Extension: ids of existing jobs this one waits for (1..1000); absent = none. */
  dependsOn?: string[] | null;
  /** Extension: what a parent's failure does to this job; absent = `cancel`. */
  onParentFailure?: ParentFailurePolicy | null;
  /**
   * Extension: a delayed job, due at this time (epoch ms, coordinator clock;
   * at most 366 days ahead; a past time means now). Sent only to a
   * coordinator known to understand it (client/negotiation.ts).
   */
  runAtMillis?: number | null; /**
   * Extension: the submitter's W3C trace context (trace-context.ts), kept
   * with the job and handed to the worker with each assignment; absent = none.
   */
  traceparent?: string | null;
  /** Extension: the `tracestate` that goes with `traceparent` (at most 512 characters). */
  tracestate?: string | null;
  /** Extension: a deduplication key (1..256 characters), scoped to the job's queue (dedup.ts). */
  dedupKey?: string | null;
  /** Extension: how `dedupKey` deduplicates; absent = `active`. */
  dedupMode?: DedupMode | null;
  /** Extension: `throttle`'s window after the key's job was created (1 ms..366 d; required there). */
  dedupWindowMillis?: number | null;
  /** Extension: epoch ms after which the job, if no attempt has started, ends CANCELLED (expired). */
  expiresAtMillis?: number | null;
}
/** How a `dedupKey` deduplicates submissions (see dedup.ts). */
export const DEDUP_MODES = ['active', 'throttle', 'debounce'] as const;
export type DedupMode = (typeof DEDUP_MODES)[number];
/** Extension: one job of a SUBMIT_JOBS batch, the fields of a SUBMIT_JOB without `type`. */
export type SubmitJobsElement = Omit<SubmitJob, 'type' | 'knownStates'>;
/**
 * Extension: up to {@link MAX_BATCH_JOBS} jobs created in one commit, or none.
 * The elements stay raw JSON objects here and are validated one by one by the
 * coordinator, so that a bad one is answered with its index.
 */
export interface SubmitJobs {
  type: 'SUBMIT_JOBS';
  jobs: JsonObject[];
}
/** Extension: the ids of a SUBMIT_JOBS batch, in the order given. */
export interface JobsSubmitted {
  type: 'JOBS_SUBMITTED';
  jobIds: string[];
  /** Extension: per job, in order, whether it named an existing job by its `dedupKey`; absent = none did. */
  deduplicated?: boolean[] | null;
  /** Extension: per job, whether a debounced job's payload and run time were replaced; absent = none. */
  replaced?: boolean[] | null;
}
/** Most jobs in one SUBMIT_JOBS. */
export const MAX_BATCH_JOBS = 1_000;
export interface JobSubmitted {
  type: 'JOB_SUBMITTED';
  jobId: string;
  /** Extension: the job right after submission (saves a status round trip). */
  job: JobSnapshot | null;
  /** Extension: live workers that declared the job's task type when it was accepted. */
  servingWorkers?: number | null;
  /** Extension: `true` when the job's queue was paused when it was accepted (absent otherwise). */
  queuePaused?: boolean | null;
  /** Extension: `true` when nothing was created: `jobId` is the job that holds the `dedupKey`. */
  deduplicated?: boolean | null;
  /** Extension: `true` when that job was debounced (its payload and run time replaced). */
  replaced?: boolean | null;
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
  /** Extension: also return the attempt history (`JOB_STATUS.attempts`). */
  attempts?: boolean | null;
  /** Extension: also return the submitted payload (`JOB_STATUS.payload`). */
  payload?: boolean | null;
  /**
   * Extension: the job states beyond v1's six that this client understands
   * (job-view.ts); a state it does not list is shown as its v1 equivalent.
   */
  knownStates?: string[] | null;
}
export interface JobStatus {
  type: 'JOB_STATUS';
  job: JobSnapshot;
  /** Extension (asked for with `GET_JOB_STATUS.attempts`): one entry per attempt, oldest first. */
  attempts?: AttemptSnapshot[] | null;
  /** Extension (asked for with `GET_JOB_STATUS.payload`): the payload as submitted. */
  payload?: JsonObject | null;
  /**
   * Extension: true when the payload was asked for but left out because the
   * reply would not fit in one frame.
   */
  payloadOmitted?: boolean | null;
}
export interface ListJobs {
  type: 'LIST_JOBS';
  /** Extension: page size. */
  limit: number | null;
  /** Extension: only jobs in this state. */
  state: JobState | null;
  /** Extension: continue after the page that returned this cursor. */
  cursor: string | null;
  /** Extension: only jobs of this task type. */
  taskType?: string | null;
  /**
   * Extension: only the job submitted with this idempotency key (a page of
   * zero or one job, `nextCursor` null; the other filters still apply).
   */
  idempotencyKey?: string | null;
  /**
   * Extension: the job states beyond v1's six that this client understands
   * (job-view.ts); a state it does not list is shown as its v1 equivalent.
   */
  knownStates?: string[] | null;
  /** Extension: only jobs of this named queue. */
  queue?: string | null;
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
  /** Extension: the leading coordinator's advertised `host:port` (client port). */
  leader?: string | null;
  /** Extension: the leader's epoch (fencing token); null without leadership. */
  epoch?: number | null;
}
export interface CancelJob {
  type: 'CANCEL_JOB';
  jobId: string;
  /**
   * Extension: the job states beyond v1's six that this client understands
   * (job-view.ts); a state it does not list is shown as its v1 equivalent.
   */
  knownStates?: string[] | null;
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
  /**
   * Extension: the job states beyond v1's six that this client understands
   * (job-view.ts); a state it does not list is shown as its v1 equivalent.
   */
  knownStates?: string[] | null;
}

/** Extension: the first frame on a client connection when the coordinator has client tokens. */
export interface Auth {
  type: 'AUTH';
  /** Never logged or echoed. */
  token: string;
}
export interface AuthOk {
  type: 'AUTH_OK';
}
/** Extension: deletes terminal jobs (and their attempts) in one state, older than a bound. */
export interface PurgeJobs {
  type: 'PURGE_JOBS';
  /** COMPLETED, FAILED or CANCELLED; anything else is refused. */
  state: JobState;
  /** Only jobs that finished at least this long ago, in ms. */
  olderThanMillis: number;
}
export interface JobsPurged {
  type: 'JOBS_PURGED';
  deleted: number;
}

/**
 * Extension: new attempts of stored FAILED jobs of one queue (a redrive of
 * dead letters), newest first, at most `limit` per request. Each selected
 * job is QUEUED again with a fresh attempt budget, its attempts so far kept.
 */
export interface RerunJobs {
  type: 'RERUN_JOBS';
  queue: string;
  /** The state to re-run; only FAILED. */
  state: JobState;
  /** Only jobs of this task type; absent = every type. */
  taskType?: string | null;
  /** Only jobs that finished at or after this time (epoch ms); absent = any time. */
  finishedSinceMillis?: number | null;
  /** At most this many jobs (1..10,000); absent = 1,000. */
  limit?: number | null;
  /** The fresh budget: attempts each job may make from now; absent = the coordinator's default. */
  maxAttempts?: number | null;
}
/** Extension: the jobs RERUN_JOBS queued again (their commit is durable). */
export interface JobsRerun {
  type: 'JOBS_RERUN';
  /** How many jobs were queued again (`jobIds.length`). */
  rerun: number;
  jobIds: string[];
  /** True when more jobs matched than this request took: ask again. */
  more: boolean;
}

/** A rate limit: at most `max` attempt starts in any window of `intervalMillis`. */
export interface RateLimit {
  max: number;
  intervalMillis: number;
}

/** Extension: a named queue, its settings and its jobs by state (LIST_QUEUES, SET_QUEUE). */
export interface QueueInfo {
  name: string;
  paused: boolean;
  /** Null = no limit. */
  concurrency: number | null;
  rateLimit: RateLimit | null;
  groupConcurrency: number | null;
  groupRateLimit: RateLimit | null;
  /** Stored jobs of the queue by state; a state with none is left out. */
  counts: Record<string, number>;
  /** Extension: attempts of the queue holding a lease now. */
  running?: number | null;
  /** Extension: the groups with the most QUEUED jobs, largest first (at most 10). */
  groups?: QueueGroupInfo[] | null;
  /** Extension: until when a handler held the whole queue back (RateLimitedError); null = not held. */
  rateLimitedUntilMillis?: number | null;
  /** Extension: groups of the queue a handler holds back now, soonest first (at most 10). */
  heldGroups?: HeldGroupInfo[] | null;
}

/** One group a handler holds back (QueueInfo.heldGroups). */
export interface HeldGroupInfo {
  groupKey: string | null;
  untilMillis: number;
}

/** One group's backlog (QueueInfo.groups). */
export interface QueueGroupInfo {
  /** Null = the jobs without a group key. */
  groupKey: string | null;
  queued: number;
  running: number;
}

/** The settings SET_QUEUE may change. */
export const QUEUE_SETTING_FIELDS = [
  'concurrency',
  'rateLimit',
  'groupConcurrency',
  'groupRateLimit',
] as const;
export type QueueSettingField = (typeof QUEUE_SETTING_FIELDS)[number];

/** Extension (feature `queues`): the named queues, sorted by name. */
export interface ListQueues {
  type: 'LIST_QUEUES';
}
export interface QueueList {
  type: 'QUEUE_LIST';
  queues: QueueInfo[];
}
/**
 * Extension (feature `queues`): changes a queue's settings; a field left out
 * keeps its value, a field named in `clear` is removed (no limit).
 * Answered with QUEUE_INFO once the change is durable.
 */
export interface SetQueue {
  type: 'SET_QUEUE';
  name: string;
  paused?: boolean | null;
  concurrency?: number | null;
  rateLimit?: RateLimit | null;
  groupConcurrency?: number | null;
  groupRateLimit?: RateLimit | null;
  clear?: string[] | null;
  /**
   * Extension: pause or resume a queue that has no job and no setting yet
   * (without it such a pause or resume may be refused, `UNKNOWN_QUEUE`).
   */
  create?: boolean | null;
}
export interface QueueInfoReply {
  type: 'QUEUE_INFO';
  queue: QueueInfo;
  /** Extension: `true` when the queue had no job and no setting before this change. */
  created?: boolean | null;
}

/** One job of a flow (`SUBMIT_FLOW`): a SUBMIT_JOB's fields, a ref, and parents by ref or id. */
export interface FlowJob {
  /** The job's name within the flow (unique there). */
  ref: string;
  taskType: string;
  payload: JsonObject;
  /** Refs of other jobs of the flow (forward refs allowed) or ids of existing jobs. */
  dependsOn?: string[] | null;
  maxAttempts?: number | null;
  priority?: Priority | null;
  idempotencyKey?: string | null;
  timeoutMillis?: number | null;
  onParentFailure?: ParentFailurePolicy | null;
  /** A delayed job's due time (epoch ms), as SUBMIT_JOB's; after its parents, if any. */
  runAtMillis?: number | null;
  /** The submitter's trace context, as SUBMIT_JOB's. */
  traceparent?: string | null;
  tracestate?: string | null;
  /** The named queue and group key, as SUBMIT_JOB's. */
  queue?: string | null;
  groupKey?: string | null;
  /** Deduplication and expiry, as SUBMIT_JOB's. */
  dedupKey?: string | null;
  dedupMode?: DedupMode | null;
  dedupWindowMillis?: number | null;
  expiresAtMillis?: number | null;
}
/**
 * Extension (signals): a signal to one job, held until a `ctx.waitForSignal`
 * of that name takes it (each signal once, oldest first).
 */
export interface SignalJob {
  type: 'SIGNAL_JOB';
  jobId: string;
  /** A name as a queue's. */
  name: string;
  /** Any JSON value, at most 256 KiB encoded. */
  payload: JsonValue;
}
export interface JobSignalled {
  type: 'JOB_SIGNALLED';
  jobId: string;
  name: string;
  /** True when a wait of the job took it at once (the job was waiting for it). */
  resumed: boolean;
  /** Signals the job holds, not yet taken, after this one. */
  signalsHeld: number;
}
/**
 * Extension (signals): an event. Its triggers' jobs are created and the
 * jobs waiting for it woken in the commit that stores it. A known
 * `eventId` does nothing again and gets the first reply.
 */
export interface PublishEvent {
  type: 'PUBLISH_EVENT';
  name: string;
  payload: JsonValue;
  /** 1..256 characters; absent = none. */
  key?: string | null;
  /** 1..256 characters; absent = the coordinator makes one. */
  eventId?: string | null;
}
export interface EventPublished {
  type: 'EVENT_PUBLISHED';
  eventId: string;
  /** The jobs its triggers created, in trigger-name order. */
  jobIds: string[];
  /** Waiting jobs it woke. */
  resumed: number;
  /** True when the event id was known: nothing was done again. */
  duplicate?: boolean | null;
}
/** A trigger: each event of `event` creates one job of `taskType` whose payload is the event's. */
export interface TriggerDefinition {
  name: string;
  event: string;
  taskType: string;
  queue?: string | null;
  priority?: Priority | null;
  maxAttempts?: number | null;
}
export interface TriggerSnapshot {
  name: string;
  event: string;
  taskType: string;
  queue: string;
  priority: Priority | null;
  maxAttempts: number | null;
  createdAtMillis: number;
  updatedAtMillis: number;
}
export interface SetTrigger {
  type: 'SET_TRIGGER';
  trigger: TriggerDefinition;
}
export interface ListTriggers {
  type: 'LIST_TRIGGERS';
}
export interface DeleteTrigger {
  type: 'DELETE_TRIGGER';
  name: string;
}
export interface TriggerInfo {
  type: 'TRIGGER_INFO';
  trigger: TriggerSnapshot;
}
export interface TriggerList {
  type: 'TRIGGER_LIST';
  triggers: TriggerSnapshot[];
}
export interface TriggerDeleted {
  type: 'TRIGGER_DELETED';
  name: string;
  deleted: boolean;
}

/**
 * Extension (feature `shards`): the shards of the database and who leads
 * each. Answered by the coordinator itself, not by a shard's core.
 */
export interface ListShards {
  type: 'LIST_SHARDS';
  /**
   * On a sharded coordinator's worker port that requires worker tokens: the
   * worker's token (as in WORKER_REGISTER). Never logged. The client port
   * takes AUTH instead.
   */
  authToken?: string | null;
}
/** One shard: its leader's client port (the coordinator's own) and epoch, and its own ports. */
export interface ShardInfo {
  shard: number;
  /** The leading coordinator's client `host:port`; null while no coordinator leads it. */
  leader: string | null;
  /** The epoch of the shard's lease (0 = never led). */
  epoch: number;
  /** Where the shard itself takes client connections (its requests only); null = unknown. */
  clientAddress: string | null;
  /** Where the shard itself takes workers; null = unknown. */
  workerAddress: string | null;
  /**
   * Extension: with a leader, the ms its lease had left when the map was
   * answered (as the coordinator last read it, counted down since). Until
   * then no other coordinator leads the shard unless this one lets it go
   * first (its port then answers NOT_LEADER). Absent when none leads it.
   */
  leaseLeftMillis?: number | null;
}
/** One coordinator alive on the database and how many shards it leads. */
export interface CoordinatorInfo {
  /** Its client `host:port`. */
  address: string;
  /** Its worker `host:port`; null = unknown. */
  workerAddress: string | null;
  shards: number;
}
export interface ShardList {
  type: 'SHARD_LIST';
  shards: ShardInfo[];
  coordinators: CoordinatorInfo[];
}

/** Extension: many jobs with dependencies among them, created in one commit or not at all. */
export interface SubmitFlow {
  type: 'SUBMIT_FLOW';
  jobs: FlowJob[];
}
/** One created job of a flow. */
export interface FlowRef {
  ref: string;
  jobId: string;
  /** Extension: `true` when the ref names an existing job that holds its `dedupKey`. */
  deduplicated?: boolean | null;
  /** Extension: `true` when that job was debounced. */
  replaced?: boolean | null;
}
export interface FlowSubmitted {
  type: 'FLOW_SUBMITTED';
  /** Every job of the flow, in the order the request listed them. */
  jobs: FlowRef[];
}
/** Which jobs a subscription follows: every field given must match (none = every job). */
export interface JobEventFilter {
  jobId?: string | null;
  taskType?: string | null;
  queue?: string | null;
}
/**
 * Extension: from now on, push a JOB_EVENT on this connection for every
 * change of a matching job (answered SUBSCRIBED, then the pushes).
 */
export interface SubscribeJobs {
  type: 'SUBSCRIBE_JOBS';
  filter: JobEventFilter;
  /** As on GET_JOB_STATUS: the job states beyond v1's six this client understands. */
  knownStates?: string[] | null;
}
export interface Subscribed {
  type: 'SUBSCRIBED';
}
/** The two kinds of change a JOB_EVENT reports. */
export const JOB_EVENT_KINDS = ['state', 'progress'] as const;
export type JobEventKind = (typeof JOB_EVENT_KINDS)[number];
/** Extension (pushed after SUBSCRIBED): a matching job changed; `job` is it after the change. */
export interface JobEvent {
  type: 'JOB_EVENT';
  event: JobEventKind;
  atMillis: number;
  job: JobSnapshot;
}
/**
 * Extension (pushed): the subscriber fell behind by more than its buffer and
 * `missed` events were dropped; pushes resume after this message.
 */
export interface EventsMissed {
  type: 'EVENTS_MISSED';
  missed: number;
}

/** How a schedule's tick treats a previous job of it that is not terminal yet. */
export const SCHEDULE_OVERLAPS = ['allow', 'skip'] as const;
export type ScheduleOverlap = (typeof SCHEDULE_OVERLAPS)[number];
/** What a schedule does with ticks missed while no coordinator led. */
export const SCHEDULE_CATCH_UPS = ['latest', 'none'] as const;
export type ScheduleCatchUp = (typeof SCHEDULE_CATCH_UPS)[number];

/** Extension: what `SET_SCHEDULE` defines (exactly one of `cron` and `everyMillis`). */
export interface ScheduleDefinition {
  /** Matches `^[A-Za-z][A-Za-z0-9_.-]{0,63}$`. */
  name: string;
  taskType: string;
  /** 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first). */
  cron: string | null;
  /** A fixed interval, at least 1000 ms; the first tick one interval after the set. */
  everyMillis: number | null;
  /** IANA name for `cron` (null = UTC); must be null with `everyMillis`. */
  timezone: string | null;
  payload: JsonObject;
  maxAttempts: number | null;
  priority: Priority | null;
  timeoutMillis: number | null;
  /** null = `allow`. */
  overlap: ScheduleOverlap | null;
  /** null = `latest`. */
  catchUp: ScheduleCatchUp | null;
  /** null = false. */
  paused: boolean | null;
  /** The named queue of its jobs; absent or null = `default`. */
  queue?: string | null;
}

/** Extension: a schedule as clients see it. */
export interface ScheduleSnapshot {
  name: string;
  taskType: string;
  cron: string | null;
  everyMillis: number | null;
  timezone: string | null;
  payload: JsonObject;
  paused: boolean;
  overlap: ScheduleOverlap;
  catchUp: ScheduleCatchUp;
  /** The next tick; null while paused. */
  nextRunAtMillis: number | null;
  lastRunAtMillis: number | null;
  lastJobId: string | null;
  maxAttempts: number | null;
  priority: Priority | null;
  timeoutMillis: number | null;
  /** The named queue of its jobs (always sent by this coordinator). */
  queue?: string | null;
}

/** Extension: one recent job of a schedule (`SCHEDULE_INFO.recentJobs`). */
export interface ScheduleJob {
  jobId: string;
  state: JobState;
  runAtMillis: number | null;
}

/** Extension: creates a schedule or replaces its definition (idempotent). */
export interface SetSchedule {
  type: 'SET_SCHEDULE';
  schedule: ScheduleDefinition;
}
/** Extension: every schedule, by name. */
export interface ListSchedules {
  type: 'LIST_SCHEDULES';
}
/** Extension: one schedule and its recent jobs. */
export interface GetSchedule {
  type: 'GET_SCHEDULE';
  name: string;
  knownStates?: string[] | null;
}
export interface PauseSchedule {
  type: 'PAUSE_SCHEDULE';
  name: string;
}
export interface ResumeSchedule {
  type: 'RESUME_SCHEDULE';
  name: string;
}
export interface DeleteSchedule {
  type: 'DELETE_SCHEDULE';
  name: string;
}
/** Extension: one job of the schedule now, outside its cadence (answered with JOB_SUBMITTED). */
export interface TriggerSchedule {
  type: 'TRIGGER_SCHEDULE';
  name: string;
  knownStates?: string[] | null;
}
/** Extension: a schedule (the answer to SET/GET/PAUSE/RESUME_SCHEDULE). */
export interface ScheduleInfo {
  type: 'SCHEDULE_INFO';
  schedule: ScheduleSnapshot;
  /** GET_SCHEDULE only: its newest jobs first. */
  recentJobs?: ScheduleJob[] | null;
}
export interface ScheduleList {
  type: 'SCHEDULE_LIST';
  schedules: ScheduleSnapshot[];
}
export interface ScheduleDeleted {
  type: 'SCHEDULE_DELETED';
  name: string;
}

export type WorkerToCoordinator =
  | WorkerRegister
  | Heartbeat
  | TaskResult
  | TaskResults
  | WorkerDraining
  | TaskProgress
  | TaskSuspend
  | HeldAttempts
  | WorkerCall;
/**
 * What the coordinator's core takes from a worker: every worker message but
 * TASK_RESULTS, whose results the worker port hands over one by one (a
 * batch is framing, not an input of its own).
 */
export type WorkerInput = Exclude<WorkerToCoordinator, TaskResults>;
export type CoordinatorToWorker =
  | WorkerRegistered
  | TaskAssign
  | TaskAssigns
  | TaskCancel
  | ErrorMessage
  | HeartbeatAck
  | CallReply;
export type ClientRequest =
  | SubmitJob
  | SubmitJobs
  | GetJobStatus
  | ListJobs
  | ListWorkers
  | CancelJob
  | WaitJob
  | Auth
  | PurgeJobs
  | RerunJobs
  | ListQueues
  | SetQueue
  | SubscribeJobs
  | ScheduleRequest
  | SubmitFlow
  | SignalJob
  | PublishEvent
  | SetTrigger
  | ListTriggers
  | DeleteTrigger
  | ListShards;
/** The schedule requests (extensions). */
export type ScheduleRequest =
  | SetSchedule
  | ListSchedules
  | GetSchedule
  | PauseSchedule
  | ResumeSchedule
  | DeleteSchedule
  | TriggerSchedule;
export type ClientReply =
  | JobSubmitted
  | JobsSubmitted
  | SubmitRejected
  | JobStatus
  | JobList
  | WorkerList
  | JobCancel
  | ErrorMessage
  | AuthOk
  | JobsPurged
  | JobsRerun
  | QueueList
  | QueueInfoReply
  | Subscribed
  | JobEvent
  | EventsMissed
  | ScheduleInfo
  | ScheduleList
  | ScheduleDeleted
  | FlowSubmitted
  | JobSignalled
  | EventPublished
  | TriggerInfo
  | TriggerList
  | TriggerDeleted
  | ShardList;

export type Message = WorkerToCoordinator | CoordinatorToWorker | ClientRequest | ClientReply;
export type MessageType = Message['type'];
export type MessageOf<T extends MessageType> = Extract<Message, { type: T }>;

/** Direction tables: the compiler checks that each lists exactly its union. */
const CLIENT_REQUEST_TYPES: { readonly [T in ClientRequest['type']]: true } = {
  SUBMIT_JOB: true,
  SUBMIT_JOBS: true,
  GET_JOB_STATUS: true,
  LIST_JOBS: true,
  LIST_WORKERS: true,
  CANCEL_JOB: true,
  WAIT_JOB: true,
  AUTH: true,
  PURGE_JOBS: true,
  RERUN_JOBS: true,
  LIST_QUEUES: true,
  SET_QUEUE: true,

  SUBMIT_FLOW: true,
  SUBSCRIBE_JOBS: true,
  SET_SCHEDULE: true,
  LIST_SCHEDULES: true,
  GET_SCHEDULE: true,
  PAUSE_SCHEDULE: true,
  RESUME_SCHEDULE: true,
  DELETE_SCHEDULE: true,
  TRIGGER_SCHEDULE: true,
  SIGNAL_JOB: true,
  PUBLISH_EVENT: true,
  SET_TRIGGER: true,
  LIST_TRIGGERS: true,
  DELETE_TRIGGER: true,
  LIST_SHARDS: true,
};
const CLIENT_REPLY_TYPES: { readonly [T in ClientReply['type']]: true } = {
  JOB_SUBMITTED: true,
  JOBS_SUBMITTED: true,
  SUBMIT_REJECTED: true,
  JOB_STATUS: true,
  JOB_LIST: true,
  WORKER_LIST: true,
  JOB_CANCEL: true,
  ERROR: true,
  AUTH_OK: true,
  JOBS_PURGED: true,
  JOBS_RERUN: true,
  QUEUE_LIST: true,
  QUEUE_INFO: true,

  FLOW_SUBMITTED: true,
  SUBSCRIBED: true,
  JOB_EVENT: true,
  EVENTS_MISSED: true,
  SCHEDULE_INFO: true,
  SCHEDULE_LIST: true,
  SCHEDULE_DELETED: true,
  JOB_SIGNALLED: true,
  EVENT_PUBLISHED: true,
  TRIGGER_INFO: true,
  TRIGGER_LIST: true,
  SHARD_LIST: true,
  TRIGGER_DELETED: true,
};
const WORKER_TO_COORDINATOR_TYPES: { readonly [T in WorkerToCoordinator['type']]: true } = {
  WORKER_REGISTER: true,
  HEARTBEAT: true,
  TASK_RESULT: true,
  TASK_RESULTS: true,
  WORKER_DRAINING: true,
  TASK_PROGRESS: true,
  RECORD_STEP: true,
  GET_STEPS: true,
  TASK_SUSPEND: true,
  HELD_ATTEMPTS: true,
  ENQUEUE_CHILD: true,
};
const COORDINATOR_TO_WORKER_TYPES: { readonly [T in CoordinatorToWorker['type']]: true } = {
  WORKER_REGISTERED: true,
  TASK_ASSIGN: true,
  TASK_ASSIGNS: true,
  TASK_CANCEL: true,
  ERROR: true,
  HEARTBEAT_ACK: true,
  STEP_RECORDED: true,
  STEPS: true,
  CHILD_ENQUEUED: true,
};
const WORKER_CALL_TYPES: { readonly [T in WorkerCall['type']]: true } = {
  ENQUEUE_CHILD: true,
  RECORD_STEP: true,
  GET_STEPS: true,
};
const CALL_REPLY_TYPES: { readonly [T in CallReply['type']]: true } = {
  CHILD_ENQUEUED: true,
  STEP_RECORDED: true,
  STEPS: true,
};

const has = (table: object, type: string): boolean =>
  Object.prototype.hasOwnProperty.call(table, type);

export function isClientRequest(msg: Message): msg is ClientRequest {
  return has(CLIENT_REQUEST_TYPES, msg.type);
}

export function isClientReply(msg: Message): msg is ClientReply {
  return has(CLIENT_REPLY_TYPES, msg.type);
}

export function isWorkerToCoordinator(msg: Message): msg is WorkerToCoordinator {
  return has(WORKER_TO_COORDINATOR_TYPES, msg.type);
}

export function isCoordinatorToWorker(msg: Message): msg is CoordinatorToWorker {
  return has(COORDINATOR_TO_WORKER_TYPES, msg.type);
}

/** A call of a running attempt (it carries `requestId`, `jobId` and `attemptId`). */
export function isWorkerCall(msg: Message): msg is WorkerCall {
  return has(WORKER_CALL_TYPES, msg.type);
}

/** A non-error answer to a call. */
export function isCallReply(msg: Message): msg is CallReply {
  return has(CALL_REPLY_TYPES, msg.type);
}

/** The job states that have no exits. */
export const TERMINAL_STATES = ['COMPLETED', 'FAILED', 'CANCELLED'] as const;
export type TerminalState = (typeof TERMINAL_STATES)[number];
const TERMINAL: ReadonlySet<JobState> = new Set<JobState>(TERMINAL_STATES);

/** COMPLETED, FAILED and CANCELLED have no exits. */
export function isTerminalState(state: JobState): state is TerminalState {
  return TERMINAL.has(state);
}
