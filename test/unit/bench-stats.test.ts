import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  buildBenchReport,
  nearestRank,
  percentileOfSorted,
  summarizeLatencies,
  throughputPerSec,
} from '../../src/client/bench-stats.js';
import type { BenchCounts } from '../../src/client/bench-stats.js';
import { ProgressBar, formatBenchReport, renderProgress } from '../../src/cli/bench.js';
import type { BenchProgress, BenchRunReport } from '../../src/cli/bench.js';

const oneToHundred = Array.from({ length: 100 }, (_, i) => i + 1);

describe('nearestRank', () => {
  it('is ceil(p/100 * n) when that is not an integer', () => {
    assert.equal(nearestRank(50, 5), 3);
    assert.equal(nearestRank(95, 10), 10);
    assert.equal(nearestRank(99, 20), 20);
    assert.equal(nearestRank(95, 30), 29);
  });

  it('is exactly p/100 * n when that is an integer, despite float noise', () => {
    assert.equal(nearestRank(50, 10), 5);
    assert.equal(nearestRank(95, 20), 19);
    assert.equal(nearestRank(99, 100), 99);
    // 7 * 100 / 100 is exact, but 0.07 * 100 is 7.000000000000001 in floats.
    assert.equal(nearestRank(7, 100), 7);
    assert.equal(nearestRank(29, 100), 29);
  });

  it('clamps to 1..n at the ends', () => {
    assert.equal(nearestRank(0, 10), 1);
    assert.equal(nearestRank(100, 10), 10);
    assert.equal(nearestRank(1, 1), 1);
  });

  it('rejects a percent outside 0..100 and a count below 1', () => {
    assert.throws(() => nearestRank(101, 10), RangeError);
    assert.throws(() => nearestRank(Number.NaN, 10), RangeError);
    assert.throws(() => nearestRank(50, 0), RangeError);
    assert.throws(() => nearestRank(50, 1.5), RangeError);
  });
});

describe('percentileOfSorted', () => {
  it('returns an observed sample, never an interpolation', () => {
    assert.equal(percentileOfSorted([10, 20, 30, 40], 50), 20);
    assert.equal(percentileOfSorted([10, 20, 30, 40], 51), 30);
    assert.equal(percentileOfSorted(oneToHundred, 95), 95);
    assert.equal(percentileOfSorted(oneToHundred, 99), 99);
  });

  it('is 0 for no samples', () => {
    assert.equal(percentileOfSorted([], 50), 0);
  });
});

describe('summarizeLatencies', () => {
  it('gives every percentile as the one sample when n = 1', () => {
    assert.deepEqual(summarizeLatencies([4.5]), { p50: 4.5, p95: 4.5, p99: 4.5, max: 4.5 });
  });

  it('sorts unsorted input without modifying it', () => {
    const samples = [5, 1, 4, 2, 3];
    assert.deepEqual(summarizeLatencies(samples), { p50: 3, p95: 5, p99: 5, max: 5 });
    assert.deepEqual(samples, [5, 1, 4, 2, 3]);
  });

  it('handles small n where p95 and p99 are the max', () => {
    assert.deepEqual(summarizeLatencies([2, 1]), { p50: 1, p95: 2, p99: 2, max: 2 });
    assert.deepEqual(summarizeLatencies([3, 1, 2]), { p50: 2, p95: 3, p99: 3, max: 3 });
  });

  it('keeps ties', () => {
    assert.deepEqual(summarizeLatencies([7, 7, 7, 7, 9]), { p50: 7, p95: 9, p99: 9, max: 9 });
    assert.deepEqual(summarizeLatencies([2, 2, 2]), { p50: 2, p95: 2, p99: 2, max: 2 });
  });

  it('reads p95 and p99 from the tail of 1..100', () => {
    assert.deepEqual(summarizeLatencies([...oneToHundred].reverse()), {
      p50: 50,
      p95: 95,
      p99: 99,
      max: 100,
    });
  });

  it('is all zeros for no samples', () => {
    assert.deepEqual(summarizeLatencies([]), { p50: 0, p95: 0, p99: 0, max: 0 });
  });
});

describe('buildBenchReport', () => {
  const counts: BenchCounts = {
    jobs: 4,
    accepted: 3,
    rejected: 1,
    completed: 2,
    failed: 1,
    errors: 0,
    timedOut: 1,
  };

  it('derives throughput from completed jobs and elapsed time', () => {
    const report = buildBenchReport(
      counts,
      { submitAckMs: [1.23456, 2, 3], endToEndMs: [10, 20] },
      500,
    );
    assert.equal(report.throughputJobsPerSec, 4);
    assert.equal(report.elapsedMillis, 500);
    assert.deepEqual(report.submitAckMillis, { p50: 2, p95: 3, p99: 3, max: 3 });
    assert.deepEqual(report.endToEndMillis, { p50: 10, p95: 20, p99: 20, max: 20 });
    assert.deepEqual([report.submitAckSamples, report.endToEndSamples], [3, 2]);
    assert.equal(
      buildBenchReport(counts, { submitAckMs: [1.23456], endToEndMs: [] }, 1).submitAckMillis.p50,
      1.235,
    );
  });

  it('keeps every field numeric when nothing was measured', () => {
    const none = { ...counts, accepted: 0, completed: 0, failed: 0, timedOut: 0, rejected: 4 };
    const report = buildBenchReport(none, { submitAckMs: [], endToEndMs: [] }, 0);
    assert.equal(report.throughputJobsPerSec, 0);
    assert.deepEqual(report.endToEndMillis, { p50: 0, p95: 0, p99: 0, max: 0 });
    assert.equal(throughputPerSec(5, 0), 0);
  });
});

describe('bench rendering', () => {
  const progress: BenchProgress = {
    phase: 'measure',
    done: 5,
    total: 10,
    completed: 4,
    rejected: 1,
    failed: 0,
  };

  it('renders a half-full bar with the counts', () => {
    const text = renderProgress(progress);
    assert.match(text, /\[#{15}-{15}\] 5\/10/);
    assert.match(text, /completed 4 {2}rejected 1 {2}failed 0/);
  });

  it('redraws at most every 100 ms but always on the last job, and clears once', () => {
    let nowMs = 0;
    const written: string[] = [];
    const bar = new ProgressBar(
      (text) => written.push(text),
      () => nowMs,
    );
    bar.update(progress);
    nowMs = 50;
    bar.update({ ...progress, done: 6 });
    nowMs = 60;
    bar.update({ ...progress, done: 10 });
    nowMs = 200;
    bar.update({ ...progress, done: 7 });
    assert.equal(written.length, 3);
    bar.clear();
    bar.clear();
    assert.equal(written.length, 4);
  });

  it('prints counts and a latency table', () => {
    const report: BenchRunReport = {
      ...buildBenchReport(
        { jobs: 2, accepted: 2, rejected: 0, completed: 2, failed: 0, errors: 0, timedOut: 0 },
        { submitAckMs: [1, 2], endToEndMs: [3, 4] },
        1_000,
      ),
      task: 'sha256',
      concurrency: 2,
      connections: 2,
      warmup: 0,
    };
    const text = formatBenchReport(report);
    assert.match(text, /^ {2}Throughput: {2}2\.00 jobs\/s$/m);
    assert.match(text, /^ {2}submit-ack +1\.00 +2\.00 +2\.00 +2\.00 +2$/m);
    assert.match(text, /^ {2}end-to-end +3\.00 +4\.00 +4\.00 +4\.00 +2$/m);
    const unmeasured = formatBenchReport({ ...report, endToEndSamples: 0 });
    assert.match(unmeasured, /^ {2}end-to-end +- +- +- +- +0$/m);
  });
});
