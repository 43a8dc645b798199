/**
 * A schedule and queue settings across a failover on PostgreSQL, through the
 * scripts: the leader and the standby are both frozen with SIGSTOP while an
 * `--every 1s` schedule runs, until the store shows its next tick well
 * overdue, so that nobody leads for several ticks. The standby, let
 * go, takes over (the old leader is killed then), resumes the schedule where
 * the store says — no tick makes two jobs, and the ticks missed while nobody
 * led collapse into one catch-up job — and holds the paused queue and the
 * rate it reads from the store.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import {
  createTestDatabase,
  dropTestDatabase,
  postgresSkip,
  queryDatabase,
} from '../helpers/postgres.js';
import { health, leads, startPgNode } from '../helpers/pg-nodes.js';
import { ScriptProcess } from '../helpers/processes.js';
import { until } from '../helpers/until.js';

const skip = postgresSkip();
const procs: ScriptProcess[] = [];
let database = '';
let client: DtpClient | null = null;

after(async () => {
  await client?.close();
  await Promise.all(procs.map((p) => p.stop(2_000)));
  if (database !== '') await dropTestDatabase(database);
});

async function tickJobs(c: DtpClient, name: string): Promise<JobSnapshot[]> {
  const jobs: JobSnapshot[] = [];
  for await (const job of c.list({})) if (job.scheduleName === name) jobs.push(job);
  return jobs.sort((a, b) => (a.runAtMillis ?? 0) - (b.runAtMillis ?? 0));
}

describe('a schedule and queue settings across a PostgreSQL failover', { skip }, () => {
  it(
    'resumes the schedule on the new leader without a second job for any tick, and keeps the queues',
    { timeout: 120_000 },
    async () => {
      database = await createTestDatabase();
      const first = await startPgNode(database, procs);
      const epoch = await leads(first, 0);
      const second = await startPgNode(database, procs);
      const hosts = [first, second].map((n) => `127.0.0.1:${n.clientPort}`);
      client = await DtpClient.connect({
        host: hosts.join(','),
        port: first.clientPort,
        followTimeoutMs: 30_000,
      });
      await client.queues.pause('held');
      await client.queues.set('slow', { rateLimit: { max: 2, intervalMillis: 60_000 } });
      const held = await client.submit('SHA256', { text: 'held' }, { queue: 'held' });
      await client.schedules.set('beat', 'SHA256', { everyMs: 1_000, payload: { text: 'b' } });
      await until(async () => (await tickJobs(client as DtpClient, 'beat')).length >= 2, {
        timeoutMs: 20_000,
        what: 'two ticks on the first leader',
      });

      // Nobody leads for at least three ticks: the standby is frozen too,
      // and let go only well after the leader's lease ran out.
      second.proc.signal('SIGSTOP');
      first.proc.signal('SIGSTOP');
      const frozenAt = Date.now();
      // Frozen until the store shows the schedule's next tick well overdue:
      // two ticks or more fell while nobody led.
      await until(
        async () => {
          const rows = await queryDatabase<{ next: string | null }>(
            database,
            "SELECT next_run_at_ms AS next FROM dtp.schedules WHERE name = 'beat'",
          );
          const next = Number(rows[0]?.next ?? Infinity);
          return Date.now() - next >= 2_500;
        },
        { timeoutMs: 15_000, intervalMs: 50, what: 'ticks to pass while nobody leads' },
      );
      second.proc.signal('SIGCONT');
      await leads(second, epoch);
      // The frozen leader keeps its connections open (a client's request to
      // it would wait): once the standby leads, it goes for good.
      await first.proc.kill();
      await until(
        async () =>
          (await tickJobs(client as DtpClient, 'beat')).filter(
            (j) => (j.runAtMillis ?? 0) > frozenAt + 3_000,
          ).length >= 2,
        { timeoutMs: 30_000, what: 'two ticks on the new leader' },
      );
      assert.equal((await health(second)).status, 200);

      const jobs = await tickJobs(client, 'beat');
      const ticks = jobs.map((j) => j.runAtMillis ?? 0);
      assert.equal(new Set(ticks).size, ticks.length, `a tick made two jobs: ${ticks.join(', ')}`);
      for (const [k, tick] of ticks.entries()) {
        if (k > 0)
          assert.equal((tick - (ticks[k - 1] as number)) % 1_000, 0, 'ticks of one cadence');
      }
      // The ticks that fell while nobody led made one job, not one each.
      const gaps = ticks.slice(1).map((tick, k) => tick - (ticks[k] as number));
      assert.ok(
        gaps.some((gap) => gap >= 2_000),
        `no tick was collapsed into a catch-up: ${gaps.join(', ')}`,
      );

      const queues = await client.queues.list();
      const heldQueue = queues.find((q) => q.name === 'held');
      assert.equal(heldQueue?.paused, true);
      assert.deepEqual(queues.find((q) => q.name === 'slow')?.rateLimit, {
        max: 2,
        intervalMillis: 60_000,
      });
      // A worker on the new leader takes the schedule's jobs but nothing of the paused queue.
      const worker = ScriptProcess.start('worker.sh', [
        '--coordinator-host',
        `127.0.0.1:${second.workerPort}`,
        '--id',
        'w1',
        '--capacity',
        '4',
        '--log-level',
        'warn',
      ]);
      procs.push(worker);
      const ran = jobs.at(-1) as JobSnapshot;
      assert.equal((await client.wait(ran.jobId, 30_000)).state, 'COMPLETED');
      assert.equal((await client.status(held.jobId)).state, 'QUEUED');
      await client.queues.resume('held');
      assert.equal((await client.wait(held.jobId, 30_000)).state, 'COMPLETED');
      await client.schedules.delete('beat');
    },
  );
});
