/**
 * Delayed jobs and a schedule across `kill -9` of the coordinator, end to end
 * through the scripts: the overdue delayed job runs once at the restart, the
 * far one stays SCHEDULED, and no tick of an `--every 1s` schedule makes two
 * jobs (missed ticks collapse into one catch-up job).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { DtpClient, TransportError } from '../../src/client/index.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import { ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';

async function scheduleJobs(client: DtpClient, name: string): Promise<JobSnapshot[]> {
  const jobs: JobSnapshot[] = [];
  for await (const job of client.list({})) if (job.scheduleName === name) jobs.push(job);
  return jobs;
}

describe('time across kill -9 of the coordinator, through the scripts', () => {
  const temp = tempDir('dtp-e2e-time-');
  const procs: ScriptProcess[] = [];
  let client: DtpClient | null = null;
  after(async () => {
    await client?.close();
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  it(
    'runs overdue jobs once after the restart and never makes two jobs for a tick',
    { timeout: 120_000 },
    async () => {
      const args = ['--database', `${temp.dir}/coordinator.db`, '--sweep-interval-millis', '50'];
      let coordinator = await startCoordinatorProcess(args);
      procs.push(coordinator.proc);
      const { workerPort, clientPort } = coordinator;
      procs.push(
        ScriptProcess.start('worker.sh', [
          ...['--coordinator-host', HOST, '--coordinator-port', String(workerPort)],
          ...['--id', 'time-w1', '--capacity', '2', '--reconnect-delay-millis', '100'],
        ]),
      );
      client = await DtpClient.connect({ host: HOST, port: clientPort });
      await client.schedules.set('beat', 'SHA256', { everyMs: 1_000, payload: { text: 'beat' } });
      const soon = await client.submit('SHA256', { text: 'soon' }, { delayMs: 1_500 });
      const far = await client.submit('SHA256', { text: 'far' }, { delayMs: 3_600_000 });
      const c1 = client;
      await until(async () => (await scheduleJobs(c1, 'beat')).length >= 1, { timeoutMs: 20_000 });
      await client.close();
      client = null;

      await coordinator.proc.kill(); // SIGKILL
      // While no coordinator runs, the delayed job falls due and a tick of the
      // schedule passes: wait on the clock for both, not a fixed time.
      const dueMs = Math.max(soon.snapshot.runAtMillis ?? 0, Date.now() + 1_000);
      await until(() => Date.now() > dueMs, { timeoutMs: 10_000, intervalMs: 50 });
      coordinator = await startCoordinatorProcess(args, { workerPort, clientPort });
      procs.push(coordinator.proc);
      for (let i = 0; client === null && i < 100; i++) {
        try {
          client = await DtpClient.connect({ host: HOST, port: clientPort });
        } catch (err) {
          if (!(err instanceof TransportError)) throw err;
          await delay(50);
        }
      }
      assert.ok(client !== null, 'the restarted coordinator did not answer');
      const c2 = client;
      const done = await c2.wait(soon.jobId, 30_000);
      assert.equal(done.state, 'COMPLETED');
      assert.equal(done.attempts, 1);
      assert.ok((done.startedAtMillis as number) >= (done.runAtMillis as number));
      assert.equal((await c2.status(far.jobId)).state, 'SCHEDULED');
      const before = (await scheduleJobs(c2, 'beat')).length;
      await until(async () => (await scheduleJobs(c2, 'beat')).length >= before + 2, {
        timeoutMs: 20_000,
      });
      const ticks = (await scheduleJobs(c2, 'beat')).map((j) => j.runAtMillis as number);
      assert.equal(new Set(ticks).size, ticks.length, `a tick made two jobs: ${ticks.join(', ')}`);
      const first = Math.min(...ticks);
      for (const tick of ticks) assert.equal((tick - first) % 1_000, 0, 'ticks keep their phase');
    },
  );
});
