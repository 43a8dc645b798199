/**
 * The ready queue: priority levels, FIFO within a level, aging of old jobs,
 * lazy removal, task-type filtering, and popBest against a brute-force model.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  ReadyQueue,
  effectiveLevel,
  type RunnableTypes,
} from '../../src/coordinator/core/ready-queue.js';
import { PRIORITIES, type Priority } from '../../src/protocol/messages.js';
import type { CoreJob } from '../../src/coordinator/core/job.js';
import { coreJob } from '../helpers/job-record.js';

/** Runnable task types as the worker registry reports them. */
function accepting(types: readonly string[]): RunnableTypes {
  const set = new Set(types);
  return {
    canRun: (t) => set.has(t),
    runnableTypes: () => set.values(),
    runnableTypeCount: set.size,
  };
}

/** Every task type is runnable (the queue then looks at its own lanes). */
const ANY: RunnableTypes = {
  canRun: () => true,
  runnableTypes: () => {
    throw new Error('not enumerable');
  },
  runnableTypeCount: Number.POSITIVE_INFINITY,
};

function job(seq: number, priority: Priority, createdAtMs = 0, taskType = 'SLEEP'): CoreJob {
  return coreJob(seq, {
    taskType,
    payloadJson: '{}',
    priority,
    timeoutMs: 1_000,
    createdAtMs,
    updatedAtMs: createdAtMs,
  });
}

function drainIds(queue: ReadyQueue, nowMs: number, accept = ANY): string[] {
  const out: string[] = [];
  for (let j = queue.popBest(nowMs, accept); j !== undefined; j = queue.popBest(nowMs, accept)) {
    out.push(j.jobId);
  }
  return out;
}

describe('effectiveLevel', () => {
  it('rises one level per aging step and stops at HIGH when a job grows old', () => {
    const low = job(1, 'LOW', 1_000);
    assert.equal(effectiveLevel(low, 1_000, 100), 0);
    assert.equal(effectiveLevel(low, 1_099, 100), 0);
    assert.equal(effectiveLevel(low, 1_100, 100), 1);
    assert.equal(effectiveLevel(low, 1_200, 100), 2);
    assert.equal(effectiveLevel(low, 9_999_999, 100), 2);
    assert.equal(effectiveLevel(job(2, 'NORMAL', 0), 100, 100), 2);
    assert.equal(effectiveLevel(job(3, 'HIGH', 0), 10_000, 100), 2);
  });

  it('keeps the base level when aging is off or the clock is behind', () => {
    assert.equal(effectiveLevel(job(1, 'LOW', 0), 1e9, 0), 0);
    assert.equal(effectiveLevel(job(1, 'LOW', 5_000), 0, 100), 0);
  });
});

describe('ReadyQueue', () => {
  it('pops HIGH before NORMAL before LOW when all are queued', () => {
    const queue = new ReadyQueue(1_000_000);
    queue.push(job(1, 'LOW'));
    queue.push(job(2, 'NORMAL'));
    queue.push(job(3, 'HIGH'));
    queue.push(job(4, 'LOW'));
    queue.push(job(5, 'HIGH'));
    assert.deepEqual(drainIds(queue, 0), ['job-3', 'job-5', 'job-2', 'job-1', 'job-4']);
    assert.equal(queue.size, 0);
  });

  it('keeps submission order within a level when pushed out of order', () => {
    const queue = new ReadyQueue(1_000_000);
    for (const seq of [7, 3, 9, 1, 5]) queue.push(job(seq, 'NORMAL'));
    assert.deepEqual(drainIds(queue, 0), ['job-1', 'job-3', 'job-5', 'job-7', 'job-9']);
  });

  it('lets an aged LOW job beat a newer HIGH one when two steps have passed', () => {
    const queue = new ReadyQueue(1_000);
    queue.push(job(1, 'LOW', 0));
    queue.push(job(2, 'HIGH', 1_500));
    // At 1500 the LOW job is one step old: NORMAL, still behind HIGH.
    assert.equal(queue.popBest(1_500, ANY)?.jobId, 'job-2');
    queue.push(job(3, 'HIGH', 1_900));
    // At 2000 it is two steps old: HIGH too, and older (lower seq) wins.
    assert.equal(queue.popBest(2_000, ANY)?.jobId, 'job-1');
    assert.equal(queue.popBest(2_000, ANY)?.jobId, 'job-3');
  });

  it('lets an aged LOW job beat a fresh NORMAL one when one step has passed', () => {
    const queue = new ReadyQueue(1_000);
    queue.push(job(1, 'LOW', 0));
    queue.push(job(2, 'NORMAL', 999));
    assert.equal(queue.popBest(999, ANY)?.jobId, 'job-2', 'not aged yet');
    queue.push(job(3, 'NORMAL', 1_000));
    assert.equal(queue.popBest(1_000, ANY)?.jobId, 'job-1');
  });

  it('skips and drops entries that left QUEUED when they reach the head', () => {
    const queue = new ReadyQueue(1_000_000);
    const jobs = [job(1, 'HIGH'), job(2, 'NORMAL'), job(3, 'NORMAL'), job(4, 'LOW')];
    for (const j of jobs) queue.push(j);
    (jobs[0] as CoreJob).state = 'CANCELLED';
    (jobs[2] as CoreJob).state = 'CANCELLED';
    assert.equal(queue.size, 4, 'removal is lazy');
    assert.deepEqual(drainIds(queue, 0), ['job-2', 'job-4']);
    assert.equal(queue.size, 0);
  });

  it('takes only accepted task types when a filter is given', () => {
    const queue = new ReadyQueue(1_000_000);
    queue.push(job(1, 'HIGH', 0, 'SHA256'));
    queue.push(job(2, 'LOW', 0, 'SLEEP'));
    queue.push(job(3, 'NORMAL', 0, 'SHA256'));
    assert.deepEqual([...queue.taskTypes()].sort(), ['SHA256', 'SLEEP']);
    assert.equal(
      queue.popBest(0, accepting(['SLEEP']))?.jobId,
      'job-2',
      'HIGH SHA256 is not wanted',
    );
    assert.equal(queue.popBest(0, accepting([])), undefined);
    assert.deepEqual([...queue.taskTypes()], ['SHA256']);
    assert.deepEqual(drainIds(queue, 0), ['job-1', 'job-3']);
    assert.deepEqual([...queue.taskTypes()], []);
  });

  it('matches a brute-force model when jobs are pushed, cancelled and popped at random', () => {
    const step = fc.oneof(
      fc.record({
        kind: fc.constant('push' as const),
        priority: fc.constantFrom(...PRIORITIES),
        taskType: fc.constantFrom('A', 'B', 'C'),
        advanceMs: fc.integer({ min: 0, max: 400 }),
      }),
      fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }),
      fc.record({
        kind: fc.constant('pop' as const),
        accept: fc.subarray(['A', 'B', 'C']),
        advanceMs: fc.integer({ min: 0, max: 400 }),
      }),
    );
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 200 }),
        fc.integer({ min: 1, max: 1_000 }),
        (steps, agingStepMs) => {
          const queue = new ReadyQueue(agingStepMs);
          const model: CoreJob[] = [];
          let nowMs = 0;
          let seq = 0;
          for (const s of steps) {
            if (s.kind === 'push') {
              nowMs += s.advanceMs;
              const j = job(++seq, s.priority, nowMs, s.taskType);
              queue.push(j);
              model.push(j);
            } else if (s.kind === 'cancel') {
              const queued = model.filter((j) => j.state === 'QUEUED');
              const victim = queued[s.pick % Math.max(1, queued.length)];
              if (victim !== undefined) victim.state = 'CANCELLED';
            } else {
              nowMs += s.advanceMs;
              const accept = (t: string): boolean => s.accept.includes(t);
              // Many runnable types make the queue walk its own lanes; few, the runnable list.
              const runnable = accepting([...s.accept, ...(s.accept.length > 1 ? ['X', 'Y'] : [])]);
              const expected = model
                .filter((j) => j.state === 'QUEUED' && accept(j.taskType))
                .sort(
                  (a, b) =>
                    effectiveLevel(b, nowMs, agingStepMs) - effectiveLevel(a, nowMs, agingStepMs) ||
                    a.seq - b.seq,
                )[0];
              const got = queue.popBest(nowMs, runnable);
              assert.equal(got?.jobId, expected?.jobId);
              if (got !== undefined) got.state = 'RUNNING';
            }
          }
        },
      ),
      { numRuns: 300, seed: 1234 },
    );
  });
});

describe('ReadyQueue with many task types', () => {
  it('forgets a task type once its last job is taken', () => {
    const queue = new ReadyQueue(1_000_000);
    for (let i = 1; i <= 1_000; i++) queue.push(job(i, 'NORMAL', 0, `type-${i}`));
    assert.equal([...queue.taskTypes()].length, 1_000);
    assert.equal(drainIds(queue, 0).length, 1_000);
    assert.deepEqual([...queue.taskTypes()], []);
  });

  it('finds the one runnable type among thousands of unserved ones', () => {
    const queue = new ReadyQueue(1_000_000);
    for (let i = 1; i <= 5_000; i++) queue.push(job(i, 'HIGH', 0, `unserved-${i}`));
    queue.push(job(5_001, 'LOW', 0, 'served'));
    assert.equal(queue.popBest(0, accepting(['served']))?.jobId, 'job-5001');
    assert.equal(queue.popBest(0, accepting(['served'])), undefined);
  });
});
