/**
 * The core's scheduling: submission order, priorities and aging, worker choice
 * (most free slots, ties by id), capacity, task types, and every moment the
 * core schedules (submit, registration, result, tick). A property test drives
 * random inputs and checks the scheduling invariants after each one.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { CoreHarness, messagesOf, sentTo } from '../helpers/core-harness.js';

/** Job ids in the order they were assigned, from the whole log. */
function assignedOrder(h: CoreHarness): string[] {
  return messagesOf(h.log, 'TASK_ASSIGN').map((m) => m.jobId);
}

describe('core: scheduling order', () => {
  it('assigns jobs in submission order when they share a priority', () => {
    const h = new CoreHarness();
    const ids = [h.submit(), h.submit(), h.submit()];
    h.register('w1', 1);
    for (const jobId of ids) h.result(jobId);
    assert.deepEqual(assignedOrder(h), ids);
  });

  it('assigns HIGH before NORMAL before LOW when all wait', () => {
    const h = new CoreHarness();
    const low = h.submit({ priority: 'LOW' });
    const normal = h.submit({ priority: null });
    const high = h.submit({ priority: 'HIGH' });
    const normal2 = h.submit({ priority: 'NORMAL' });
    h.register('w1', 1);
    for (let i = 0; i < 4; i++) h.result(assignedOrder(h)[i] as string);
    assert.deepEqual(assignedOrder(h), [high, normal, normal2, low]);
  });

  it('assigns an aged LOW job before a newer HIGH one when two aging steps passed', () => {
    const h = new CoreHarness({ config: { agingStepMs: 1_000 } });
    const low = h.submit({ priority: 'LOW' });
    h.clock += 2_000;
    const high = h.submit({ priority: 'HIGH' });
    h.register('w1', 1);
    h.result(low);
    assert.deepEqual(assignedOrder(h), [low, high]);
  });

  it('keeps priority and submission order when jobs come back from a retry', () => {
    const h = new CoreHarness({ config: { retryBaseDelayMs: 0 } });
    h.register('w1', 1);
    const first = h.submit({ priority: 'LOW' });
    const high = h.submit({ priority: 'HIGH' });
    const low2 = h.submit({ priority: 'LOW' });
    // first runs; it fails and comes back behind the HIGH job but before low2.
    h.result(first, { success: false });
    h.tick();
    assert.deepEqual(assignedOrder(h), [first, high]);
    h.result(high);
    assert.deepEqual(assignedOrder(h), [first, high, first]);
    h.result(first);
    assert.deepEqual(assignedOrder(h), [first, high, first, low2]);
  });
});

describe('core: worker choice', () => {
  it('gives each job to the worker with the most free slots, ties by worker id', () => {
    const h = new CoreHarness();
    const b = h.register('w-b', 4);
    const a = h.register('w-a', 2);
    const ids = Array.from({ length: 7 }, () => h.submit());
    const target = (jobId: string): string =>
      h.assignmentsOf(jobId)[0]?.connId === a
        ? 'w-a'
        : h.assignmentsOf(jobId)[0]?.connId === b
          ? 'w-b'
          : 'none';
    // free (a,b): (2,4) b, (2,3) b, (2,2) a, (1,2) b, (1,1) a, (0,1) b, (0,0) none
    assert.deepEqual(ids.map(target), ['w-b', 'w-b', 'w-a', 'w-b', 'w-a', 'w-b', 'none']);
    assert.equal(h.status(ids[6] as string).state, 'QUEUED');
  });

  it('prefers the lower worker id when free slots tie', () => {
    const h = new CoreHarness();
    h.register('zeta', 1);
    const alpha = h.register('alpha', 1);
    const jobId = h.submit();
    assert.equal(h.assignmentOf(jobId).connId, alpha);
  });

  it('never exceeds a worker capacity when more jobs than slots exist', () => {
    const h = new CoreHarness();
    h.register('w1', 3);
    for (let i = 0; i < 10; i++) h.submit();
    assert.deepEqual(
      h.core.inspect().workers.map((w) => w.running.length),
      [3],
    );
    assert.equal(h.core.inspect().freeSlots, 0);
    assert.equal(messagesOf(h.log, 'TASK_ASSIGN').length, 3);
  });

  it('assigns a job only to workers that declared its task type', () => {
    const h = new CoreHarness();
    const shaConn = h.register('w-sha', 2, ['SHA256']);
    const sleep = h.submit();
    assert.equal(h.status(sleep).state, 'QUEUED');
    const sha = h.submit({ taskType: 'SHA256', payload: { text: 'abc' } });
    assert.equal(h.assignmentOf(sha).connId, shaConn);
    const anyConn = h.register('w-any', 1, null);
    assert.equal(h.assignmentOf(sleep).connId, anyConn);
  });

  it('does not let a job for a busy task type block others when a worker is free', () => {
    const h = new CoreHarness();
    h.register('w-sha', 1, ['SHA256']);
    const sleep = h.submit({ priority: 'HIGH' });
    const sha = h.submit({ taskType: 'SHA256', payload: { text: 'x' }, priority: 'LOW' });
    assert.equal(h.status(sleep).state, 'QUEUED');
    assert.equal(h.status(sha).state, 'RUNNING');
  });
});

describe('core: when scheduling happens', () => {
  it('assigns on submit when a worker is free', () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 1);
    const jobId = h.submit();
    const assign = messagesOf(h.last, 'TASK_ASSIGN', connId);
    assert.equal(assign.length, 1);
    assert.deepEqual(assign[0], {
      type: 'TASK_ASSIGN',
      jobId,
      attemptId: assign[0]?.attemptId,
      attemptNumber: 1,
      taskType: 'SLEEP',
      payload: { durationMillis: 10 },
      timeoutMillis: h.config.taskTimeoutMs,
      maxAttempts: 3,
    });
    const job = h.status(jobId);
    assert.equal(job.state, 'RUNNING');
    assert.equal(job.workerId, 'w1');
    assert.equal(job.attempts, 1);
  });

  it('assigns on registration when jobs are queued', () => {
    const h = new CoreHarness();
    const jobId = h.submit();
    const connId = h.register('w1', 1);
    assert.equal(messagesOf(h.last, 'TASK_ASSIGN', connId)[0]?.jobId, jobId);
  });

  it('assigns the next job on a result when the slot frees', () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 1);
    const a = h.submit();
    const b = h.submit();
    assert.equal(h.status(b).state, 'QUEUED');
    const effects = h.result(a);
    assert.equal(messagesOf(effects, 'TASK_ASSIGN', connId)[0]?.jobId, b);
  });

  it('assigns on a tick when a retry becomes due', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    h.result(jobId, { success: false });
    assert.equal(messagesOf(h.tick(99), 'TASK_ASSIGN').length, 0);
    const effects = h.tick(1);
    assert.equal(messagesOf(effects, 'TASK_ASSIGN')[0]?.jobId, jobId);
    assert.equal(messagesOf(effects, 'TASK_ASSIGN')[0]?.attemptNumber, 2);
  });

  it('sends nothing to a worker when no job is waiting', () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 1);
    assert.deepEqual(sentTo(h.tick(10), connId), []);
  });
});

describe('core: scheduling invariants', () => {
  it('keeps capacity, lease and work-conservation invariants when inputs are random', () => {
    const workerIds = ['w1', 'w2', 'w3'];
    const input = fc.oneof(
      fc.record({
        kind: fc.constant('submit' as const),
        priority: fc.constantFrom('HIGH', 'NORMAL', 'LOW', null),
      }),
      fc.record({
        kind: fc.constant('register' as const),
        worker: fc.constantFrom(...workerIds),
        capacity: fc.integer({ min: 1, max: 3 }),
      }),
      fc.record({ kind: fc.constant('close' as const), worker: fc.constantFrom(...workerIds) }),
      fc.record({
        kind: fc.constant('result' as const),
        pick: fc.nat(),
        success: fc.boolean(),
      }),
      fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }),
      fc.record({
        kind: fc.constant('tick' as const),
        advanceMs: fc.integer({ min: 0, max: 300 }),
      }),
    );
    fc.assert(
      fc.property(fc.array(input, { maxLength: 60 }), (inputs) => {
        const h = new CoreHarness({
          config: { heartbeatTimeoutMs: 1_000_000, taskTimeoutMs: 250, maxActiveJobs: 20 },
        });
        const registered = new Set<string>();
        const submitted: string[] = [];
        for (const step of inputs) {
          applyStep(h, step, registered, submitted);
          checkInvariants(h);
        }
      }),
      { numRuns: 150, seed: 99 },
    );
  });
});

type Step =
  | { kind: 'submit'; priority: 'HIGH' | 'NORMAL' | 'LOW' | null }
  | { kind: 'register'; worker: string; capacity: number }
  | { kind: 'close'; worker: string }
  | { kind: 'result'; pick: number; success: boolean }
  | { kind: 'cancel'; pick: number }
  | { kind: 'tick'; advanceMs: number };

function applyStep(h: CoreHarness, step: Step, registered: Set<string>, submitted: string[]): void {
  switch (step.kind) {
    case 'submit': {
      const reply = h.submitRequest({ priority: step.priority });
      if (reply?.type === 'JOB_SUBMITTED') submitted.push(reply.jobId);
      return;
    }
    case 'register':
      h.register(step.worker, step.capacity);
      registered.add(step.worker);
      return;
    case 'close':
      if (registered.delete(step.worker)) h.closeWorker(step.worker);
      return;
    case 'result': {
      const running = h.core.activeJobs().filter((j) => j.state === 'RUNNING');
      const job = running[step.pick % Math.max(1, running.length)];
      if (job !== undefined) h.result(job.jobId, { success: step.success });
      return;
    }
    case 'cancel': {
      const jobId = submitted[step.pick % Math.max(1, submitted.length)];
      if (jobId !== undefined) h.request({ type: 'CANCEL_JOB', jobId });
      return;
    }
    case 'tick':
      h.tick(step.advanceMs);
      return;
  }
}

function checkInvariants(h: CoreHarness): void {
  const view = h.core.inspect();
  const byWorker = new Map(view.workers.map((w) => [w.workerId, w]));
  const activeJobs = h.core.activeJobs();
  let free = 0;
  for (const w of view.workers) {
    assert.ok(w.running.length <= w.capacity, `${w.workerId} over capacity`);
    free += w.capacity - w.running.length;
  }
  assert.equal(view.freeSlots, free, 'free slot count');
  assert.equal(view.activeCount, activeJobs.length, 'activeCount');
  for (const job of activeJobs) {
    if (job.state === 'RUNNING') {
      assert.ok(job.attemptId !== null && job.deadlineAtMs !== null);
      assert.ok(
        byWorker.get(job.workerId as string)?.running.includes(job.jobId),
        'lease on a worker',
      );
    } else {
      assert.equal(job.workerId, null);
      assert.equal(job.attemptId, null);
    }
    assert.ok(job.attempts <= job.maxAttempts);
  }
  const runningCount = activeJobs.filter((j) => j.state === 'RUNNING').length;
  assert.equal(
    view.workers.reduce((n, w) => n + w.running.length, 0),
    runningCount,
    'every slot taken is a running job',
  );
  const queued = activeJobs.some((j) => j.state === 'QUEUED');
  assert.ok(!(queued && free > 0), 'a job waits while a worker is free');
}
