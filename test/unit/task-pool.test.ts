import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { JsonObject } from '../../src/protocol/messages.js';
import { TaskPool, type TaskOutcome, type TaskPoolOptions } from '../../src/worker/task-pool.js';
import { until } from '../helpers/until.js';

/**
 * A task module for misbehaving tasks, as a data: URL so the test needs no
 * fixture file. It exports a registry-shaped object, which is all the thread
 * needs from a task module.
 */
const MISBEHAVING_TASKS = `
const tasks = {
  ECHO: async (payload) => JSON.stringify(payload),
  EXIT: () => { process.exit(7); },
  THROW_LATER: () => new Promise(() => { setTimeout(() => { throw new Error('boom later'); }, 0); }),
  NOT_A_STRING: async () => 42,
};
export function createRegistry() {
  return {
    require(taskType) {
      const run = tasks[taskType];
      if (run === undefined) throw new Error('no task ' + taskType);
      return { taskType, validate() {}, run };
    },
  };
}
`;
const MISBEHAVING_MODULE = `data:text/javascript,${encodeURIComponent(MISBEHAVING_TASKS)}`;

const PRIME_LIMIT_MAX = 50_000_000;

function succeeded(result: string): TaskOutcome {
  return { success: true, result };
}

function failed(error: string): TaskOutcome {
  return { success: false, error, cancelled: false };
}

async function errorOf(outcome: Promise<TaskOutcome>): Promise<string> {
  const ended = await outcome;
  assert.equal(ended.success, false, `expected a failure, got ${JSON.stringify(ended)}`);
  return ended.success ? '' : ended.error;
}

describe('TaskPool', () => {
  const pools: TaskPool[] = [];

  function createPool(options: TaskPoolOptions): TaskPool {
    const pool = new TaskPool(options);
    pools.push(pool);
    return pool;
  }

  afterEach(async () => {
    await Promise.all(pools.splice(0).map((pool) => pool.close()));
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
    for (const [taskType, payload, attempt, expected] of cases) {
      const outcome = await pool.run(taskType, payload, attempt).outcome;
      assert.deepEqual(outcome, expected, `${taskType} ${JSON.stringify(payload)}`);
    }
  });

  it('reports a failure with the task message when FAIL runs below its attempt', async () => {
    const pool = createPool({ capacity: 1 });
    const outcome = await pool.run('FAIL', { failUntilAttempt: 3 }, 2).outcome;
    assert.deepEqual(outcome, failed('deliberate failure on attempt 2'));
  });

  it('reports a failure when the payload is invalid or the task type unknown', async () => {
    const pool = createPool({ capacity: 1 });
    const invalid = pool.run('PRIME_COUNT', { limit: 'many' }, 1);
    assert.match(await errorOf(invalid.outcome), /^Invalid payload: limit/);
    assert.equal(await invalid.started, false);
    assert.match(await errorOf(pool.run('RM_RF', {}, 1).outcome), /Unknown task type/);
  });

  it('runs up to capacity tasks at once when they overlap', async () => {
    const pool = createPool({ capacity: 3 });
    const handles = [1, 2, 3].map(() => pool.run('SLEEP', { durationMillis: 60_000 }, 1));
    assert.deepEqual(await Promise.all(handles.map((h) => h.started)), [true, true, true]);
    assert.equal(pool.runningCount, 3);
    assert.equal(pool.threadCount, 3);
    const extra = pool.run('SHA256', { text: 'x' }, 1);
    assert.match(await errorOf(extra.outcome), /at capacity/);
    await Promise.all(handles.map((h) => h.cancel()));
    assert.equal(pool.runningCount, 0);
    assert.equal(pool.threadCount, 0);
  });

  it('reuses one thread when tasks run one after another', async () => {
    const pool = createPool({ capacity: 4 });
    for (const text of ['a', 'b', 'c']) {
      assert.equal((await pool.run('SHA256', { text }, 1).outcome).success, true);
    }
    assert.equal(pool.threadCount, 1);
  });

  it('stops a running PRIME_COUNT 50,000,000 within 1 s when cancelled', async () => {
    const pool = createPool({ capacity: 1 });
    const handle = pool.run('PRIME_COUNT', { limit: PRIME_LIMIT_MAX }, 1);
    assert.equal(await handle.started, true);
    const cancelledAtMs = performance.now();
    await handle.cancel();
    const stopMs = performance.now() - cancelledAtMs;
    assert.ok(stopMs < 1_000, `thread took ${stopMs.toFixed(0)} ms to stop`);
    assert.deepEqual(await handle.outcome, {
      success: false,
      error: 'task cancelled',
      cancelled: true,
    });
    assert.equal(pool.threadCount, 0, 'the cancelled thread has exited');
    assert.equal(pool.runningCount, 0);
  });

  it('still runs tasks on a new thread when a previous one was cancelled', async () => {
    const pool = createPool({ capacity: 1 });
    const first = pool.run('SLEEP', { durationMillis: 60_000 }, 1);
    assert.equal(await first.started, true);
    await first.cancel();
    await first.cancel();
    const outcome = await pool.run('PRIME_COUNT', { limit: 100 }, 1).outcome;
    assert.deepEqual(outcome, succeeded('25'));
    assert.equal(pool.threadCount, 1);
  });

  it('fails the task and replaces the thread when the thread exits', async () => {
    const pool = createPool({ capacity: 1, taskModule: MISBEHAVING_MODULE });
    const error = await errorOf(pool.run('EXIT', {}, 1).outcome);
    assert.equal(error, 'task thread exited unexpectedly with code 7');
    assert.equal(pool.threadCount, 0);
    assert.deepEqual(await pool.run('ECHO', { a: 1 }, 1).outcome, succeeded('{"a":1}'));
  });

  it('fails the task when its thread throws outside the task', async () => {
    const pool = createPool({ capacity: 1, taskModule: MISBEHAVING_MODULE });
    const error = await errorOf(pool.run('THROW_LATER', {}, 1).outcome);
    assert.equal(error, 'task thread crashed: boom later');
    await until(() => pool.threadCount === 0, { what: 'the crashed thread to exit' });
    assert.deepEqual(await pool.run('ECHO', {}, 1).outcome, succeeded('{}'));
  });

  it('fails the task when it resolves with something other than a string', async () => {
    const pool = createPool({ capacity: 1, taskModule: MISBEHAVING_MODULE });
    const error = await errorOf(pool.run('NOT_A_STRING', {}, 1).outcome);
    assert.equal(error, 'task returned a number, not a string');
    assert.equal(pool.threadCount, 1, 'a failed task keeps its thread');
  });

  it('fails the task when the task module cannot be loaded', async () => {
    const pool = createPool({ capacity: 1, taskModule: '/nonexistent/dtp-tasks.js' });
    const error = await errorOf(pool.run('SHA256', { text: 'abc' }, 1).outcome);
    assert.match(error, /^cannot load task module file:\/\/\/nonexistent\/dtp-tasks\.js: /);
  });

  it('cancels running tasks and refuses new ones when closed, and closes once', async () => {
    const pool = createPool({ capacity: 2 });
    const running = pool.run('SLEEP', { durationMillis: 60_000 }, 1);
    assert.equal(await running.started, true);
    const closing = pool.close();
    assert.equal(pool.close(), closing);
    await closing;
    assert.deepEqual(await running.outcome, {
      success: false,
      error: 'task pool closed',
      cancelled: true,
    });
    assert.equal(pool.threadCount, 0);
    assert.match(await errorOf(pool.run('SHA256', { text: 'x' }, 1).outcome), /closed/);
  });

  it('rejects a capacity outside 1..1024', () => {
    for (const capacity of [0, 1025, 1.5]) {
      assert.throws(() => new TaskPool({ capacity }), { code: 'INVALID_OPTIONS' });
    }
  });
});
