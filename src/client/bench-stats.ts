/**
 * Arithmetic of a load-generator run: nearest-rank percentiles, latency
 * summaries and the report document of `client.sh bench --json`. Pure: no clock, no I/O.
 *
 * Percentiles use the nearest-rank definition: the p-th percentile of n
 * samples is the ceil(p/100 · n)-th smallest sample (1-based; rank clamped to
 * 1..n), so every reported value is a latency that was actually observed. An
 * empty sample set summarises as all zeros, so that `--json` stays numeric;
 * the sample counts next to the summaries tell a reader when that happened.
 */

/** p50/p95/p99/max of one latency, in ms. */
export interface LatencySummary {
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

/** Outcome counts of the measured jobs. */
export interface BenchCounts {
  /** Submissions sent: accepted + rejected + submissions answered with ERROR. */
  jobs: number;
  /** Answered JOB_SUBMITTED. */
  accepted: number;
  /** Answered SUBMIT_REJECTED (never retried). */
  rejected: number;
  /** Seen COMPLETED. */
  completed: number;
  /** Seen FAILED or CANCELLED, timed out, or answered ERROR. */
  failed: number;
  /** Of `failed`: ERROR replies to the submission or to the wait. */
  errors: number;
  /** Of `failed`: accepted jobs not terminal within the wait timeout. */
  timedOut: number;
}

/** Latencies of the measured jobs, in ms, in any order. */
export interface BenchSamples {
  /** SUBMIT_JOB sent -> JOB_SUBMITTED received, one per accepted job. */
  submitAckMs: readonly number[];
  /** SUBMIT_JOB sent -> terminal state received, one per job that reached one in time. */
  endToEndMs: readonly number[];
}

/** What `bench --json` prints; the first nine fields are the documented ones. */
export interface BenchReport extends BenchCounts {
  elapsedMillis: number;
  throughputJobsPerSec: number;
  submitAckMillis: LatencySummary;
  endToEndMillis: LatencySummary;
  submitAckSamples: number;
  endToEndSamples: number;
}

/** Tolerance for float noise in p·n/100 (e.g. 7·100/100 must be rank 7, not 8). */
const RANK_EPSILON = 1e-9;

/**
 * The 1-based nearest rank of percentile `percent` (0..100) among `count`
 * samples: ceil(percent/100 · count), clamped to 1..count. `count` >= 1.
 */
export function nearestRank(percent: number, count: number): number {
  if (!(percent >= 0 && percent <= 100)) {
    throw new RangeError(`percent must be in 0..100, got ${percent}`);
  }
  if (!Number.isSafeInteger(count) || count < 1) {
    throw new RangeError(`count must be a positive integer, got ${count}`);
  }
  const exact = (percent * count) / 100;
  const nearest = Math.round(exact);
  const rank = Math.abs(exact - nearest) < RANK_EPSILON ? nearest : Math.ceil(exact);
  return Math.min(count, Math.max(1, rank));
}

/** The nearest-rank percentile of ascending `sorted`; 0 when it is empty. */
export function percentileOfSorted(sorted: readonly number[], percent: number): number {
  if (sorted.length === 0) return 0;
  const value = sorted[nearestRank(percent, sorted.length) - 1];
  if (value === undefined) throw new Error('nearest rank outside the samples');
  return value;
}

/** p50/p95/p99/max of `samples` (any order, not modified); zeros when empty. */
export function summarizeLatencies(samples: readonly number[]): LatencySummary {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    p50: percentileOfSorted(sorted, 50),
    p95: percentileOfSorted(sorted, 95),
    p99: percentileOfSorted(sorted, 99),
    max: sorted.length === 0 ? 0 : (sorted[sorted.length - 1] ?? 0),
  };
}

/** Completed jobs per second of the measured phase; 0 when no time passed. */
export function throughputPerSec(completed: number, elapsedMs: number): number {
  return elapsedMs > 0 ? completed / (elapsedMs / 1_000) : 0;
}

/** Rounds to microseconds (3 decimals of a ms), so JSON stays readable. */
function roundMs(value: number): number {
  return Math.round(value * 1_000) / 1_000;
}

function roundSummary(summary: LatencySummary): LatencySummary {
  return {
    p50: roundMs(summary.p50),
    p95: roundMs(summary.p95),
    p99: roundMs(summary.p99),
    max: roundMs(summary.max),
  };
}

/** The report of a measured phase that took `elapsedMs`. */
export function buildBenchReport(
  counts: BenchCounts,
  samples: BenchSamples,
  elapsedMs: number,
): BenchReport {
  return {
    ...counts,
    elapsedMillis: roundMs(elapsedMs),
    throughputJobsPerSec: roundMs(throughputPerSec(counts.completed, elapsedMs)),
    submitAckMillis: roundSummary(summarizeLatencies(samples.submitAckMs)),
    endToEndMillis: roundSummary(summarizeLatencies(samples.endToEndMs)),
    submitAckSamples: samples.submitAckMs.length,
    endToEndSamples: samples.endToEndMs.length,
  };
}
