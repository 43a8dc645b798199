import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { DtpClient, TransportError } from '../../src/client/index.js';
import { ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';

function startWorker(port: number, id: string, extra: string[] = []): ScriptProcess {
  return ScriptProcess.start('worker.sh', [
    ...[
      '--coordinator-host',
      HOST,
      '--coordinator-port',
      String(port),
      '--id',
      id,
      '--capacity',
      '1',
    ],
    ...['--heartbeat-interval-millis', '100', '--reconnect-delay-millis', '100', ...extra],
  ]);
}

describe('the start-up line', () => {
  for (const format of ['pretty', 'json']) {
    it(`names the ports at --log-level warn too (${format})`, async () => {
      const c = await startCoordinatorProcess([
        '--database',
        ':memory:',
        '--log-level',
        'warn',
        '--log-format',
        format,
      ]);
      try {
        assert.ok(c.workerPort > 0 && c.clientPort > 0);
      } finally {
        c.proc.signal('SIGTERM');
        assert.equal(await c.proc.exited, 0);
      }
    });
  }
});

describe('graceful stops through the scripts (SIGTERM)', () => {
  const temp = tempDir('dtp-e2e-stop-');
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  it('lets a worker finish its running job, take no new one, and exit 0', async () => {
    const c = await startCoordinatorProcess([
      '--database',
      `${temp.dir}/w.db`,
      '--heartbeat-timeout-millis',
      '60000',
    ]);
    procs.push(c.proc);
    const worker = startWorker(c.workerPort, 'term-w', ['--drain-timeout-millis', '10000']);
    procs.push(worker);
    const client = await DtpClient.connect({ host: HOST, port: c.clientPort });
    try {
      await until(async () => (await client.workers()).length === 1, {
        timeoutMs: 30_000,
        what: 'the worker',
      });
      const { jobId } = await client.submit({
        taskType: 'SLEEP',
        payload: { durationMillis: 800 },
      });
      await worker.waitForOutput(/task started/);
      worker.signal('SIGTERM');
      await c.proc.waitForOutput(/worker draining workerId=term-w/);
      const next = (await client.submit({ taskType: 'SHA256', payload: { text: 'after' } })).jobId;
      assert.equal(await worker.exited, 0);
      const job = await client.status(jobId);
      assert.deepEqual([job.state, job.attempts, job.result], ['COMPLETED', 1, 'slept 800 ms']);
      assert.equal((await client.status(next)).state, 'QUEUED');
    } finally {
      await client.close();
    }
  });

  it(
    'stops the coordinator under load without losing an acknowledged job',
    { timeout: 120_000 },
    async () => {
      const db = `${temp.dir}/c.db`;
      let c = await startCoordinatorProcess(['--database', db]);
      procs.push(c.proc);
      const { workerPort, clientPort } = c;
      procs.push(startWorker(workerPort, 'load-w'));
      const acked = new Map<string, string>();
      let stopped = false;
      const submitter = (async () => {
        const client = await DtpClient.connect({ host: HOST, port: clientPort });
        try {
          for (let i = 0; i < 400; i++) {
            const key = `term-${i}`;
            const { jobId } = await client.submit(
              { taskType: 'SHA256', payload: { text: key }, idempotencyKey: key },
              { retries: 300, baseDelayMs: 20, maxDelayMs: 100 },
            );
            acked.set(key, jobId);
          }
        } finally {
          await client.close();
        }
      })();
      await until(() => acked.size >= 100, { timeoutMs: 30_000, what: '100 acknowledged jobs' });
      c.proc.signal('SIGTERM');
      assert.equal(await c.proc.exited, 0, c.proc.output);
      stopped = true;
      await delay(200); // a short outage while submissions keep coming
      c = await startCoordinatorProcess(['--database', db], { workerPort, clientPort });
      procs.push(c.proc);
      await submitter;
      assert.ok(stopped);
      const client = await DtpClient.connect({ host: HOST, port: clientPort });
      try {
        for (const jobId of acked.values()) {
          const job = await client.wait(jobId, 30_000).catch((err: unknown) => {
            if (err instanceof TransportError) return client.wait(jobId, 30_000);
            throw err;
          });
          assert.equal(job.state, 'COMPLETED');
        }
        let total = 0;
        let cursor: string | null = null;
        do {
          const page = await client.listPage(
            cursor === null ? { limit: 1_000 } : { limit: 1_000, cursor },
          );
          total += page.jobs.length;
          cursor = page.nextCursor;
        } while (cursor !== null);
        assert.equal(acked.size, 400);
        assert.equal(total, 400, 'one job per key');
      } finally {
        await client.close();
      }
    },
  );
});
