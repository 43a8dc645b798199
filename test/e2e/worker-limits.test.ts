/**
 * `scripts/worker.sh` as a separate process, at the edges of its limits:
 *
 * - every capacity up to the maximum (10,000) starts with its default
 *   prefetch (4 x capacity, at most 4,096);
 * - a cancel preempts computing tasks: four running PRIME_COUNT 50,000,000 on
 *   a 4-slot worker, cancelled, stop at once, which the worker process's own
 *   CPU time (read from /proc/<pid>/stat) shows, not only its log;
 * - `--task-memory-mb`: a task that fills its heap, one that allocates 2 GiB
 *   of Buffers in one go, and one that throws a 5 MB error each fail their
 *   job with a clear error (the first two alone on their thread: failed in
 *   one attempt, not requeued); one that keeps 200 MiB until it ends completes
 *   (twice);
 *   after each, the worker's resident memory comes back, and the next job
 *   runs.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { MAX_CAPACITY, MAX_ERROR_CHARS, MAX_SLOTS } from '../../src/protocol/limits.js';
import { defaultPrefetch } from '../../src/worker/options.js';
import { ScriptProcess } from '../helpers/processes.js';
import { startCoordinator, tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';
const PRIME_LIMIT_MAX = 50_000_000;

describe('worker.sh --capacity', () => {
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((proc) => proc.stop()));
  });

  for (const capacity of [600, MAX_CAPACITY, MAX_SLOTS]) {
    it(`starts with capacity ${capacity} and the default prefetch`, async () => {
      // Nothing listens on port 1: it starts, then keeps dialling.
      const proc = ScriptProcess.start('worker.sh', [
        ...['--capacity', String(capacity), '--coordinator-host', HOST],
        ...['--coordinator-port', '1', '--reconnect-delay-millis', '60000'],
      ]);
      procs.push(proc);
      await proc.waitForOutput(
        new RegExp(
          `worker started .*capacity=${capacity} threads=\\d+ prefetch=${defaultPrefetch(capacity)}`,
        ),
      );
      assert.equal(await proc.stop(), 0, proc.output);
    });
  }
});

function count(text: string, pattern: RegExp): number {
  return [...text.matchAll(new RegExp(pattern.source, 'g'))].length;
}

describe('worker.sh and a cancel of computing tasks', () => {
  const cleanups: (() => Promise<unknown> | void)[] = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('stops four running PRIME_COUNT 50,000,000 at once: the worker burns no CPU after the cancel', async () => {
    const c = await startCoordinator({ heartbeatTimeoutMs: 10_000 });
    cleanups.push(() => c.close());
    const worker = ScriptProcess.start('worker.sh', [
      ...['--capacity', '4', '--prefetch', '0', '--heartbeat-interval-millis', '500'],
      ...['--coordinator-host', HOST, '--coordinator-port', String(c.coordinator.workerPort)],
    ]);
    cleanups.push(() => worker.stop());
    await worker.waitForOutput(/registered/);
    const client = await DtpClient.connect({ host: HOST, port: c.coordinator.clientPort });
    cleanups.push(() => client.close());
    const submitPrime = async (): Promise<string> =>
      (await client.submit({ taskType: 'PRIME_COUNT', payload: { limit: PRIME_LIMIT_MAX } })).jobId;

    // What one whole count costs this worker, to compare the cancel with.
    const wholeStartMs = worker.cpuMs();
    assert.equal((await client.wait(await submitPrime(), 60_000)).state, 'COMPLETED');
    const wholeMs = worker.cpuMs() - wholeStartMs;

    const jobIds = await Promise.all([1, 2, 3, 4].map(() => submitPrime()));
    await until(() => count(worker.output, /task started/) === 5, {
      timeoutMs: 30_000,
      what: 'the four counts to run',
    });
    const cancelCpuMs = worker.cpuMs();
    for (const jobId of jobIds) await client.cancel(jobId);
    await until(() => count(worker.output, /task stopped/) === 4, {
      timeoutMs: 30_000,
      what: 'the four counts to stop',
    });
    const afterCancelMs = worker.cpuMs() - cancelCpuMs;
    assert.equal(count(worker.output, /task stopped: the handler stopped/), 4, worker.output);
    // Four counts that ran on would cost about four whole ones.
    assert.ok(
      afterCancelMs < wholeMs,
      `${afterCancelMs} ms of CPU after the cancel; one whole count: ${wholeMs} ms`,
    );
  });
});

const HOGS = `
export default {
  heap: async () => { const a = []; for (;;) a.push({ n: Math.random(), s: 'x'.repeat(40) + Math.random() }); },
  buffersAtOnce: () => { const kept = []; for (let i = 0; i < 2048; i++) kept.push(Buffer.alloc(1 << 20, 1)); return 'all 2 GiB'; },
  keep: (payload) => { const kept = []; for (let i = 0; i < payload.mb; i++) kept.push(Buffer.alloc(1 << 20, 1)); return String(kept.length); },
  longError: async () => { throw new Error('e'.repeat(5_000_000)); },
};
`;

describe('worker.sh --task-memory-mb', () => {
  const temp = tempDir('dtp-e2e-memory-');
  const cleanups: (() => Promise<unknown> | void)[] = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    temp.remove();
  });

  it('fails the jobs of tasks over their memory, clearly, and gives the memory back', async () => {
    writeFileSync(join(temp.dir, 'hogs.mjs'), HOGS);
    const c = await startCoordinator({ heartbeatTimeoutMs: 10_000 });
    cleanups.push(() => c.close());
    const worker = ScriptProcess.start(
      'worker.sh',
      [
        ...['--task-memory-mb', '256', '--tasks', './hogs.mjs', '--capacity', '1'],
        ...['--heartbeat-interval-millis', '500', '--coordinator-host', HOST],
        ...['--coordinator-port', String(c.coordinator.workerPort)],
      ],
      { cwd: temp.dir },
    );
    cleanups.push(() => worker.stop());
    await worker.waitForOutput(/registered/);
    const client = await DtpClient.connect({ host: HOST, port: c.coordinator.clientPort });
    cleanups.push(() => client.close());
    const baselineMb = worker.rssMb();
    const run = async (taskType: string, payload = {}) => {
      const { jobId } = await client.submit({ taskType, payload, maxAttempts: 1 });
      const job = await client.wait(jobId, 60_000);
      // Whatever the task took, the worker gives it back.
      await until(() => worker.rssMb() < baselineMb + 100, {
        timeoutMs: 5_000,
        what: `the worker's memory back near ${Math.round(baselineMb)} MiB after ${taskType}`,
      });
      return job;
    };

    // Twice: the allocator may keep the second round's memory in its arenas.
    for (const round of [1, 2]) {
      const kept = await run('keep', { mb: 200 });
      assert.equal(kept.state, 'COMPLETED', `round ${round}`);
      assert.equal(kept.result, '200');
    }
    const atOnce = await run('buffersAtOnce');
    assert.equal(atOnce.state, 'FAILED');
    // Alone on its thread, the attempt is the culprit: failed, not requeued to run again.
    assert.equal(atOnce.attempts, 1);
    assert.equal(atOnce.requeues ?? 0, 0);
    assert.match(
      atOnce.error ?? '',
      /^the worker's memory \(\d+ MiB resident\) went over its budget/,
    );
    const heap = await run('heap');
    assert.equal(heap.state, 'FAILED');
    assert.equal(heap.attempts, 1);
    assert.equal(heap.requeues ?? 0, 0);
    // The coordinator adds how many attempts were used.
    assert.ok(
      heap.error?.startsWith(
        'task thread ran out of memory: its JavaScript heap reached the 256 MiB limit (--task-memory-mb)',
      ),
      heap.error ?? '',
    );
    const long = await run('longError');
    assert.equal(long.state, 'FAILED');
    assert.ok(long.error?.startsWith(`${'e'.repeat(MAX_ERROR_CHARS)}... (truncated)`));
    assert.ok((long.error ?? '').length < MAX_ERROR_CHARS + 100);
    const next = await run('SHA256', { text: 'a' });
    assert.equal(next.state, 'COMPLETED');
  });
});
