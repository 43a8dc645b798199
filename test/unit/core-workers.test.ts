/**
 * The core's worker side: registration rules, re-registration, protocol
 * violations, heartbeat liveness (strict timeout, suspicion at half) and
 * LIST_WORKERS.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CoreHarness,
  effectsOf,
  eventsOf,
  expectReply,
  messagesOf,
  sentTo,
} from '../helpers/core-harness.js';

function listWorkers(
  h: CoreHarness,
): { workerId: string; activeTasks: number; capacity: number }[] {
  return expectReply(h.request({ type: 'LIST_WORKERS' }), 'WORKER_LIST').workers;
}

/** What a valid registration of `w1` is answered with: the features on offer. */
const REGISTERED_W1 = {
  type: 'WORKER_REGISTERED',
  workerId: 'w1',
  features: [
    'drain',
    'taskTypes',
    'retryable',
    'assignLimits',
    'heartbeatAck',
    'prefetch',
    'reattach',
    'queues',
    'parents',
    'progress',
    'children',
    'steps',
    'slots',
    'requeue',
    'moreHeld',
    'batches',
    'rateLimits',
    'signals',
  ],
} as const;

describe('core: worker registration', () => {
  it('answers WORKER_REGISTERED when the registration is valid', () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 4);
    assert.deepEqual(sentTo(h.last, connId), [REGISTERED_W1]);
    assert.equal(effectsOf(h.last, 'close').length, 0);
    assert.deepEqual(eventsOf(h.last, 'worker.registered'), [
      {
        type: 'worker.registered',
        workerId: 'w1',
        capacity: 4,
        connId,
        taskTypes: null,
        traceContext: false,
      },
    ]);
  });

  for (const first of ['HEARTBEAT', 'TASK_RESULT', 'WORKER_DRAINING'] as const) {
    it(`sends an ERROR naming WORKER_REGISTER and closes when the first message is ${first}`, () => {
      const h = new CoreHarness();
      const connId = h.newConn();
      const msg =
        first === 'TASK_RESULT'
          ? {
              type: first,
              workerId: 'w1',
              jobId: 'j',
              attemptId: 'a',
              success: true,
              result: 'x',
              error: null,
            }
          : { type: first, workerId: 'w1' };
      const effects = h.handle({ kind: 'workerMessage', connId, msg });
      const errors = messagesOf(effects, 'ERROR', connId);
      assert.equal(errors.length, 1);
      assert.match(errors[0]?.message ?? '', /WORKER_REGISTER/);
      assert.deepEqual(
        effectsOf(effects, 'close').map((c) => c.connId),
        [connId],
      );
      assert.equal(h.core.inspect().workers.length, 0);
      // Anything else the closed connection sends is ignored.
      const later = h.handle({
        kind: 'workerMessage',
        connId,
        msg: { type: 'WORKER_REGISTER', workerId: 'w1', capacity: 1, taskTypes: null },
      });
      assert.deepEqual(later, []);
    });
  }

  const invalid: [string, string, number][] = [
    ['an empty id', '', 1],
    ['a blank id', '  \t ', 1],
    ['capacity 0', 'w1', 0],
    ['capacity 1025', 'w1', 1025],
    ['a negative capacity', 'w1', -1],
  ];
  for (const [what, workerId, capacity] of invalid) {
    it(`sends an ERROR and closes when the registration has ${what}`, () => {
      const h = new CoreHarness();
      const connId = h.register(workerId, capacity);
      assert.equal(messagesOf(h.last, 'ERROR', connId).length, 1);
      assert.equal(messagesOf(h.last, 'WORKER_REGISTERED').length, 0);
      assert.deepEqual(
        effectsOf(h.last, 'close').map((c) => c.connId),
        [connId],
      );
      assert.equal(eventsOf(h.last, 'worker.rejected').length, 1);
      assert.equal(h.core.inspect().workers.length, 0);
    });
  }

  it('accepts capacities 1 and 1024 when they are at the bounds', () => {
    const h = new CoreHarness();
    h.register('small', 1);
    h.register('large', 1024);
    assert.deepEqual(
      listWorkers(h).map((w) => [w.workerId, w.capacity]),
      [
        ['large', 1024],
        ['small', 1],
      ],
    );
    assert.equal(h.core.inspect().freeSlots, 1025);
  });

  it('sends WORKER_REGISTERED before any TASK_ASSIGN when jobs are waiting', () => {
    const h = new CoreHarness();
    const jobId = h.submit();
    const connId = h.register('w1', 2);
    assert.deepEqual(
      sentTo(h.last, connId).map((m) => m.type),
      ['WORKER_REGISTERED', 'TASK_ASSIGN'],
    );
    assert.equal(h.assignmentOf(jobId).attemptNumber, 1);
  });

  it('loses the old session and retries its job when a live worker id registers again', () => {
    const h = new CoreHarness();
    const oldConn = h.register('w1', 1);
    const jobId = h.submit();
    const first = h.assignmentOf(jobId);
    const newConn = h.register('w1', 1);
    const effects = h.last;

    assert.deepEqual(
      effectsOf(effects, 'close').map((c) => c.connId),
      [oldConn],
    );
    const lost = eventsOf(effects, 'worker.lost');
    assert.equal(lost.length, 1);
    assert.equal(lost[0]?.reason, 'worker re-registered');
    assert.equal(lost[0]?.runningJobs, 1);
    assert.deepEqual(sentTo(effects, newConn)[0], REGISTERED_W1);

    // Requeued at once and assigned to the new session in the same step.
    const job = h.status(jobId);
    assert.equal(job.state, 'RUNNING');
    assert.equal(job.error, 'worker w1 lost (worker re-registered)');

    const second = h.assignmentOf(jobId);
    assert.equal(second.connId, newConn);
    assert.equal(second.attemptNumber, 2);
    assert.notEqual(second.attemptId, first.attemptId);
    assert.deepEqual(
      h.core.inspect().workers.map((w) => [w.workerId, w.connId]),
      [['w1', newConn]],
    );
  });

  it('loses the worker when it sends WORKER_REGISTER again on its own connection', () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 1);
    const effects = h.handle({
      kind: 'workerMessage',
      connId,
      msg: { type: 'WORKER_REGISTER', workerId: 'w1', capacity: 1, taskTypes: null },
    });
    assert.deepEqual(
      effectsOf(effects, 'close').map((c) => c.connId),
      [connId],
    );
    assert.match(eventsOf(effects, 'worker.lost')[0]?.reason ?? '', /protocol violation/);
    assert.equal(h.core.inspect().workers.length, 0);
  });

  it('retries the running jobs of a worker when its connection breaks the protocol', () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 2);
    const a = h.submit();
    const b = h.submit();
    const effects = h.handle({ kind: 'workerViolation', connId, reason: 'bad frame' });
    assert.equal(eventsOf(effects, 'worker.lost')[0]?.runningJobs, 2);
    for (const jobId of [a, b]) {
      const job = h.status(jobId);
      assert.equal(job.state, 'QUEUED');
      assert.equal(job.error, 'worker w1 lost (protocol violation: bad frame)');
    }
  });

  it('refuses an unregistered connection when it breaks the protocol', () => {
    const h = new CoreHarness();
    const connId = h.newConn();
    const effects = h.handle({ kind: 'workerViolation', connId, reason: 'garbage' });
    assert.match(messagesOf(effects, 'ERROR', connId)[0]?.message ?? '', /WORKER_REGISTER/);
    assert.equal(effectsOf(effects, 'close').length, 1);
  });

  it('assigns nothing new to a worker when it announced it is draining', () => {
    const h = new CoreHarness();
    const connId = h.register('w1', 2);
    const running = h.submit();
    h.handle({ kind: 'workerMessage', connId, msg: { type: 'WORKER_DRAINING', workerId: 'w1' } });
    const waiting = h.submit();
    assert.equal(h.status(waiting).state, 'QUEUED');
    h.result(running);
    assert.equal(h.status(running).state, 'COMPLETED');
    assert.equal(h.status(waiting).state, 'QUEUED');
  });
});

describe('core: heartbeats', () => {
  const config = { heartbeatTimeoutMs: 1_000 };

  it('keeps a worker silent for exactly the timeout and loses it 1 ms later', () => {
    const h = new CoreHarness({ config });
    const connId = h.register('w1', 1);
    h.tick(1_000);
    assert.equal(eventsOf(h.last, 'worker.lost').length, 0);
    assert.equal(listWorkers(h).length, 1);
    h.tick(1);
    const lost = eventsOf(h.last, 'worker.lost');
    assert.equal(lost.length, 1);
    assert.match(lost[0]?.reason ?? '', /^heartbeat timeout/);
    assert.deepEqual(
      effectsOf(h.last, 'close').map((c) => c.connId),
      [connId],
    );
    assert.equal(listWorkers(h).length, 0);
  });

  it('restarts the silence count when a heartbeat arrives', () => {
    const h = new CoreHarness({ config });
    h.register('w1', 1);
    h.tick(900);
    h.heartbeat('w1');
    h.tick(1_000);
    assert.equal(listWorkers(h).length, 1);
    assert.equal(
      expectReply(h.request({ type: 'LIST_WORKERS' }), 'WORKER_LIST').workers[0]
        ?.lastHeartbeatMillis,
      h.clock - 1_000,
    );
    h.tick(1);
    assert.equal(listWorkers(h).length, 0);
  });

  it('retries the running job when its worker times out', () => {
    const h = new CoreHarness({ config });
    h.register('w1', 1);
    const jobId = h.submit();
    h.tick(1_001);
    const job = h.status(jobId);
    assert.equal(job.state, 'QUEUED');
    assert.equal(job.error, 'worker w1 lost (heartbeat timeout: none for 1001 ms)');
  });

  it('emits worker.suspected once when half the timeout has passed', () => {
    const h = new CoreHarness({ config });
    h.register('w1', 1);
    h.tick(499);
    assert.equal(h.events('worker.suspected').length, 0);
    h.tick(2);
    assert.deepEqual(h.events('worker.suspected'), [
      { type: 'worker.suspected', workerId: 'w1', silentMs: 501 },
    ]);
    h.tick(100);
    assert.equal(h.events('worker.suspected').length, 1, 'once per silence');
    h.heartbeat('w1');
    h.tick(501);
    assert.equal(h.events('worker.suspected').length, 2, 'a new silence is reported again');
    assert.equal(h.events('worker.lost').length, 0);
  });
});

describe('core: LIST_WORKERS', () => {
  it('lists live workers sorted by id with their active tasks when jobs run', () => {
    const h = new CoreHarness();
    h.register('w-c', 1);
    h.register('w-a', 3);
    h.register('w-b', 2);
    // Most free slots first, ties by id: a(3), a(2 vs b 2), b(2), a(1 each).
    for (let i = 0; i < 4; i++) h.submit();
    const workers = listWorkers(h);
    assert.deepEqual(
      workers.map((w) => [w.workerId, w.capacity, w.activeTasks]),
      [
        ['w-a', 3, 3],
        ['w-b', 2, 1],
        ['w-c', 1, 0],
      ],
    );
    h.closeWorker('w-b');
    assert.deepEqual(
      listWorkers(h).map((w) => w.workerId),
      ['w-a', 'w-c'],
    );
  });
});
