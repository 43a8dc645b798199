/**
 * Batches and `kill -9` of the coordinator, through the scripts: every id a
 * JOBS_SUBMITTED reported is there after the restart, and a batch that was
 * in flight at the kill is there whole or not at all.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DtpClient, TransportError } from '../../src/client/index.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import { startCoordinatorProcess, type ScriptProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';

const HOST = '127.0.0.1';
const BATCH = 200;
const KILLS = 3;
const PRODUCERS = 2;

async function allJobs(port: number): Promise<JobSnapshot[]> {
  const client = await DtpClient.connect({ host: HOST, port });
  try {
    const jobs: JobSnapshot[] = [];
    let cursor: string | null = null;
    do {
      const page = await client.listPage(
        cursor === null ? { limit: 1_000 } : { limit: 1_000, cursor },
      );
      jobs.push(...page.jobs);
      cursor = page.nextCursor;
    } while (cursor !== null);
    return jobs;
  } finally {
    await client.close();
  }
}

describe('SUBMIT_JOBS and a coordinator killed with SIGKILL', () => {
  const temp = tempDir('dtp-e2e-bulk-crash-');
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  it('keeps every acknowledged batch, and no part of one', { timeout: 120_000 }, async () => {
    const db = `${temp.dir}/coordinator.db`;
    let coordinator = await startCoordinatorProcess(['--database', db]);
    procs.push(coordinator.proc);
    const { workerPort, clientPort } = coordinator;
    const acked: string[] = [];
    for (let kill = 0; kill < KILLS; kill++) {
      let stop = false;
      const killed: Promise<void>[] = [];
      const produce = async (p: number): Promise<void> => {
        const client = await DtpClient.connect({ host: HOST, port: clientPort });
        try {
          for (let n = 0; !stop && n < 50; n++) {
            const jobs = Array.from({ length: BATCH }, (_, i) => ({
              taskType: 'SHA256',
              payload: { text: `k${kill}-p${p}-b${n}-${i}` },
            }));
            const ids = await client.submitMany(jobs);
            acked.push(...ids);
            // Right after a reply (the other producer's batch may be in flight).
            if (p === 0 && n === 2) {
              stop = true;
              killed.push(coordinator.proc.kill());
            }
          }
        } catch (err) {
          if (!(err instanceof TransportError)) throw err;
        } finally {
          await client.close().catch(() => undefined);
        }
      };
      await Promise.all(Array.from({ length: PRODUCERS }, (_, p) => produce(p)));
      await Promise.all(killed);
      coordinator = await startCoordinatorProcess(['--database', db], { workerPort, clientPort });
      procs.push(coordinator.proc);
    }
    const stored = await allJobs(clientPort);
    const ids = new Set(stored.map((job) => job.jobId));
    for (const id of acked) assert.ok(ids.has(id), `acknowledged job ${id} is gone`);
    const unacknowledged = stored.length - acked.length;
    assert.ok(
      unacknowledged >= 0 && unacknowledged % BATCH === 0 && unacknowledged <= KILLS * BATCH,
      `${stored.length} stored for ${acked.length} acknowledged: a batch was kept in part`,
    );
  });
});
