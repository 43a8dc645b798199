/**
 * Reads of history the core asked the shell to run, and what to do with
 * each answer. A read is data (which request it serves), not a closure, so
 * the simulation can print and inspect it.
 *
 * Listings merge the store's rows with the core's overlay of rows the store
 * may not have yet. A row can stop being overlay (its batch committed) while
 * the listing's read is still out, after the read took its snapshot; such
 * rows are kept here (`seen`) so the merge still uses them.
 */
import type { DedupRequest } from './dedup-index.js';
import type {
  ParentFailurePolicy,
  SetQueue,
  SubmitJob,
  SubmitJobsElement,
  TerminalState,
} from '../../protocol/messages.js';
import type { JobRecord, ListQuery, OutboxBody } from '../../store/store.js';

export interface NormalizedSubmission {
  readonly maxAttempts: number;
  readonly priority: 'HIGH' | 'NORMAL' | 'LOW';
  readonly timeoutMs: number;
  readonly queue: string;
  readonly groupKey: string | null;
  /** Parents, duplicates removed, in the order given; null = none. */
  readonly dependsOn: string[] | null;
  readonly onParentFailure: ParentFailurePolicy | null;
  /** The requested due time of a delayed job (not yet clamped to now); null = not delayed. */
  readonly runAtMs: number | null;
  /** Its deduplication (dedup.ts); null = none. */
  readonly dedup: DedupRequest | null;
  /** When it expires unless started (expiry.ts); null = never. */
  readonly expiresAtMs: number | null;
}

/** A submission held while the store is asked about its idempotency key. */
export interface HeldSubmission {
  readonly connId: number;
  readonly requestId: number;
  readonly msg: SubmitJob;
  readonly wanted: NormalizedSubmission;
}

/** A checked flow: its jobs in creation order (parents first). */
export interface FlowPlan {
  readonly connId: number;
  readonly requestId: number;
  /** The refs in the order the request listed them (the reply's order). */
  readonly refs: readonly string[];
  readonly ordered: readonly PlannedJob[];
  /** Parents that are not refs of the flow: existing jobs. */
  readonly external: readonly string[];
  /** The flow's idempotency keys: what memory or the store said of each, and lookups still out. */
  readonly keys: {
    readonly found: Map<string, JobRecord | null>;
    /** The keys asked of the store, pinned in the job table until the flow is answered. */
    readonly lookedUp: string[];
    waiting: number;
    failed: boolean;
  };
}

export interface PlannedJob {
  readonly ref: string;
  readonly msg: SubmitJob;
  readonly wanted: NormalizedSubmission;
}

/** A SUBMIT_JOBS whose keys the store is being asked about (batch-submission.ts). */
export interface HeldBatch {
  readonly connId: number;
  readonly requestId: number;
  readonly jobs: readonly {
    readonly msg: SubmitJobsElement;
    readonly wanted: NormalizedSubmission;
  }[];
  /** What the store said of each key looked up so far. */
  readonly stored: Map<string, JobRecord | null>;
  /** The keys asked of the store (pinned in the job table until every answer came). */
  readonly lookedUp: string[];
  /** Lookups still out. */
  waiting: number;
  /** A lookup failed: the batch was answered with an error. */
  failed: boolean;
}

export type PendingRead =
  /** An outbox message that needs rows of the store before it applies (cross-shard.ts). */
  | {
      kind: 'outboxJobs';
      messageId: number;
      body: Extract<OutboxBody, { type: 'createJobs' }>;
      /** What earlier reads for it answered, and every id asked so far. */
      stored: JobRecord[];
      asked: string[];
    }
  | {
      kind: 'outboxWatch';
      messageId: number;
      watch: Extract<OutboxBody, { type: 'watch' }>;
    }
  /** A signal to a job memory does not hold (signals.ts). */
  | {
      kind: 'signal';
      connId: number;
      requestId: number;
      jobId: string;
      name: string;
      payloadJson: string;
    }
  /** Publishes wait for the store to say whether their event id is known (signals.ts). */
  | { kind: 'event'; eventId: string }
  /** A suspending attempt waits for a job memory does not hold (steps.ts). */
  | { kind: 'stepWait'; jobId: string; attemptId: string; targetId: string }
  | {
      kind: 'status';
      connId: number;
      requestId: number;
      jobId: string;
      withAttempts: boolean;
      withPayload: boolean;
      /** The job's row as committed while the read was out (newer than the read's). */
      latest?: JobRecord;
    }
  | {
      kind: 'cancel' | 'wait';
      connId: number;
      requestId: number;
      jobId: string;
      /** The job's row as committed while the read was out (newer than the read's). */
      latest?: JobRecord;
      /** WAIT_JOB's timeout, as asked. */
      timeoutMillis?: number | null;
      /** WAIT_JOB: the peer's address (null: in-process). */
      address?: string | null;
      /** WAIT_JOB: its connection closed while the read was out (nothing is held for it). */
      abandoned?: true;
    }
  /** The next window of delayed jobs (scheduled-window.ts). */
  | { kind: 'window'; untilMs: number; seen: Map<string, JobRecord> }
  | {
      kind: 'list';
      connId: number;
      requestId: number;
      query: ListQuery;
      /** Rows asked of the store (the page plus what the overlay may hide). */
      fetchLimit: number;
      /** Rows that left the overlay while the read was out. */
      seen: Map<string, JobRecord>;
    }
  | { kind: 'key'; key: string }
  /** RERUN_JOBS: the stored FAILED jobs to queue again (rerun.ts). */
  | {
      kind: 'rerun';
      connId: number;
      requestId: number;
      limit: number;
      budget: number;
      /** Rows that left the overlay while the read was out: changed meanwhile, skipped. */
      seen: Map<string, JobRecord>;
    }
  /** A submission's parents that memory does not hold: the store is asked for them. */
  | { kind: 'parents'; held: HeldSubmission; asked: readonly string[] }
  /** A flow's parents that are existing jobs memory does not hold. */
  | { kind: 'flowParents'; plan: FlowPlan; asked: readonly string[] }
  /** ENQUEUE_CHILD of a re-run parent: its stored children (children.ts). */
  | { kind: 'children'; parentJobId: string }
  /** One idempotency key of a flow: the flow goes on when its last lookup is answered. */
  | { kind: 'flowKey'; plan: FlowPlan; key: string }
  /** GET_SCHEDULE: the schedule's newest jobs from the store. */
  | { kind: 'scheduleJobs'; connId: number; requestId: number; name: string }

  /** One key of a SUBMIT_JOBS: the batch is settled when its last lookup is answered. */
  | { kind: 'batchKey'; batch: HeldBatch; key: string }
  /** LIST_JOBS with an idempotency key: the store is asked for the key's job. */
  | { kind: 'listKey'; connId: number; requestId: number; query: ListQuery; key: string }
  /**
   * LIST_QUEUES (`queue` null) or SET_QUEUE (the queue it changed): counts
   * from the store. `held`: a pause or resume of a queue without a setting,
   * applied only once the counts say the queue has jobs (queue-requests.ts).
   */
  | {
      kind: 'queues';
      connId: number;
      requestId: number;
      queue: string | null;
      held?: SetQueue;
    }
  | {
      kind: 'purge';
      /** The client that asked, or null for background retention. */
      request: { connId: number; requestId: number; deletedSoFar: number } | null;
      state: TerminalState;
      finishedBeforeMs: number;
    };

export class PendingReads {
  readonly #reads = new Map<number, PendingRead>();
  /** Submissions per idempotency key whose store lookup is out, oldest first. */
  readonly #held = new Map<string, HeldSubmission[]>();
  #nextReadId = 1;

  get size(): number {
    return this.#reads.size;
  }

  add(read: PendingRead): number {
    const readId = this.#nextReadId++;
    this.#reads.set(readId, read);
    return readId;
  }

  /** Removes and returns a read; undefined for an id never given or already answered. */
  take(readId: number): PendingRead | undefined {
    const read = this.#reads.get(readId);
    this.#reads.delete(readId);
    return read;
  }

  /** Rows that just stopped being overlay: every pending listing keeps them. */
  noteCommitted(rows: readonly JobRecord[]): void {
    if (rows.length === 0) return;
    for (const read of this.#reads.values()) {
      if (read.kind === 'list' || read.kind === 'rerun' || read.kind === 'window') {
        for (const row of rows) read.seen.set(row.jobId, row);
      } else if (read.kind === 'status' || read.kind === 'cancel' || read.kind === 'wait') {
        for (const row of rows) if (row.jobId === read.jobId) read.latest = row;
      }
    }
  }

  /**
   * A client connection closed: its waits whose read is still out are
   * abandoned (a wait held for a closed connection would stay until its job
   * ended, counted against its address). Bounded by the reads out.
   */
  abandonWaits(connId: number): void {
    for (const read of this.#reads.values()) {
      if (read.kind === 'wait' && read.connId === connId) read.abandoned = true;
    }
  }

  /** The submissions waiting for a key's lookup, if one is out. */
  heldFor(key: string): HeldSubmission[] | undefined {
    return this.#held.get(key);
  }

  /** Starts holding submissions for a key (the caller issues the lookup). */
  hold(key: string, first: HeldSubmission): void {
    this.#held.set(key, [first]);
  }

  /** Removes and returns the submissions held for a key. */
  release(key: string): HeldSubmission[] {
    const held = this.#held.get(key) ?? [];
    this.#held.delete(key);
    return held;
  }
}
