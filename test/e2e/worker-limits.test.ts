/**
 * `scripts/worker.sh` as a separate process, at the edges of its limits:
 *
 * - every capacity up to the maximum starts with its default prefetch
 *   (2 x capacity);
 * - a cancel preempts computing tasks: four running PRIME_COUNT 50,000,000 on
 *   a 4-slot worker, cancelled, stop at once, which the worker process's own
 *   CPU time (read from /proc/<pid>/stat) shows, not only its log.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { MAX_CAPACITY } from '../../src/protocol/limits.js';
import { ScriptProcess } from '../helpers/processes.js';
import { startCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';
const PRIME_LIMIT_MAX = 50_000_000;

describe('worker.sh --capacity', () => {
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((proc) => proc.stop()));
  });

  for (const capacity of [600, MAX_CAPACITY]) {
    it(`starts with capacity ${capacity} and the default prefetch`, async () => {
      // Nothing listens on port 1: it starts, then keeps dialling.
      const proc = ScriptProcess.start('worker.sh', [
        ...['--capacity', String(capacity), '--coordinator-host', HOST],
        ...['--coordinator-port', '1', '--reconnect-delay-millis', '60000'],
      ]);
      procs.push(proc);
      await proc.waitForOutput(
        new RegExp(`worker started .*capacity=${capacity} prefetch=${2 * capacity}`),
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
