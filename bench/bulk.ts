/**
 * Bulk submission: real coordinator and workers as processes, 4 producer
 * connections in this process, each submitting its share of SHA256 jobs in
 * batches (SUBMIT_JOBS of `batch` jobs, the next once the previous one is
 * acknowledged), or one SUBMIT_JOB at a time for `batch` 1. Reports how fast
 * the jobs were acknowledged and how fast they were all done (no job QUEUED
 * or RUNNING any more, polled every 20 ms).
 */
import { DtpClient } from '../src/client/index.js';
import { until } from '../test/helpers/until.js';
import { HOST, startCluster } from './harness.js';

export interface BulkRun {
  batch: number;
  /** Jobs acknowledged per second, over the submission phase. */
  submittedPerSec: number;
  /** Jobs done per second, from the first submission to the last completion. */
  donePerSec: number;
}

const PRODUCERS = 4;

async function produce(port: number, jobs: number, batch: number, tag: string): Promise<void> {
  const client = await DtpClient.connect({ host: HOST, port });
  try {
    for (let sent = 0; sent < jobs; sent += batch) {
      const n = Math.min(batch, jobs - sent);
      const texts = Array.from({ length: n }, (_, i) => `${tag}-${sent + i}`);
      if (batch === 1) await client.submit('SHA256', { text: texts[0] ?? '' });
      else
        await client.submitMany(texts.map((text) => ({ taskType: 'SHA256', payload: { text } })));
    }
  } finally {
    await client.close();
  }
}

async function allDone(client: DtpClient): Promise<boolean> {
  for (const state of ['QUEUED', 'RUNNING', 'RETRY_WAIT'] as const) {
    if ((await client.listPage({ state, limit: 1 })).jobs.length > 0) return false;
  }
  return true;
}

export async function bulkRun(dir: string, jobs: number, batch: number): Promise<BulkRun> {
  const cluster = await startCluster(
    ['--database', `${dir}/bulk-${batch}.db`, '--max-active-jobs', String(jobs * 2)],
    3,
    4,
  );
  const watcher = await DtpClient.connect({ host: HOST, port: cluster.clientPort });
  try {
    const started = performance.now();
    const share = Math.ceil(jobs / PRODUCERS);
    await Promise.all(
      Array.from({ length: PRODUCERS }, (_, p) =>
        produce(cluster.clientPort, share, batch, `p${p}`),
      ),
    );
    const submittedMs = performance.now() - started;
    await until(() => allDone(watcher), { timeoutMs: 600_000, intervalMs: 20, what: 'all jobs' });
    const doneMs = performance.now() - started;
    const total = share * PRODUCERS;
    return {
      batch,
      submittedPerSec: (total / submittedMs) * 1000,
      donePerSec: (total / doneMs) * 1000,
    };
  } finally {
    await watcher.close();
    await cluster.stop();
  }
}
