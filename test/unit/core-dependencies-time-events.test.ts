/**
 * Dependencies together with the other features of the core: a delayed job
 * with parents (WAITING, then SCHEDULED until its time), a delayed job of a
 * flow, a SUBMIT_JOBS element with `dependsOn` (refused), and the job events
 * of a release and of a cascade.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Effect } from '../../src/coordinator/core/types.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import {
  CLIENT_CONN,
  CoreHarness,
  START_MS,
  effectsOf,
  expectReply,
  messagesOf,
} from '../helpers/core-harness.js';

const pushes = (effects: readonly Effect[]) =>
  effectsOf(effects, 'push').flatMap((e) =>
    e.connIds.filter((id) => id === CLIENT_CONN).map(() => e.msg),
  );

describe('core: dependencies with delayed jobs', () => {
  it('moves a delayed dependent from WAITING to SCHEDULED when its parent completes early', () => {
    const h = new CoreHarness();
    h.register('w1', 2);
    const parent = h.submit();
    const child = h.submit({ dependsOn: [parent], runAtMillis: START_MS + 5_000 });
    assert.equal(h.status(child).state, 'WAITING');
    h.result(parent);
    assert.equal(h.status(child).state, 'SCHEDULED');
    assert.equal(h.assignmentsOf(child).length, 0, 'not before its time');
    h.clock = START_MS + 5_000;
    h.handle({ kind: 'wake' });
    assert.equal(h.assignmentsOf(child).length, 1);
  });

  it('queues a delayed dependent at once when its parent completes after its time', () => {
    const h = new CoreHarness();
    h.register('w1', 2);
    const parent = h.submit();
    const child = h.submit({ dependsOn: [parent], runAtMillis: START_MS + 1_000 });
    h.clock = START_MS + 2_000;
    h.handle({ kind: 'wake' });
    assert.equal(h.status(child).state, 'WAITING', 'its time alone does not release it');
    h.result(parent);
    assert.equal(h.assignmentsOf(child).length, 1);
  });

  it('holds a delayed job of a flow until its time', () => {
    const h = new CoreHarness();
    h.register('w1', 2);
    const reply = expectReply(
      h.request({
        type: 'SUBMIT_FLOW',
        jobs: [
          { ref: 'a', taskType: 'SLEEP', payload: { durationMillis: 1 } },
          {
            ref: 'b',
            taskType: 'SLEEP',
            payload: { durationMillis: 1 },
            dependsOn: ['a'],
            runAtMillis: START_MS + 3_000,
          },
          {
            ref: 'c',
            taskType: 'SLEEP',
            payload: { durationMillis: 1 },
            runAtMillis: START_MS + 3_000,
          },
        ],
      }),
      'FLOW_SUBMITTED',
    );
    const id = new Map(reply.jobs.map((j) => [j.ref, j.jobId]));
    const [a, b, c] = ['a', 'b', 'c'].map((ref) => id.get(ref) as string) as [
      string,
      string,
      string,
    ];
    assert.equal(h.status(c).state, 'SCHEDULED');
    assert.equal(h.status(c).runAtMillis, START_MS + 3_000);
    h.result(a);
    assert.equal(h.status(b).state, 'SCHEDULED');
    h.clock = START_MS + 3_000;
    h.handle({ kind: 'wake' });
    assert.deepEqual(
      messagesOf(h.log, 'TASK_ASSIGN')
        .map((m) => m.jobId)
        .filter((jobId) => jobId !== a)
        .sort(),
      [b, c].sort(),
    );
  });
});

describe('core: SUBMIT_JOBS with dependsOn', () => {
  it('refuses the batch, naming the element, and creates nothing', () => {
    const h = new CoreHarness();
    const parent = h.submit();
    const before = h.store.committedJobs().length;
    const reply = expectReply(
      h.request({
        type: 'SUBMIT_JOBS',
        jobs: [
          { taskType: 'SLEEP', payload: { durationMillis: 1 } },
          { taskType: 'SLEEP', payload: { durationMillis: 1 }, dependsOn: [parent] },
        ],
      }),
      'ERROR',
    );
    assert.equal(reply.code, ErrorCode.InvalidRequest);
    assert.equal(reply.index, 1);
    assert.match(reply.message, /dependsOn is not supported in SUBMIT_JOBS/);
    assert.equal(h.store.committedJobs().length, before);
  });
});

describe('core: job events of dependencies', () => {
  it('pushes the release of a dependent (WAITING to QUEUED) and the cascade of a failure', () => {
    const h = new CoreHarness();
    const parent = h.submit({ maxAttempts: 1 });
    const child = h.submit({ dependsOn: [parent] });
    const other = h.submit();
    const waiting = h.submit({ dependsOn: [other] });
    expectReply(h.request({ type: 'SUBSCRIBE_JOBS', filter: {} }), 'SUBSCRIBED');
    h.register('w1', 2);
    h.result(other);
    assert.deepEqual(
      pushes(h.last)
        .filter((m) => m.job.jobId === waiting)
        .map((m) => m.job.state),
      // Released and assigned in the same input: one event, as the job is after both.
      ['RUNNING'],
    );
    h.result(parent, { success: false, error: 'broke' });
    assert.deepEqual(
      pushes(h.last)
        .filter((m) => m.job.jobId === child)
        .map((m) => [m.event, m.job.state]),
      [['state', 'CANCELLED']],
    );
  });

  it('pushes QUEUED for a released dependent when no worker takes it', () => {
    const h = new CoreHarness();
    h.register('w1', 1, ['SLEEP']);
    const parent = h.submit();
    // A type no worker runs: released, it stays QUEUED.
    const child = h.submit({ taskType: 'SHA256', payload: { text: 'x' }, dependsOn: [parent] });
    expectReply(h.request({ type: 'SUBSCRIBE_JOBS', filter: { jobId: child } }), 'SUBSCRIBED');
    h.result(parent);
    assert.deepEqual(
      pushes(h.last).map((m) => m.job.state),
      ['QUEUED'],
    );
  });
});
