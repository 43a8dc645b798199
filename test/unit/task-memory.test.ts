/**
 * Task threads' memory budget (memory-budget.ts): the decisions on samples,
 * and the pool on real threads: a heap that reaches V8's limit, Buffers that
 * grow while the event loop turns, Buffers that grow in one synchronous
 * stretch (caught through the process's resident memory), a thread that keeps
 * much after its task (replaced, not reused), and an error too long for a
 * frame (cut). After each death the next task runs on a new thread.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { MAX_ERROR_CHARS } from '../../src/protocol/limits.js';
import {
  RETAINED_LIMIT_MB,
  overBudget,
  rssBudgetMb,
  type ThreadSample,
} from '../../src/worker/memory-budget.js';
import { TaskPool, type TaskOutcome, type TaskPoolOptions } from '../../src/worker/task-pool.js';
import { attempt, errorOf } from '../helpers/pool-tasks.js';
import { until } from '../helpers/until.js';

describe('overBudget', () => {
  const check = { taskMemoryMb: 64, rssMb: 100, rssBudgetMb: 500 };
  const sample = (thread: string, usedMb: number, fresh = true): ThreadSample<string> => ({
    thread,
    usedMb,
    fresh,
  });

  it('picks the threads whose own samples are over the budget', () => {
    const verdicts = overBudget([sample('a', 10), sample('b', 65), sample('c', 64)], check);
    assert.deepEqual(
      verdicts.map((v) => v.thread),
      ['b'],
    );
    assert.match(verdicts[0]?.error ?? '', /used 65 MiB .*over its 64 MiB budget/);
  });

  it('leaves threads that hold their event loop alone while the process is within budget', () => {
    assert.deepEqual(overBudget([sample('a', 10, false)], check), []);
  });

  it('picks every thread that holds its event loop once the process is over budget', () => {
    const samples = [sample('fresh', 10), sample('held', 1, false), sample('held2', 2, false)];
    const verdicts = overBudget(samples, { ...check, rssMb: 501 });
    assert.deepEqual(
      verdicts.map((v) => v.thread),
      ['held', 'held2'],
    );
    assert.match(verdicts[0]?.error ?? '', /memory \(501 MiB resident\) went over its budget/);
  });

  it('budgets the process as its start plus slack plus every thread', () => {
    assert.equal(rssBudgetMb(100, 4, 512), 100 + 256 + 4 * (512 + 64));
  });
});

/** Tasks that misuse memory, as a data: URL module. */
const HOGS = {
  specifier: 'hogs',
  url: `data:text/javascript,${encodeURIComponent(`
export default {
  heap: async () => { const a = []; for (;;) a.push({ n: Math.random(), s: 'x'.repeat(40) + Math.random() }); },
  heapIsolated: { isolate: true, run: async () => { const a = []; for (;;) a.push({ n: Math.random(), s: 'x'.repeat(40) + Math.random() }); } },
  buffersAwaiting: async () => {
    const kept = [];
    for (let i = 0; i < 2048; i++) { kept.push(Buffer.alloc(1 << 20, 1)); await new Promise((r) => setImmediate(r)); }
    return 'all 2 GiB';
  },
  buffersAtOnce: () => { const kept = []; for (let i = 0; i < 2048; i++) kept.push(Buffer.alloc(1 << 20, 1)); return 'all 2 GiB'; },
  keep: (payload) => { const kept = []; for (let i = 0; i < payload.mb; i++) kept.push(Buffer.alloc(1 << 20, 1)); return String(kept.length); },
  longError: async () => { throw new Error('e'.repeat(5_000_000)); },
};
`)}`,
};

function outcomeOf(pool: TaskPool, taskType: string, payload = {}): Promise<TaskOutcome> {
  return pool.run(attempt(taskType, payload), { isolated: taskType.endsWith('Isolated') }).outcome;
}

/** What the attempts of a shared thread that went over its budget end with. */
const REQUEUED = '; this attempt shared the thread and is requeued';

describe('TaskPool memory budget', () => {
  const pools: TaskPool[] = [];
  function createPool(options: TaskPoolOptions): TaskPool {
    const pool = new TaskPool(options);
    pools.push(pool);
    return pool;
  }
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((pool) => pool.close()));
  });

  /** The pool carries on: a new thread runs the next task. */
  async function carriesOn(pool: TaskPool): Promise<void> {
    assert.deepEqual(await outcomeOf(pool, 'SHA256', { text: 'a' }), {
      success: true,
      result: 'ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb',
      resultFormat: 'text',
    });
    assert.equal(pool.threadCount, 1);
  }

  // An isolated attempt, and one alone on its shared thread (nothing else was
  // there: it did it, and a requeue would run it again), fail the same way.
  for (const [what, taskType, threads] of [
    ['an isolated attempt', 'heapIsolated', undefined],
    ['an attempt alone on its shared thread', 'heap', 1],
  ] as const) {
    it(`fails ${what}, retryably and not requeued, when the JavaScript heap reaches the limit`, async () => {
      const pool = createPool({
        capacity: 1,
        ...(threads === undefined ? {} : { threads }),
        taskMemoryMb: 64,
        modules: [HOGS],
      });
      assert.deepEqual(await outcomeOf(pool, taskType), {
        success: false,
        error:
          'task thread ran out of memory: its JavaScript heap reached the 64 MiB limit (--task-memory-mb)',
        cancelled: false,
        retryable: true,
      });
      await carriesOn(pool);
    });
  }

  it('requeues the attempts of a shared thread whose JavaScript heap reaches the limit', async () => {
    const pool = createPool({ capacity: 2, threads: 1, taskMemoryMb: 64, modules: [HOGS] });
    const beside = pool.run(attempt('SLEEP', { durationMillis: 60_000 })).outcome;
    const outcome = await outcomeOf(pool, 'heap');
    assert.deepEqual(outcome, {
      success: false,
      error: `task thread ran out of memory: its JavaScript heap reached the 64 MiB limit (--task-memory-mb)${REQUEUED}`,
      cancelled: false,
      retryable: true,
      requeue: true,
    });
    assert.deepEqual(await beside, outcome, 'its neighbour is requeued with it');
    await carriesOn(pool);
  });

  it('terminates a thread whose Buffers go over the budget while its event loop turns', async () => {
    const pool = createPool({ capacity: 1, taskMemoryMb: 64, modules: [HOGS] });
    const error = await errorOf(outcomeOf(pool, 'buffersAwaiting'));
    assert.match(
      error,
      /^task thread used \d+ MiB \(JavaScript heap and Buffers\), over its 64 MiB budget[^;]*$/,
    );
    await carriesOn(pool);
  });

  it('terminates a thread whose Buffers grow in one synchronous stretch past the process budget', async () => {
    const pool = createPool({ capacity: 1, taskMemoryMb: 64, modules: [HOGS] });
    const error = await errorOf(outcomeOf(pool, 'buffersAtOnce'));
    assert.match(error, /^the worker's memory \(\d+ MiB resident\) went over its budget/);
    await carriesOn(pool);
  });

  it('replaces a thread that keeps more than the retained limit after its task', async () => {
    const pool = createPool({ capacity: 1, modules: [HOGS] });
    const mb = RETAINED_LIMIT_MB * 2;
    assert.deepEqual(await outcomeOf(pool, 'keep', { mb }), {
      success: true,
      result: String(mb),
      resultFormat: 'text',
    });
    // Terminated instead of going back to the idle threads.
    await until(() => pool.threadCount === 0, { timeoutMs: 5_000, what: 'the thread to exit' });
    await carriesOn(pool);
    assert.equal((await outcomeOf(pool, 'keep', { mb: 1 })).success, true);
    assert.equal(pool.threadCount, 1, 'a thread that keeps little is reused');
  });

  it('cuts an error of 5,000,000 characters to the limit, marked', async () => {
    const pool = createPool({ capacity: 1, modules: [HOGS] });
    const error = await errorOf(outcomeOf(pool, 'longError'));
    assert.equal(error, `${'e'.repeat(MAX_ERROR_CHARS)}... (truncated)`);
  });

  it('rejects a budget outside 32..1048576 MiB', () => {
    for (const taskMemoryMb of [31, 1_048_577, 64.5]) {
      assert.throws(() => new TaskPool({ capacity: 1, taskMemoryMb }), {
        code: 'INVALID_OPTIONS',
        message: /taskMemoryMb must be an integer in 32\.\.1048576/,
      });
    }
  });
});
