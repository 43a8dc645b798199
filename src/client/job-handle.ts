/**
 * What `submit` returns: the job's id and first snapshot, and `result()`,
 * which waits for the job to end and gives back the handler's value
 * unchanged, or rejects with {@link JobFailedError} / {@link JobCancelledError}.
 *
 * How a result travels: `result` is a string on the wire (v1 clients read it
 * as it is). A handler's string result is sent as it is; any other JSON value
 * as its JSON text, with the snapshot's `resultFormat: "json"`. So `json`
 * means "parse it", anything else "the string is the value".
 */
import type { JobSnapshot, JsonValue } from '../protocol/messages.js';
import { JobCancelledError, JobFailedError } from './errors.js';

/** How long to wait, and how to stop waiting early. */
export interface WaitOptions {
  /** Give up after this long with a WaitTimeoutError (default: no limit), in ms. */
  timeoutMs?: number;
  /** Stop waiting when this aborts (rejects with the signal's reason). */
  signal?: AbortSignal;
}

/** A cancel's outcome. */
export interface CancelResult {
  /** True when this call moved the job to CANCELLED; false when it was already terminal. */
  cancelled: boolean;
  job: JobSnapshot;
}

/** What a submission's reply said about deduplication (absent = false). */
export interface SubmitOutcome {
  deduplicated?: boolean | null;
  replaced?: boolean | null;
}

/** The part of the client a handle uses. */
export interface JobClient {
  wait(jobId: string, timeoutMs?: number, options?: { signal?: AbortSignal }): Promise<JobSnapshot>;
  status(jobId: string): Promise<JobSnapshot>;
  cancel(jobId: string): Promise<CancelResult>;
}

/**
 * The value of a terminal job: its result when COMPLETED (parsed when the
 * snapshot says `resultFormat: "json"`); {@link JobFailedError} when FAILED,
 * {@link JobCancelledError} when CANCELLED.
 */
export function settledValue<R = JsonValue>(job: JobSnapshot): R {
  switch (job.state) {
    case 'COMPLETED':
      if (job.resultFormat === 'json' && job.result !== null) return JSON.parse(job.result) as R;
      return job.result as R;
    case 'FAILED':
      throw new JobFailedError(job);
    case 'CANCELLED':
      throw new JobCancelledError(job);
    case 'SCHEDULED':
    case 'WAITING':
    case 'QUEUED':
    case 'RUNNING':
    case 'RETRY_WAIT':
      throw new RangeError(`job ${job.jobId} is not terminal (${job.state})`);
  }
}

/** A submitted job. `R` is the handler's result type when the client is typed. */
export class JobHandle<R = JsonValue> {
  readonly jobId: string;
  /** The job right after submission. */
  readonly snapshot: JobSnapshot;
  /**
   * Live workers that declared the job's task type when it was accepted;
   * null when the coordinator does not say (a v1 coordinator).
   */
  readonly servingWorkers: number | null;
  /**
   * True when the job's queue was paused when it was accepted: the job waits
   * until the queue is resumed (false also from a coordinator that does not say).
   */
  readonly queuePaused: boolean;
  /**
   * True when nothing was created: the submission's `dedupKey` named this
   * existing job (false also from a coordinator that does not deduplicate).
   */
  readonly deduplicated: boolean;
  /** True when that existing job was debounced: its payload and run time are the submission's. */
  readonly replaced: boolean;
  readonly #client: JobClient;

  constructor(
    client: JobClient,
    snapshot: JobSnapshot,
    servingWorkers: number | null,
    queuePaused = false,
    outcome: SubmitOutcome = {},
  ) {
    this.#client = client;
    this.jobId = snapshot.jobId;
    this.snapshot = snapshot;
    this.servingWorkers = servingWorkers;
    this.queuePaused = queuePaused;
    this.deduplicated = outcome.deduplicated === true;
    this.replaced = outcome.replaced === true;
  }

  /** Waits for the end of the job; its value, or a JobFailedError / JobCancelledError. */
  async result(options: WaitOptions = {}): Promise<R> {
    return settledValue<R>(await this.wait(options));
  }

  /** Waits for the end of the job; its final snapshot, whatever the state. */
  wait(options: WaitOptions = {}): Promise<JobSnapshot> {
    const { timeoutMs, signal } = options;
    return this.#client.wait(this.jobId, timeoutMs, signal === undefined ? {} : { signal });
  }

  /** The job's current snapshot. */
  status(): Promise<JobSnapshot> {
    return this.#client.status(this.jobId);
  }

  /** Cancels the job unless it already ended. */
  cancel(): Promise<CancelResult> {
    return this.#client.cancel(this.jobId);
  }
}
