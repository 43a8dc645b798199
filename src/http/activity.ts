/**
 * Throughput and failures over the last hour, for the dashboard's charts:
 * counts of core events in fixed buckets ({@link BUCKET_MS}), kept in memory
 * only. They start empty when the coordinator starts (the page says so); the
 * store is not scanned to rebuild them. Recording is O(1) per event and the
 * memory is fixed ({@link BUCKETS} buckets).
 */
import type { CoreEvent } from '../coordinator/view.js';

/** One bucket covers this much time, in ms. */
export const BUCKET_MS = 10_000;
/** Buckets kept: one hour. */
export const BUCKETS = 360;

export const ACTIVITY_KINDS = ['submitted', 'completed', 'failed', 'cancelled', 'retried'] as const;
export type ActivityKind = (typeof ACTIVITY_KINDS)[number];
export type ActivityCounts = Record<ActivityKind, number>;

/** The events the charts count, and as what. */
const KIND_OF_EVENT: Partial<Record<CoreEvent['type'], ActivityKind>> = {
  'job.submitted': 'submitted',
  'job.completed': 'completed',
  'job.failed': 'failed',
  'job.cancelled': 'cancelled',
  'job.retryScheduled': 'retried',
};

/** The kind an event counts as, or null for events the charts do not show. */
export function activityKind(event: CoreEvent): ActivityKind | null {
  return KIND_OF_EVENT[event.type] ?? null;
}

const zero = (): ActivityCounts => ({
  submitted: 0,
  completed: 0,
  failed: 0,
  cancelled: 0,
  retried: 0,
});

export interface ActivitySeries {
  bucketMillis: number;
  /** Start of the first (oldest) bucket, epoch ms. */
  startMillis: number;
  /** Oldest first; the last one is the bucket in progress. */
  buckets: ActivityCounts[];
  /** When counting began (the coordinator's start); earlier buckets are empty, not zero. */
  sinceMillis: number;
  /** Totals since counting began. */
  totals: ActivityCounts;
}

export class ActivityLog {
  readonly #buckets: ActivityCounts[] = Array.from({ length: BUCKETS }, zero);
  /** Index (absolute bucket number) of the newest bucket written. */
  #newest: number;
  readonly #sinceMs: number;
  readonly #totals = zero();

  constructor(nowMs: number) {
    this.#newest = Math.floor(nowMs / BUCKET_MS);
    this.#sinceMs = nowMs;
  }

  record(kind: ActivityKind, nowMs: number): void {
    this.#advance(nowMs);
    const bucket = this.#buckets[this.#newest % BUCKETS] as ActivityCounts;
    bucket[kind]++;
    this.#totals[kind]++;
  }

  /** Clears the buckets that time has moved past since the last write. */
  #advance(nowMs: number): void {
    const current = Math.floor(nowMs / BUCKET_MS);
    if (current <= this.#newest) return;
    const stale = Math.min(current - this.#newest, BUCKETS);
    for (let i = 1; i <= stale; i++) this.#buckets[(this.#newest + i) % BUCKETS] = zero();
    this.#newest = current;
  }

  series(nowMs: number): ActivitySeries {
    this.#advance(nowMs);
    const first = this.#newest - BUCKETS + 1;
    const buckets: ActivityCounts[] = [];
    for (let n = first; n <= this.#newest; n++) {
      buckets.push({ ...(this.#buckets[((n % BUCKETS) + BUCKETS) % BUCKETS] as ActivityCounts) });
    }
    return {
      bucketMillis: BUCKET_MS,
      startMillis: first * BUCKET_MS,
      buckets,
      sinceMillis: this.#sinceMs,
      totals: { ...this.#totals },
    };
  }
}
