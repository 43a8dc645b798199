/**
 * The job state machine and attempt leases: every one of the 6x6 state pairs
 * is either legal or refused, terminal states have no exits, and lease
 * currency and deadlines follow their exact boundaries.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  IllegalTransitionError,
  JOB_STATES,
  isLegalTransition,
  isTerminalState,
  transition,
  type JobState,
} from '../../src/coordinator/core/job-state.js';
import type { CoreJob } from '../../src/coordinator/core/job.js';
import { grantLease, isCurrentLease } from '../../src/coordinator/core/lease.js';
import type { JobRecord } from '../../src/store/store.js';
import { coreJob } from '../helpers/job-record.js';

function jobIn(state: JobState, overrides: Partial<JobRecord> = {}): CoreJob {
  const running =
    state === 'RUNNING' ? { workerId: 'w0', attemptId: 'lease-0', deadlineAtMs: 600 } : {};
  return coreJob(1, {
    taskType: 'SLEEP',
    payloadJson: '{"durationMillis":1}',
    state,
    timeoutMs: 500,
    createdAtMs: 100,
    updatedAtMs: 100,
    ...running,
    ...overrides,
  });
}

const LEASE = { workerId: 'w1', attemptId: 'lease-x', startedAtMs: 777, deadlineAtMs: 1_277 };

/** The move that enters `to` (RUNNING needs a lease). */
function move(to: JobState, recovery = false): Parameters<typeof transition>[1] {
  return to === 'RUNNING' ? { to, lease: LEASE } : { to, recovery };
}

/** The legal moves of the spec, written out independently of the code under test. */
const EXPECTED_LEGAL = new Set<string>([
  'QUEUED->RUNNING',
  'QUEUED->CANCELLED',
  'RUNNING->COMPLETED',
  'RUNNING->FAILED',
  'RUNNING->RETRY_WAIT',
  'RUNNING->CANCELLED',
  'RUNNING->SCHEDULED',
  'RUNNING->WAITING',
  'RETRY_WAIT->QUEUED',
  'RETRY_WAIT->CANCELLED',
  'SCHEDULED->QUEUED',
  'SCHEDULED->CANCELLED',
  'WAITING->QUEUED',
  'WAITING->SCHEDULED',
  'WAITING->CANCELLED',
]);
const RECOVERY_ONLY = 'RUNNING->QUEUED';

const PAIRS: [JobState, JobState][] = JOB_STATES.flatMap((from) =>
  JOB_STATES.map((to): [JobState, JobState] => [from, to]),
);

describe('job state machine', () => {
  it('covers all 64 state pairs when enumerating the table', () => {
    assert.equal(JOB_STATES.length, 8);
    assert.equal(PAIRS.length, 64);
  });

  for (const [from, to] of PAIRS) {
    const name = `${from}->${to}`;
    const legal = EXPECTED_LEGAL.has(name);
    if (legal) {
      it(`moves ${name} and stamps updatedAtMs when the move is legal`, () => {
        const job = jobIn(from);
        assert.equal(isLegalTransition(from, to), true);
        transition(job, move(to), 777);
        assert.equal(job.state, to);
        assert.equal(job.updatedAtMs, 777);
        assert.equal(job.lease !== null, to === 'RUNNING', 'a lease exactly while RUNNING');
        if (isTerminalState(to)) assert.equal(job.finishedAtMs, 777);
      });
    } else {
      it(`refuses ${name} without changing the job when the move is illegal`, () => {
        const job = jobIn(from);
        assert.equal(isLegalTransition(from, to), false);
        assert.throws(
          () => transition(job, move(to), 777),
          (err: unknown) =>
            err instanceof IllegalTransitionError &&
            err.message.includes(`${from} -> ${to}`) &&
            err.message.includes('job-1'),
        );
        assert.equal(job.state, from);
        assert.equal(job.updatedAtMs, 100);
      });
    }
  }

  for (const [from, to] of PAIRS) {
    const name = `${from}->${to}`;
    const legal = EXPECTED_LEGAL.has(name) || name === RECOVERY_ONLY;
    it(`${legal ? 'allows' : 'refuses'} ${name} when recovering`, () => {
      assert.equal(isLegalTransition(from, to, true), legal);
      const job = jobIn(from);
      if (legal) {
        transition(job, move(to, true), 5);
        assert.equal(job.state, to);
      } else {
        assert.throws(() => transition(job, move(to, true), 5), IllegalTransitionError);
        assert.equal(job.state, from);
      }
    });
  }

  it('refuses RUNNING->QUEUED when recovery is not asked for', () => {
    const job = jobIn('RUNNING');
    assert.throws(() => transition(job, { to: 'QUEUED' }, 1), IllegalTransitionError);
    assert.throws(
      () => transition(job, { to: 'QUEUED', recovery: false }, 1),
      IllegalTransitionError,
    );
    assert.equal(job.state, 'RUNNING');
  });

  it('takes a FAILED job back to QUEUED only for a redrive, clearing its finish time', () => {
    assert.equal(isLegalTransition('FAILED', 'QUEUED', true), false);
    assert.equal(isLegalTransition('FAILED', 'QUEUED', false, true), true);
    assert.equal(isLegalTransition('CANCELLED', 'QUEUED', false, true), false);
    assert.equal(isLegalTransition('COMPLETED', 'QUEUED', true, true), false);
    const job = jobIn('FAILED', { finishedAtMs: 4 });
    assert.throws(() => transition(job, { to: 'QUEUED' }, 5), IllegalTransitionError);
    transition(job, { to: 'QUEUED', redrive: true }, 6);
    assert.equal(job.state, 'QUEUED');
    assert.equal(job.finishedAtMs, null);
  });

  it('leaves terminal states with no exit at all when the state is terminal', () => {
    for (const from of JOB_STATES) {
      const exits = JOB_STATES.filter((to) => isLegalTransition(from, to, true));
      assert.equal(isTerminalState(from), exits.length === 0, from);
    }
    assert.deepEqual(
      JOB_STATES.filter((s) => isTerminalState(s)),
      ['COMPLETED', 'FAILED', 'CANCELLED'],
    );
  });
});

describe('lease', () => {
  it('starts an attempt with attempts+1, a lease and deadline now+timeout when granted', () => {
    const job = jobIn('QUEUED', { attempts: 1, retryAtMs: 50 });
    const running = grantLease(job, 'w1', 'lease-a', 1_000);
    assert.equal(running.state, 'RUNNING');
    assert.equal(running.attempts, 2);
    assert.deepEqual(running.lease, {
      workerId: 'w1',
      attemptId: 'lease-a',
      startedAtMs: 1_000,
      deadlineAtMs: 1_500,
    });
    assert.equal(running.retryAtMs, null);
    assert.equal(running.updatedAtMs, 1_000);
    assert.equal(running.startedAtMs, 1_000);
  });

  it('refuses to grant a lease when the job is not QUEUED', () => {
    for (const state of JOB_STATES.filter((s) => s !== 'QUEUED')) {
      const job = jobIn(state, { attempts: 1 });
      assert.throws(() => grantLease(job, 'w1', 'lease-a', 1_000), IllegalTransitionError);
      assert.equal(job.attempts, 1, state);
    }
  });

  it('counts only the current lease of a RUNNING job as current', () => {
    const job = jobIn('QUEUED');
    grantLease(job, 'w1', 'lease-a', 0);
    assert.equal(isCurrentLease(job, 'lease-a'), true);
    assert.equal(isCurrentLease(job, 'lease-b'), false);
    assert.equal(isCurrentLease(job, ''), false);
    transition(job, { to: 'RETRY_WAIT' }, 1);
    assert.equal(isCurrentLease(job, 'lease-a'), false, 'not RUNNING any more');
    assert.equal(job.lease, null, 'leaving RUNNING drops the lease');
    assert.equal(job.attempts, 1, 'the attempt still counts');
  });
});
