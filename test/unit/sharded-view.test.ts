import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { EMPTY_INSPECTION } from '../../src/coordinator/leadership/role.js';
import type {
  CoordinatorView,
  CoreEvent,
  CoreInspection,
  Failure,
} from '../../src/coordinator/view.js';
import { healthOf } from '../../src/http/health.js';
import { mergeInspections } from '../../src/server/sharding/merge-inspection.js';
import { ShardedView } from '../../src/server/sharding/sharded-view.js';

type WorkerEntry = CoreInspection['workers'][number];

function worker(workerId: string, capacity: number, running: string[] = []): WorkerEntry {
  return {
    workerId,
    connId: 1,
    capacity,
    prefetch: 0,
    prefetching: false,
    running,
    draining: false,
    ending: false,
    listingHeld: false,
    taskTypes: null,
  };
}

/** One shard's coordinator as the view sees it. */
class FakeShard implements CoordinatorView {
  readonly events = new EventEmitter<{ event: [CoreEvent] }>();
  leading = false;
  failure: Failure | null = null;
  integrityProblems: readonly string[] | null = null;
  inspection: CoreInspection = EMPTY_INSPECTION;
  dependents: string[] = [];

  inspect(): CoreInspection {
    return this.leading ? this.inspection : EMPTY_INSPECTION;
  }
  dependentsOf(_jobId: string, limit: number): string[] {
    return this.leading ? this.dependents.slice(0, limit) : [];
  }
  request(): never {
    throw new Error('not through a shard');
  }
  status(): ReturnType<CoordinatorView['status']> {
    const role = this.leading ? 'leader' : 'standby';
    return { role, epoch: 1, leaderClient: null, leaderWorker: null };
  }
}

function viewOf(inner: FakeShard[], member = { alive: true }): ShardedView {
  return new ShardedView({
    shards: inner.length,
    inner,
    memberAlive: () => member.alive,
    request: () => Promise.resolve({ type: 'AUTH_OK' }),
  });
}

describe('mergeInspections', () => {
  it('adds counts up and shows a worker of several shards once, its slots added', () => {
    const a: CoreInspection = {
      ...EMPTY_INSPECTION,
      activeCount: 3,
      activeByState: { QUEUED: 2, RUNNING: 1 },
      queuedByTaskType: new Map([['ECHO', 2]]),
      queuedByPriority: { HIGH: 1, NORMAL: 1, LOW: 0 },
      workers: [worker('w1', 2, ['j1']), worker('w2', 1)],
      servedTaskTypes: ['ECHO'],
      freeSlots: 2,
      wakeArmedAtMs: 500,
    };
    const b: CoreInspection = {
      ...EMPTY_INSPECTION,
      activeCount: 1,
      activeByState: { QUEUED: 1 },
      queuedByTaskType: new Map([
        ['ECHO', 1],
        ['SLEEP', 0],
      ]),
      queuedByPriority: { HIGH: 0, NORMAL: 0, LOW: 1 },
      workers: [worker('w1', 2, ['j2'])],
      servedTaskTypes: ['ECHO', 'SLEEP'],
      freeSlots: 1,
      wakeArmedAtMs: 200,
    };
    const merged = mergeInspections([a, b]);
    assert.equal(merged.activeCount, 4);
    assert.deepEqual(merged.activeByState, { QUEUED: 3, RUNNING: 1 });
    assert.deepEqual(
      [...merged.queuedByTaskType],
      [
        ['ECHO', 3],
        ['SLEEP', 0],
      ],
    );
    assert.deepEqual(merged.queuedByPriority, { HIGH: 1, NORMAL: 1, LOW: 1 });
    assert.deepEqual(
      merged.workers.map((w) => [w.workerId, w.capacity, w.running]),
      [
        ['w1', 4, ['j1', 'j2']],
        ['w2', 1, []],
      ],
    );
    assert.deepEqual(merged.servedTaskTypes, ['ECHO', 'SLEEP']);
    assert.equal(merged.freeSlots, 3);
    assert.equal(merged.wakeArmedAtMs, 200);
    // The parts are left as they were.
    assert.deepEqual(a.workers[0]?.running, ['j1']);
    assert.equal(a.workers[0]?.capacity, 2);
  });

  it('of no shard is an empty inspection', () => {
    const merged = mergeInspections([]);
    assert.equal(merged.activeCount, 0);
    assert.deepEqual(merged.workers, []);
    assert.equal(merged.wakeArmedAtMs, null);
  });
});

describe('ShardedView', () => {
  it('shows the shards it leads: their inspections, dependents and events', () => {
    const shards = [new FakeShard(), new FakeShard(), new FakeShard()];
    const [s0, s1, s2] = shards as [FakeShard, FakeShard, FakeShard];
    s0.leading = true;
    s2.leading = true;
    s0.inspection = { ...EMPTY_INSPECTION, activeCount: 2 };
    s1.inspection = { ...EMPTY_INSPECTION, activeCount: 50 };
    s2.inspection = { ...EMPTY_INSPECTION, activeCount: 3 };
    s0.dependents = ['a', 'b'];
    s2.dependents = ['c', 'd'];
    const view = viewOf(shards);
    assert.equal(view.inspect().activeCount, 5);
    assert.deepEqual(view.dependentsOf('p', 3), ['a', 'b', 'c']);
    assert.deepEqual(view.sharding(), { shards: 3, led: [0, 2], member: true });

    const seen: CoreEvent[] = [];
    view.events.on('event', (e) => seen.push(e));
    const event: CoreEvent = { type: 'job.due', jobId: 'x', lateMs: 0 };
    s2.events.emit('event', event);
    assert.deepEqual(seen, [event]);
    view.close();
    s2.events.emit('event', event);
    assert.equal(seen.length, 1);
  });

  it('names the shard of a failure and of integrity problems', () => {
    const shards = [new FakeShard(), new FakeShard()];
    const [s0, s1] = shards as [FakeShard, FakeShard];
    const view = viewOf(shards);
    assert.equal(view.failure, null);
    assert.equal(view.integrityProblems, null);
    s1.failure = { code: 'STORE_FAILED', message: 'disk full' };
    s0.integrityProblems = [];
    s1.integrityProblems = ['job j: bad state'];
    assert.deepEqual(view.failure, { code: 'STORE_FAILED', message: 'shard 1: disk full' });
    assert.deepEqual(view.integrityProblems, ['shard 1: job j: bad state']);
  });
});

describe('healthOf a sharded process', () => {
  it('is ok while a member, isolated once not, failed while a shard has failed', () => {
    const shards = [new FakeShard(), new FakeShard()];
    (shards[1] as FakeShard).leading = true;
    const member = { alive: true };
    const view = viewOf(shards, member);
    assert.deepEqual(healthOf(view), {
      statusCode: 200,
      body: { status: 'ok', role: 'sharded', shards: 2, led: [1] },
    });
    member.alive = false;
    assert.deepEqual(healthOf(view), {
      statusCode: 503,
      body: { status: 'isolated', role: 'sharded', shards: 2, led: [1] },
    });
    member.alive = true;
    (shards[0] as FakeShard).failure = { code: 'INTERNAL_ERROR', message: 'bug' };
    const failed = healthOf(view);
    assert.equal(failed.statusCode, 503);
    assert.equal(failed.body.status, 'failed');
    assert.equal(failed.body.message, 'shard 0: bug');
  });

  it('of one coordinator is as before: no shards in it', () => {
    const one = new FakeShard();
    one.leading = true;
    assert.deepEqual(healthOf(one), {
      statusCode: 200,
      body: { status: 'ok', role: 'leader', epoch: 1 },
    });
  });
});
