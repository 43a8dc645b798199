/**
 * A batch split across shards, put back together (server/sharding/merge.ts):
 * the ids in the batch's order, and a refused part's job at fault named by
 * its place in the whole batch, and the jobs other shards created said.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { mergeSubmitted } from '../../src/server/sharding/merge.js';

/** Jobs 0 and 2 went to one shard, 1 and 3 to another. */
const parts = [
  { jobs: [{}, {}], at: [0, 2] },
  { jobs: [{}, {}], at: [1, 3] },
];

describe('mergeSubmitted', () => {
  it('puts every part’s ids back at their jobs’ places in the batch', () => {
    const reply = mergeSubmitted(4, [
      { part: parts[0]!, reply: { type: 'JOBS_SUBMITTED', jobIds: ['a', 'c'] } },
      {
        part: parts[1]!,
        reply: { type: 'JOBS_SUBMITTED', jobIds: ['b', 'd'], deduplicated: [false, true] },
      },
    ]);
    assert.deepEqual(reply, {
      type: 'JOBS_SUBMITTED',
      jobIds: ['a', 'b', 'c', 'd'],
      deduplicated: [false, false, false, true],
    });
  });

  it('names the refused job by its index in the whole batch', () => {
    const refusal = {
      type: 'ERROR',
      code: ErrorCode.InvalidRequest,
      message: 'Job at index 1 of the batch: no task type; no job of the batch was created',
      index: 1,
    } as const;
    const reply = mergeSubmitted(4, [
      { part: parts[0]!, reply: { type: 'JOBS_SUBMITTED', jobIds: ['a', 'c'] } },
      { part: parts[1]!, reply: refusal },
    ]);
    assert.deepEqual(reply, {
      ...refusal,
      index: 3,
      message:
        "Job at index 3 of the batch: no task type; no job of its shard's part was created, but those at indexes 0, 2 (other shards) were",
    });
  });

  it('leaves a refusal as it is when no other part was created', () => {
    const refusal = {
      type: 'ERROR',
      code: ErrorCode.LimitExceeded,
      message: 'Limit exceeded: too many active jobs',
    } as const;
    const reply = mergeSubmitted(4, [
      { part: parts[0]!, reply: refusal },
      { part: parts[1]!, reply: refusal },
    ]);
    assert.deepEqual(reply, refusal);
  });
});
