/**
 * A signal survives `kill -9` of the coordinator and of the worker, through
 * the real scripts: a handler (test/fixtures/io-tasks.ts, `io.waitSignal`)
 * waits for `approve`; with its job WAITING, the worker is killed; a signal
 * is sent and acknowledged; the coordinator is killed before any worker
 * could run the job again; a new coordinator on the same database and a new
 * worker finish the job with the signal's payload, taken once.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import type { ScriptProcess } from '../helpers/processes.js';
import {
  runClient as client,
  startCoordinatorProcess,
  startWorkerProcess,
} from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const IO_TASKS = fileURLToPath(new URL('../fixtures/io-tasks.js', import.meta.url));

describe('a signal across kill -9 of the worker and the coordinator', { timeout: 120_000 }, () => {
  const temp = tempDir('dtp-e2e-signals-');
  const procs: ScriptProcess[] = [];

  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  function startWorker(workerPort: number, id: string): ScriptProcess {
    const proc = startWorkerProcess(workerPort, id, IO_TASKS, temp.dir);
    procs.push(proc);
    return proc;
  }

  it('the job resumes with the signal once both are back', async () => {
    const database = join(temp.dir, 'coordinator.db');
    const flags = [...['--database', database], ...['--heartbeat-timeout-millis', '1000']];
    const first = await startCoordinatorProcess(flags);
    procs.push(first.proc);
    const worker = startWorker(first.workerPort, 'e2e-signals-1');
    await first.proc.waitForOutput(/worker registered workerId=e2e-signals-1/);
    const submitted = client(
      first.clientPort,
      'submit',
      'io.waitSignal',
      '--payload',
      '{}',
      '--quiet',
    );
    assert.equal(submitted.status, 0, submitted.stderr);
    const jobId = submitted.stdout.trim();
    await until(
      () => {
        const status = client(first.clientPort, 'status', jobId, '--json');
        return (
          status.status === 0 &&
          (JSON.parse(status.stdout) as { state: string }).state === 'WAITING'
        );
      },
      { what: 'the job waiting for its signal', timeoutMs: 20_000, intervalMs: 100 },
    );
    await worker.kill();
    const signalled = client(
      first.clientPort,
      'signal',
      jobId,
      'approve',
      '--payload',
      '{"by": "ana"}',
      '--json',
    );
    assert.equal(signalled.status, 0, signalled.stdout + signalled.stderr);
    assert.equal((JSON.parse(signalled.stdout) as { resumed: boolean }).resumed, true);
    // Acknowledged, so durable: kill the coordinator before any worker runs the job again.
    await first.proc.kill();
    const second = await startCoordinatorProcess(flags);
    procs.push(second.proc);
    startWorker(second.workerPort, 'e2e-signals-2');
    const waited = client(
      second.clientPort,
      'wait',
      jobId,
      '--json',
      '--exit-status',
      '--timeout-millis',
      '30000',
    );
    assert.equal(waited.status, 0, waited.stdout + waited.stderr);
    const job = JSON.parse(waited.stdout) as {
      state: string;
      result: string;
      steps?: { name: string }[];
    };
    assert.equal(job.state, 'COMPLETED');
    assert.deepEqual(JSON.parse(job.result), { approved: { by: 'ana' } });
    assert.deepEqual(
      job.steps?.map((s) => s.name),
      ['dtp.waitForSignal'],
    );
  });
});
