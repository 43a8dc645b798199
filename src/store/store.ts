/**
 * The Store: where the coordinator's jobs live durably.
 *
 * Writes are staged and become durable together at {@link Store.commit} (group
 * commit: the shell commits once per batch of inputs, then releases the
 * replies that depended on them). Staged rows are visible to reads at once, so
 * the core never reads an older version of a row it just wrote.
 *
 * The interface is deliberately small and row-oriented so that another backend
 * (e.g. PostgreSQL) can implement it.
 */
import { ErrorCode } from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';
import type { JobState, Priority, ResultFormat } from '../protocol/messages.js';

/** One job, exactly as persisted (and as held in the core's memory). */
export interface JobRecord {
  /** Submission order, 1-based, unique; also the paging key (newest = highest). */
  seq: number;
  jobId: string;
  taskType: string;
  /** The submitted payload as JSON text. */
  payloadJson: string;
  state: JobState;
  priority: Priority;
  /** Attempts started so far (incremented only at assignment). */
  attempts: number;
  maxAttempts: number;
  /** Execution deadline of each attempt, fixed at submission. */
  timeoutMs: number;
  idempotencyKey: string | null;
  /** The current lease: set only while RUNNING. */
  workerId: string | null;
  attemptId: string | null;
  deadlineAtMs: number | null;
  /** When a RETRY_WAIT job becomes QUEUED again (absolute, coordinator clock). */
  retryAtMs: number | null;
  result: string | null;
  /**
   * How to read `result` (set with it): `json` = the JSON text of a
   * non-string value, `text` = the handler's string. Null before a result.
   */
  resultFormat: ResultFormat | null;
  error: string | null;
  createdAtMs: number;
  updatedAtMs: number;
}

export interface ListQuery {
  /** Only rows with seq below this (the cursor); null = from the newest. */
  beforeSeq: number | null;
  /** Only rows in this state; null = all. */
  state: JobState | null;
  /** At most this many rows. */
  limit: number;
}

export interface Store {
  /** Stages a new job. Durable after the next {@link commit}. */
  insertJob(job: Readonly<JobRecord>): void;
  /** Stages the new version of an existing job (all mutable fields). */
  updateJob(job: Readonly<JobRecord>): void;
  /** Makes every staged write durable, atomically. Throws {@link StoreError}. */
  commit(): void;
  /** Number of staged, uncommitted jobs. */
  readonly pendingCount: number;
  getJob(jobId: string): Readonly<JobRecord> | undefined;
  getJobByIdempotencyKey(key: string): Readonly<JobRecord> | undefined;
  /** Every non-terminal job, in submission order (restart recovery). */
  loadActiveJobs(): JobRecord[];
  /** Highest seq ever stored (0 when empty). */
  maxSeq(): number;
  /** Newest first. */
  listJobs(query: ListQuery): Readonly<JobRecord>[];
  /** Idempotent. Does not commit staged writes. */
  close(): void;
}

/** A write or read the storage could not do (disk full, I/O error, ...). */
export class StoreError extends DtpError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.StoreFailed, message, options);
  }
}

/**
 * Staged writes, coalesced per job (the last version wins, and a job inserted
 * and updated in one batch is still one insert). Shared by the backends.
 */
export class PendingWrites {
  readonly #rows = new Map<string, { job: Readonly<JobRecord>; isNew: boolean }>();
  readonly #byKey = new Map<string, Readonly<JobRecord>>();

  insert(job: Readonly<JobRecord>): void {
    this.#rows.set(job.jobId, { job, isNew: true });
    if (job.idempotencyKey !== null) this.#byKey.set(job.idempotencyKey, job);
  }

  update(job: Readonly<JobRecord>): void {
    const existing = this.#rows.get(job.jobId);
    this.#rows.set(job.jobId, { job, isNew: existing?.isNew ?? false });
    if (job.idempotencyKey !== null && existing?.isNew) this.#byKey.set(job.idempotencyKey, job);
  }

  get size(): number {
    return this.#rows.size;
  }

  get(jobId: string): Readonly<JobRecord> | undefined {
    return this.#rows.get(jobId)?.job;
  }

  getByKey(key: string): Readonly<JobRecord> | undefined {
    return this.#byKey.get(key);
  }

  /** Every staged version, as copies taken now. */
  entries(): { job: JobRecord; isNew: boolean }[] {
    return [...this.#rows.values()].map(({ job, isNew }) => ({ job: { ...job }, isNew }));
  }

  clear(): void {
    this.#rows.clear();
    this.#byKey.clear();
  }

  /** Staged rows matching a list query (to merge with committed ones). */
  matching(query: ListQuery): Readonly<JobRecord>[] {
    const out: Readonly<JobRecord>[] = [];
    for (const { job } of this.#rows.values()) {
      if (query.beforeSeq !== null && job.seq >= query.beforeSeq) continue;
      if (query.state !== null && job.state !== query.state) continue;
      out.push(job);
    }
    return out;
  }

  has(jobId: string): boolean {
    return this.#rows.has(jobId);
  }
}

/**
 * Merges committed rows (newest first, already filtered, fetched with
 * `limit + pending` rows so enough survive) with staged ones; staged versions
 * replace committed ones.
 */
export function mergeListed(
  committed: readonly Readonly<JobRecord>[],
  pending: PendingWrites,
  query: ListQuery,
): Readonly<JobRecord>[] {
  const merged = committed.filter((job) => !pending.has(job.jobId));
  merged.push(...pending.matching(query));
  merged.sort((a, b) => b.seq - a.seq);
  return merged.slice(0, query.limit);
}
