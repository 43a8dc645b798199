/**
 * Group turns across task types: one ring per queue and base priority, so a
 * tenant's backlog of one type does not hold back another tenant's job of
 * another type; the bound (each other group passes a waiting job at most
 * once among the picks that could have taken it) against random pushes,
 * cancels and picks by workers that run different subsets of the types; and
 * the per-group backlog counts with cancelled jobs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ReadyQueue, type RunnableTypes } from '../../src/coordinator/core/ready-queue.js';
import type { CoreJob } from '../../src/coordinator/core/job.js';
import type { Priority } from '../../src/protocol/messages.js';
import { coreJob } from '../helpers/job-record.js';

function accepting(types: readonly string[]): RunnableTypes {
  const set = new Set(types);
  return {
    canRun: (t) => set.has(t),
    runnableTypes: () => set.values(),
    runnableTypeCount: set.size,
  };
}

function job(
  seq: number,
  taskType: string,
  groupKey: string | null,
  priority: Priority = 'NORMAL',
  createdAtMs = 0,
): CoreJob {
  return coreJob(seq, { taskType, groupKey, priority, createdAtMs, updatedAtMs: createdAtMs });
}

/** Pops like the scheduler: the job leaves QUEUED. */
function take(ready: ReadyQueue, runnable: RunnableTypes, nowMs = 0): CoreJob | undefined {
  const j = ready.popBest(nowMs, runnable);
  if (j !== undefined) j.state = 'RUNNING';
  return j;
}

describe('ReadyQueue group turns across task types', () => {
  it("serves another tenant's job of another type next when one tenant has a backlog", () => {
    const ready = new ReadyQueue(0);
    for (let i = 1; i <= 2_000; i++) ready.push(job(i, 'SLEEP', 'tenant-a'));
    ready.push(job(2_001, 'SHA256', 'tenant-b'));
    const both = accepting(['SLEEP', 'SHA256']);
    assert.deepEqual(
      [take(ready, both), take(ready, both), take(ready, both)].map((j) => j?.groupKey),
      ['tenant-a', 'tenant-b', 'tenant-a'],
    );
  });

  it('keeps the turn of a group whose type no free worker runs until one does', () => {
    const ready = new ReadyQueue(0);
    for (let i = 1; i <= 10; i++) ready.push(job(i, 'SLEEP', 'a'));
    ready.push(job(11, 'SHA256', 'b'));
    ready.push(job(12, 'SLEEP', 'c'));
    const sleepOnly = accepting(['SLEEP']);
    // Picks no worker for SHA256 could have taken do not count against b.
    assert.deepEqual(
      [take(ready, sleepOnly), take(ready, sleepOnly), take(ready, sleepOnly)].map(
        (j) => j?.groupKey,
      ),
      ['a', 'c', 'a'],
    );
    assert.equal(take(ready, accepting(['SLEEP', 'SHA256']))?.groupKey, 'b');
  });

  it("takes a group's oldest job among the types the free workers run", () => {
    const ready = new ReadyQueue(0);
    ready.push(job(1, 'X', 'a', 'NORMAL', 5));
    ready.push(job(2, 'Y', 'a', 'NORMAL', 1));
    ready.push(job(3, 'X', 'b', 'NORMAL', 0));
    const both = accepting(['X', 'Y']);
    assert.deepEqual(
      [take(ready, both), take(ready, both), take(ready, both)].map((j) => j?.seq),
      [2, 3, 1],
    );
  });

  it('counts only live jobs in a group backlog once a queued job is cancelled', () => {
    const ready = new ReadyQueue(0);
    const jobs = [job(1, 'SLEEP', null), job(2, 'SLEEP', null), job(3, 'SHA256', 't')];
    for (const j of jobs) ready.push(j);
    assert.deepEqual(ready.groupBacklog('default', 10), [
      { group: '', queued: 2 },
      { group: 't', queued: 1 },
    ]);
    for (const j of jobs.slice(0, 2)) {
      j.state = 'CANCELLED';
      ready.cancelled(j);
    }
    assert.deepEqual(ready.groupBacklog('default', 10), [{ group: 't', queued: 1 }]);
    assert.equal(take(ready, accepting(['SLEEP', 'SHA256']))?.seq, 3);
    assert.deepEqual(ready.groupBacklog('default', 10), []);
  });
});

type Step =
  | { kind: 'push'; group: string; taskType: string; count: number }
  | { kind: 'cancel'; pick: number }
  | { kind: 'pick'; accept: string[] };

const TYPES = ['A', 'B', 'C'];

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant('push' as const),
    group: fc.constantFrom('g1', 'g2', 'g3', 'g4', ''),
    taskType: fc.constantFrom(...TYPES),
    // Bursts make backlogs, where a group could pass another more than once.
    count: fc.integer({ min: 1, max: 8 }),
  }),
  fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('pick' as const), accept: fc.subarray(TYPES) }),
);

/**
 * The bound: for each waiting group, how often each other group was served
 * by a pick that could have taken one of its live jobs; never twice before
 * the waiting group itself is served.
 */
function checkBound(steps: readonly Step[]): void {
  const ready = new ReadyQueue(0);
  const queued: CoreJob[] = [];
  const passed = new Map<string, Map<string, number>>();
  let seq = 0;
  for (const s of steps) {
    if (s.kind === 'push') {
      for (let i = 0; i < s.count; i++) {
        const j = job(++seq, s.taskType, s.group === '' ? null : s.group);
        ready.push(j);
        queued.push(j);
      }
    } else if (s.kind === 'cancel') {
      const live = queued.filter((j) => j.state === 'QUEUED');
      const victim = live[s.pick % Math.max(1, live.length)];
      if (victim === undefined) continue;
      victim.state = 'CANCELLED';
      ready.cancelled(victim);
    } else {
      const got = take(ready, accepting(s.accept));
      const live = queued.filter((j) => j.state === 'QUEUED' || j === got);
      const eligible = live.some((j) => s.accept.includes(j.taskType));
      assert.equal(got !== undefined, eligible, 'a pick finds a job exactly when one is runnable');
      if (got === undefined) continue;
      const served = got.groupKey ?? '';
      passed.delete(served);
      const waiting = new Set(
        live.filter((j) => j !== got && s.accept.includes(j.taskType)).map((j) => j.groupKey ?? ''),
      );
      for (const g of waiting) {
        if (g === served) continue;
        const byOther = passed.get(g) ?? new Map<string, number>();
        const n = (byOther.get(served) ?? 0) + 1;
        assert.ok(n <= 1, `group ${served} served twice while ${g} waited for a runnable job`);
        byOther.set(served, n);
        passed.set(g, byOther);
      }
      for (const g of [...passed.keys()]) {
        if (!live.some((j) => j !== got && (j.groupKey ?? '') === g)) passed.delete(g);
      }
    }
  }
}

describe('ReadyQueue fairness bound', () => {
  it('passes a waiting group at most once per other group among the picks that could take it', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 300 }), (steps) => checkBound(steps)),
      { numRuns: 400, seed: 4242 },
    );
  });
});
