/**
 * Deduplication keys (`dedupKey`, `dedupMode`, `dedupWindowMillis`).
 *
 * A key is scoped to a queue. The *key's job* is the latest job created
 * with it that is not terminal or, ended, is still within the throttle
 * window its own creation opened; a submission with the key is decided
 * against it, in the single writer, so two submissions racing with one key
 * never both create:
 * - `active`: while a job with the key is not terminal, nothing is created
 *   and the reply names the latest such job;
 * - `throttle`: within the submission's window after the key's job was
 *   created, nothing is created (whatever that job's state);
 * - `debounce`: while the key's job is SCHEDULED and has never started, its
 *   payload and run time are replaced by the submission's.
 * Otherwise a new job is created and becomes the key's job.
 *
 * The keys are indexed in memory only (dedup-index.ts), so a keyed job is
 * never parked outside memory as a far delayed job.
 */
import type { DedupRequest } from './dedup-index.js';
import type { CoreJob } from './job.js';
import { isTerminalState } from './job-state.js';
import type { CoreState } from './state.js';

export type { DedupRequest };

/** What a keyed submission does. */
export type DedupDecision =
  | { readonly kind: 'create' }
  /** Nothing is created: the reply names this job (its row, when memory still has it). */
  | { readonly kind: 'existing'; readonly jobId: string; readonly job: CoreJob | undefined }
  /** The key's job, SCHEDULED and never started, takes the submission's payload and run time. */
  | { readonly kind: 'replace'; readonly job: CoreJob };

const CREATE: DedupDecision = { kind: 'create' };

/** Decides a keyed submission against the key's job (see the module comment). */
export function decideDedup(s: CoreState, queue: string, dedup: DedupRequest): DedupDecision {
  if (dedup.mode === 'active') {
    // Any job of the key that is not terminal answers, not only the latest
    // (a later one made by another mode may have ended meanwhile).
    const entry = s.dedup.liveOf(queue, dedup.key);
    const job = entry === undefined ? undefined : s.jobs.get(entry.jobId);
    return entry !== undefined && job !== undefined && !isTerminalState(job.state)
      ? { kind: 'existing', jobId: entry.jobId, job }
      : CREATE;
  }
  const holder = s.dedup.holderOf(queue, dedup.key, s.nowMs);
  if (holder === undefined) return CREATE;
  const job = s.jobs.get(holder.jobId) ?? s.jobs.recent(holder.jobId);
  const live = !holder.ended && job !== undefined && !isTerminalState(job.state);
  switch (dedup.mode) {
    case 'throttle':
      return s.nowMs < holder.createdAtMs + (dedup.windowMs ?? 0)
        ? { kind: 'existing', jobId: holder.jobId, job }
        : CREATE;
    case 'debounce':
      return live && job.state === 'SCHEDULED' && job.attempts === 0
        ? { kind: 'replace', job }
        : CREATE;
  }
}

/**
 * A debounced submission replaces the payload and run time of the key's
 * job (SCHEDULED, never started): the delayed-jobs heap gets the new time
 * (the old entry no longer matches `runAtMs` and is skipped when met).
 */
export function debounce(s: CoreState, job: CoreJob, payloadJson: string, runAtMs: number): void {
  job.payloadJson = payloadJson;
  job.runAtMs = runAtMs;
  job.updatedAtMs = s.nowMs;
  s.scheduled.push({ atMs: runAtMs, seq: job.seq, jobId: job.jobId });
  s.jobs.save(job);
  s.emit({ type: 'job.debounced', jobId: job.jobId, runAtMs });
}
