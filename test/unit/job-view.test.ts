/**
 * What a client is shown of job states: a client that lists no `knownStates`
 * sees the six v1 states only (SCHEDULED and WAITING as QUEUED), in replies and
 * in what its LIST_JOBS state filter matches; a client that lists them sees them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KNOWN_STATES, StateView } from '../../src/protocol/job-view.js';
import {
  JOB_STATES,
  V1_JOB_STATES,
  type ClientReply,
  type JobSnapshot,
  type JobState,
} from '../../src/protocol/messages.js';
import { CoreHarness, expectReply } from '../helpers/core-harness.js';

function snapshot(state: JobState, jobId = `job-${state.length}`): JobSnapshot {
  return {
    jobId,
    taskType: 'T',
    state,
    attempts: 0,
    maxAttempts: 3,
    workerId: null,
    result: null,
    error: null,
    createdAtMillis: 1,
    updatedAtMillis: 1,
  } as JobSnapshot;
}

describe('StateView', () => {
  it('shows a v1 client every extension state as QUEUED, and v1 states as they are', () => {
    for (const view of [StateView.of(undefined), StateView.of(null), StateView.of([])]) {
      assert.equal(view, StateView.V1);
      for (const state of V1_JOB_STATES) assert.equal(view.show(state), state);
      assert.equal(view.show('SCHEDULED'), 'QUEUED');
      assert.equal(view.show('WAITING'), 'QUEUED');
      assert.equal(view.knows('SCHEDULED'), false);
    }
  });

  it('shows a client the states it listed, and ignores names it does not know', () => {
    const all = StateView.of([...KNOWN_STATES, 'SOMEDAY']);
    assert.equal(all, StateView.ALL);
    for (const state of JOB_STATES) assert.equal(all.show(state), state);
    const scheduledOnly = StateView.of(['SCHEDULED', 'SOMEDAY']);
    assert.equal(scheduledOnly.show('SCHEDULED'), 'SCHEDULED');
    assert.equal(scheduledOnly.show('WAITING'), 'QUEUED');
    assert.equal(StateView.of(['SOMEDAY']), StateView.V1);
  });

  it('widens a v1 QUEUED filter to every state shown as QUEUED', () => {
    assert.deepEqual(StateView.V1.matchedBy('QUEUED').sort(), ['QUEUED', 'SCHEDULED', 'WAITING']);
    assert.deepEqual(StateView.V1.matchedBy('RUNNING'), ['RUNNING']);
    assert.deepEqual(StateView.ALL.matchedBy('QUEUED'), ['QUEUED']);
    assert.deepEqual(StateView.of(['WAITING']).matchedBy('QUEUED').sort(), ['QUEUED', 'SCHEDULED']);
  });

  it('rewrites the snapshots of every reply that carries them, and nothing else', () => {
    const job = snapshot('SCHEDULED');
    const replies: ClientReply[] = [
      { type: 'JOB_SUBMITTED', jobId: job.jobId, job },
      { type: 'JOB_STATUS', job },
      { type: 'JOB_CANCEL', cancelled: false, job },
      { type: 'JOB_LIST', jobs: [job, snapshot('RUNNING')], nextCursor: null },
    ];
    for (const reply of replies) {
      const shown = StateView.V1.reply(reply);
      assert.notEqual(shown, reply);
      assert.doesNotMatch(JSON.stringify(shown), /"state":"SCHEDULED"/);
      assert.match(JSON.stringify(reply), /"state":"SCHEDULED"/, 'the original is left alone');
      assert.equal(StateView.ALL.reply(reply), reply);
    }
    const plain: ClientReply = { type: 'JOB_STATUS', job: snapshot('RUNNING') };
    assert.equal(StateView.V1.reply(plain), plain, 'nothing to change: the same object');
  });
});

describe('core: LIST_JOBS and knownStates', () => {
  it('refuses a state filter the request did not list in knownStates', () => {
    const h = new CoreHarness();
    for (const state of ['SCHEDULED', 'WAITING'] as const) {
      const reply = h.request({ type: 'LIST_JOBS', limit: null, state, cursor: null });
      const error = expectReply(reply, 'ERROR');
      assert.equal(error.code, 'INVALID_REQUEST');
      assert.match(error.message, /knownStates/);
    }
    const known = h.request({
      type: 'LIST_JOBS',
      limit: null,
      state: 'SCHEDULED',
      cursor: null,
      knownStates: [...KNOWN_STATES],
    });
    assert.deepEqual(expectReply(known, 'JOB_LIST').jobs, []);
  });

  it('lists QUEUED jobs for a v1 client as before', () => {
    const h = new CoreHarness();
    const id = h.submit();
    const reply = h.request({ type: 'LIST_JOBS', limit: null, state: 'QUEUED', cursor: null });
    assert.deepEqual(
      expectReply(reply, 'JOB_LIST').jobs.map((j) => j.jobId),
      [id],
    );
  });
});
