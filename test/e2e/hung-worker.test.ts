import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

describe('a hung worker (SIGSTOP), end to end through the scripts', () => {
  const temp = tempDir('dtp-e2e-hung-');
  const procs: ScriptProcess[] = [];
  const workers = new Map<string, ScriptProcess>();
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
      '--retry-base-delay-millis',
      '50',
    ]);
    coordinator = started.proc;
    procs.push(coordinator);
    for (const id of ['hung-a', 'hung-b']) {
      workers.set(
        id,
        ScriptProcess.start('worker.sh', [
          '--coordinator-host',
          '127.0.0.1',
          '--coordinator-port',
          String(started.workerPort),
          '--id',
          id,
          '--capacity',
          '1',
          '--heartbeat-interval-millis',
          '100',
          '--reconnect-delay-millis',
          '100',
        ]),
      );
    }
    procs.push(...workers.values());
    client = await DtpClient.connect({ host: '127.0.0.1', port: started.clientPort });
    await until(async () => (await client.workers()).length === 2, {
      timeoutMs: 30_000,
      what: 'two workers',
    });
  });

  after(async () => {
    if (process.env.DTP_E2E_DUMP === '1') for (const p of procs) console.log(p.name, p.output);
    await client?.close();
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  it("moves the job to another worker and rejects the frozen worker's late result", async () => {
    const { jobId } = await client.submit({ taskType: 'SLEEP', payload: { durationMillis: 1500 } });
    const running = await until(
      async () => {
        const job = await client.status(jobId);
        return job.state === 'RUNNING' ? job : null;
      },
      { timeoutMs: 10_000, what: 'the job to run' },
    );
    const victimId = running.workerId as string;
    const victim = workers.get(victimId) as ScriptProcess;
    // Freeze it only once its task is really running (not merely assigned).
    await victim.waitForOutput(new RegExp(`task started .*jobId=${jobId}`));
    victim.signal('SIGSTOP');
    // The frozen worker misses heartbeats; the job moves on and completes elsewhere.
    const done = await client.wait(jobId, 30_000);
    assert.equal(done.state, 'COMPLETED');
    assert.equal(done.attempts, 2);
    assert.match(done.error ?? '', new RegExp(`worker ${victimId} lost \\(heartbeat timeout`));
    assert.equal(done.result, 'slept 1500 ms');
    // By now the frozen attempt's sleep is over too: thawed, it reports its
    // result, which the coordinator rejects as stale.
    victim.signal('SIGCONT');
    await coordinator.waitForOutput(
      new RegExp(`stale result rejected jobId=${jobId} .*workerId=${victimId}`),
    );
    await until(async () => (await client.workers()).some((w) => w.workerId === victimId), {
      timeoutMs: 10_000,
      what: `${victimId} to register again`,
    });
    const after = await client.status(jobId);
    assert.deepEqual(
      [after.state, after.attempts, after.result],
      ['COMPLETED', 2, 'slept 1500 ms'],
    );
  });
});
