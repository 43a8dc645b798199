/**
 * Named queues in the core: the sliding rate window, the queue table's
 * limits, the ready queue's round robin of groups and turns of queues, and
 * the scheduler obeying pause, concurrency (across workers, prefetch
 * included), rate and group limits, with settings kept across a restart.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { QueueTable, StartWindow } from '../../src/coordinator/core/queue-table.js';
import { ReadyQueue, type RunnableTypes } from '../../src/coordinator/core/ready-queue.js';
import { LevelBound } from '../../src/coordinator/core/level-bound.js';
import type { CoreJob } from '../../src/coordinator/core/job.js';
import type { SetQueue } from '../../src/protocol/messages.js';
import {
  CoreHarness,
  START_MS,
  effectsOf,
  expectReply,
  messagesOf,
} from '../helpers/core-harness.js';
import { coreJob } from '../helpers/job-record.js';

const ANY: RunnableTypes = {
  canRun: () => true,
  runnableTypes: () => [],
  runnableTypeCount: Number.POSITIVE_INFINITY,
};

function job(seq: number, queue = 'default', groupKey: string | null = null): CoreJob {
  return coreJob(seq, { taskType: 'SLEEP', queue, groupKey, createdAtMs: 0, updatedAtMs: 0 });
}

function drain(ready: ReadyQueue, nowMs = 0): CoreJob[] {
  const out: CoreJob[] = [];
  for (let j = ready.popBest(nowMs, ANY); j !== undefined; j = ready.popBest(nowMs, ANY)) {
    out.push(j);
  }
  return out;
}

describe('StartWindow', () => {
  it('counts the starts of the last interval, half-open: a start leaves after exactly one interval', () => {
    const w = new StartWindow();
    w.record(100);
    w.record(150);
    assert.equal(w.count(150, 100), 2);
    assert.equal(w.count(199, 100), 2);
    assert.equal(w.count(200, 100), 1, 'the start at 100 is out of [101, 200]');
    assert.equal(w.count(250, 100), 0);
  });

  it('names the time the next start keeps the limit when the window is full', () => {
    const w = new StartWindow();
    for (const t of [0, 10, 20]) w.record(t);
    const rate = { max: 2, intervalMillis: 100 };
    // Three starts in the window, two allowed: the two oldest must leave.
    assert.equal(w.nextOpeningMs(20, rate), 110);
    assert.equal(w.nextOpeningMs(110, rate), 110);
    assert.equal(w.count(110, 100), 1);
    assert.equal(w.nextOpeningMs(30, { max: 5, intervalMillis: 100 }), 30);
  });
});

describe('QueueTable', () => {
  const none = {
    paused: false,
    concurrency: null,
    rate: null,
    groupConcurrency: null,
    groupRate: null,
  };

  it('blocks a queue when paused, at its concurrency, or out of rate, and frees it again', () => {
    const t = new QueueTable();
    assert.equal(t.queueBlock('q', 0), null, 'a queue without settings is never held');
    t.set('q', { ...none, concurrency: 2 }, 0);
    t.noteStart('q', '', 0);
    assert.equal(t.queueBlock('q', 0), null);
    t.noteStart('q', '', 0);
    assert.equal(t.queueBlock('q', 0), 'concurrency');
    t.noteEnd('q', '');
    assert.equal(t.queueBlock('q', 0), null);
    t.set('q', { ...none, paused: true }, 0);
    assert.equal(t.queueBlock('q', 0), 'paused');
    t.set('q', { ...none, rate: { max: 1, intervalMillis: 1_000 } }, 0);
    t.noteStart('q', '', 5);
    assert.equal(t.queueBlock('q', 5), 'rate');
    assert.equal(t.nextOpeningMs(5), 1_005);
    assert.equal(t.queueBlock('q', 1_005), null);
  });

  it('counts group leases even before a group limit is set', () => {
    const t = new QueueTable();
    t.noteStart('q', 'a', 0);
    t.set('q', { ...none, groupConcurrency: 1 }, 0);
    assert.equal(t.groupBlock('q', 'a', 0), 'concurrency');
    assert.equal(t.groupOpeningMs('q', 'a', 0), null);
    assert.equal(t.groupBlock('q', 'b', 0), null);
    t.noteEnd('q', 'a');
    assert.equal(t.groupOpeningMs('q', 'a', 0), 0);
  });

  it('starts each rate window full after a restart (never a burst above the limit)', () => {
    const t = new QueueTable();
    const record = t.set('q', { ...none, rate: { max: 5, intervalMillis: 1_000 } }, 0);
    const recovered = new QueueTable();
    recovered.load(record, 10_000);
    assert.equal(recovered.queueBlock('q', 10_999), 'rate');
    assert.equal(recovered.queueBlock('q', 11_000), null);
  });
});

describe('ReadyQueue fairness', () => {
  it('serves group keys in turn, so a large backlog delays another group by one job per group', () => {
    const ready = new ReadyQueue(0);
    let seq = 1;
    for (let i = 0; i < 100; i++) ready.push(job(seq++, 'default', 'big'));
    ready.push(job(seq++, 'default', 'small'));
    ready.push(job(seq++, 'default', null));
    const order = drain(ready).map((j) => j.groupKey);
    assert.deepEqual(order.slice(0, 3), ['big', 'small', null]);
    assert.equal(order.length, 102);
  });

  it('within a group keeps submission order, and priority still comes first', () => {
    const ready = new ReadyQueue(0);
    ready.push(job(1, 'default', 'a'));
    ready.push(job(2, 'default', 'a'));
    ready.push(coreJob(3, { taskType: 'SLEEP', groupKey: 'b', priority: 'HIGH' }));
    ready.push(job(4, 'default', 'b'));
    assert.deepEqual(
      drain(ready).map((j) => j.seq),
      [3, 1, 4, 2],
    );
  });

  it('lets queues with ready work take turns at the same priority', () => {
    const ready = new ReadyQueue(0);
    for (let seq = 1; seq <= 5; seq++) ready.push(job(seq, 'bulk'));
    ready.push(job(6, 'alerts'));
    ready.push(job(7, 'alerts'));
    assert.deepEqual(
      drain(ready).map((j) => j.queue),
      ['bulk', 'alerts', 'bulk', 'alerts', 'bulk', 'bulk', 'bulk'],
    );
  });

  it('parks a group held by its limit and takes it back when asked', () => {
    const held = new Set(['a']);
    const ready = new ReadyQueue(0, {
      queueBlock: () => null,
      groupOpeningMs: (_q, group, nowMs) => (held.has(group) ? null : nowMs),
    });
    ready.push(job(1, 'default', 'a'));
    ready.push(job(2, 'default', 'b'));
    ready.push(job(3, 'default', 'a'));
    assert.deepEqual(
      drain(ready).map((j) => j.seq),
      [2],
    );
    held.delete('a');
    assert.equal(ready.popBest(0, ANY), undefined, 'a parked group stays out until unparked');
    ready.unpark('default', 'a');
    assert.deepEqual(
      drain(ready).map((j) => j.seq),
      [1, 3],
    );
  });

  it('takes a group held by its rate back once its window opens', () => {
    let opensAt = 500;
    const ready = new ReadyQueue(0, {
      queueBlock: () => null,
      groupOpeningMs: (_q, _g, nowMs) => Math.max(nowMs, opensAt),
    });
    ready.push(job(1, 'default', 'a'));
    assert.equal(ready.popBest(0, ANY), undefined);
    assert.equal(ready.nextUnparkMs(), 500);
    opensAt = 0;
    assert.equal(ready.popBest(499, ANY), undefined);
    assert.equal(ready.popBest(500, ANY)?.seq, 1);
  });

  it('skips a held queue without losing its jobs', () => {
    let paused = true;
    const ready = new ReadyQueue(0, {
      queueBlock: (q) => (paused && q === 'reports' ? 'paused' : null),
      groupOpeningMs: (_q, _g, nowMs) => nowMs,
    });
    ready.push(job(1, 'reports'));
    ready.push(job(2, 'alerts'));
    assert.deepEqual(
      drain(ready).map((j) => j.seq),
      [2],
    );
    paused = false;
    assert.equal(ready.popBest(0, ANY)?.seq, 1);
  });
});

describe('ReadyQueue with many queues and groups', () => {
  /** Pops like the scheduler: the job leaves QUEUED. */
  function take(ready: ReadyQueue, nowMs: number): CoreJob | undefined {
    const j = ready.popBest(nowMs, ANY);
    if (j !== undefined) j.state = 'RUNNING';
    return j;
  }

  it('still takes a higher-priority job from the queue served last, though it looks at few queues', () => {
    const ready = new ReadyQueue(0);
    let seq = 1;
    for (let q = 0; q < 50; q++) for (let i = 0; i < 3; i++) ready.push(job(seq++, `q${q}`));
    // Every queue served once: q49 was served last, so it is last in turn.
    const first = Array.from({ length: 50 }, () => take(ready, 0)?.queue);
    assert.equal(first[49], 'q49');
    ready.push(coreJob(seq++, { taskType: 'SLEEP', queue: 'q49', priority: 'HIGH' }));
    const next = take(ready, 0);
    assert.equal(next?.priority, 'HIGH');
    assert.equal(take(ready, 0)?.queue, 'q0', 'then the turns go on where they were');
  });

  it('still takes a job aged to a higher level from the queue served last', () => {
    const step = 1_000;
    const ready = new ReadyQueue(step);
    let seq = 1;
    const at = (createdAtMs: number, queue: string, priority: 'LOW' | 'NORMAL'): CoreJob =>
      coreJob(seq++, { taskType: 'SLEEP', queue, priority, createdAtMs, updatedAtMs: createdAtMs });
    for (let q = 0; q < 20; q++) {
      ready.push(at(5_000, `q${q}`, 'NORMAL'));
      ready.push(at(5_000, `q${q}`, 'NORMAL'));
    }
    for (let i = 0; i < 20; i++) take(ready, 5_000);
    // Waiting since 0, a LOW job of q19 is HIGH by 5,000 (two aging steps).
    ready.push(at(0, 'q19', 'LOW'));
    assert.equal(take(ready, 5_000)?.priority, 'LOW');
  });

  it('keeps nothing for a group or queue once its jobs ran', () => {
    const ready = new ReadyQueue(0);
    const table = new QueueTable();
    for (let g = 0; g < 1_000; g++) ready.push(job(g + 1, g % 2 === 0 ? 'a' : 'b', `g${g}`));
    for (let j = take(ready, 0); j !== undefined; j = take(ready, 0)) {
      table.noteStart(j.queue, j.groupKey ?? '', 0);
      table.noteEnd(j.queue, j.groupKey ?? '');
    }
    assert.equal(ready.size, 0);
    assert.deepEqual(ready.turnsOf('a'), []);
    assert.deepEqual(ready.groupBacklog('b', 10), []);
    assert.equal(table.size, 0);
  });
});

describe('LevelBound', () => {
  it('names the highest effective level queued and stays bounded while an old job waits', () => {
    const bound = new LevelBound((j) => j.createdAtMs);
    const level = (j: CoreJob, nowMs: number): number =>
      Math.min(
        2,
        (j.priority === 'LOW' ? 0 : j.priority === 'NORMAL' ? 1 : 2) +
          Math.floor((nowMs - j.createdAtMs) / 1_000),
      );
    assert.equal(bound.highest(0, level), -1);
    const old = coreJob(1, { priority: 'LOW', createdAtMs: 0 });
    bound.added(old, 0);
    assert.equal(bound.highest(0, level), 0);
    assert.equal(bound.highest(1_500, level), 1);
    // 100,000 NORMAL jobs come and go behind the old one: the heap is rebuilt, not grown.
    for (let i = 0; i < 100_000; i++) {
      const j = coreJob(i + 2, { priority: 'NORMAL', createdAtMs: 1_000 + i });
      bound.added(j, 1);
      j.state = 'RUNNING';
      bound.removed(1);
    }
    assert.ok((bound.sizes()[1] as number) <= 1_026, bound.sizes().join(','));
    assert.equal(bound.highest(1_500, level), 1);
    assert.equal(bound.highest(2_000, level), 2, 'the LOW job aged two steps');
    old.state = 'CANCELLED';
    assert.equal(bound.highest(2_000, level), -1);
  });
});

function setQueue(h: CoreHarness, msg: Omit<SetQueue, 'type'>): void {
  expectReply(h.request({ type: 'SET_QUEUE', ...msg }), 'QUEUE_INFO');
}

function assigned(h: CoreHarness): string[] {
  return messagesOf(h.log, 'TASK_ASSIGN').map((m) => m.jobId);
}

describe('scheduler with queue settings', () => {
  it('starts nothing of a paused queue, accepts its submissions, and runs them on resume', () => {
    const h = new CoreHarness();
    h.register('w1', 4);
    setQueue(h, { name: 'reports', paused: true });
    const held = h.submit({ queue: 'reports' });
    const other = h.submit({ queue: 'alerts' });
    assert.deepEqual(assigned(h), [other]);
    assert.equal(h.status(held).state, 'QUEUED');
    setQueue(h, { name: 'reports', paused: false });
    assert.deepEqual(assigned(h), [other, held]);
  });

  it('holds a queue to its concurrency across workers, prefetch included, and never revokes on a lower limit', () => {
    const h = new CoreHarness();
    h.register('w1', 2, null, { prefetch: 2 });
    h.register('w2', 2);
    setQueue(h, { name: 'q', concurrency: 3 });
    const ids = Array.from({ length: 6 }, () => h.submit({ queue: 'q' }));
    assert.equal(assigned(h).length, 3);
    setQueue(h, { name: 'q', concurrency: 1 });
    assert.equal(h.core.inspect().activeByState.RUNNING, 3, 'a lower limit revokes nothing');
    for (const id of assigned(h).slice(0, 2)) h.result(id);
    assert.equal(assigned(h).length, 3, 'one still leased: at the limit of 1');
    h.result(assigned(h)[2] as string);
    assert.equal(assigned(h).length, 4);
    assert.ok(ids.includes(assigned(h)[3] as string));
  });

  it('holds a queue to its rate in every window and starts again when the window opens', () => {
    const h = new CoreHarness();
    h.register('w1', 10);
    setQueue(h, { name: 'q', rateLimit: { max: 2, intervalMillis: 1_000 } });
    for (let i = 0; i < 5; i++) h.submit({ queue: 'q' });
    assert.equal(assigned(h).length, 2);
    h.tick(999);
    assert.equal(assigned(h).length, 2);
    h.tick(1);
    assert.equal(assigned(h).length, 4);
  });

  it('asks to be woken when a rate window opens and starts the queue then, without a sweep tick', () => {
    const h = new CoreHarness();
    h.register('w1', 10);
    setQueue(h, { name: 'q', rateLimit: { max: 2, intervalMillis: 1_000 } });
    for (let i = 0; i < 3; i++) h.submit({ queue: 'q' });
    assert.equal(assigned(h).length, 2);
    const opensAt = START_MS + 1_000;
    assert.equal(effectsOf(h.log, 'wakeAt').at(-1)?.atMs, opensAt);
    h.clock = opensAt - 1;
    h.handle({ kind: 'wake' });
    assert.equal(assigned(h).length, 2);
    h.clock = opensAt;
    h.handle({ kind: 'wake' });
    assert.equal(assigned(h).length, 3);
  });

  it('asks to be woken when a group held by its rate may start again', () => {
    const h = new CoreHarness();
    h.register('w1', 10);
    setQueue(h, { name: 'q', groupRateLimit: { max: 1, intervalMillis: 500 } });
    const a1 = h.submit({ queue: 'q', groupKey: 'a' });
    const a2 = h.submit({ queue: 'q', groupKey: 'a' });
    assert.deepEqual(assigned(h), [a1]);
    assert.equal(effectsOf(h.log, 'wakeAt').at(-1)?.atMs, START_MS + 500);
    h.clock = START_MS + 500;
    h.handle({ kind: 'wake' });
    assert.deepEqual(assigned(h), [a1, a2]);
  });

  it('puts a delayed job that falls due into its queue, under its limits; SCHEDULED jobs hold no slot', () => {
    const h = new CoreHarness();
    h.register('w1', 10);
    setQueue(h, { name: 'q', concurrency: 1 });
    const later = h.submit({ queue: 'q', groupKey: 'g', runAtMillis: START_MS + 2_000 });
    const now1 = h.submit({ queue: 'q' });
    const now2 = h.submit({ queue: 'q' });
    assert.deepEqual(assigned(h), [now1], 'the SCHEDULED job does not use the one slot');
    h.result(now1);
    assert.deepEqual(assigned(h), [now1, now2]);
    h.clock = START_MS + 2_000;
    h.handle({ kind: 'wake' });
    assert.deepEqual(assigned(h), [now1, now2], 'due, but the queue is at its concurrency');
    assert.equal(h.status(later).queue, 'q');
    h.result(now2);
    assert.deepEqual(assigned(h), [now1, now2, later]);
  });

  it('limits each group of a queue and lets the other groups run meanwhile', () => {
    const h = new CoreHarness();
    h.register('w1', 10);
    setQueue(h, { name: 'q', groupConcurrency: 1 });
    const a1 = h.submit({ queue: 'q', groupKey: 'a' });
    const a2 = h.submit({ queue: 'q', groupKey: 'a' });
    const b1 = h.submit({ queue: 'q', groupKey: 'b' });
    assert.deepEqual(assigned(h), [a1, b1]);
    h.result(a1);
    assert.deepEqual(assigned(h), [a1, b1, a2]);
  });

  it('routes a job only to a worker that takes its queue', () => {
    const h = new CoreHarness();
    h.register('mail', 1, null, { queues: ['emails'] });
    const report = h.submit({ queue: 'reports' });
    assert.deepEqual(assigned(h), []);
    const mail = h.submit({ queue: 'emails' });
    assert.deepEqual(assigned(h), [mail]);
    h.register('any', 1);
    assert.deepEqual(assigned(h), [mail, report]);
  });

  it('keeps settings and pauses across a restart', () => {
    const h = new CoreHarness();
    setQueue(h, { name: 'reports', paused: true, concurrency: 7 });
    const held = h.submit({ queue: 'reports', groupKey: 'tenant-1' });
    h.restart();
    h.register('w1', 2);
    assert.equal(h.status(held).state, 'QUEUED');
    assert.equal(h.status(held).groupKey, 'tenant-1');
    const list = expectReply(h.request({ type: 'LIST_QUEUES' }), 'QUEUE_LIST');
    const reports = list.queues.find((q) => q.name === 'reports');
    assert.equal(reports?.paused, true);
    assert.equal(reports?.concurrency, 7);
    assert.equal(reports?.counts.QUEUED, 1);
  });

  it("counts a group's queued jobs without the cancelled ones (the Queues page)", () => {
    const h = new CoreHarness();
    const ids = [h.submit({ groupKey: 'tenant-1' }), h.submit(), h.submit(), h.submit()];
    for (const jobId of ids.slice(1, 3)) h.request({ type: 'CANCEL_JOB', jobId });
    const list = expectReply(h.request({ type: 'LIST_QUEUES' }), 'QUEUE_LIST');
    assert.deepEqual(list.queues.find((q) => q.name === 'default')?.groups, [
      { groupKey: null, queued: 1, running: 0 },
      { groupKey: 'tenant-1', queued: 1, running: 0 },
    ]);
  });

  it('refuses a bad setting naming the field, and changes nothing', () => {
    const h = new CoreHarness();
    const bad: Omit<SetQueue, 'type'>[] = [
      { name: '1bad' },
      { name: 'q', concurrency: 0 },
      { name: 'q', rateLimit: { max: 0, intervalMillis: 1_000 } },
      { name: 'q', groupRateLimit: { max: 1, intervalMillis: 86_400_001 } },
      { name: 'q', clear: ['speed'] },
    ];
    const fields = ['name', 'concurrency', 'rateLimit', 'groupRateLimit', 'clear'];
    bad.forEach((msg, i) => {
      const reply = expectReply(h.request({ type: 'SET_QUEUE', ...msg }), 'ERROR');
      assert.equal(reply.code, 'INVALID_REQUEST');
      assert.match(reply.message, new RegExp(fields[i] as string));
    });
    assert.deepEqual(h.store.committedQueues(), []);
    const long = expectReply(h.submitRequest({ groupKey: 'x'.repeat(129) }), 'ERROR');
    assert.match(long.message, /groupKey/);
  });

  it('clears a limit with `clear` and keeps the ones left out', () => {
    const h = new CoreHarness();
    setQueue(h, { name: 'q', concurrency: 3, rateLimit: { max: 5, intervalMillis: 1_000 } });
    const reply = expectReply(
      h.request({ type: 'SET_QUEUE', name: 'q', clear: ['concurrency'] }),
      'QUEUE_INFO',
    );
    assert.equal(reply.queue.concurrency, null);
    assert.deepEqual(reply.queue.rateLimit, { max: 5, intervalMillis: 1_000 });
  });
});
