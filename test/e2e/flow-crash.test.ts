/**
 * A flow half done when the coordinator is killed with SIGKILL: a -> b, c ->
 * d through the real scripts. The coordinator dies once a and c are
 * COMPLETED, b is RUNNING (a task that takes a few seconds) and d is
 * WAITING; a new coordinator on the same SQLite file must finish the flow in
 * dependency order: every job COMPLETED once, and no attempt of a dependent
 * started before its parents had completed (the coordinator's own stamps:
 * attempt start vs parent end).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import { ROOT, ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';
const TASKS = join(ROOT, 'dist', 'test', 'fixtures', 'custom-tasks.js');

/** `fn` on a fresh connection (a poll across a restart: the caller retries on any error). */
async function withClient<T>(port: number, fn: (c: DtpClient) => Promise<T>): Promise<T> {
  const client = await DtpClient.connect({ host: HOST, port });
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

describe('coordinator killed with SIGKILL in the middle of a flow', () => {
  const temp = tempDir('dtp-e2e-flow-crash-');
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  it(
    'finishes the flow after a restart, in dependency order, each job once',
    {
      timeout: 120_000,
    },
    async () => {
      const db = `${temp.dir}/coordinator.db`;
      const timings = ['--heartbeat-timeout-millis', '2000', '--sweep-interval-millis', '50'];
      const first = await startCoordinatorProcess(['--database', db, ...timings]);
      procs.push(first.proc);
      const { workerPort, clientPort } = first;
      procs.push(
        ScriptProcess.start('worker.sh', [
          ...['--coordinator-host', HOST, '--coordinator-port', String(workerPort)],
          ...['--id', 'flow-crash-w1', '--capacity', '4', '--tasks', TASKS],
          ...['--heartbeat-interval-millis', '100', '--reconnect-delay-millis', '100'],
        ]),
      );
      await until(() => withClient(clientPort, async (c) => (await c.workers()).length === 1), {
        timeoutMs: 30_000,
        what: 'the worker',
      });

      const flow = await withClient(clientPort, (c) =>
        c.submitFlow({
          jobs: [
            { ref: 'a', taskType: 'reverse', payload: { text: 'abc' } },
            {
              ref: 'b',
              taskType: 'polite',
              payload: { ms: 3_000 },
              dependsOn: ['a'],
              maxAttempts: 5,
            },
            { ref: 'c', taskType: 'reverse', payload: { text: 'xyz' }, dependsOn: ['a'] },
            { ref: 'd', taskType: 'reverse', payload: { text: 'end' }, dependsOn: ['b', 'c'] },
          ],
        }),
      );
      const id = (ref: string): string => flow.jobs[ref] as string;
      const states = (c: DtpClient): Promise<string[]> =>
        Promise.all(['a', 'b', 'c', 'd'].map(async (ref) => (await c.status(id(ref))).state));

      // Half done: a and c COMPLETED, b RUNNING, d WAITING.
      await until(
        () =>
          withClient(clientPort, async (c) => {
            const now = await states(c);
            return now.join() === 'COMPLETED,RUNNING,COMPLETED,WAITING' ? now : null;
          }),
        { timeoutMs: 30_000, intervalMs: 20, what: 'the flow half done' },
      );
      await first.proc.kill();

      const second = await startCoordinatorProcess(['--database', db, ...timings], {
        workerPort,
        clientPort,
      });
      procs.push(second.proc);
      await until(
        () =>
          withClient(clientPort, async (c) => (await states(c)).every((s) => s === 'COMPLETED')),
        { timeoutMs: 60_000, intervalMs: 50, what: 'every job of the flow COMPLETED' },
      );

      await withClient(clientPort, async (c) => {
        const jobs = new Map<string, { job: JobSnapshot; starts: number[] }>();
        for (const ref of ['a', 'b', 'c', 'd']) {
          const got = await c.status(id(ref), { attempts: true });
          assert.ok(got.attempts !== null, 'the coordinator keeps attempts');
          jobs.set(ref, { job: got.job, starts: got.attempts.map((a) => a.startedAtMillis) });
        }
        const get = (ref: string): { job: JobSnapshot; starts: number[] } =>
          jobs.get(ref) as { job: JobSnapshot; starts: number[] };
        const parentsOf: Record<string, string[]> = { b: ['a'], c: ['a'], d: ['b', 'c'] };
        for (const [ref, parents] of Object.entries(parentsOf)) {
          const ended = Math.max(...parents.map((p) => get(p).job.finishedAtMillis ?? Infinity));
          for (const start of get(ref).starts) {
            assert.ok(start >= ended, `${ref} attempt started at ${start}, parents ended ${ended}`);
          }
        }
        assert.equal(get('d').job.result, 'dne');
        assert.equal(get('d').starts.length, 1, 'd ran once, after the restart');
        // One job per ref: the store holds the four jobs and nothing else.
        const all = await c.listPage({ limit: 100 });
        assert.deepEqual(all.jobs.map((j) => j.jobId).sort(), ['a', 'b', 'c', 'd'].map(id).sort());
        assert.ok(all.jobs.every((j) => j.state === 'COMPLETED'));
      });
    },
  );
});
