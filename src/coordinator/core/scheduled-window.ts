/**
 * The near window of delayed jobs: which SCHEDULED jobs memory holds.
 *
 * A million delayed jobs spread over months would not fit in memory as full
 * jobs, and restart recovery would have to load them all. So memory holds
 * only the SCHEDULED jobs due up to a **horizon**; the later ("far") ones
 * live only in the store, indexed by due time, and are counted here.
 *
 * - Every SCHEDULED job without parents whose (runAtMs, seq) is at or
 *   before the horizon is in memory. Memory may hold later ones too (jobs
 *   that became SCHEDULED inside the core, jobs a request needed): that is
 *   allowed, never the reverse.
 * - A new delayed job due after `keepUntilMs` (the horizon, or the target
 *   of the window read that is out) is written to the store and not kept
 *   (`parkFar`): it stays findable in memory only until its batch commits.
 *   Not a job with an idempotency key: a key lookup issued before the job
 *   was created can come back "unknown" after that commit, and the
 *   submission waiting for it would make a second job with the same key,
 *   so keyed delayed jobs created by this core stay in memory (after a
 *   restart they are far like any other: every lookup then sees them).
 * - When the clock comes within `marginMs` of the horizon, the wake-up
 *   asks the store for the next window (`scheduledWindow`, at most `limit`
 *   jobs due by now + `windowMs`, in due-time order), at most one read at a
 *   time. The read is marked to run only after every batch produced before
 *   it has committed, so it sees every far job created until then; jobs
 *   created after it was issued and due within its target stay in memory
 *   (the target is `keepUntilMs` from the moment of issue). A full read
 *   moves the horizon to its last job; a shorter one to its target.
 * - Rows of the read that memory holds are skipped; rows committed while
 *   the read was out replace the read's copy (a far job cancelled
 *   meanwhile is not brought back).
 * - Far jobs count toward `maxScheduledJobs` (`farCount`), never toward
 *   `maxActiveJobs`.
 *
 * SCHEDULED jobs with parents are always in memory (recovery loads them; the
 * window read leaves them out): their parents' rows come with recovery.
 */
import type { JobRecord, RecoveredState } from '../../store/store.js';
import { holdScheduled } from './delayed-jobs.js';
import { fromRecord, type CoreJob } from './job.js';
import { watchExpiry } from './expiry.js';
import type { CoreState } from './state.js';
import type { CoreConfig } from './types.js';
import {
  DEFAULT_SCHEDULED_WINDOW,
  LAST_SEQ,
  type ScheduledWindow,
  type ScheduledWindowConfig,
} from './scheduled-window-state.js';

export function windowConfigOf(config: CoreConfig): ScheduledWindowConfig {
  return config.scheduledWindow ?? DEFAULT_SCHEDULED_WINDOW;
}

/** Recovery: the store loaded the window it was asked for and counted the rest. */
export function recoverWindow(s: CoreState, stored: RecoveredState): void {
  const asked = stored.scheduledWindow;
  if (asked === undefined) return; // everything was loaded: no horizon
  const w = s.window;
  w.farCount = asked.farCount;
  // The store loaded the first `limit` delayed jobs due by `untilMs` (the
  // window) and, beside them, delayed parents of active jobs, which may be
  // due much later. Sorted, the window is the first `limit` rows: a full
  // window ends at the limit-th row (due by `untilMs`); a row there due
  // later means the window was not full, and then everything due by
  // `untilMs` is in memory.
  const rows = stored.activeJobs
    .filter((row) => row.state === 'SCHEDULED' && row.dependsOn === null)
    .sort((a, b) => (isBefore(a, b) ? -1 : isBefore(b, a) ? 1 : 0));
  const edge = rows[asked.limit - 1];
  const full = edge !== undefined && (edge.runAtMs ?? 0) <= asked.untilMs;
  setHorizon(w, full ? edge : null, asked.untilMs);
}

/** True when a new delayed job due at `runAtMs` goes to the store only. */
export function isFar(s: CoreState, runAtMs: number): boolean {
  const w = s.window;
  if (w.horizonMs === Infinity) return false;
  // Nothing far and no read out: the horizon may simply move on.
  if (w.farCount === 0 && w.readingUntilMs === null) {
    const untilMs = s.nowMs + windowConfigOf(s.config).windowMs;
    if (untilMs > w.horizonMs) setHorizon(w, null, untilMs);
  }
  return runAtMs > w.keepUntilMs;
}

/** A new delayed job beyond the window: written with the batch, not kept. */
export function parkFar(s: CoreState, job: CoreJob): void {
  s.jobs.insertFar(job);
  s.window.farCount++;
}

/**
 * The job memory holds under this id, if any; a far job whose batch has not
 * committed yet is taken into memory for good first (a request acts on it).
 */
export function memoryJob(s: CoreState, jobId: string): CoreJob | undefined {
  const job = s.jobs.get(jobId);
  if (job !== undefined && s.jobs.unpark(job)) takeIntoMemory(s, job);
  return job;
}

/**
 * A far job read from the store, now needed in memory (a cancel, a wait, a
 * dependent, the window): it becomes a delayed job like any other.
 */
export function loadFar(s: CoreState, row: JobRecord): CoreJob {
  const job = fromRecord(row, []);
  s.jobs.adopt(job);
  takeIntoMemory(s, job);
  return job;
}

function takeIntoMemory(s: CoreState, job: CoreJob): void {
  holdScheduled(s, job);
  watchExpiry(s, job);
  s.window.farCount--;
}

/**
 * From the wake-up: when the clock is within the margin of the horizon,
 * moves the horizon on (nothing far) or asks the store for the next window.
 */
export function advanceWindow(s: CoreState): void {
  const w = s.window;
  if (w.horizonMs === Infinity || w.readingUntilMs !== null) return;
  const { windowMs, limit, marginMs } = windowConfigOf(s.config);
  if (s.nowMs + marginMs < w.horizonMs) return;
  const untilMs = Math.max(s.nowMs + windowMs, w.horizonMs);
  if (w.farCount === 0) return setHorizon(w, null, untilMs);
  w.readingUntilMs = untilMs;
  w.keepUntilMs = Math.max(w.keepUntilMs, untilMs);
  s.read(
    {
      op: 'scheduledWindow',
      after: { atMs: w.horizonMs, seq: w.horizonSeq },
      untilMs,
      limit,
    },
    { kind: 'window', untilMs, seen: new Map() },
    { afterCommit: true },
  );
}

/** The next window came back: its jobs not in memory become delayed jobs there. */
export function windowRead(
  s: CoreState,
  read: { untilMs: number; seen: ReadonlyMap<string, JobRecord> },
  rows: readonly JobRecord[],
): void {
  const w = s.window;
  w.readingUntilMs = null;
  for (const row of rows) {
    if (s.jobs.get(row.jobId) !== undefined) continue;
    const latest = read.seen.get(row.jobId) ?? row;
    if (latest.state === 'SCHEDULED') loadFar(s, latest);
  }
  const { limit } = windowConfigOf(s.config);
  setHorizon(w, rows.length >= limit ? (rows[rows.length - 1] ?? null) : null, read.untilMs);
}

/** A window read failed: the next wake-up asks again. */
export function windowReadFailed(s: CoreState): void {
  s.window.readingUntilMs = null;
  s.window.keepUntilMs = s.window.horizonMs;
}

/** When the wake-up should ask for the next window; null = not needed. */
export function nextWindowAtMs(s: CoreState): number | null {
  const w = s.window;
  if (w.horizonMs === Infinity || w.readingUntilMs !== null || w.farCount === 0) return null;
  return w.horizonMs - windowConfigOf(s.config).marginMs;
}

/** The horizon is the last row of a full read, or else `untilMs` (every job due by then). */
function setHorizon(w: ScheduledWindow, last: JobRecord | null, untilMs: number): void {
  if (last !== null && last.runAtMs !== null) {
    w.horizonMs = last.runAtMs;
    w.horizonSeq = last.seq;
  } else {
    w.horizonMs = untilMs;
    w.horizonSeq = LAST_SEQ;
  }
  w.keepUntilMs = w.horizonMs;
}

function isBefore(a: JobRecord, b: JobRecord): boolean {
  const at = a.runAtMs ?? 0;
  const bt = b.runAtMs ?? 0;
  return at !== bt ? at < bt : a.seq < b.seq;
}
