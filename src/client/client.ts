/**
 * The dtp client library: a typed, promise-based view of the client port.
 *
 *     const client = await DtpClient.connect({ host: 'localhost', port: 7071 });
 *     const { jobId } = await client.submit({ taskType: 'SHA256', payload: { text: 'abc' } });
 *     const job = await client.wait(jobId, 60_000);
 *     await client.close();
 *
 * Requests may be issued concurrently: they are pipelined on one connection
 * and each promise settles with its own reply. When the connection breaks,
 * the requests in flight fail with `CONNECTION_LOST` (their outcome is
 * unknown) and the next request dials a fresh connection.
 */
import { setTimeout as sleepMs } from 'node:timers/promises';
import { isTerminalState } from '../protocol/messages.js';
import type {
  ClientReply,
  ClientRequest,
  JobSnapshot,
  JobState,
  JsonObject,
  Priority,
  WorkerSnapshot,
} from '../protocol/messages.js';
import { ClientConnection, type ConnectionSecurity } from './connection.js';
import type { ClientTls } from '../net/tls.js';
import {
  ClientClosedError,
  RemoteError,
  SubmitRejectedError,
  UnexpectedReplyError,
  WaitTimeoutError,
} from './errors.js';
import { submitWithRetry } from './submit-retry.js';
import type { SubmitRetryOptions } from './submit-retry.js';

/** Default time allowed for a TCP connect, in ms. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
/** Longest hold asked of the coordinator by one WAIT_JOB, in ms; longer waits send several. */
export const WAIT_SLICE_MS = 60_000;
/** Pause between status polls when the coordinator lacks WAIT_JOB, in ms. */
export const WAIT_POLL_INTERVAL_MS = 250;

export interface ConnectOptions {
  host: string;
  port: number;
  /** Give up connecting after this long (default 5000 ms). */
  connectTimeoutMs?: number;
  /**
   * TLS: `true` = verify the coordinator against the system CAs; an object =
   * trust its `ca` (and present its `cert`/`key`); absent = plain TCP.
   */
  tls?: ClientTls | boolean | null;
  /**
   * A client token: every connection sends `AUTH` with it first. A refusal
   * fails with `AuthError` `UNAUTHENTICATED`; a coordinator that does not
   * know `AUTH` fails with `AuthError` `AUTH_UNSUPPORTED` (never a silent
   * downgrade).
   */
  token?: string | null;
}

function securityOf(options: ConnectOptions): ConnectionSecurity {
  const tls = options.tls === true ? {} : options.tls === false ? null : (options.tls ?? null);
  return { tls, token: options.token ?? null };
}

export interface SubmitRequest {
  /** Upper-case task type, e.g. `SHA256`. */
  taskType: string;
  payload: JsonObject;
  /** Absent, null or <= 0: the coordinator's default. */
  maxAttempts?: number | null;
  /** Resubmitting the same key and submission returns the original job. */
  idempotencyKey?: string | null;
  /** Absent or null: NORMAL. */
  priority?: Priority | null;
  /** Per-attempt execution deadline, 1..86400000 ms; absent or null: the coordinator's. */
  timeoutMillis?: number | null;
}

export interface SubmitResult {
  jobId: string;
  /** The job right after submission. */
  job: JobSnapshot;
  /**
   * Live workers that declared the job's task type when it was accepted;
   * null when the coordinator does not say (a v1 coordinator).
   */
  servingWorkers: number | null;
}

/** Retry policy and injected sources for {@link DtpClient.submit} (default: no retry). */
export type SubmitOptions = Omit<SubmitRetryOptions, 'hasIdempotencyKey'>;

export interface CancelResult {
  /** True when this call moved the job to CANCELLED; false when it was already terminal. */
  cancelled: boolean;
  job: JobSnapshot;
}

export interface ListJobsOptions {
  /** Page size (default: the coordinator's page). */
  limit?: number;
  /** Only jobs in this state. */
  state?: JobState;
  /** The `nextCursor` of the previous page. */
  cursor?: string;
}

export interface JobPage {
  /** Newest first. */
  jobs: JobSnapshot[];
  /** Null on the last page. */
  nextCursor: string | null;
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

function assertNonNegativeInt(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
  }
}

export class DtpClient {
  readonly #host: string;
  readonly #port: number;
  readonly #connectTimeoutMs: number;
  readonly #security: ConnectionSecurity;
  #current: ClientConnection;
  #dialing: Promise<ClientConnection> | null = null;
  #closing: Promise<void> | null = null;

  private constructor(options: ConnectOptions, first: ClientConnection) {
    this.#host = options.host;
    this.#port = options.port;
    this.#connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.#security = securityOf(options);
    this.#current = first;
  }

  /** Connects; fails with a {@link TransportError} `CONNECT_FAILED`. */
  static async connect(options: ConnectOptions): Promise<DtpClient> {
    const timeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const first = await ClientConnection.open(
      options.host,
      options.port,
      timeoutMs,
      securityOf(options),
    );
    return new DtpClient(options, first);
  }

  /**
   * Submits a job. Fails with {@link SubmitRejectedError} when admission
   * control refuses it, {@link RemoteError} for an invalid submission.
   * `options.retries` (default 0) enables retry as in `submit-retry.ts`.
   */
  submit(request: SubmitRequest, options: SubmitOptions = {}): Promise<SubmitResult> {
    const key = request.idempotencyKey ?? null;
    return submitWithRetry(() => this.#submitOnce(request), {
      ...options,
      hasIdempotencyKey: key !== null && key !== '',
    });
  }

  /** The job's current snapshot; {@link RemoteError} `UNKNOWN_JOB` if there is none. */
  async status(jobId: string): Promise<JobSnapshot> {
    const reply = await this.#request({ type: 'GET_JOB_STATUS', jobId });
    return expectReply('GET_JOB_STATUS', reply, 'JOB_STATUS').job;
  }

  /**
   * Resolves as soon as the job is terminal (COMPLETED, FAILED, CANCELLED);
   * fails with {@link WaitTimeoutError} (carrying the last snapshot) after
   * `timeoutMs`. The coordinator holds each WAIT_JOB; no polling.
   */
  async wait(jobId: string, timeoutMs: number): Promise<JobSnapshot> {
    assertNonNegativeInt('timeoutMs', timeoutMs);
    const deadlineMs = performance.now() + timeoutMs;
    let serverWaits = true;
    for (;;) {
      const startedMs = performance.now();
      const sliceMs = Math.min(WAIT_SLICE_MS, Math.max(0, Math.ceil(deadlineMs - startedMs)));
      const job = serverWaits ? await this.#waitJob(jobId, sliceMs) : await this.status(jobId);
      if (job === null) {
        serverWaits = false;
        continue;
      }
      if (isTerminalState(job.state)) return job;
      const nowMs = performance.now();
      if (nowMs >= deadlineMs) throw new WaitTimeoutError(job, timeoutMs);
      // A peer that answers long before the slice ends (or plain polling)
      // must not turn this loop into a busy one.
      if (nowMs - startedMs < sliceMs / 2) {
        await sleepMs(Math.min(WAIT_POLL_INTERVAL_MS, Math.ceil(deadlineMs - nowMs)));
      }
    }
  }

  /** Cancels a job; `cancelled` is false when it was already terminal. */
  async cancel(jobId: string): Promise<CancelResult> {
    const reply = await this.#request({ type: 'CANCEL_JOB', jobId });
    const { cancelled, job } = expectReply('CANCEL_JOB', reply, 'JOB_CANCEL');
    return { cancelled, job };
  }

  /** One page of jobs, newest first. */
  async list(options: ListJobsOptions = {}): Promise<JobPage> {
    const reply = await this.#request({
      type: 'LIST_JOBS',
      limit: options.limit ?? null,
      state: options.state ?? null,
      cursor: options.cursor ?? null,
    });
    const { jobs, nextCursor } = expectReply('LIST_JOBS', reply, 'JOB_LIST');
    return { jobs, nextCursor };
  }

  /** Live workers, sorted by id. */
  async workers(): Promise<WorkerSnapshot[]> {
    const reply = await this.#request({ type: 'LIST_WORKERS' });
    return expectReply('LIST_WORKERS', reply, 'WORKER_LIST').workers;
  }

  /** Fails pending requests with {@link ClientClosedError} and closes. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#current.close();
    return this.#closing;
  }

  async #submitOnce(request: SubmitRequest): Promise<SubmitResult> {
    const reply = await this.#request({
      type: 'SUBMIT_JOB',
      taskType: request.taskType,
      payload: request.payload,
      maxAttempts: request.maxAttempts ?? null,
      idempotencyKey: request.idempotencyKey ?? null,
      priority: request.priority ?? null,
      timeoutMillis: request.timeoutMillis ?? null,
    });
    if (reply.type === 'SUBMIT_REJECTED') throw new SubmitRejectedError(reply);
    const { jobId, job, servingWorkers } = expectReply('SUBMIT_JOB', reply, 'JOB_SUBMITTED');
    return {
      jobId,
      job: job ?? (await this.status(jobId)),
      servingWorkers: servingWorkers ?? null,
    };
  }

  /** JOB_STATUS of a WAIT_JOB, or null when the coordinator does not know WAIT_JOB. */
  async #waitJob(jobId: string, timeoutMs: number): Promise<JobSnapshot | null> {
    const reply = await this.#request({ type: 'WAIT_JOB', jobId, timeoutMillis: timeoutMs });
    if (reply.type === 'ERROR' && reply.message.includes('Unsupported request')) return null;
    return expectReply('WAIT_JOB', reply, 'JOB_STATUS').job;
  }

  /**
   * Sends on the current connection; after it broke, on a fresh one. The fast
   * path is synchronous so that requests leave in call order.
   */
  #request(msg: ClientRequest): Promise<ClientReply> {
    if (this.#closing !== null) return Promise.reject(new ClientClosedError());
    if (this.#current.isOpen) return this.#current.request(msg);
    this.#dialing ??= this.#redial();
    return this.#dialing.then((conn) => conn.request(msg));
  }

  async #redial(): Promise<ClientConnection> {
    try {
      const conn = await ClientConnection.open(
        this.#host,
        this.#port,
        this.#connectTimeoutMs,
        this.#security,
      );
      if (this.#closing !== null) {
        await conn.close();
        throw new ClientClosedError();
      }
      this.#current = conn;
      return conn;
    } finally {
      this.#dialing = null;
    }
  }
}
