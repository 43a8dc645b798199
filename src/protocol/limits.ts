/**
 * Every limit of the protocol, defined once. Coordinator, worker, client, CLI
 * and benchmarks import these; none re-types a number.
 */

/** The largest TCP port. */
export const MAX_PORT = 65_535;
/**
 * Largest `WORKER_REGISTER.capacity` (1..this), as version 1 fixes it. A
 * worker with more slots sends this and the extension field `slots`.
 */
export const MAX_CAPACITY = 1024;
/**
 * Most attempts one worker may run at once: `WORKER_REGISTER.slots` is
 * `MAX_CAPACITY + 1`..this (feature `slots`), and a worker's `capacity`
 * option is 1..this.
 */
export const MAX_SLOTS = 10_000;
/** Most shared task threads of a worker (`--threads`). */
export const MAX_TASK_THREADS = 256;
/** Most attempts a worker may queue beyond its capacity (`prefetch`), per unit of capacity. */
export const MAX_PREFETCH_PER_SLOT = 4;
/**
 * Most attempts any worker may queue beyond its capacity, whatever its
 * capacity: 4 x 1,024, so every capacity of version 1 keeps its 4 x.
 * Prefetch hides a round trip per attempt; past a few thousand queued
 * attempts it would only park work on one worker that another could start.
 */
export const MAX_PREFETCH = MAX_PREFETCH_PER_SLOT * MAX_CAPACITY;
/**
 * Largest `prefetch` of a worker with this capacity (4 x capacity, at most
 * {@link MAX_PREFETCH}): the one bound that the worker's options, its task
 * pool's queue, the CLI and the coordinator check.
 */
export function maxPrefetch(capacity: number): number {
  return Math.min(MAX_PREFETCH_PER_SLOT * capacity, MAX_PREFETCH);
}
/** Upper bound on a job's maxAttempts (retry delays are overflow-safe up to here). */
export const MAX_ATTEMPTS_LIMIT = 1000;
/**
 * Attempts of one job that may end REQUEUED (`TASK_RESULT.requeue`, feature
 * `requeue`) without counting toward its maxAttempts; a requeue past these
 * counts like a failed attempt, so no job loops for ever.
 */
export const MAX_FREE_REQUEUES = 10;
/** Longest idempotency key, in characters. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 256;
/** Longest worker id, in characters. */
export const MAX_WORKER_ID_LENGTH = 200;
/** Shortest and longest per-attempt execution deadline, in ms (`timeoutMillis`). */
export const MIN_TASK_TIMEOUT_MS = 1;
export const MAX_TASK_TIMEOUT_MS = 86_400_000;
/**
 * Largest accepted result, in UTF-8 bytes of its JSON string encoding without
 * the quotes (keeps every job snapshot well under a frame).
 */
export const MAX_RESULT_BYTES = 512 * 1024;
/** Longer attempt errors are cut to this many characters. */
export const MAX_ERROR_CHARS = 8 * 1024;

/** An attempt's error cut to {@link MAX_ERROR_CHARS}, marked `... (truncated)` when it was. */
export function clipError(text: string): string {
  return text.length <= MAX_ERROR_CHARS ? text : `${text.slice(0, MAX_ERROR_CHARS)}... (truncated)`;
}
/**
 * Most attempts a worker may list in `WORKER_REGISTER.heldAttempts`: as many
 * as one session of the largest v1 capacity may hold (capacity plus
 * prefetch). The registration frame is bounded too (128 KiB before a
 * connection registers): a worker lists there what fits, and the rest in
 * HELD_ATTEMPTS messages (feature `moreHeld`).
 */
export const MAX_HELD_ATTEMPTS = (1 + MAX_PREFETCH_PER_SLOT) * MAX_CAPACITY;
/**
 * Most attempts one HELD_ATTEMPTS message may list: 2,000 entries of the
 * longest ids (200 characters each) stay under a frame.
 */
export const MAX_HELD_ATTEMPTS_PER_MESSAGE = 2_000;
/**
 * Most attempts a registration and its HELD_ATTEMPTS may list in all: as
 * many as one session may hold at the largest slot count, with prefetch.
 */
export const MAX_HELD_ATTEMPTS_TOTAL = MAX_SLOTS + MAX_PREFETCH;
/** Longest job or attempt id accepted in `WORKER_REGISTER.heldAttempts`. */
export const MAX_HELD_ID_LENGTH = 200;
/** Most task types one worker may declare. */
export const MAX_TASK_TYPES_PER_WORKER = 1024;

/** Most parents one job may depend on (`dependsOn`). */
export const MAX_PARENTS = 1000;
/**
 * Most bytes of parents' results one assignment carries (`TASK_ASSIGN.parents`);
 * a result that does not fit is marked `omitted` and the handler asks for it.
 */
export const MAX_ASSIGNED_PARENT_RESULT_BYTES = 256 * 1024;
/** Longest job id a request may name as a parent (ours are UUIDs). */
export const MAX_JOB_ID_LENGTH = 200;
/** Most jobs one flow (`SUBMIT_FLOW`) may hold. */
export const MAX_FLOW_JOBS = 10_000;
/** Longest progress message (`TASK_PROGRESS.message`), in UTF-8 bytes. */
export const MAX_PROGRESS_MESSAGE_BYTES = 1024;
/** Most progress messages a worker sends per job per second (the last one always goes). */
export const PROGRESS_MESSAGES_PER_SECOND = 4;
/** Subscriptions (SUBSCRIBE_JOBS) one client connection may hold. */
export const MAX_SUBSCRIPTIONS_PER_CONNECTION = 16;
/** Subscriptions all client connections together may hold. */
export const MAX_SUBSCRIPTIONS = 1024;
/** Live streams of the HTTP port (`GET /api/events`) open at once. */
export const MAX_HTTP_STREAMS = 32;
/** Longest value of a SUBSCRIBE_JOBS filter field, in characters. */
export const MAX_FILTER_VALUE_LENGTH = 256;
/**
 * Pushed bytes a subscriber may leave unread before further events are
 * dropped (and counted in EVENTS_MISSED once it reads again).
 */
export const MAX_SUBSCRIBER_BUFFER_BYTES = 256 * 1024;
/** Furthest ahead a delayed job may be due, in ms (366 days: `runAtMillis`, `--delay`, `--run-at`). */
export const MAX_DELAY_MS = 366 * 86_400_000;
/** Longest `dedupKey`, in characters. */
export const MAX_DEDUP_KEY_LENGTH = 256;
/** Longest `throttle` window (`dedupWindowMillis`): 366 days. */
export const MAX_DEDUP_WINDOW_MS = 366 * 86_400_000;
/** Longest `retryAfterMs` of a RateLimitedError: one day. */
export const MAX_RETRY_AFTER_MS = 86_400_000;
/** Rate-limited attempts in a row after which the job fails. */
export const MAX_RATE_LIMITED_IN_A_ROW = 1_000;
/** Largest signal or event payload, in bytes of its JSON text. */
export const MAX_SIGNAL_PAYLOAD_BYTES = 256 * 1024;
/** Signals one job holds that no wait has taken yet. */
export const MAX_SIGNALS_HELD = 1_000;
/** Jobs waiting for one event name at once. */
export const MAX_EVENT_WAITERS = 100_000;
/** Triggers one event name may have. */
export const MAX_TRIGGERS_PER_EVENT = 100;
/** Triggers in all. */
export const MAX_TRIGGERS = 10_000;
/** Longest event id or event key, in characters. */
export const MAX_EVENT_ID_LENGTH = 256;
/** Default bound on SCHEDULED jobs (`--max-scheduled-jobs`). */
export const DEFAULT_MAX_SCHEDULED_JOBS = 1_000_000;
/** Jobs one RERUN_JOBS queues again at most, and when it names no limit. */
export const MAX_RERUN_LIMIT = 10_000;
export const DEFAULT_RERUN_LIMIT = 1_000;
/** Calls (ENQUEUE_CHILD, ...) one attempt may have in flight at once. */
export const MAX_CALLS_PER_ATTEMPT = 64;
/** Children one parent job may have (ENQUEUE_CHILD beyond: LIMIT_EXCEEDED). */
export const MAX_CHILDREN_PER_JOB = 10_000;
/** Longest explicit child key (`ctx.enqueue(..., { key })`), in characters. */
export const MAX_CHILD_KEY_LENGTH = 256;

/** Most steps (`ctx.step`, sleeps and waits included) one job may record. */
export const MAX_STEPS_PER_JOB = 1000;
/**
 * Most bytes of recorded step results one job may hold, counted as the
 * results' JSON string encodings without the quotes (as a result is).
 */
export const MAX_STEP_RESULTS_BYTES = 1024 * 1024;
/**
 * Largest single step result, counted the same way: a step, sent alone,
 * always fits one frame with room for its envelope.
 */
export const MAX_STEP_RESULT_BYTES = 960 * 1024;
/** Longest step name, in characters. */
export const MAX_STEP_NAME_LENGTH = 200;
/**
 * Longest step name as JSON (UTF-8, escapes included): 1,000 names in a
 * snapshot stay well inside a frame beside the largest result.
 */
export const MAX_STEP_NAME_JSON_BYTES = 256;
/** Most bytes of step results one assignment carries (`TASK_ASSIGN.steps`); GET_STEPS has the rest. */
export const MAX_ASSIGNED_STEP_BYTES = 256 * 1024;
