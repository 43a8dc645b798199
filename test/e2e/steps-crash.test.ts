/**
 * A recorded step survives `kill -9` of its worker, through the real
 * scripts: a worker process runs a handler (test/fixtures/step-tasks.ts,
 * `steps.pause`) that records its first step and then pauses; the test
 * kills it with SIGKILL there, starts a second worker, and the job's second
 * attempt skips the first step (its body ran once: the counter file it
 * appends to says so) and runs the second.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { runsOf } from '../fixtures/step-tasks.js';
import type { ScriptProcess } from '../helpers/processes.js';
import { runClient, startCoordinatorProcess, startWorkerProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const STEP_TASKS = fileURLToPath(new URL('../fixtures/step-tasks.js', import.meta.url));

describe('durable steps across a worker killed with SIGKILL', { timeout: 120_000 }, () => {
  const temp = tempDir('dtp-e2e-steps-');
  const procs: ScriptProcess[] = [];

  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  function startWorker(workerPort: number, id: string): ScriptProcess {
    const proc = startWorkerProcess(workerPort, id, STEP_TASKS, temp.dir);
    procs.push(proc);
    return proc;
  }

  it('the second attempt skips the step the killed attempt recorded', async () => {
    const c = await startCoordinatorProcess([
      ...['--database', join(temp.dir, 'coordinator.db')],
      ...['--heartbeat-timeout-millis', '1000'],
    ]);
    procs.push(c.proc);
    const client = (...args: string[]) => runClient(c.clientPort, ...args);
    const first = startWorker(c.workerPort, 'e2e-steps-1');
    await c.proc.waitForOutput(/worker registered workerId=e2e-steps-1/);
    const payload = JSON.stringify({ dir: temp.dir });
    const submitted = client('submit', 'steps.pause', '--payload', payload, '--quiet');
    assert.equal(submitted.status, 0, submitted.stderr);
    const jobId = submitted.stdout.trim();
    // The first step is recorded (its body ran) and the handler waits between the two.
    await until(() => existsSync(join(temp.dir, 'between')), {
      what: 'the handler between its steps',
      timeoutMs: 20_000,
    });
    assert.equal(runsOf(temp.dir, 'first'), 1);
    await first.kill();
    startWorker(c.workerPort, 'e2e-steps-2');
    const waited = client('wait', jobId, '--json', '--exit-status', '--timeout-millis', '30000');
    assert.equal(waited.status, 0, waited.stdout + waited.stderr);
    const job = JSON.parse(waited.stdout) as {
      state: string;
      result: string;
      steps?: { name: string }[];
    };
    assert.equal(job.state, 'COMPLETED');
    assert.deepEqual(JSON.parse(job.result), { first: 1, second: 1, attempt: 2 });
    assert.equal(runsOf(temp.dir, 'first'), 1, 'the first step did not run again');
    assert.equal(runsOf(temp.dir, 'second'), 1);
    assert.deepEqual(
      job.steps?.map((s) => s.name),
      ['first', 'second'],
    );
  });
});
