/**
 * The deterministic simulation as a test: the odd seeds of a fixed batch
 * (the even ones are sim-even-seeds.test.ts) and the regression seeds, each
 * checked against every invariant after every step;
 * and small checks that the generator and the checker themselves work (a
 * checker that can never fail proves nothing).
 *
 * More seeds: `node dist/test/sim/run.js --seeds 2000`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CoreConfig, CoreEvent, Effect } from '../../src/coordinator/core/types.js';
import type { ClientReply, SubmitJob, TaskResult } from '../../src/protocol/messages.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { MAX_FREE_REQUEUES } from '../../src/protocol/limits.js';
import { Random } from './random.js';
import { REGRESSION_SEEDS } from './regression-seeds.js';
import { Simulation } from './simulator.js';
import type { ScheduleRecord } from '../../src/store/store.js';
import { jobRecord } from '../helpers/job-record.js';
import { ScheduleChecks } from './schedule-checks.js';
import { SignalChecks } from './signal-checks.js';
import { JobTracker } from './tracker.js';
import { Judge, SimulationViolation } from './violation.js';
import { SEED_COUNT, runSeed, runSeeds } from './seed-run.js';
import type { HandledInput } from './world.js';

describe('coordinator core simulation', () => {
  it(`keeps every invariant after every step on the odd seeds of 1..${SEED_COUNT}`, () => {
    runSeeds(1);
  });

  for (const regression of REGRESSION_SEEDS) {
    it(`keeps every invariant on regression seed ${regression.seed} (${regression.note})`, () => {
      runSeed(regression.seed, regression.steps);
    });
  }

  it('replays a seed identically when run twice', () => {
    const first = new Simulation(12345, { steps: 150 }).run();
    const second = new Simulation(12345, { steps: 150 }).run();
    assert.deepEqual(second, first);
    assert.ok(first.jobsCreated > 0 && first.faultTotal > 0);
  });
});

describe('Random', () => {
  it('yields the same sequence for the same seed and stays in range', () => {
    const a = new Random(42);
    const b = new Random(42);
    for (let i = 0; i < 1_000; i++) {
      const n = a.int(-3, 7);
      assert.equal(b.int(-3, 7), n);
      assert.ok(n >= -3 && n <= 7 && Number.isInteger(n));
    }
    assert.notEqual(new Random(1).nextUint32(), new Random(2).nextUint32());
  });

  it('covers both ends of an int range', () => {
    const rng = new Random(7);
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) seen.add(rng.int(0, 3));
    assert.deepEqual([...seen].sort(), [0, 1, 2, 3]);
  });
});

const CONFIG: CoreConfig = {
  heartbeatTimeoutMs: 1_000,
  taskTimeoutMs: 1_000,
  defaultMaxAttempts: 3,
  retryBaseDelayMs: 10,
  retryMaxDelayMs: 100,
  maxActiveJobs: 10,
  maxScheduledJobs: 1_000_000,
  agingStepMs: 0,
  sweepIntervalMs: 100,
  retainTerminalMs: null,
  maxWaitsPerConnection: 10_000,
  maxWaits: 100_000,
  maxWaitsPerAddress: 100_000,
  maxSubscriptions: 1_024,
  maxSubscriptionsPerAddress: 1_024,
  subscriberStallMs: 10_000,
};

function trackerForTest(): JobTracker {
  return new JobTracker({
    judge: new Judge(99),
    config: CONFIG,
    store: new MemoryStore(),
    invalid: new WeakSet(),
    linkWorker: () => 'w1',
  });
}

function handled(input: HandledInput['input'], effects: Effect[], active = [0, 0]): HandledInput {
  return {
    input,
    effects,
    activeBefore: active[0] as number,
    activeAfter: active[1] as number,
    scheduledBefore: 0,
    scheduledAfter: 0,
    nowMs: 0,
    linkWorkerId: 'w1',
    linkClosedByCore: false,
    currentAtSend: false,
  };
}

const ev = (event: CoreEvent): Effect => ({ kind: 'event', event });

function submitted(
  tracker: JobTracker,
  jobId: string,
  key: string | null,
  extra: Partial<SubmitJob> = {},
  reply: Partial<Extract<ClientReply, { type: 'JOB_SUBMITTED' }>> = {},
): void {
  tracker.onHandled(
    handled(
      {
        kind: 'clientRequest',
        connId: 1,
        requestId: 0,
        msg: {
          type: 'SUBMIT_JOB',
          taskType: 'SLEEP',
          payload: { durationMillis: 1 },
          maxAttempts: null,
          idempotencyKey: key,
          priority: null,
          ...extra,
        },
      },
      [
        ev({
          type: 'job.submitted',
          jobId,
          state: 'QUEUED',
          taskType: 'SLEEP',
          priority: 'NORMAL',
          maxAttempts: 3,
          idempotencyKey: key,
          queue: 'default',
          scheduleName: null,
          traceContext: null,
        }),
        {
          kind: 'reply',
          connId: 1,
          requestId: 0,
          msg: { type: 'JOB_SUBMITTED', jobId, job: null, ...reply },
        },
      ],
      [0, 1],
    ),
  );
}

function assigned(jobId: string, attemptId: string, attempt: number): Effect[] {
  return [
    {
      kind: 'send',
      connId: 5,
      msg: {
        type: 'TASK_ASSIGN',
        jobId,
        attemptId,
        attemptNumber: attempt,
        taskType: 'SLEEP',
        payload: {},
      },
    },
    ev({
      type: 'job.assigned',
      jobId,
      workerId: 'w1',
      attempt,
      maxAttempts: 3,
      attemptId,
      queuedMs: 0,
    }),
  ];
}

describe('JobTracker (the checker itself)', () => {
  it('reports a second lease while one is current', () => {
    const tracker = trackerForTest();
    submitted(tracker, 'j1', null);
    tracker.onHandled(handled({ kind: 'tick' }, assigned('j1', 'a1', 1), [1, 1]));
    assert.throws(
      () => tracker.onHandled(handled({ kind: 'tick' }, assigned('j1', 'a2', 2), [1, 1])),
      (err: unknown) => err instanceof SimulationViolation && /while lease a1/.test(err.message),
    );
  });

  it('reports a second live job made by an active dedup key', () => {
    const tracker = trackerForTest();
    submitted(tracker, 'j1', null, { dedupKey: 'k' }, { deduplicated: false });
    submitted(tracker, 'j2', null, { dedupKey: 'k', queue: 'other' }, { deduplicated: false });
    assert.throws(
      () => submitted(tracker, 'j3', null, { dedupKey: 'k' }, { deduplicated: false }),
      /active submission with key default\/k created j3 at 0 while j1 live/,
    );
  });

  it('reports an attempt started at its expiry', () => {
    const tracker = trackerForTest();
    submitted(tracker, 'j1', null, { expiresAtMillis: 10 });
    assert.throws(
      () =>
        tracker.onHandled({
          ...handled({ kind: 'tick' }, assigned('j1', 'a1', 1), [1, 1]),
          nowMs: 10,
        }),
      /started at 10, at or after its expiry 10/,
    );
  });

  it('reports a start in a group a handler holds back, but not a rate limited attempt as counted', () => {
    const tracker = trackerForTest();
    submitted(tracker, 'j1', null, { groupKey: 'g' });
    tracker.onHandled(handled({ kind: 'tick' }, assigned('j1', 'a1', 1), [1, 1]));
    const result: TaskResult = {
      type: 'TASK_RESULT',
      workerId: 'w1',
      jobId: 'j1',
      attemptId: 'a1',
      success: false,
      result: null,
      error: 'RATE_LIMITED: 429',
      rateLimited: { retryAfterMillis: 1_000, scope: 'group' },
    };
    tracker.onHandled({
      ...handled({ kind: 'workerMessage', connId: 5, msg: result }, [
        ev({
          type: 'job.rateLimited',
          jobId: 'j1',
          workerId: 'w1',
          attempt: 1,
          scope: 'group',
          untilMs: 1_000,
          inARow: 1,
        }),
      ]),
      currentAtSend: true,
    });
    assert.equal(tracker.uncounted('j1'), 1);
    assert.equal(tracker.heldUntil('default', 'g'), 1_000);
    submitted(tracker, 'j2', null, { groupKey: 'g' });
    assert.throws(
      () => tracker.onHandled(handled({ kind: 'tick' }, assigned('j2', 'a2', 1), [2, 2])),
      /started at 0, held back until 1000 by a handler's rate limit/,
    );
  });

  it('reports one idempotency key given to two jobs', () => {
    const tracker = trackerForTest();
    submitted(tracker, 'j1', 'k');
    assert.throws(() => submitted(tracker, 'j2', 'k'), /maps to two jobs: j1 and j2/);
  });

  it('reports a completion that no current lease backs', () => {
    const tracker = trackerForTest();
    submitted(tracker, 'j1', null);
    const completed = ev({
      type: 'job.completed',
      jobId: 'j1',
      workerId: 'w1',
      attempt: 0,
      runMs: 0,
      endToEndMs: 0,
    });
    assert.throws(
      () => tracker.onHandled(handled({ kind: 'tick' }, [completed], [1, 0])),
      /without holding its current lease/,
    );
  });

  it('reports a free requeue past the bound, and a requeue the worker never sent', () => {
    const tracker = trackerForTest();
    submitted(tracker, 'j1', null);
    const requeueOf = (attempt: number) => ({
      kind: 'workerMessage' as const,
      connId: 5,
      msg: {
        type: 'TASK_RESULT' as const,
        workerId: 'w1',
        jobId: 'j1',
        attemptId: `a${attempt}`,
        success: false,
        result: null,
        error: 'cut off',
        requeue: true,
      },
    });
    const requeued = (attempt: number): Effect =>
      ev({
        type: 'job.attemptRequeued',
        jobId: 'j1',
        workerId: 'w1',
        attemptId: `a${attempt}`,
        attempt,
        requeues: attempt,
        error: 'cut off',
      });
    for (let attempt = 1; attempt <= MAX_FREE_REQUEUES; attempt++) {
      tracker.onHandled(handled({ kind: 'tick' }, assigned('j1', `a${attempt}`, attempt), [1, 1]));
      tracker.onHandled({
        ...handled(requeueOf(attempt), [requeued(attempt)], [1, 1]),
        currentAtSend: true,
      });
    }
    assert.equal(tracker.requeues.get('j1'), MAX_FREE_REQUEUES);
    tracker.onHandled(handled({ kind: 'tick' }, assigned('j1', 'a11', 11), [1, 1]));
    assert.throws(
      () =>
        tracker.onHandled({
          ...handled(requeueOf(11), [requeued(11)], [1, 1]),
          currentAtSend: true,
        }),
      /requeued for free as number 11 after 10 free requeues/,
    );
    const other = trackerForTest();
    submitted(other, 'j1', null);
    other.onHandled(handled({ kind: 'tick' }, assigned('j1', 'a1', 1), [1, 1]));
    assert.throws(
      () => other.onHandled(handled({ kind: 'tick' }, [requeued(1)], [1, 1])),
      /requeued on a tick input/,
    );
  });
});

describe('ScheduleChecks (the checker itself)', () => {
  const T0 = 1_700_000_000_000;
  const every: ScheduleRecord = {
    name: 's1',
    taskType: 'SLEEP',
    cron: null,
    everyMs: 1_000,
    timezone: null,
    payloadJson: '{"durationMillis":1}',
    maxAttempts: null,
    priority: null,
    timeoutMs: null,
    overlap: 'allow',
    catchUp: 'latest',
    paused: false,
    nextRunAtMs: T0 + 1_000,
    lastRunAtMs: null,
    lastJobId: null,
    createdAtMs: T0,
    updatedAtMs: T0,
    queue: 'default',
  };

  /** Checks whose model holds `schedule` as committed, after a core started at `startMs`. */
  function checksWith(schedule: ScheduleRecord, startMs = T0): [ScheduleChecks, MemoryStore] {
    const store = new MemoryStore();
    store.commitNow({ batchId: 1, jobs: [], attempts: [], schedules: [schedule] });
    const checks = new ScheduleChecks({
      judge: new Judge(99),
      store,
      maxActiveJobs: 10,
      terminal: () => undefined,
    });
    checks.onCrash();
    checks.onRecovery(startMs);
    return [checks, store];
  }

  function fire(checks: ScheduleChecks, jobId: string, tickMs: number, nowMs: number) {
    const effects: Effect[] = [
      ev({
        type: 'job.submitted',
        jobId,
        state: 'QUEUED',
        taskType: 'SLEEP',
        priority: 'NORMAL',
        maxAttempts: 3,
        idempotencyKey: null,
        queue: 'default',
        scheduleName: 's1',
        traceContext: null,
      }),
      ev({ type: 'schedule.fired', name: 's1', jobId, tickMs, lagMs: nowMs - tickMs }),
    ];
    return checks.onTimedInput({ ...handled({ kind: 'wake' }, effects, [0, 1]), nowMs });
  }

  /** Commits jobs of the tick at `tickMs`, with the schedule as `advanced` says. */
  function commitJobs(
    store: MemoryStore,
    jobIds: string[],
    tickMs: number,
    advanced: ScheduleRecord,
  ): void {
    const jobs = jobIds.map((jobId, i) => ({
      job: jobRecord(i + 1, { jobId, scheduleName: 's1', runAtMs: tickMs }),
      isNew: true,
    }));
    store.commitNow({ batchId: 2, jobs, attempts: [], schedules: [advanced] });
  }

  it('reports a second committed job for one tick', () => {
    const [checks, store] = checksWith(every);
    const tick = T0 + 1_000;
    const [fact] = fire(checks, 'j1', tick, tick);
    assert.ok(fact !== undefined);
    commitJobs(store, ['j1', 'j2'], tick, { ...every, nextRunAtMs: tick + 1_000 });
    checks.onCommitted(new Map([['j1', fact]]));
    // As a core that lost the advance and fired the tick again would commit it.
    assert.throws(
      () => checks.onCommitted(new Map([['j2', fact]])),
      /already made committed job j1/,
    );
  });

  it("reports a tick's job committed without the schedule's advance", () => {
    const [checks, store] = checksWith(every);
    const tick = T0 + 1_000;
    const [fact] = fire(checks, 'j1', tick, tick);
    assert.ok(fact !== undefined);
    commitJobs(store, ['j1'], tick, every);
    assert.throws(
      () => checks.onCommitted(new Map([['j1', fact]])),
      /the schedule's next tick is still/,
    );
  });

  it('reports a tick of a paused schedule, one off its cadence, and a second catch-up job', () => {
    const [paused] = checksWith({ ...every, paused: true, nextRunAtMs: null });
    assert.throws(() => fire(paused, 'j1', T0 + 1_000, T0 + 1_000), /the schedule is paused/);
    const [offBeat] = checksWith(every);
    assert.throws(() => fire(offBeat, 'j1', T0 + 1_500, T0 + 1_500), /not on its cadence/);
    // Ticks due before the core started: one catch-up job, not two.
    const [late] = checksWith(every, T0 + 20_000);
    fire(late, 'j1', T0 + 9_000, T0 + 9_500);
    assert.throws(() => fire(late, 'j2', T0 + 10_000, T0 + 10_500), /catch-up job #2/);
  });

  it('reports a tick that fired while the last job of an overlap-skip schedule runs', () => {
    const [checks] = checksWith({ ...every, overlap: 'skip', lastJobId: 'j0' });
    assert.throws(() => fire(checks, 'j1', T0 + 1_000, T0 + 1_000), /overlapping true/);
  });
});

describe('the signal checker', () => {
  const suspend = (jobId: string, wait: 'signal' | 'event'): HandledInput['input'] => ({
    kind: 'workerMessage',
    connId: 1,
    msg: {
      type: 'TASK_SUSPEND',
      workerId: 'w1',
      jobId,
      attemptId: `${jobId}-a`,
      ...(wait === 'signal' ? { waitForSignal: { name: 's0' } } : { waitForEvent: { name: 'e0' } }),
    },
  });
  const suspended = (jobId: string): Effect =>
    ev({
      type: 'job.suspended',
      jobId,
      workerId: 'w1',
      attempt: 1,
      attemptId: `${jobId}-a`,
      untilMs: null,
      waitingFor: null,
    });
  const signal = (jobId: string, n: number): HandledInput['input'] => ({
    kind: 'clientRequest',
    connId: 2,
    requestId: n,
    msg: { type: 'SIGNAL_JOB', jobId, name: 's0', payload: { sig: n } },
  });
  const signalled = (jobId: string, n: number, resumed: boolean, signalsHeld: number): Effect[] => [
    ev({ type: 'job.signalled', jobId, name: 's0', resumed }),
    ...(resumed ? [ev({ type: 'job.resumed', jobId, by: 'dtp.waitForSignal' })] : []),
    {
      kind: 'reply',
      connId: 2,
      requestId: n,
      msg: { type: 'JOB_SIGNALLED', jobId, name: 's0', resumed, signalsHeld },
    },
  ];
  const checks = (): SignalChecks =>
    new SignalChecks(new Judge(99), new MemoryStore(), () => false);

  it('accepts a signal held and then taken by the wait that begins', () => {
    const c = checks();
    c.onHandled(handled(signal('j1', 1), signalled('j1', 1, false, 1)));
    c.onHandled(
      handled(suspend('j1', 'signal'), [
        suspended('j1'),
        ev({ type: 'job.resumed', jobId: 'j1', by: 'dtp.waitForSignal' }),
      ]),
    );
    assert.deepEqual(c.waiting(), []);
  });

  it('catches a held signal a beginning wait does not take', () => {
    const c = checks();
    c.onHandled(handled(signal('j1', 1), signalled('j1', 1, false, 1)));
    assert.throws(
      () => c.onHandled(handled(suspend('j1', 'signal'), [suspended('j1')])),
      SimulationViolation,
    );
  });

  it('catches a signal held by a job that waits for it', () => {
    const c = checks();
    c.onHandled(handled(suspend('j1', 'signal'), [suspended('j1')]));
    assert.throws(
      () => c.onHandled(handled(signal('j1', 1), signalled('j1', 1, false, 1))),
      SimulationViolation,
    );
  });

  it('catches an event that does not wake a job waiting for it', () => {
    const c = checks();
    c.onHandled(handled(suspend('j1', 'event'), [suspended('j1')]));
    const publish: HandledInput['input'] = {
      kind: 'clientRequest',
      connId: 2,
      requestId: 7,
      msg: { type: 'PUBLISH_EVENT', name: 'e0', payload: null },
    };
    assert.throws(
      () =>
        c.onHandled(
          handled(publish, [
            ev({ type: 'event.published', eventId: 'x', name: 'e0', jobs: 0, resumed: 0 }),
            {
              kind: 'reply',
              connId: 2,
              requestId: 7,
              msg: { type: 'EVENT_PUBLISHED', eventId: 'x', jobIds: [], resumed: 0 },
            },
          ]),
        ),
      SimulationViolation,
    );
  });

  it('catches a wait resumed by no signal, event or timeout', () => {
    const c = checks();
    c.onHandled(handled(suspend('j1', 'signal'), [suspended('j1')]));
    assert.throws(
      () =>
        c.onHandled(
          handled({ kind: 'tick' }, [
            ev({ type: 'job.resumed', jobId: 'j1', by: 'dtp.waitForSignal' }),
          ]),
        ),
      SimulationViolation,
    );
  });
});
