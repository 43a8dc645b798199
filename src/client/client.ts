/**
 * The dtp client library: a typed, promise-based view of the client port.
 *
 *     import type tasks from './my-tasks.js';
 *     const client = await connect<typeof tasks>({ host: 'localhost', port: 7071 });
 *     const job = await client.submit('checksum', { path: 'a.txt' }, { priority: 'HIGH' });
 *     const value = await job.result();   // the handler's value, or JobFailedError
 *     for await (const j of client.list({ state: 'FAILED' })) console.log(j.jobId);
 *     await client.close();
 *
 * Requests may be issued concurrently: they are pipelined on one connection
 * and each promise settles with its own reply. When the connection breaks,
 * the requests in flight fail with `CONNECTION_LOST` (their outcome is
 * unknown) and the next request dials a fresh connection.
 *
 * Extensions are used only where the coordinator understands them
 * (negotiation.ts): `wait` holds one WAIT_JOB at a time when it can and polls
 * GET_JOB_STATUS otherwise; `listPage` pages a v1 reply itself
 * (list-paging.ts).
 *
 * Against a sharded coordinator, a request about one queue or job goes
 * straight to its shard's own client port, one pipelined connection per
 * shard address (shard-routing.ts), unless `shardRouting: false`.
 */
import { QueuesApi } from './queues.js';
import { rerunMessage, type RerunOptions, type RerunResult } from './rerun.js';
import { DEFAULT_QUEUE } from '../protocol/queue-names.js';
import { LocalErrorCode } from '../protocol/error-codes.js';
import { setTimeout as sleepMs } from 'node:timers/promises';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { MAX_BATCH_JOBS, isTerminalState } from '../protocol/messages.js';
import { KNOWN_STATES } from '../protocol/job-view.js';
import type {
  AttemptSnapshot,
  ClientReply,
  ClientRequest,
  CoordinatorInfo,
  JobEventKind,
  JobSnapshot,
  JsonValue,
  ScheduleRequest,
  ShardInfo,
  TerminalState,
  WorkerSnapshot,
} from '../protocol/messages.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { isNotUnderstood } from '../protocol/features.js';
import type { TraceContext } from '../protocol/trace-context.js';
import { activeTraceContext } from '../observability/tracing.js';
import { checkPayload } from '../sdk/payload-schema.js';
import type { ClientTls } from '../net/tls.js';
import { ClientConnection, requestFrame, type ConnectionSecurity } from './connection.js';
import {
  DEFAULT_FOLLOW_TIMEOUT_MS,
  LeaderConnection,
  type LeaderConnectionOptions,
} from './leader-connection.js';
import { Subscription, type EventGap } from './subscription.js';
import {
  ClientClosedError,
  FeatureUnsupportedError,
  InvalidPayloadError,
  RemoteError,
  SubmitRejectedError,
  TransportError,
  UnexpectedReplyError,
  UnsupportedFeatureError,
  UnsupportedRequestError,
  WaitTimeoutError,
} from './errors.js';
import { Schedules } from './schedules.js';
import {
  TriggersApi,
  publishMessage,
  signalMessage,
  signalsRequest,
  type PublishOptions,
  type PublishResult,
  type SignalResult,
} from './signals.js';
import { JobHandle, settledValue } from './job-handle.js';
import type { CancelResult, WaitOptions } from './job-handle.js';
import { isLocalCursor, pageLocally, queryIgnored } from './list-paging.js';
import type { JobPage, ListQuery } from './list-paging.js';
import {
  DEFAULT_FEATURE_CACHE,
  PROBED_SUPPORT,
  V1_FEATURES,
  probeFeature,
  type ProbedFeature,
  probeWaitJob,
} from './negotiation.js';
import type { CoordinatorFeatures, FeatureCache } from './negotiation.js';
import { ShardRouting, type Answer } from './shard-routing.js';
import { submitWithRetry } from './submit-retry.js';
import type { SubmitRetryOptions } from './submit-retry.js';
import type { AnyTasks, FlowJobOf, TaskName, TaskPayload, TaskResult } from './typing.js';
import {
  flowMessage,
  jobFieldsOf,
  requestFieldsOf,
  submitJobOf,
  submitJobsOf,
  submitMessage,
} from './requests.js';
import type { BatchJob, FlowJobSpec, JobFields, JobOptions, SubmitRequest } from './requests.js';

export { flowMessage, runAtOf, submitJobsMessage, submitMessage } from './requests.js';
export type { BatchJob, DedupOptions, FlowJobSpec, JobOptions, SubmitRequest } from './requests.js';

/** Default time allowed for a TCP connect, in ms. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
/** Longest hold asked of the coordinator by one WAIT_JOB, in ms; longer waits send several. */
export const WAIT_SLICE_MS = 60_000;
/** First and longest pause between status polls when the coordinator lacks WAIT_JOB, in ms. */
export const FIRST_POLL_INTERVAL_MS = 50;
export const WAIT_POLL_INTERVAL_MS = 500;

export interface ConnectOptions {
  /**
   * The coordinator's host, or several coordinators sharing one database
   * (`h1[:p1],h2[:p2],…`): the client finds and follows the leader
   * (leader-connection.ts).
   */
  host: string;
  /** Port of the addresses that name none. */
  port: number;
  /** Give up connecting after this long (default 5000 ms). */
  connectTimeoutMs?: number;
  /**
   * With several coordinators: give up finding a leader for one request after
   * this long. Also how long `wait()` keeps reconnecting to a coordinator that
   * went away (restarted, failed over) before it gives up (default 30000 ms).
   */
  followTimeoutMs?: number;
  /**
   * Payload schemas by task name (any Standard Schema). A payload for one of
   * these tasks is validated before it is sent; an invalid one rejects with
   * {@link InvalidPayloadError} and nothing is sent.
   */
  schemas?: Readonly<Record<string, StandardSchemaV1>>;
  /** Told once per client what the coordinator was found to understand. */
  onFeatures?: (features: CoordinatorFeatures, address: string) => void;
  /** Where probe answers are remembered (default: one cache for the process). */
  featureCache?: FeatureCache;
  /**
   * TLS: `true` = verify the coordinator against the system CAs; an object =
   * trust its `ca` (and present its `cert`/`key`); absent = plain TCP.
   */
  tls?: ClientTls | boolean | null;
  /**
   * A client token: every connection (the probe's too) sends `AUTH` with it
   * first. A refusal fails with `AuthError` `UNAUTHENTICATED`; a coordinator
   * that does not know `AUTH` fails with `AuthError` `AUTH_UNSUPPORTED`
   * (never a silent downgrade, and `AUTH` is never probed).
   */
  token?: string | null;
  /**
   * Against a sharded coordinator, send each request about one queue or job
   * straight to the client port of its shard, on the coordinator that leads
   * it, rather than through the coordinator dialled, which would forward it
   * (default true). The shards' ports are found out and followed by the
   * client; one it cannot reach is left to the coordinator dialled.
   */
  shardRouting?: boolean;
}

/** Options of {@link DtpClient.submit}: the job's, the retry policy's, and a schema. */
export interface SubmitOptions extends JobOptions, Omit<SubmitRetryOptions, 'hasIdempotencyKey'> {
  /** Validate the payload with this schema (default: the one given to `connect` for the task). */
  schema?: StandardSchemaV1;
}

/** What {@link DtpClient.submitFlow} resolves with: each ref's job id. */
export interface FlowSubmission {
  jobs: Record<string, string>;
  /** Refs whose `dedupKey` named an existing job (their id is that job's; nothing was created for them). */
  deduplicated: string[];
  /** Refs of those whose existing job was debounced (payload and run time replaced). */
  replaced: string[];
}

/** What {@link DtpClient.submitBatch} resolves with: per job, in the order given. */
export interface BatchSubmission {
  jobIds: string[];
  /** Whether the job's `dedupKey` named an existing job (nothing created for it). */
  deduplicated: boolean[];
  /** Whether that existing job was debounced (payload and run time replaced). */
  replaced: boolean[];
}

/** Same as {@link JobHandle}: what a submission returns. */
export type SubmitResult = JobHandle;
export type { CancelResult, WaitOptions } from './job-handle.js';
export type { JobPage, ListQuery } from './list-paging.js';
/** @deprecated Use {@link ListQuery}. */
export type ListJobsOptions = ListQuery;

/** A job with its attempt history ({@link DtpClient.status} with `attempts: true`). */
export interface JobWithAttempts {
  job: JobSnapshot;
  /** One per attempt, oldest first; null when the coordinator keeps no history (v1). */
  attempts: AttemptSnapshot[] | null;
}

type ReplyOf<T extends ClientReply['type']> = Extract<ClientReply, { type: T }>;

/** The reply if it has the wanted type; `ERROR` becomes a {@link RemoteError}. */
function expectReply<T extends ClientReply['type']>(
  request: ClientRequest['type'],
  reply: ClientReply,
  type: T,
): ReplyOf<T> {
  if (reply.type === type) return reply as ReplyOf<T>;
  if (reply.type === 'ERROR') throw new RemoteError(reply);
  throw new UnexpectedReplyError(request, reply.type);
}

function assertIntIn(name: string, value: number, min: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer in ${min}..${max}, got ${value}`);
  }
}

/** Settles like `promise`, or rejects with the signal's reason once it aborts. */
function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** Whether a submission or schedule names a queue other than `default` or a group key. */
function namesQueue(request: { queue?: string | null; groupKey?: string | null }): boolean {
  return (request.queue != null && request.queue !== DEFAULT_QUEUE) || request.groupKey != null;
}

/**
 * Throws {@link RequestTooLargeError} when the submission would not fit in
 * one frame; nothing is sent. (Every request is checked this way before it
 * is sent; this lets a caller check before it even connects.)
 */
export function checkSubmitSize(request: SubmitRequest): void {
  requestFrame(submitMessage(request));
}

/**
 * A client of one coordinator. `T` is the default export type of a task
 * module (`connect<typeof tasks>()`): it types submissions and results.
 */
function securityOf(options: ConnectOptions): ConnectionSecurity {
  const tls = options.tls === true ? {} : options.tls === false ? null : (options.tls ?? null);
  return { tls, token: options.token ?? null };
}

/** What {@link DtpClient.workerList} resolves with. */
export interface WorkerList {
  workers: WorkerSnapshot[];
  /** `host:port` (client port) of the leader that answered; null without leadership. */
  leader: string | null;
  /** Its epoch (fencing token); null without leadership. */
  epoch: number | null;
}

/** What {@link DtpClient.shards} answers. */
export interface ShardMap {
  shards: ShardInfo[];
  coordinators: CoordinatorInfo[];
}

/** One item of {@link DtpClient.watch} and {@link DtpClient.events}. */
export interface WatchEvent {
  /** `current`: the job as it was when watching began; `state`: a new state or attempt; `progress`: new progress. */
  event: 'current' | JobEventKind;
  atMillis: number;
  job: JobSnapshot;
}

export interface EventStreamOptions {
  /** Ends the iteration when aborted. */
  signal?: AbortSignal;
  /**
   * Told of each stretch of events this subscriber did not see (it fell
   * behind, or its connection ended and was dialled again). `watch` also
   * reads the job again then and reports what changed as a `state` event.
   */
  onGap?: (gap: EventGap) => void;
}

/** Which jobs {@link DtpClient.events} reports: every field given must match. */
export interface EventFilter {
  jobId?: string;
  taskType?: string;
  queue?: string;
}

export class DtpClient<T extends object = AnyTasks> {
  readonly #conn: LeaderConnection;
  /** Null when `shardRouting: false`. */
  readonly #routing: ShardRouting | null;
  readonly #connOptions: LeaderConnectionOptions;
  readonly #connectTimeoutMs: number;
  readonly #followTimeoutMs: number;
  readonly #schemas: Readonly<Record<string, StandardSchemaV1>>;
  readonly #featureCache: FeatureCache;
  /** Feature probes out now, by feature and address (see #require). */
  readonly #probing = new Map<string, Promise<boolean | null>>();
  readonly #security: ConnectionSecurity;
  readonly #onFeatures: ConnectOptions['onFeatures'];
  #featuresTold = false;
  #closing: Promise<void> | null = null;
  /** The named queues: list, pause, resume, limits. */
  readonly queues: QueuesApi;
  /** Open event subscriptions (closed with the client). */
  readonly #subscriptions = new Set<Subscription>();
  /** Recurring schedules: set, list, get, pause, resume, delete, trigger. */
  readonly schedules: Schedules;
  /** Triggers, which turn each event of a name into a job: set, list, delete. */
  readonly triggers: TriggersApi;

  private constructor(options: ConnectOptions, conn: LeaderConnection) {
    this.#conn = conn;
    this.#connOptions = connectionOptions(options);
    this.#connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.#followTimeoutMs = options.followTimeoutMs ?? DEFAULT_FOLLOW_TIMEOUT_MS;
    this.#schemas = options.schemas ?? {};
    this.#featureCache = options.featureCache ?? DEFAULT_FEATURE_CACHE;
    this.#security = securityOf(options);
    this.#onFeatures = options.onFeatures;
    this.#routing =
      options.shardRouting === false
        ? null
        : new ShardRouting({
            connectTimeoutMs: this.#connectTimeoutMs,
            security: this.#security,
            cache: this.#featureCache,
            address: () => this.#conn.address,
            viaPublic: (msg) => this.#conn.requestOn(msg),
            openProbe: () => this.#probeConnection(),
          });
    this.queues = new QueuesApi((msg) => this.#request(msg));
    this.schedules = new Schedules(
      (msg) => this.scheduleRequest(msg),
      (_jobId, job, serving, queuePaused) => new JobHandle(this, job, serving, queuePaused),
      (jobId) => this.status(jobId),
    );
    this.triggers = new TriggersApi((msg) => this.#extensionRequest(msg));
  }

  /** Connects; fails with a {@link TransportError} `CONNECT_FAILED`. */
  static async connect<T extends object = AnyTasks>(
    options: ConnectOptions,
  ): Promise<DtpClient<T>> {
    const conn = await LeaderConnection.open(connectionOptions(options));
    return new DtpClient<T>(options, conn);
  }

  /**
   * Every change of the jobs that match `filter` (a new job, a new state or
   * attempt, new progress), pushed by the coordinator as it happens, until
   * the iteration is ended (`break`, `options.signal`) or the client closes.
   * It uses a connection of its own and dials again after a restart or
   * failover (see {@link EventStreamOptions.onGap}). Throws
   * {@link EventsUnsupportedError} on a coordinator without job events, and
   * a {@link RemoteError} for a filter it refuses.
   */
  async *events(
    filter: EventFilter = {},
    options: EventStreamOptions = {},
  ): AsyncGenerator<WatchEvent> {
    const sub = await this.#subscribe(filter, options.signal);
    try {
      for await (const item of sub) {
        if ('reason' in item) {
          options.onGap?.(item);
          continue;
        }
        yield { event: item.event, atMillis: item.atMillis, job: item.job };
      }
    } finally {
      await sub.close();
    }
  }

  /**
   * The job as it is now (`current`), then each change of it as it happens,
   * ending once it is terminal (at once for a job that already is). After a
   * gap (see {@link EventStreamOptions.onGap}) the job is read again and a
   * change is reported as a `state` event. Throws as {@link events} does, and
   * {@link RemoteError} `UNKNOWN_JOB` for an unknown job.
   */
  async *watch(jobId: string, options: EventStreamOptions = {}): AsyncGenerator<WatchEvent> {
    const sub = await this.#subscribe({ jobId }, options.signal);
    try {
      let last = await this.status(jobId);
      yield { event: 'current', atMillis: Date.now(), job: last };
      if (isTerminalState(last.state)) return;
      for await (const item of sub) {
        let next: WatchEvent;
        if ('reason' in item) {
          options.onGap?.(item);
          const now = await this.status(jobId);
          if (sameJobView(now, last)) continue;
          next = { event: 'state', atMillis: Date.now(), job: now };
        } else {
          if (item.job.updatedAtMillis < last.updatedAtMillis || sameJobView(item.job, last))
            continue;
          next = { event: item.event, atMillis: item.atMillis, job: item.job };
        }
        last = next.job;
        yield next;
        if (isTerminalState(last.state)) return;
      }
    } finally {
      await sub.close();
    }
  }

  async #subscribe(filter: EventFilter, signal: AbortSignal | undefined): Promise<Subscription> {
    if (this.#closing !== null) throw new ClientClosedError();
    signal?.throwIfAborted();
    const sub = await Subscription.open(this.#connOptions, {
      jobId: filter.jobId ?? null,
      taskType: filter.taskType ?? null,
      queue: filter.queue ?? null,
    });
    const stop = (): void => void sub.close();
    signal?.addEventListener('abort', stop, { once: true });
    this.#subscriptions.add(sub);
    void this.#closedSubscription(sub, signal, stop);
    return sub;
  }

  async #closedSubscription(
    sub: Subscription,
    signal: AbortSignal | undefined,
    stop: () => void,
  ): Promise<void> {
    await sub.ended;
    signal?.removeEventListener('abort', stop);
    this.#subscriptions.delete(sub);
  }

  /** `host:port` of the coordinator (with several: the one dialled last). */
  get address(): string {
    return this.#conn.address;
  }

  /**
   * Submits a job and returns its handle. Rejects with
   * {@link InvalidPayloadError} when the payload fails the task's schema
   * (nothing is sent), {@link SubmitRejectedError} when admission control
   * refuses it, {@link RemoteError} for a submission the coordinator refuses
   * (`Invalid payload`, `Invalid task type`, ...). `options.retries`
   * (default 0) resends a retryable rejection as in submit-retry.ts.
   */
  submit<K extends TaskName<T>>(
    task: K,
    payload: TaskPayload<T, K>,
    options?: SubmitOptions,
  ): Promise<JobHandle<TaskResult<T, K>>>;
  /** Submits a submission spelled out field by field. */
  submit(request: SubmitRequest, options?: SubmitOptions): Promise<JobHandle>;
  async submit(
    taskOrRequest: string | SubmitRequest,
    payloadOrOptions?: unknown,
    maybeOptions?: SubmitOptions,
  ): Promise<JobHandle<unknown>> {
    const byName = typeof taskOrRequest === 'string';
    const options = (byName ? maybeOptions : (payloadOrOptions as SubmitOptions)) ?? {};
    const request = byName
      ? jobFieldsOf(taskOrRequest, payloadOrOptions, options)
      : requestFieldsOf(taskOrRequest);
    await this.#validate(request, options.schema);
    // The caller's span (if OpenTelemetry is set up here) becomes the job's trace context.
    const trace = await activeTraceContext();
    const key = request.idempotencyKey ?? null;
    return submitWithRetry(() => this.#submitOnce(request, trace), {
      ...options,
      hasIdempotencyKey: key !== null && key !== '',
    });
  }

  /**
   * Submits a flow: up to 10,000 jobs whose `dependsOn` name each other by
   * ref (or existing jobs by id), created in one commit or not at all.
   * Rejects with {@link RemoteError} (`FLOW_CYCLE`, `INVALID_FLOW`,
   * `UNKNOWN_JOB`, `INVALID_PAYLOAD`, ...: nothing was created),
   * {@link SubmitRejectedError} when admission control cannot take the whole
   * flow, {@link FeatureUnsupportedError} from a coordinator without flows.
   * Sent again after a lost connection only when every job has an
   * idempotency key (the same flow again then creates nothing new).
   * With a typed client (`connect<typeof tasks>()`) each job's payload is
   * typed by its own `taskType`, and checked against the client's `schemas`
   * before anything is sent ({@link InvalidPayloadError} naming the ref).
   */
  async submitFlow(flow: { jobs: readonly FlowJobOf<T, FlowJobSpec>[] }): Promise<FlowSubmission> {
    const msg = flowMessage(flow as { jobs: readonly FlowJobSpec[] }, await activeTraceContext());
    for (const job of msg.jobs) {
      const schema = this.#schemaOf(job.taskType);
      if (schema === undefined) continue;
      const check = await checkPayload(schema, job.payload);
      if (!check.ok) {
        throw new InvalidPayloadError(
          `${check.message} (flow job ref ${JSON.stringify(job.ref)})`,
          check.issues,
        );
      }
    }
    if (msg.jobs.some(namesQueue)) await this.#require('queues', 'named queues');
    const { reply, conn } = await this.#conn.requestOn(msg);
    if (reply.type === 'ERROR' && isNotUnderstood(reply)) {
      void conn.destroy('the coordinator did not understand SUBMIT_FLOW');
      throw new FeatureUnsupportedError('flows', reply.message, msg.type);
    }
    if (reply.type === 'SUBMIT_REJECTED') throw new SubmitRejectedError(reply);
    const submitted = expectReply('SUBMIT_FLOW', reply, 'FLOW_SUBMITTED');
    return {
      jobs: Object.fromEntries(submitted.jobs.map(({ ref, jobId }) => [ref, jobId])),
      deduplicated: submitted.jobs.filter((job) => job.deduplicated === true).map((j) => j.ref),
      replaced: submitted.jobs.filter((job) => job.replaced === true).map((j) => j.ref),
    };
  }

  /**
   * Submits 1..1,000 jobs as one batch (SUBMIT_JOBS): all of them are created,
   * in one commit, or none is. Resolves with their ids in the order given (a
   * job whose idempotency key is known gets its original id). Rejects with
   * {@link RemoteError} (its `index` names the job at fault) when the
   * coordinator refuses the batch, {@link SubmitRejectedError} when it does
   * not fit under admission control, {@link InvalidPayloadError} when a
   * payload fails its schema and {@link RequestTooLargeError} when the batch
   * does not fit in one frame (nothing is sent then), and
   * {@link UnsupportedRequestError} when the coordinator predates batches
   * (nothing was created; no job is submitted one by one instead). More than
   * 1,000 jobs is a `RangeError`: split them, each part is its own batch.
   */
  async submitMany(jobs: readonly BatchJob[]): Promise<string[]> {
    return (await this.submitBatch(jobs)).jobIds;
  }

  /**
   * {@link submitMany}, resolving also with what each job's deduplication
   * key did (all false from a coordinator that does not deduplicate). A key
   * used twice in one batch: the second job is deduplicated against the first.
   */
  async submitBatch(jobs: readonly BatchJob[]): Promise<BatchSubmission> {
    if (jobs.length === 0 || jobs.length > MAX_BATCH_JOBS) {
      throw new RangeError(`submitMany takes 1..${MAX_BATCH_JOBS} jobs, got ${jobs.length}`);
    }
    if (jobs.some((job) => job.dependsOn !== undefined || job.onParentFailure !== undefined)) {
      throw new TypeError(
        'submitMany takes no dependsOn: submit jobs with parents with submitFlow',
      );
    }
    const nowMs = Date.now();
    const requests = jobs.map((job) => jobFieldsOf(job.taskType, job.payload, job, nowMs));
    for (const request of requests) await this.#validate(request, undefined);
    const message = submitJobsOf(requests, await activeTraceContext());
    requestFrame(message);
    if (requests.some(namesQueue)) await this.#require('queues', 'named queues');
    const reply = await this.#request(message);
    if (reply.type === 'SUBMIT_REJECTED') throw new SubmitRejectedError(reply);
    if (reply.type === 'ERROR' && isNotUnderstood(reply)) {
      throw new UnsupportedRequestError(message.type, 'bulk submission', reply.message);
    }
    const { jobIds, deduplicated, replaced } = expectReply('SUBMIT_JOBS', reply, 'JOBS_SUBMITTED');
    const flags = (given: boolean[] | null | undefined): boolean[] =>
      jobIds.map((_, i) => given?.[i] === true);
    return { jobIds, deduplicated: flags(deduplicated), replaced: flags(replaced) };
  }

  /** The job's current snapshot; {@link RemoteError} `UNKNOWN_JOB` if there is none. */
  status(jobId: string): Promise<JobSnapshot>;
  /** The job's snapshot and its attempts, oldest first (the running one included). */
  status(jobId: string, options: { attempts: true }): Promise<JobWithAttempts>;
  async status(
    jobId: string,
    options: { attempts?: boolean } = {},
  ): Promise<JobSnapshot | JobWithAttempts> {
    const withAttempts = options.attempts === true;
    const reply = await this.#request({
      type: 'GET_JOB_STATUS',
      jobId,
      ...(withAttempts && { attempts: true }),
      knownStates: [...KNOWN_STATES],
    });
    const status = expectReply('GET_JOB_STATUS', reply, 'JOB_STATUS');
    if (!withAttempts) return status.job;
    return { job: status.job, attempts: status.attempts ?? null };
  }

  /**
   * Deletes terminal jobs of one state (and their attempts) that finished at
   * least `olderThanMs` ago; resolves with how many were deleted. Their
   * idempotency keys are forgotten. {@link RemoteError} `INVALID_REQUEST` for
   * a state that is not terminal.
   */
  async purge(state: TerminalState, olderThanMs: number): Promise<number> {
    assertIntIn('olderThanMs', olderThanMs, 0, Number.MAX_SAFE_INTEGER);
    const reply = await this.#request({ type: 'PURGE_JOBS', state, olderThanMillis: olderThanMs });
    return expectReply('PURGE_JOBS', reply, 'JOBS_PURGED').deleted;
  }

  /**
   * Re-runs the FAILED jobs of a queue (a redrive of dead letters): each
   * selected job is QUEUED again as the same job, with `maxAttempts` more
   * attempts (default: the coordinator's default) and its attempts so far
   * kept. Newest first, at most `limit` (default 1,000, at most 10,000) per
   * call; `more` says whether more matched (call again). Resolves once the
   * change is durable. {@link UnsupportedFeatureError} from a coordinator
   * without it; `RangeError`/`TypeError` for bad options (nothing sent).
   */
  async rerun(options: RerunOptions): Promise<RerunResult> {
    const msg = rerunMessage(options);
    const reply = await this.#request(msg);
    if (reply.type === 'ERROR' && isNotUnderstood(reply)) {
      throw new UnsupportedRequestError(msg.type, 'the re-run of failed jobs', reply.message);
    }
    const { rerun, jobIds, more } = expectReply(msg.type, reply, 'JOBS_RERUN');
    return { rerun, jobIds, more };
  }

  /**
   * Resolves with the job's snapshot as soon as it is terminal (COMPLETED,
   * FAILED, CANCELLED); fails with {@link WaitTimeoutError} (carrying the last
   * snapshot) after `timeoutMs` (default: no limit), or with the signal's
   * reason once it aborts. Held by the coordinator (WAIT_JOB) when it can,
   * polled otherwise (also while the coordinator holds as many waits as it
   * will: `TOO_MANY_WAITS` makes it look once and hold again after a pause
   * of 50 ms growing to 500 ms). A wait survives its coordinator going away (a restart,
   * a failover): waiting is safe to repeat, so the client reconnects and asks
   * again, for up to `followTimeoutMs` without a connection.
   */
  async wait(
    jobId: string,
    timeoutMs?: number,
    options: { signal?: AbortSignal } = {},
  ): Promise<JobSnapshot> {
    if (timeoutMs !== undefined) assertIntIn('timeoutMs', timeoutMs, 0, Number.MAX_SAFE_INTEGER);
    const { signal } = options;
    const deadlineMs = performance.now() + (timeoutMs ?? Number.POSITIVE_INFINITY);
    let push = await unlessAborted(this.#waitJobSupported(), signal);
    let pollMs = FIRST_POLL_INTERVAL_MS;
    /** When the connection was last found gone (null while it works). */
    let lostSinceMs: number | null = null;
    let reconnectPauseMs = FIRST_POLL_INTERVAL_MS;
    for (;;) {
      const startedMs = performance.now();
      const sliceMs = Math.min(WAIT_SLICE_MS, Math.max(0, Math.ceil(deadlineMs - startedMs)));
      let job: JobSnapshot | null;
      try {
        job = push
          ? await unlessAborted(this.#waitJob(jobId, sliceMs), signal)
          : await unlessAborted(this.status(jobId), signal);
      } catch (err) {
        if (!(err instanceof TransportError) || err.code === LocalErrorCode.TlsFailed) throw err;
        if (this.#closing !== null) throw err;
        lostSinceMs ??= startedMs;
        const nowMs = performance.now();
        if (nowMs - lostSinceMs >= this.#followTimeoutMs || nowMs >= deadlineMs) throw err;
        await unlessAborted(sleepMs(Math.min(reconnectPauseMs, deadlineMs - nowMs)), signal);
        reconnectPauseMs = Math.min(WAIT_POLL_INTERVAL_MS, reconnectPauseMs * 2);
        continue;
      }
      lostSinceMs = null;
      reconnectPauseMs = FIRST_POLL_INTERVAL_MS;
      if (job === null) {
        push = false;
        continue;
      }
      if (isTerminalState(job.state)) return job;
      const nowMs = performance.now();
      if (nowMs >= deadlineMs) throw new WaitTimeoutError(job, timeoutMs ?? 0);
      // A peer that answers long before the slice ends (or plain polling)
      // must not turn this loop into a busy one.
      if (!push || nowMs - startedMs < sliceMs / 2) {
        await unlessAborted(sleepMs(Math.min(pollMs, Math.ceil(deadlineMs - nowMs))), signal);
        pollMs = Math.min(WAIT_POLL_INTERVAL_MS, pollMs * 2);
      }
    }
  }

  /**
   * Waits for the end of any job (e.g. one submitted elsewhere) and returns
   * its value, or rejects with {@link JobFailedError} / {@link JobCancelledError}.
   */
  async result<R = JsonValue>(jobId: string, options: WaitOptions = {}): Promise<R> {
    const { timeoutMs, signal } = options;
    const job = await this.wait(jobId, timeoutMs, signal === undefined ? {} : { signal });
    return settledValue<R>(job);
  }

  /**
   * Sends a signal to one job: `payload` is any JSON value (absent = null) of
   * at most 256 KiB, `name` a name as a queue's. The job holds it until a
   * `ctx.waitForSignal(name)` of its handler takes it (at once when the job
   * is waiting for it: `resumed`). Resolves once durable. Rejects with
   * {@link RemoteError} for an unknown job (`UNKNOWN_JOB`), one that has
   * ended (`INVALID_REQUEST`) or one that holds 1,000 signals (`LIMIT_EXCEEDED`), {@link FeatureUnsupportedError}
   * from a coordinator without signals, `TypeError` or
   * {@link RequestTooLargeError} for bad input (nothing sent).
   */
  async signal(jobId: string, name: string, payload: JsonValue = null): Promise<SignalResult> {
    const msg = signalMessage(jobId, name, payload);
    const reply = await signalsRequest((m) => this.#extensionRequest(m), msg, 'JOB_SIGNALLED');
    return {
      jobId: reply.jobId,
      name: reply.name,
      resumed: reply.resumed,
      signalsHeld: reply.signalsHeld,
    };
  }

  /**
   * Publishes an event: each trigger of `name` creates one job whose payload
   * is `payload` (any JSON value, absent = null, at most 256 KiB), and every
   * job waiting for it (`ctx.waitForEvent(name)`, with this key or none)
   * wakes, in one commit; resolves once durable. An `eventId` published
   * before does nothing again: the first reply comes back, with `duplicate`.
   * Rejects as {@link signal} does.
   */
  async publish(
    name: string,
    payload: JsonValue = null,
    options: PublishOptions = {},
  ): Promise<PublishResult> {
    const msg = publishMessage(name, payload, options);
    const reply = await signalsRequest((m) => this.#extensionRequest(m), msg, 'EVENT_PUBLISHED');
    return {
      eventId: reply.eventId,
      jobIds: reply.jobIds,
      resumed: reply.resumed,
      duplicate: reply.duplicate === true,
    };
  }

  /** Cancels a job; `cancelled` is false when it was already terminal. */
  async cancel(jobId: string): Promise<CancelResult> {
    const reply = await this.#request({
      type: 'CANCEL_JOB',
      jobId,
      knownStates: [...KNOWN_STATES],
    });
    const { cancelled, job } = expectReply('CANCEL_JOB', reply, 'JOB_CANCEL');
    return { cancelled, job };
  }

  /** One page of jobs, newest first (paged here when the coordinator does not page). */
  async listPage(query: ListQuery = {}): Promise<JobPage> {
    const local = isLocalCursor(query.cursor);
    const reply = await this.#request({
      type: 'LIST_JOBS',
      limit: query.limit ?? null,
      state: query.state ?? null,
      cursor: local ? null : (query.cursor ?? null),
      knownStates: [...KNOWN_STATES],
      ...(query.queue !== undefined && { queue: query.queue }),
    });
    const { jobs, nextCursor } = expectReply('LIST_JOBS', reply, 'JOB_LIST');
    if (queryIgnored(query, jobs)) this.#learned(V1_FEATURES);
    if (local || queryIgnored(query, jobs)) return pageLocally(jobs, query);
    return { jobs, nextCursor };
  }

  /**
   * Every job matching the query (state, page size), newest first, fetched
   * page by page as the iteration goes.
   */
  async *list(query: Omit<ListQuery, 'cursor'> = {}): AsyncGenerator<JobSnapshot, void, undefined> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listPage({ ...query, ...(cursor !== undefined && { cursor }) });
      yield* page.jobs;
      if (page.nextCursor === null || page.jobs.length === 0) return;
      cursor = page.nextCursor;
    }
  }

  /** Live workers, sorted by id. */
  async workers(): Promise<WorkerSnapshot[]> {
    return (await this.workerList()).workers;
  }

  /**
   * Live workers, with the leader that answered and its epoch when the
   * coordinators share PostgreSQL (both null on SQLite or a v1 coordinator).
   */
  async workerList(): Promise<WorkerList> {
    const reply = await this.#request({ type: 'LIST_WORKERS' });
    const list = expectReply('LIST_WORKERS', reply, 'WORKER_LIST');
    return { workers: list.workers, leader: list.leader ?? null, epoch: list.epoch ?? null };
  }

  /**
   * The shards of the database and who leads each, and the coordinators
   * alive on it with how many shards each leads. An unsharded coordinator
   * answers with one shard, its own; one that predates shards is a
   * {@link FeatureUnsupportedError}.
   */
  async shards(): Promise<ShardMap> {
    const msg = { type: 'LIST_SHARDS' } as const;
    const sentAtMs = performance.now();
    const { reply, conn } = await this.#conn.requestOn(msg);
    if (reply.type === 'ERROR' && isNotUnderstood(reply)) {
      void conn.destroy('the coordinator did not understand LIST_SHARDS');
      throw new FeatureUnsupportedError('shards', reply.message, msg.type);
    }
    const list = expectReply(msg.type, reply, 'SHARD_LIST');
    this.#routing?.learned(list, sentAtMs);
    return { shards: list.shards, coordinators: list.coordinators };
  }

  /**
   * What the coordinator understands (probed once per address, on a
   * connection of its own); null when that could not be found out.
   */
  async features(): Promise<CoordinatorFeatures | null> {
    const features = await this.#featureCache.learn(this.address, () => this.#probe());
    if (features !== null) this.#tell(features);
    return features;
  }

  /** Fails pending requests with {@link ClientClosedError} and closes. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= Promise.all([
      this.#conn.close(),
      this.#routing?.close(),
      ...[...this.#subscriptions].map((sub) => sub.close()),
    ]).then(() => undefined);
    return this.#closing;
  }

  /** The schema given for a task type (own keys only: a task named `constructor` has none). */
  #schemaOf(taskType: string): StandardSchemaV1 | undefined {
    return Object.hasOwn(this.#schemas, taskType) ? this.#schemas[taskType] : undefined;
  }

  async #validate(request: SubmitRequest, schema: StandardSchemaV1 | undefined): Promise<void> {
    const chosen = schema ?? this.#schemaOf(request.taskType);
    if (chosen === undefined) return;
    const check = await checkPayload(chosen, request.payload);
    if (!check.ok) throw new InvalidPayloadError(check.message, check.issues);
  }

  async #submitOnce(request: JobFields, trace: TraceContext | null): Promise<JobHandle> {
    // A coordinator that does not know delayed jobs would run this one at once.
    if (request.runAtMillis != null) await this.#require('time', 'delayed jobs');
    // Nor one that does not know dependencies: it would run this one before its parents.
    if (request.dependsOn != null && request.dependsOn.length > 0) {
      await this.#require('flows', 'dependencies between jobs');
    }
    // Nor one that does not know queues: it would run this one outside its queue's limits.
    if (namesQueue(request)) await this.#require('queues', 'named queues');
    const reply = await this.#request(submitJobOf(request, trace));
    if (reply.type === 'SUBMIT_REJECTED') throw new SubmitRejectedError(reply);
    const submitted = expectReply('SUBMIT_JOB', reply, 'JOB_SUBMITTED');
    const { jobId, job, servingWorkers, queuePaused } = submitted;
    const snapshot = job ?? (await this.status(jobId));
    return new JobHandle(this, snapshot, servingWorkers ?? null, queuePaused === true, submitted);
  }

  async #waitJobSupported(): Promise<boolean> {
    return (await this.features())?.waitJob ?? true;
  }

  /** JOB_STATUS of a WAIT_JOB, or null when the coordinator did not understand it. */
  async #waitJob(jobId: string, timeoutMs: number): Promise<JobSnapshot | null> {
    if (this.#closing !== null) throw new ClientClosedError();
    const { reply, conn } = await this.#send({
      type: 'WAIT_JOB',
      jobId,
      timeoutMillis: timeoutMs,
      knownStates: [...KNOWN_STATES],
    });
    if (reply.type === 'ERROR' && isNotUnderstood(reply)) {
      // A v1 coordinator closes the connection after such an answer: do not
      // send anything more on it.
      void conn.destroy('the coordinator did not understand WAIT_JOB');
      this.#learned(V1_FEATURES);
      return null;
    }
    if (reply.type === 'ERROR' && reply.code === ErrorCode.TooManyWaits) {
      // The coordinator holds as many waits as it will: look now, hold one again later.
      return this.status(jobId);
    }
    return expectReply('WAIT_JOB', reply, 'JOB_STATUS').job;
  }

  /**
   * Fails with {@link UnsupportedFeatureError} unless the coordinator is
   * known to understand delayed jobs and schedules (probed once per address,
   * on a connection of its own; an inconclusive probe lets the request go).
   */
  async #require(feature: ProbedFeature, what: string): Promise<void> {
    const key = `${feature} ${this.address}`;
    let known = PROBED_SUPPORT.get(key);
    if (known === undefined) {
      // Requests made while the probe is out wait for that one probe: one
      // connection for a burst, and the requests leave in the order made.
      let probing = this.#probing.get(key);
      if (probing === undefined) {
        probing = this.#probeWith((conn) => probeFeature(conn, feature, this.#connectTimeoutMs));
        this.#probing.set(key, probing);
        const done = (): void => void this.#probing.delete(key);
        void probing.then(done, done);
      }
      const found = await probing;
      if (found !== null) PROBED_SUPPORT.set(key, found);
      known = found ?? true;
    }
    if (!known) throw new UnsupportedFeatureError(`this coordinator does not support ${what}`);
  }

  /** Sends a schedule request; a coordinator without schedules fails it plainly. */
  async scheduleRequest(msg: ScheduleRequest): Promise<ClientReply> {
    await this.#require('time', 'schedules');
    if (msg.type === 'SET_SCHEDULE' && namesQueue(msg.schedule)) {
      await this.#require('queues', 'named queues');
    }
    const reply = await this.#request(msg);
    if (reply.type === 'ERROR' && isNotUnderstood(reply)) {
      throw new UnsupportedFeatureError('this coordinator does not support schedules');
    }
    return reply;
  }

  /** Records what a reply showed about the coordinator. */
  #learned(features: CoordinatorFeatures): void {
    const before = this.#featureCache.get(this.address);
    this.#featureCache.record(this.address, features);
    if (before?.waitJob === features.waitJob) return;
    this.#featuresTold = false;
    this.#tell(features);
  }

  #tell(features: CoordinatorFeatures): void {
    if (this.#featuresTold) return;
    this.#featuresTold = true;
    this.#onFeatures?.(features, this.address);
  }

  /**
   * The capability probe, on a connection of its own; null when
   * inconclusive. A coordinator that understood it is asked there whether
   * it is sharded too (shard-routing.ts), after this resolves.
   */
  async #probe(): Promise<CoordinatorFeatures | null> {
    const conn = await this.#probeConnection();
    if (conn === null) return null;
    const features = await probeWaitJob(conn, this.#connectTimeoutMs);
    const learning = features?.waitJob === true && this.#routing?.learnOn(conn) === true;
    if (!learning) await conn.close();
    return features;
  }

  /** Runs a probe on a connection of its own; null when it cannot connect. */
  async #probeWith<R>(probe: (conn: ClientConnection) => Promise<R | null>): Promise<R | null> {
    const conn = await this.#probeConnection();
    if (conn === null) return null;
    try {
      return await probe(conn);
    } finally {
      await conn.close();
    }
  }

  /** A connection of its own to the coordinator dialled, for a probe; null when it cannot connect. */
  async #probeConnection(): Promise<ClientConnection | null> {
    try {
      const { host, port } = this.#conn.current;
      return await ClientConnection.open(host, port, this.#connectTimeoutMs, this.#security);
    } catch {
      return null;
    }
  }

  /**
   * Sends an extension request. A coordinator that did not understand it
   * (a v1 one) closes the connection after its answer: the connection is
   * dropped at once, so that the next request dials a fresh one rather than
   * being lost on this one.
   */
  async #extensionRequest(msg: ClientRequest): Promise<ClientReply> {
    if (this.#closing !== null) throw new ClientClosedError();
    const { reply, conn } = await this.#send(msg);
    if (reply.type === 'ERROR' && isNotUnderstood(reply)) {
      void conn.destroy(`the coordinator did not understand ${msg.type}`);
    }
    return reply;
  }

  /**
   * Sends on the current connection; after it broke, on a fresh one (to the
   * leader, with several coordinators: leader-connection.ts); to the shard's
   * own port when routed (shard-routing.ts). The fast path is synchronous so
   * that requests leave in call order on each connection.
   */
  #request(msg: ClientRequest): Promise<ClientReply> {
    if (this.#closing !== null) return Promise.reject(new ClientClosedError());
    if (this.#routing === null) return this.#conn.request(msg);
    return this.#routing.request(msg).then((answer) => answer.reply);
  }

  /**
   * Sends to the shard the request is about when that is known and
   * reachable, else through the coordinator dialled; names the connection
   * that answered.
   */
  #send(msg: ClientRequest): Promise<Answer> {
    return this.#routing?.request(msg) ?? this.#conn.requestOn(msg);
  }
}

/**
 * Connects to a coordinator's client port. `T` types submissions and results
 * from a task module: `connect<typeof tasks>(...)` after
 * `import type tasks from './tasks.js'`.
 */
export function connect<T extends object = AnyTasks>(
  options: ConnectOptions,
): Promise<DtpClient<T>> {
  return DtpClient.connect<T>(options);
}

function connectionOptions(options: ConnectOptions): LeaderConnectionOptions {
  return {
    host: options.host,
    port: options.port,
    connectTimeoutMs: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    followTimeoutMs: options.followTimeoutMs,
    security: securityOf(options),
  };
}

/** True when a watcher would see nothing new between the two (state, attempts, progress). */
function sameJobView(a: JobSnapshot, b: JobSnapshot): boolean {
  return (
    a.state === b.state &&
    a.attempts === b.attempts &&
    a.progress?.fraction === b.progress?.fraction &&
    a.progress?.message === b.progress?.message &&
    a.progress?.atMillis === b.progress?.atMillis
  );
}
