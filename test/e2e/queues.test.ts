/**
 * Named queues end to end through the scripts: a pause and a rate limit set
 * with `client.sh queue` survive `kill -9` of the coordinator; after the
 * restart the paused queue still starts nothing (a worker is free), and the
 * rate is still held once the queue is resumed.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { ROOT, runLine, ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';

const HOST = '127.0.0.1';

describe('queue settings across kill -9, through the scripts', () => {
  const temp = tempDir('dtp-e2e-queues-');
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  async function cli(port: number, ...args: string[]): Promise<Record<string, unknown>> {
    const client = join(ROOT, 'scripts', 'client.sh');
    const line = [client, ...args, '--host', HOST, '--port', String(port), '--json']
      .map((a) => `'${a}'`)
      .join(' ');
    const ran = await runLine(line, { cwd: temp.dir, timeoutMs: 60_000 });
    assert.equal(ran.status, 0, `${args.join(' ')}: ${ran.stdout}${ran.stderr}`);
    return JSON.parse(ran.stdout) as Record<string, unknown>;
  }

  it('keeps a pause and a rate after SIGKILL and a restart', { timeout: 120_000 }, async () => {
    const db = `${temp.dir}/coordinator.db`;
    const flags = ['--database', db, '--sweep-interval-millis', '20'];
    let coordinator = await startCoordinatorProcess(flags);
    procs.push(coordinator.proc);
    const { workerPort, clientPort } = coordinator;
    await cli(clientPort, 'queue', 'pause', 'reports');
    const limited = await cli(clientPort, 'queue', 'set', 'reports', '--rate', '2/1s');
    assert.deepEqual(limited.rateLimit, { max: 2, intervalMillis: 1_000 });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const out = await cli(
        clientPort,
        'submit',
        'sleep',
        '--milliseconds',
        '1',
        '--queue',
        'reports',
      );
      ids.push(out.jobId as string);
    }
    await coordinator.proc.kill(); // SIGKILL
    coordinator = await startCoordinatorProcess(flags, { workerPort, clientPort });
    procs.push(coordinator.proc);
    const worker = ScriptProcess.start('worker.sh', [
      ...['--coordinator-host', HOST, '--coordinator-port', String(workerPort)],
      ...['--id', 'queues-w1', '--capacity', '4', '--heartbeat-interval-millis', '100'],
    ]);
    procs.push(worker);
    await worker.waitForOutput(/registered/);
    const client = await DtpClient.connect({ host: HOST, port: clientPort });
    try {
      const [reports] = (await client.queues.list()).filter((q) => q.name === 'reports');
      assert.equal(reports?.paused, true);
      assert.deepEqual(reports?.rateLimit, { max: 2, intervalMillis: 1_000 });
      // A free worker and a paused queue: nothing starts.
      const deadline = Date.now() + 500;
      while (Date.now() < deadline) {
        const jobs = await Promise.all(ids.map((id) => client.status(id)));
        assert.ok(jobs.every((j) => j.state === 'QUEUED' && j.attempts === 0));
      }
      await cli(clientPort, 'queue', 'resume', 'reports');
      const done = await Promise.all(ids.map((id) => client.wait(id, 60_000)));
      assert.ok(done.every((j) => j.state === 'COMPLETED'));
      const starts = done.map((j) => j.startedAtMillis ?? 0).sort((a, b) => a - b);
      for (let i = 0; i + 2 < starts.length; i++) {
        assert.ok(
          (starts[i + 2] as number) - (starts[i] as number) >= 1_000,
          `3 starts within 1 s: ${starts.join(', ')}`,
        );
      }
    } finally {
      await client.close();
    }
  });
});
