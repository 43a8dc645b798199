/**
 * The task pool on real worker threads: built-in and users' tasks, result
 * encoding, failures and their retryability, ctx and logs, capacity and the
 * queue beyond it, thread reuse, many attempts on one shared thread,
 * isolated attempts beside shared ones, placement away from a blocked
 * thread, preemption (cooperative within the grace, terminated after it,
 * and what that costs an attempt's neighbours), crashes and closing.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import fc from 'fast-check';
import { MAX_PREFETCH_PER_SLOT, MAX_SLOTS, maxPrefetch } from '../../src/protocol/limits.js';
import type { JsonObject } from '../../src/protocol/messages.js';
import { defaultPrefetch, workerOptionsProblem } from '../../src/worker/options.js';
import {
  BLOCKED_AFTER_MS,
  TaskPool,
  type BlockedThread,
  type TaskHandle,
  type TaskOutcome,
  type TaskPoolOptions,
  type TaskRunSinks,
} from '../../src/worker/task-pool.js';
import { Outbox, SharedWords, sharedBytes } from '../../src/worker/thread-messages.js';
import { attempt, errorOf } from '../helpers/pool-tasks.js';
import { until } from '../helpers/until.js';

/** A task module as a data: URL, so the test needs no fixture file. */
function moduleUrl(source: string): { specifier: string; url: string } {
  return { specifier: 'test-tasks', url: `data:text/javascript,${encodeURIComponent(source)}` };
}

const MISBEHAVING = moduleUrl(`
export default {
  echo: async (payload) => JSON.stringify(payload),
  object: async (payload, ctx) => ({ got: payload, attempt: ctx.attemptNumber, jobId: ctx.jobId,
    attemptId: ctx.attemptId, maxAttempts: ctx.maxAttempts, deadlineAtMs: ctx.deadlineAtMs }),
  nothing: async () => undefined,
  exit: () => { process.exit(7); },
  throwLater: () => new Promise(() => { setTimeout(() => { throw new Error('boom later'); }, 0); }),
  bigint: async () => ({ n: 10n }),
  refuse: async () => { const e = new Error('never works'); e.retryable = false; throw e; },
  throwString: async () => { throw 'plain string'; },
  chatty: async (payload, ctx) => { ctx.log.info('working', { step: 1 }); ctx.log.warn('careful'); return 'done'; },
  polite: (payload, ctx) => new Promise((resolve, reject) => {
    const t = setTimeout(() => resolve('finished'), 60000);
    ctx.signal.addEventListener('abort', () => { clearTimeout(t); reject(ctx.signal.reason); });
  }),
  lateButQuick: (payload, ctx) => new Promise((resolve) => {
    ctx.signal.addEventListener('abort', () => setTimeout(() => resolve('too late'), 20));
  }),
  spin: () => { for (;;) {} },
  lookLate: async (payload, ctx) => {
    // Told by the test once it has stopped the attempt; only then is ctx.signal read.
    const channel = new BroadcastChannel(payload.channel);
    const told = new Promise((resolve) => { channel.onmessage = resolve; });
    channel.postMessage('listening');
    await told;
    channel.close();
    const signal = ctx.signal;
    for (;;) { if (signal.aborted) throw signal.reason; }
  },
  crunch: (payload, ctx) => { for (;;) { ctx.signal.throwIfAborted(); } },
  // Awaits a timer: the shape of an I/O-bound handler.
  wait: (payload) => new Promise((resolve) => setTimeout(() => resolve('waited'), payload.ms)),
  // Computes for payload.ms, yielding to its event loop every millisecond (busy, never held).
  busy: async (payload) => {
    const end = Date.now() + payload.ms;
    while (Date.now() < end) {
      const slice = Date.now() + 1;
      while (Date.now() < slice) {}
      await new Promise((resolve) => setImmediate(resolve));
    }
    return 'busy';
  },
  // Holds its thread for payload.ms without yielding.
  hold: (payload) => { const end = Date.now() + payload.ms; while (Date.now() < end) {} return 'held'; },
  isolatedSpin: { isolate: true, run: () => { for (;;) {} } },
  // Writes payload.marker as it starts (a test waits for it), then holds its thread.
  markedSpin: async (payload) => {
    const { writeFileSync } = await import('node:fs');
    writeFileSync(payload.marker, 'started');
    for (;;) {}
  },
  crunchUntilAborted: (payload, ctx) => {
    let heard = false;
    ctx.signal.addEventListener('abort', () => { heard = true; });
    for (let i = 0; !ctx.signal.aborted; i++) {}
    if (!heard) throw new Error('no abort event');
    throw ctx.signal.reason;
  },
};
`);

/** One thread, two tasks waiting beyond it, the misbehaving tasks loaded. */
const QUEUE_OF_TWO: TaskPoolOptions = {
  capacity: 1,
  threads: 1,
  queueLimit: 2,
  modules: [MISBEHAVING],
};

function succeeded(result: string): TaskOutcome {
  return { success: true, result, resultFormat: 'text' };
}

function failed(error: string, retryable = true): TaskOutcome {
  return { success: false, error, cancelled: false, retryable };
}

/** How a stopped task ends, whether it ran or only waited for a thread. */
function stopped(reason: 'cancel' | 'deadline'): TaskOutcome {
  return { success: false, error: `task stopped (${reason})`, cancelled: true, retryable: true };
}

/** CPU time this process (every thread) used since `start`, in ms. */
function cpuMsSince(start: NodeJS.CpuUsage): number {
  const { user, system } = process.cpuUsage(start);
  return (user + system) / 1_000;
}

describe('TaskPool', () => {
  const pools: TaskPool[] = [];
  const folders: string[] = [];

  /** A fresh folder for marker files, removed after the test. */
  function markers(): string {
    const dir = mkdtempSync(join(tmpdir(), 'dtp-pool-'));
    folders.push(dir);
    return dir;
  }

  function createPool(options: TaskPoolOptions): TaskPool {
    const pool = new TaskPool(options);
    pools.push(pool);
    return pool;
  }

  function run(
    pool: TaskPool,
    taskType: string,
    payload: JsonObject = {},
    more = {},
    sinks: TaskRunSinks = {},
  ): TaskHandle {
    return pool.run(attempt(taskType, payload, more), {
      isolated: taskType === 'PRIME_COUNT' || taskType === 'isolatedSpin',
      ...sinks,
    });
  }

  afterEach(async () => {
    await Promise.all(pools.splice(0).map((pool) => pool.close()));
    for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('returns the right result for each built-in task type when the payload is valid', async () => {
    const pool = createPool({ capacity: 2 });
    const cases: [string, JsonObject, number, TaskOutcome][] = [
      ['SLEEP', { durationMillis: 5 }, 1, succeeded('slept 5 ms')],
      ['WORD_COUNT', { text: 'one  two\tthree\nfour' }, 1, succeeded('4')],
      ['WORD_COUNT', { text: '   ' }, 1, succeeded('0')],
      [
        'SHA256',
        { text: 'abc' },
        1,
        succeeded('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'),
      ],
      ['PRIME_COUNT', { limit: 1_000_000 }, 1, succeeded('78498')],
      ['FAIL', { failUntilAttempt: 3 }, 3, succeeded('succeeded on attempt 3')],
    ];
    for (const [taskType, payload, attemptNumber, expected] of cases) {
      const outcome = await run(pool, taskType, payload, { attemptNumber }).outcome;
      assert.deepEqual(outcome, expected, `${taskType} ${JSON.stringify(payload)}`);
    }
  });

  it('reports a retryable failure with the task message when FAIL runs below its attempt', async () => {
    const pool = createPool({ capacity: 1 });
    const outcome = await run(pool, 'FAIL', { failUntilAttempt: 3 }, { attemptNumber: 2 }).outcome;
    assert.deepEqual(outcome, failed('deliberate failure on attempt 2'));
  });

  it('fails an invalid payload without retry, and an unknown task type with', async () => {
    const pool = createPool({ capacity: 1 });
    const invalid = run(pool, 'PRIME_COUNT', { limit: 'many' });
    const outcome = await invalid.outcome;
    assert.equal(outcome.success, false);
    assert.match(outcome.success ? '' : outcome.error, /^Invalid payload: limit/);
    assert.equal(!outcome.success && outcome.retryable, false);
    assert.equal(await invalid.started, false);
    const unknown = await run(pool, 'RM_RF').outcome;
    assert.match(unknown.success ? '' : unknown.error, /Unknown task type/);
    assert.equal(!unknown.success && unknown.retryable, true);
  });

  it('runs up to capacity tasks at once when they overlap, many on one shared thread', async () => {
    const pool = createPool({ capacity: 3, threads: 1, cancelGraceMs: 0 });
    const handles = [1, 2, 3].map(() => run(pool, 'SLEEP', { durationMillis: 60_000 }));
    assert.deepEqual(await Promise.all(handles.map((h) => h.started)), [true, true, true]);
    assert.equal(pool.runningCount, 3);
    assert.equal(pool.threadCount, 1);
    assert.match(await errorOf(run(pool, 'SHA256', { text: 'x' }).outcome), /at capacity/);
    await Promise.all(handles.map((h) => h.stop('cancel')));
    assert.equal(pool.runningCount, 0);
  });

  it('reuses one thread when tasks run one after another', async () => {
    const pool = createPool({ capacity: 4, threads: 4 });
    for (const text of ['a', 'b', 'c']) {
      assert.equal((await run(pool, 'SHA256', { text }).outcome).success, true);
    }
    assert.equal(pool.threadCount, 1);
  });

  it('keeps the threads of a round of isolated attempts for the next round, and ends them once idle too long', async () => {
    // Long enough that a loaded machine does not end an idle thread between two rounds.
    const pool = createPool({ capacity: 4, threads: 1, isolatedIdleMs: 3_000 });
    const round = async (): Promise<void> => {
      const handles = [1, 2, 3, 4].map((i) => run(pool, 'PRIME_COUNT', { limit: 100 + i }));
      for (const handle of handles) assert.equal((await handle.outcome).success, true);
    };
    await round();
    assert.equal(pool.threadsStarted, 4, 'four attempts at once, four threads');
    await round();
    await round();
    assert.equal(pool.threadsStarted, 4, 'the next rounds started no thread');
    assert.equal(pool.threadCount, 4);
    await until(() => pool.threadCount === 0, {
      what: 'the idle isolated threads to end',
      timeoutMs: 20_000,
    });
    await round();
    assert.equal(pool.threadsStarted, 8, 'a round after the idle time starts its threads again');
  });

  it('terminates a handler that ignores its signal after the grace when stopped', async () => {
    const pool = createPool({ capacity: 1, cancelGraceMs: 50, modules: [MISBEHAVING] });
    const handle = run(pool, 'spin');
    assert.equal(await handle.started, true);
    const stoppedAtMs = performance.now();
    assert.equal(await handle.stop('cancel'), 'terminated');
    const stopMs = performance.now() - stoppedAtMs;
    assert.ok(stopMs < 1_000, `thread took ${stopMs.toFixed(0)} ms to stop`);
    assert.deepEqual(await handle.outcome, stopped('cancel'));
    assert.equal(pool.threadCount, 0, 'the terminated thread has exited');
    assert.equal(pool.runningCount, 0);
  });

  it('stops a computing PRIME_COUNT by itself within a grace of a minute, and keeps the thread', async (t) => {
    const pool = createPool({ capacity: 1, cancelGraceMs: 60_000 });
    // 20,000,000 (a sieve of 10 MB): what three counts leave until the next
    // GC stays well under the memory after which an idle thread is let go
    // (RETAINED_LIMIT_MB); three sieves of 25 MB could pass it, and the
    // thread would then be replaced, as it should.
    const limit = 20_000_000;
    const wholeCpu = process.cpuUsage();
    assert.equal((await run(pool, 'PRIME_COUNT', { limit }).outcome).success, true);
    const wholeMs = cpuMsSince(wholeCpu);
    for (const reason of ['cancel', 'deadline'] as const) {
      const handle = run(pool, 'PRIME_COUNT', { limit });
      assert.equal(await handle.started, true);
      const stopCpu = process.cpuUsage();
      // The grace is a minute: only the sieve's own look at its signal ends it this soon.
      assert.equal(await handle.stop(reason), 'cooperative');
      // What the stop cost is told, not judged (a loaded machine's GC can land in it).
      t.diagnostic(
        `${reason}: ${cpuMsSince(stopCpu).toFixed(1)} ms of the process's CPU from the stop to its end; the whole count ${wholeMs.toFixed(0)} ms`,
      );
      assert.deepEqual(await handle.outcome, stopped(reason));
    }
    // The thread's loop is free again at once: the next attempt runs on it.
    assert.deepEqual(await run(pool, 'PRIME_COUNT', { limit: 100 }).outcome, succeeded('25'));
    assert.equal(pool.threadsStarted, 1, 'every attempt ran on the one thread');
  });

  it("stops a user's computing loop that looks at its signal, and keeps the thread", async () => {
    const pool = createPool({ capacity: 1, cancelGraceMs: 60_000, modules: [MISBEHAVING] });
    for (const taskType of ['crunch', 'crunchUntilAborted']) {
      const handle = run(pool, taskType);
      assert.equal(await handle.started, true);
      assert.equal(await handle.stop('cancel'), 'cooperative', taskType);
    }
    assert.equal(pool.threadCount, 1);
  });

  it('gives a handler that first reads ctx.signal after its stop a signal that says so', async () => {
    // The signal is made when first read; a stop that came before must show in it.
    const pool = createPool({ capacity: 1, cancelGraceMs: 60_000, modules: [MISBEHAVING] });
    const channel = new BroadcastChannel('look-late');
    try {
      const listening = new Promise((resolve) => (channel.onmessage = resolve));
      const handle = run(pool, 'lookLate', { channel: 'look-late' });
      assert.equal(await handle.started, true);
      await listening;
      const stopped = handle.stop('cancel');
      channel.postMessage('stopped');
      assert.equal(await stopped, 'cooperative');
      assert.equal(pool.threadCount, 1);
    } finally {
      channel.close();
    }
  });

  it('keeps the thread when a stopped handler honours its signal within the grace', async () => {
    const pool = createPool({
      capacity: 1,
      threads: 1,
      cancelGraceMs: 5_000,
      modules: [MISBEHAVING],
    });
    const first = run(pool, 'polite');
    assert.equal(await first.started, true);
    assert.equal(await first.stop('deadline'), 'cooperative');
    assert.equal(((await first.outcome) as { cancelled: boolean }).cancelled, true);
    assert.equal(pool.threadCount, 1, 'the thread is reused');
    assert.deepEqual(await run(pool, 'echo', { n: 2 }).outcome, succeeded('{"n":2}'));
    assert.equal(pool.threadCount, 1);
  });

  it('never reports what a stopped handler returns afterwards', async () => {
    const pool = createPool({ capacity: 1, cancelGraceMs: 5_000, modules: [MISBEHAVING] });
    const handle = run(pool, 'lateButQuick');
    assert.equal(await handle.started, true);
    assert.equal(await handle.stop('cancel'), 'cooperative');
    const outcome = await handle.outcome;
    assert.equal(outcome.success, false, "'too late' must not become a result");
  });

  it('frees the slot at once when a task is stopped, before its thread is gone', async () => {
    const pool = createPool({
      capacity: 1,
      threads: 2,
      cancelGraceMs: 60_000,
      modules: [MISBEHAVING],
    });
    const stuck = run(pool, 'spin');
    assert.equal(await stuck.started, true);
    void stuck.stop('cancel');
    assert.equal(pool.runningCount, 0);
    assert.deepEqual(await run(pool, 'echo', { a: 1 }).outcome, succeeded('{"a":1}'));
    assert.equal(pool.threadCount, 2, 'the stuck thread is still in its grace');
  });

  it('encodes non-string results as JSON and gives the handler its context', async () => {
    const pool = createPool({ capacity: 1, modules: [MISBEHAVING] });
    const more = { attemptNumber: 2, maxAttempts: 5, deadlineAtMs: 123 };
    const ids = { jobId: 'job-context', attemptId: 'attempt-context' };
    const outcome = await run(pool, 'object', { x: [1] }, { ...more, ...ids }).outcome;
    assert.equal(outcome.success && outcome.resultFormat, 'json');
    const value = JSON.parse(outcome.success ? outcome.result : 'null') as Record<string, unknown>;
    assert.deepEqual(value, {
      got: { x: [1] },
      attempt: 2,
      ...ids,
      maxAttempts: 5,
      deadlineAtMs: 123,
    });
    assert.deepEqual(await run(pool, 'nothing').outcome, {
      success: true,
      result: 'null',
      resultFormat: 'json',
    });
    assert.match(
      await errorOf(run(pool, 'bigint').outcome),
      /result is not a JSON value: result\.n is a bigint/,
    );
  });

  it('marks an error with retryable: false as not retryable, and describes any thrown value', async () => {
    const pool = createPool({ capacity: 1, modules: [MISBEHAVING] });
    assert.deepEqual(await run(pool, 'refuse').outcome, failed('never works', false));
    assert.deepEqual(await run(pool, 'throwString').outcome, failed('plain string'));
  });

  it('passes the lines a handler logs to the log sink of its task', async () => {
    const pool = createPool({ capacity: 1, modules: [MISBEHAVING] });
    const lines: unknown[] = [];
    const handle = pool.run(attempt('chatty', {}), {
      onLog: (level, message, fields) => lines.push([level, message, fields]),
    });
    assert.deepEqual(await handle.outcome, succeeded('done'));
    assert.deepEqual(lines, [
      ['info', 'working', { step: 1 }],
      ['warn', 'careful', {}],
    ]);
  });

  it('fails the task alone on a shared thread that exits, and replaces the thread', async () => {
    const pool = createPool({ capacity: 1, modules: [MISBEHAVING] });
    // Nothing else was on the thread: the attempt did it (a requeue would run it again).
    const outcome = await run(pool, 'exit').outcome;
    assert.deepEqual(outcome, failed('task thread exited unexpectedly with code 7'));
    assert.equal(pool.threadCount, 0);
    assert.deepEqual(await run(pool, 'echo', { a: 1 }).outcome, succeeded('{"a":1}'));
  });

  it('requeues every task of a shared thread that exits while it holds several', async () => {
    const pool = createPool({ capacity: 2, threads: 1, modules: [MISBEHAVING] });
    const beside = run(pool, 'SLEEP', { durationMillis: 60_000 });
    await until(() => pool.threadCount === 1, { what: 'the thread to start' });
    const outcome = await run(pool, 'exit').outcome;
    const requeued = {
      ...failed(
        'task thread exited unexpectedly with code 7; this attempt shared the thread and is requeued',
      ),
      requeue: true,
    };
    assert.deepEqual(outcome, requeued);
    assert.deepEqual(await beside.outcome, requeued, 'its neighbour is requeued with it');
    assert.deepEqual(await run(pool, 'echo', { a: 1 }).outcome, succeeded('{"a":1}'));
  });

  it('fails the task when its thread throws outside the task', async () => {
    const pool = createPool({ capacity: 1, modules: [MISBEHAVING] });
    const error = await errorOf(run(pool, 'throwLater').outcome);
    assert.equal(error, 'task thread crashed: boom later');
    await until(() => pool.threadCount === 0, { what: 'the crashed thread to exit' });
    assert.deepEqual(await run(pool, 'echo').outcome, succeeded('{}'));
  });

  it('fails each task, retryably, when a task module cannot be loaded in the thread', async () => {
    const broken = { specifier: './gone.mjs', url: 'file:///nonexistent/dtp-tasks.mjs' };
    const pool = createPool({ capacity: 1, modules: [broken] });
    const outcome = await run(pool, 'SHA256', { text: 'abc' }).outcome;
    assert.match(
      outcome.success ? '' : outcome.error,
      /^task module \.\/gone\.mjs: cannot be loaded/,
    );
    assert.equal(!outcome.success && outcome.retryable, true);
  });

  it('cancels running tasks and refuses new ones when closed, and closes once', async () => {
    const pool = createPool({ capacity: 2 });
    const running = run(pool, 'SLEEP', { durationMillis: 60_000 });
    assert.equal(await running.started, true);
    const closing = pool.close();
    assert.equal(pool.close(), closing);
    await closing;
    assert.deepEqual(await running.outcome, {
      success: false,
      error: 'task pool closed',
      cancelled: true,
      retryable: true,
    });
    assert.equal(pool.threadCount, 0);
    assert.match(await errorOf(run(pool, 'SHA256', { text: 'x' }).outcome), /closed/);
  });

  it('queues up to queueLimit tasks beyond capacity and starts them in order as slots free', async () => {
    const pool = createPool({ ...QUEUE_OF_TWO, cancelGraceMs: 5_000 });
    const first = run(pool, 'polite');
    assert.equal(await first.started, true);
    const second = run(pool, 'echo', { n: 2 });
    const third = run(pool, 'echo', { n: 3 });
    assert.equal(pool.queuedCount, 2);
    assert.match(await errorOf(run(pool, 'echo').outcome), /at capacity/, 'beyond the queue');
    const order: number[] = [];
    void second.outcome.then(() => order.push(2));
    void third.outcome.then(() => order.push(3));
    assert.equal(await first.stop('cancel'), 'cooperative');
    assert.deepEqual(await second.outcome, succeeded('{"n":2}'));
    assert.deepEqual(await third.outcome, succeeded('{"n":3}'));
    assert.deepEqual(order, [2, 3]);
    assert.equal(await second.started, true);
    assert.equal(pool.queuedCount, 0);
    assert.equal(pool.threadCount, 1, 'the queued tasks ran on the freed thread');
  });

  it('ends a queued task that is stopped without ever starting it', async () => {
    const pool = createPool({ capacity: 1, queueLimit: 1, cancelGraceMs: 0 });
    const running = run(pool, 'SLEEP', { durationMillis: 60_000 });
    assert.equal(await running.started, true);
    const waiting = run(pool, 'SHA256', { text: 'never' });
    assert.equal(await waiting.stop('cancel'), 'cooperative');
    assert.equal(await waiting.started, false);
    assert.deepEqual(await waiting.outcome, stopped('cancel'));
    assert.equal(pool.queuedCount, 0);
    assert.equal(pool.runningCount, 1, 'the running task is untouched');
  });

  it('starts a queued task on a new thread when the running one crashes or is stopped', async () => {
    const pool = createPool({ ...QUEUE_OF_TWO, threads: 2, cancelGraceMs: 60_000 });
    const crashing = run(pool, 'exit');
    const afterCrash = run(pool, 'echo', { after: 'crash' });
    assert.match(await errorOf(crashing.outcome), /exited unexpectedly/);
    assert.deepEqual(await afterCrash.outcome, succeeded('{"after":"crash"}'));
    const stuck = run(pool, 'spin');
    assert.equal(await stuck.started, true);
    const afterStop = run(pool, 'echo', { after: 'stop' });
    void stuck.stop('cancel');
    assert.deepEqual(await afterStop.outcome, succeeded('{"after":"stop"}'));
  });

  it('runs a thousand attempts that await timers on one shared thread at once', async () => {
    const pool = createPool({ capacity: 1_000, threads: 1, modules: [MISBEHAVING] });
    const handles = Array.from({ length: 1_000 }, () => run(pool, 'wait', { ms: 200 }));
    const outcomes = await Promise.all(handles.map((h) => h.outcome));
    assert.ok(outcomes.every((o) => o.success && o.result === 'waited'));
    assert.equal(pool.threadCount, 1);
  });

  it('ends a stopped attempt that ignores its signal with its shared thread, and requeues its neighbours', async () => {
    const pool = createPool({
      capacity: 21,
      threads: 1,
      cancelGraceMs: 50,
      modules: [MISBEHAVING],
    });
    const neighbours = Array.from({ length: 20 }, () => run(pool, 'wait', { ms: 60_000 }));
    await Promise.all(neighbours.map((h) => h.started));
    // Beside others, a handler that holds its thread is heard of only once it
    // yields (never): it says it has started through a file.
    const marker = join(markers(), 'spinning');
    const stubborn = run(pool, 'markedSpin', { marker });
    await until(() => existsSync(marker), { what: 'the stubborn handler to start' });
    assert.equal(await stubborn.stop('deadline'), 'terminated');
    assert.deepEqual(await stubborn.outcome, stopped('deadline'));
    for (const outcome of await Promise.all(neighbours.map((h) => h.outcome))) {
      assert.equal(outcome.success, false);
      assert.equal(!outcome.success && outcome.requeue, true);
      assert.match(
        outcome.success ? '' : outcome.error,
        /did not stop within the cancel grace \(50 ms\); this attempt shared the thread and is requeued/,
      );
    }
    assert.deepEqual(await run(pool, 'echo', { after: 1 }).outcome, succeeded('{"after":1}'));
  });

  it('runs an isolated task on a thread of its own: shared ones are not held up, and its stop ends only it', async () => {
    const pool = createPool({
      capacity: 4,
      threads: 1,
      cancelGraceMs: 200,
      modules: [MISBEHAVING],
    });
    const spinning = run(pool, 'isolatedSpin');
    assert.equal(await spinning.started, true);
    const waiting = run(pool, 'polite');
    assert.equal(await waiting.started, true);
    assert.deepEqual(
      await run(pool, 'echo', { beside: true }).outcome,
      succeeded('{"beside":true}'),
    );
    assert.equal(pool.threadCount, 2);
    assert.equal(await spinning.stop('cancel'), 'terminated');
    assert.equal(pool.runningCount, 1, 'the shared attempt runs on');
    await until(() => pool.threadCount === 1, { what: 'the isolated thread to exit' });
    assert.equal(await waiting.stop('cancel'), 'cooperative');
  });

  it('places new attempts away from a shared thread whose event loop is held, and reports that thread', async () => {
    const blocked: BlockedThread[] = [];
    const pool = createPool({
      capacity: 20,
      threads: 2,
      modules: [MISBEHAVING],
      onBlocked: (report) => blocked.push(report),
    });
    const holding = run(pool, 'hold', { ms: 2_500 }, { jobId: 'job-holding' });
    assert.equal(await holding.started, true);
    await new Promise((resolve) => setTimeout(resolve, BLOCKED_AFTER_MS * 2));
    const quick = Array.from({ length: 10 }, (_, n) => run(pool, 'echo', { n }));
    const startedAt = performance.now();
    await Promise.all(quick.map((h) => h.outcome));
    assert.ok(performance.now() - startedAt < 2_000, 'none waited behind the held thread');
    assert.equal(pool.threadCount, 2);
    await until(() => blocked.length > 0, { what: 'the held thread to be reported' });
    assert.deepEqual(blocked[0]?.jobIds, ['job-holding']);
    assert.deepEqual(await holding.outcome, succeeded('held'));
  });

  it('keeps attempts that wait on one shared thread, however many, and starts another once it computes', async () => {
    const pool = createPool({ capacity: 200, threads: 2, modules: [MISBEHAVING] });
    const waiting = Array.from({ length: 200 }, () => run(pool, 'wait', { ms: 300 }));
    for (const handle of waiting) assert.equal(await handle.started, true);
    assert.equal(pool.threadCount, 1, '200 attempts that wait share one thread');
    for (const outcome of await Promise.all(waiting.map((h) => h.outcome))) {
      assert.deepEqual(outcome, succeeded('waited'));
    }
    // Its event loop busy (yet turning): the next attempts get a second thread.
    const computing = run(pool, 'busy', { ms: 1_500 });
    await until(
      async () => {
        const next = run(pool, 'echo');
        await next.outcome;
        return pool.threadCount === 2;
      },
      { timeoutMs: 5_000, what: 'a second thread beside the saturated one' },
    );
    assert.deepEqual(await computing.outcome, succeeded('busy'));
  });

  it('cancels queued tasks too when closed', async () => {
    const pool = createPool({ capacity: 1, queueLimit: 1 });
    const running = run(pool, 'SLEEP', { durationMillis: 60_000 });
    const waiting = run(pool, 'SHA256', { text: 'x' });
    await pool.close();
    for (const handle of [running, waiting]) {
      assert.equal(((await handle.outcome) as { cancelled: boolean }).cancelled, true);
    }
    assert.equal(await waiting.started, false);
  });

  it('accepts as its queue limit every prefetch a worker accepts, and names its own option', () => {
    const anyWorker = (capacity: number, prefetch?: number) => ({
      coordinatorHost: '127.0.0.1',
      workerId: 'w',
      coordinatorPort: 7070,
      capacity,
      heartbeatIntervalMs: 1_000,
      reconnectDelayMs: 1_000,
      ...(prefetch === undefined ? {} : { prefetch }),
    });
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: MAX_SLOTS }),
        fc.option(fc.nat({ max: MAX_PREFETCH_PER_SLOT * MAX_SLOTS }), { nil: undefined }),
        (capacity, prefetch) => {
          if (workerOptionsProblem(anyWorker(capacity, prefetch)) !== null) return;
          const queueLimit = prefetch ?? defaultPrefetch(capacity);
          assert.doesNotThrow(() => new TaskPool({ capacity, queueLimit }));
        },
      ),
    );
    assert.equal(workerOptionsProblem(anyWorker(600)), null);
    assert.throws(() => new TaskPool({ capacity: 2, queueLimit: 9 }), {
      code: 'INVALID_OPTIONS',
      message: 'queueLimit must be an integer in 0..4 x capacity (8), got 9',
    });
  });

  it('rejects a capacity outside 1..10,000, threads outside 1..256, and a negative grace', () => {
    for (const capacity of [0, 10_001, 1.5]) {
      assert.throws(() => new TaskPool({ capacity }), { code: 'INVALID_OPTIONS' });
    }
    assert.throws(() => new TaskPool({ capacity: 1, cancelGraceMs: -1 }), {
      code: 'INVALID_OPTIONS',
    });
    assert.throws(() => new TaskPool({ capacity: 1, queueLimit: -1 }), {
      code: 'INVALID_OPTIONS',
    });
    for (const threads of [0, 257]) {
      assert.throws(() => new TaskPool({ capacity: 1, threads }), { code: 'INVALID_OPTIONS' });
    }
  });

  it("takes a queue of up to 4 x capacity (at most 4,096), the worker's prefetch bound, at every capacity", async () => {
    for (const capacity of [1, 600, MAX_SLOTS]) {
      for (const queueLimit of [defaultPrefetch(capacity), maxPrefetch(capacity)]) {
        await createPool({ capacity, queueLimit }).close();
      }
      assert.throws(() => new TaskPool({ capacity, queueLimit: maxPrefetch(capacity) + 1 }), {
        code: 'INVALID_OPTIONS',
        message:
          maxPrefetch(capacity) < 4 * capacity
            ? new RegExp(`queueLimit must be an integer in 0\\.\\.${maxPrefetch(capacity)}, got`)
            : /queueLimit must be an integer in 0\.\.4 x capacity/,
      });
    }
  });
});

describe('SharedWords', () => {
  it('raises a stop in one slot for one request only, and a slot handed on starts clear', () => {
    const buffer = new SharedArrayBuffer(sharedBytes(4));
    const main = new SharedWords(buffer);
    const thread = new SharedWords(buffer);
    assert.equal(thread.slots, 4);
    main.raiseStop(2, 7, 'deadline');
    assert.equal(thread.stopRaised(2, 7), 'deadline');
    assert.equal(thread.stopRaised(2, 8), null, 'another request in that slot');
    assert.equal(thread.stopRaised(1, 7), null, 'another slot');
    assert.equal(thread.stopRaised(9, 7), null, 'no such slot');
    main.clearStop(2);
    assert.equal(thread.stopRaised(2, 7), null);
    main.raiseStop(3, 0x7fffffff * 3, 'cancel');
    assert.equal(thread.stopRaised(3, 0x7fffffff * 3), 'cancel', 'however large the id grows');
  });

  it('tells how long ago the thread last turned, across the clock word wrapping', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 ** 52 }),
        fc.integer({ min: 0, max: 86_400_000 }),
        (atMs, laterMs) => {
          const words = new SharedWords(new SharedArrayBuffer(sharedBytes(0)));
          words.recordTurn(atMs);
          const since = words.sinceTurnMs(atMs + laterMs);
          return atMs % 0x7fffffff === 0 ? since === 0 : since === laterMs;
        },
      ),
    );
  });
});

describe('Outbox', () => {
  it('sends what one turn pushed as one batch, and the next turn in another', async () => {
    const sent: number[][] = [];
    const outbox = new Outbox<number>(
      (items) => sent.push(items),
      (flush) => queueMicrotask(flush),
    );
    for (let n = 0; n < 100; n++) outbox.push(n);
    await Promise.resolve();
    outbox.push(100);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(
      sent.map((batch) => batch.length),
      [100, 1],
    );
  });
});
