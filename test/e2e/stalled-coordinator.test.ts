/**
 * The coordinator paused (SIGSTOP) for 10 s with every timeout at its
 * default, end to end through the scripts. The worker's own watch on a
 * silent coordinator drops the connection during the pause and redials (the
 * kernel still accepts, so dials it gives up on pile up unanswered); the
 * long task ends meanwhile. When the coordinator runs again it must not fail
 * the finished attempt because of a connection that died while it was not
 * running, and must not hand queued jobs to a connection whose end it has
 * already read: the long job completes with its first attempt's result, and
 * the queued jobs run.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

/** The length of the pause is what is tested: longer than the worker's coordinator timeout (6 s). */
const PAUSE_MS = 10_000;

describe('a coordinator paused for 10 s with default timeouts, end to end', () => {
  const temp = tempDir('dtp-e2e-stalled-');
  const procs: ScriptProcess[] = [];
  let client: DtpClient;
  let coordinator: ScriptProcess;
  let worker: ScriptProcess;

  before(async () => {
    const started = await startCoordinatorProcess(['--database', `${temp.dir}/coordinator.db`]);
    coordinator = started.proc;
    procs.push(coordinator);
    worker = ScriptProcess.start('worker.sh', [
      '--coordinator-host',
      '127.0.0.1',
      '--coordinator-port',
      String(started.workerPort),
      '--id',
      'w',
      '--capacity',
      '1',
    ]);
    procs.push(worker);
    client = await DtpClient.connect({ host: '127.0.0.1', port: started.clientPort });
    await until(async () => (await client.workers()).length === 1, {
      timeoutMs: 30_000,
      what: 'the worker',
    });
  });

  after(async () => {
    if (process.env.DTP_E2E_DUMP === '1') for (const p of procs) console.log(p.name, p.output);
    await client?.close();
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  it('fails no job: the long job keeps its first attempt, the queued ones run', async () => {
    const submit = (durationMillis: number) =>
      client.submit({ taskType: 'SLEEP', payload: { durationMillis }, maxAttempts: 1 });
    const long = await submit(8_000);
    const queued = [await submit(100), await submit(100)];
    await worker.waitForOutput(new RegExp(`task started .*jobId=${long.jobId}`));
    // The scenario itself: the coordinator stops half a second into the long
    // job (the job is known to run; this is not a wait for it).
    await new Promise((resolve) => setTimeout(resolve, 500));
    coordinator.signal('SIGSTOP');
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
    coordinator.signal('SIGCONT');
    const done = await client.wait(long.jobId, 20_000);
    assert.equal(done.state, 'COMPLETED', `long job: ${JSON.stringify(done)}`);
    assert.equal(done.attempts, 1);
    assert.equal(done.result, 'slept 8000 ms');
    for (const job of queued) {
      const end = await client.wait(job.jobId, 20_000);
      assert.deepEqual([end.state, end.attempts], ['COMPLETED', 1], JSON.stringify(end));
    }
    assert.doesNotMatch(coordinator.output, /job failed/);
  });
});
