import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { DtpClient, TransportError } from '../../src/client/index.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import { ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { Random } from '../sim/random.js';

/** At least this many jobs; clients go on submitting until the last kill is done. */
const JOBS = 2_000;
/** A bound on the load however slow the kills are. */
const MAX_JOBS = 20_000;
const CLIENTS = 4;
const KILLS = 4;
const HOST = '127.0.0.1';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** Retries a read across coordinator restarts (transport errors only). */
async function persistently<T>(port: number, fn: (c: DtpClient) => Promise<T>): Promise<T> {
  for (let attempt = 0; attempt < 600; attempt++) {
    let client: DtpClient | null = null;
    try {
      client = await DtpClient.connect({ host: HOST, port });
      return await fn(client);
    } catch (err) {
      if (!(err instanceof TransportError)) throw err;
      await delay(50);
    } finally {
      await client?.close();
    }
  }
  throw new Error('the coordinator did not come back');
}

describe('coordinator killed with SIGKILL under load, end to end through the scripts', () => {
  const temp = tempDir('dtp-e2e-crash-');
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  it('loses no acknowledged job and duplicates none', { timeout: 300_000 }, async () => {
    const db = `${temp.dir}/coordinator.db`;
    const timings = [
      '--heartbeat-timeout-millis',
      '2000',
      '--sweep-interval-millis',
      '50',
      '--retry-base-delay-millis',
      '50',
    ];
    let coordinator = await startCoordinatorProcess(['--database', db, ...timings]);
    procs.push(coordinator.proc);
    const { workerPort, clientPort } = coordinator;
    for (const id of ['crash-w1', 'crash-w2']) {
      procs.push(
        ScriptProcess.start('worker.sh', [
          ...['--coordinator-host', HOST, '--coordinator-port', String(workerPort), '--id', id],
          ...[
            '--capacity',
            '4',
            '--heartbeat-interval-millis',
            '100',
            '--reconnect-delay-millis',
            '100',
          ],
        ]),
      );
    }

    const acked = new Map<string, string>(); // key -> jobId
    let transportRetries = 0;
    let duplicatesSeen = 0;
    let next = 0;
    let submitted = 0;
    let killerDone = false;
    const submitAll = async (): Promise<void> => {
      const client = await DtpClient.connect({ host: HOST, port: clientPort });
      try {
        // Under load until every kill has happened, however fast the jobs go.
        for (let i = next++; i < MAX_JOBS && (i < JOBS || !killerDone); i = next++) {
          submitted++;
          const key = `crash-key-${i}`;
          const { jobId } = await client.submit(
            {
              taskType: 'SHA256',
              payload: { text: `crash-text-${i}` },
              idempotencyKey: key,
              maxAttempts: 10,
            },
            { retries: 200, baseDelayMs: 20, maxDelayMs: 200, onRetry: () => transportRetries++ },
          );
          if (acked.has(key) && acked.get(key) !== jobId) duplicatesSeen++;
          acked.set(key, jobId);
        }
      } finally {
        await client.close();
      }
    };

    const random = new Random(2026); // the same kill moments on every run
    let kills = 0;
    const killer = (async () => {
      while (kills < KILLS) {
        await delay(random.int(200, 800));
        await coordinator.proc.kill(); // SIGKILL
        kills++;
        coordinator = await startCoordinatorProcess(['--database', db, ...timings], {
          workerPort,
          clientPort,
        });
        procs.push(coordinator.proc);
      }
      killerDone = true;
    })();
    await Promise.all([...Array.from({ length: CLIENTS }, submitAll), killer]);

    // Every acknowledged job completes, with the right hash.
    let completed = 0;
    for (const [key, jobId] of acked) {
      const i = Number(key.slice('crash-key-'.length));
      const job: JobSnapshot = await persistently(clientPort, (c) => c.wait(jobId, 60_000));
      assert.equal(job.state, 'COMPLETED', `${key}: ${JSON.stringify(job)}`);
      assert.equal(job.result, sha256(`crash-text-${i}`));
      completed++;
    }
    // Exactly one job per key: list every job through the cursor pages.
    const all: JobSnapshot[] = await persistently(clientPort, async (c) => {
      const jobs: JobSnapshot[] = [];
      let cursor: string | null = null;
      do {
        const page = await c.listPage(
          cursor === null ? { limit: 1_000 } : { limit: 1_000, cursor },
        );
        jobs.push(...page.jobs);
        cursor = page.nextCursor;
      } while (cursor !== null);
      return jobs;
    });
    const ids = new Set(all.map((j) => j.jobId));
    console.log(
      `crash test: ${submitted} submitted, ${acked.size} acknowledged, ${completed} completed, ` +
        `${all.length} jobs stored, ${kills} SIGKILLs, ${transportRetries} client retries, ` +
        `${duplicatesSeen} key answered with another job`,
    );
    assert.equal(kills, KILLS);
    assert.ok(submitted >= JOBS);
    assert.equal(acked.size, submitted);
    assert.equal(duplicatesSeen, 0);
    assert.equal(all.length, submitted, 'one stored job per idempotency key');
    for (const jobId of acked.values()) assert.ok(ids.has(jobId));
  });
});
