/**
 * The coordinator itself frozen (SIGSTOP) for longer than the heartbeat
 * timeout, end to end: when it runs again it reads what its workers sent
 * meanwhile (heartbeats, a finished result) before it judges anyone, and
 * forgives the time it was not running. No healthy worker is declared lost
 * and a result that arrived during the pause is accepted on its first
 * attempt.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const PAUSE_MS = 3_000;

describe('a frozen coordinator (SIGSTOP), end to end through the scripts', () => {
  const temp = tempDir('dtp-e2e-frozen-');
  const procs: ScriptProcess[] = [];
  let client: DtpClient;
  let coordinator: ScriptProcess;

  before(async () => {
    const started = await startCoordinatorProcess([
      '--database',
      `${temp.dir}/coordinator.db`,
      '--heartbeat-timeout-millis',
      '1000',
      '--sweep-interval-millis',
      '50',
    ]);
    coordinator = started.proc;
    procs.push(coordinator);
    procs.push(
      ScriptProcess.start(
        'worker.sh',
        [
          '--coordinator-host',
          '127.0.0.1',
          '--coordinator-port',
          String(started.workerPort),
          '--id',
          'steady',
          '--capacity',
          '1',
          '--heartbeat-interval-millis',
          '100',
        ],
        // The worker's own watch on a silent coordinator is not what this is about.
        { env: { DTP_COORDINATOR_TIMEOUT_MILLIS: '600000' } },
      ),
    );
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

  it('loses no healthy worker and accepts the result that arrived while it was frozen', async () => {
    const { jobId } = await client.submit({
      taskType: 'SLEEP',
      payload: { durationMillis: 500 },
      maxAttempts: 1,
    });
    await coordinator.waitForOutput(new RegExp(`job assigned .*jobId=${jobId}`));
    coordinator.signal('SIGSTOP');
    // Long enough for the task to end and for the heartbeat timeout to pass twice.
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
    coordinator.signal('SIGCONT');
    const done = await client.wait(jobId, 30_000);
    assert.deepEqual([done.state, done.attempts], ['COMPLETED', 1]);
    await coordinator.waitForOutput(/coordinator stalled/);
    assert.doesNotMatch(coordinator.output, /worker lost/);
    const workers = await client.workers();
    assert.deepEqual(
      workers.map((w) => w.workerId),
      ['steady'],
    );
  });
});
