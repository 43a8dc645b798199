/**
 * What the job block says of time, parents and durable steps: the run time
 * of a SCHEDULED job, the jobs a job depends on (with their states when
 * known), and attempts counted apart from the suspensions of `ctx.sleep` and
 * `ctx.waitFor` and from the attempts a worker requeued, in the block, the
 * list and the event lines alike.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { attemptText, formatJobBlock, formatJobTable } from '../../src/cli/output.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';

function job(overrides: Partial<JobSnapshot> = {}): JobSnapshot {
  return {
    jobId: 'job-1',
    taskType: 'REPORT',
    state: 'QUEUED',
    attempts: 0,
    maxAttempts: 3,
    workerId: null,
    result: null,
    error: null,
    createdAtMillis: 1_000,
    updatedAtMillis: 1_000,
    priority: 'NORMAL',
    ...overrides,
  };
}

const lineOf = (block: string, label: string): string | undefined =>
  block.split('\n').find((line) => line.startsWith(`  ${label}:`));

describe('job block', () => {
  it('shows when a SCHEDULED job runs, with its value at column 13', () => {
    const block = formatJobBlock(
      job({ state: 'SCHEDULED', runAtMillis: Date.parse('2026-12-24T17:00:00Z') }),
    );
    assert.equal(lineOf(block, 'Run at'), '  Run at:   2026-12-24T17:00:00.000Z');
    const done = formatJobBlock(job({ state: 'COMPLETED', runAtMillis: 5 }));
    assert.equal(lineOf(done, 'Run at'), undefined, 'only while it waits for its time');
  });

  it('lists the jobs it depends on, one a line, with their states when given', () => {
    const parents = job({ state: 'WAITING', dependsOn: ['p-1', 'p-2', 'p-3'] });
    const states = new Map([
      ['p-1', 'COMPLETED' as const],
      ['p-2', null],
    ]);
    const block = formatJobBlock(parents, { parentStates: states });
    assert.match(block, /\n {2}Depends: {2}p-1 \(COMPLETED\)\n {12}p-2 \(gone\)\n {12}p-3\n/);
    assert.match(formatJobBlock(parents), /Depends: {2}p-1\n {12}p-2\n {12}p-3\n/);
    assert.equal(lineOf(formatJobBlock(job()), 'Depends'), undefined);
  });

  it('counts only the attempts that count toward maxAttempts, and the suspensions apart', () => {
    // Five attempts started; four of them ended in ctx.sleep: one counts.
    const slept = job({ state: 'COMPLETED', attempts: 5, suspensions: 4, result: 'ok' });
    const block = formatJobBlock(slept);
    assert.equal(lineOf(block, 'Attempt'), '  Attempt:  1/3');
    assert.equal(
      lineOf(block, 'Suspends'),
      '  Suspends: 4 (ctx.sleep, ctx.waitFor: not counted as attempts)',
    );
    assert.equal(attemptText(slept), '1/3');
    assert.match(formatJobTable([slept], null), /COMPLETED {2}NORMAL {4}1\/3 /);
    const plain = formatJobBlock(job({ state: 'FAILED', attempts: 3 }));
    assert.equal(lineOf(plain, 'Attempt'), '  Attempt:  3/3');
    assert.equal(lineOf(plain, 'Suspends'), undefined);
  });

  it('leaves out the attempts its worker requeued, and counts them apart', () => {
    // Six attempts started: two requeued, one suspended; three count.
    const cut = job({ state: 'FAILED', attempts: 6, requeues: 2, suspensions: 1 });
    const block = formatJobBlock(cut);
    assert.equal(lineOf(block, 'Attempt'), '  Attempt:  3/3');
    assert.equal(
      lineOf(block, 'Requeues'),
      '  Requeues: 2 (cut off through no fault of their own: not counted)',
    );
    assert.equal(attemptText(cut), '3/3');
    assert.equal(lineOf(formatJobBlock(job()), 'Requeues'), undefined);
  });

  it('leaves out the attempts its handler ended rate limited, and counts them apart', () => {
    // Five attempts started: three rate limited, one requeued; one counts.
    const limited = job({ state: 'COMPLETED', attempts: 5, rateLimited: 3, requeues: 1 });
    const block = formatJobBlock(limited);
    assert.equal(lineOf(block, 'Attempt'), '  Attempt:  1/3');
    assert.equal(
      lineOf(block, 'Limited'),
      '  Limited:  3 (rate limited by the handler: not counted)',
    );
    assert.equal(attemptText(limited), '1/3');
    assert.equal(lineOf(formatJobBlock(job()), 'Limited'), undefined);
  });
});
