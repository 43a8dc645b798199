/**
 * The worker registry's routing index against a brute-force model: random
 * registrations (with overlapping task type lists, v1 workers included),
 * leaves, drains, slots taken and freed; after every step the choice of a
 * worker for each task type, the availability, the serving counts and the
 * free-slot sum match a scan over all sessions.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { WorkerRegistry, type WorkerSession } from '../../src/coordinator/core/worker-registry.js';
import { BUILTIN_TASK_TYPES } from '../../src/protocol/task-types.js';

const TYPES = ['SLEEP', 'SHA256', 'resize', 'thumbnail', 'emails.send'] as const;

function session(workerId: string, capacity: number, taskTypes: string[] | null): WorkerSession {
  return {
    workerId,
    connId: Number(workerId.slice(1)),
    capacity,
    prefetch: 0,
    prefetching: false,
    heldList: null,
    lastResultMs: null,
    slotMs: null,
    taskTypes: taskTypes === null ? null : new Set(taskTypes),
    queues: null,
    running: new Set(),
    lastHeartbeatMs: 0,
    suspected: false,
    draining: false,
    ending: false,
    heartbeatAck: false,
    parents: false,
  };
}

const declares = (s: WorkerSession, type: string): boolean =>
  s.taskTypes === null
    ? (BUILTIN_TASK_TYPES as readonly string[]).includes(type)
    : s.taskTypes.has(type);
const freeOf = (s: WorkerSession): number => (s.draining ? 0 : s.capacity - s.running.size);

/** The spec's rule by brute force: most free slots, ties by worker id. */
function bestByScan(live: readonly WorkerSession[], type: string): WorkerSession | undefined {
  return live
    .filter((s) => freeOf(s) > 0 && declares(s, type))
    .sort((a, b) => freeOf(b) - freeOf(a) || (a.workerId < b.workerId ? -1 : 1))[0];
}

function checkAgainstModel(registry: WorkerRegistry, live: readonly WorkerSession[]): void {
  for (const type of [...TYPES, 'WORD_COUNT', 'nobody']) {
    const expected = bestByScan(live, type);
    assert.equal(registry.pickFor(type)?.workerId, expected?.workerId, `pickFor(${type})`);
    assert.equal(registry.canRun(type), expected !== undefined, `canRun(${type})`);
    const serving = live.filter((s) => !s.draining && declares(s, type)).length;
    assert.equal(registry.servingCount(type), serving, `servingCount(${type})`);
  }
  const listed = [...registry.runnableTypes()];
  assert.equal(listed.length, registry.runnableTypeCount);
  const universe = new Set<string>([...TYPES, ...BUILTIN_TASK_TYPES]);
  const runnable = [...universe].filter((type) => bestByScan(live, type) !== undefined);
  assert.deepEqual(new Set(listed), new Set(runnable));
  assert.equal(
    registry.freeSlots,
    live.reduce((sum, s) => sum + freeOf(s), 0),
  );
}

const step = fc.oneof(
  fc.record({
    kind: fc.constant('add' as const),
    capacity: fc.integer({ min: 1, max: 4 }),
    types: fc.option(fc.subarray([...TYPES], { minLength: 1 }), { nil: null }),
  }),
  fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('occupy' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('drain' as const), pick: fc.nat() }),
);

describe('WorkerRegistry routing index', () => {
  it('matches a scan over all sessions after any sequence of changes', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 120 }), (steps) => {
        const registry = new WorkerRegistry();
        const live: WorkerSession[] = [];
        let nextId = 1;
        let nextJob = 1;
        for (const s of steps) {
          const target = live[('pick' in s ? s.pick : 0) % Math.max(1, live.length)];
          if (s.kind === 'add') {
            const added = session(`w${nextId++}`, s.capacity, s.types);
            registry.add(added);
            live.push(added);
          } else if (target === undefined) {
            continue;
          } else if (s.kind === 'remove') {
            registry.remove(target);
            live.splice(live.indexOf(target), 1);
          } else if (s.kind === 'occupy' && target.running.size < target.capacity) {
            registry.occupy(target, `job-${nextJob++}`);
          } else if (s.kind === 'release' && target.running.size > 0) {
            assert.ok(registry.release(target, [...target.running][0] as string));
          } else if (s.kind === 'drain') {
            registry.markDraining(target);
          }
          checkAgainstModel(registry, live);
        }
      }),
      { numRuns: 300, seed: 4321 },
    );
  });

  it('routes a custom type only to the workers that declared it, never to a v1 worker', () => {
    const registry = new WorkerRegistry();
    const v1 = session('w1', 8, null);
    const own = session('w2', 1, ['resize']);
    registry.add(v1);
    registry.add(own);
    assert.equal(registry.pickFor('resize'), own);
    assert.equal(registry.pickFor('SHA256'), v1);
    registry.occupy(own, 'job-1');
    assert.equal(registry.pickFor('resize'), undefined, 'the v1 worker never gets it');
    assert.equal(registry.servingCount('resize'), 1, 'a busy worker still serves the type');
  });

  it('puts workers with the same list in one class whatever the order of the list', () => {
    const registry = new WorkerRegistry();
    registry.add(session('w1', 1, ['b', 'a']));
    registry.add(session('w2', 3, ['a', 'b']));
    assert.equal(registry.pickFor('a')?.workerId, 'w2');
    assert.equal(registry.servingCount('b'), 2);
  });
});
