/**
 * A subscriber that never reads costs the coordinator bounded memory: one
 * connection subscribes to every job's events and then reads nothing while
 * 50,000 jobs run through a coordinator and two workers (real processes).
 * The coordinator's resident memory, sampled throughout, may grow by at most
 * {@link GROWTH_BOUND_MIB} after the first 5,000 jobs (the figure is in
 * docs/MEASURED_BEHAVIOR.md). Without the bound on what a subscriber may
 * leave unread, every event of the run would stay queued for it: about
 * 100,000 snapshots, far more than that.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { encodeMessage } from '../../src/protocol/codec.js';
import { ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';
const JOBS = 50_000;
const BATCH = 1_000;
/** Batches submitted but not yet seen complete (keeps active jobs well under the limit). */
const BATCHES_IN_FLIGHT = 4;
const WARM_UP_JOBS = 5_000;
/** Growth of the coordinator's RSS allowed after the warm-up, MiB. */
const GROWTH_BOUND_MIB = 40;

/** A client connection that subscribes to every event and then never reads again. */
async function silentSubscriber(port: number): Promise<Socket> {
  const socket = connect({ host: HOST, port });
  await once(socket, 'connect');
  socket.write(encodeMessage({ type: 'SUBSCRIBE_JOBS', filter: {} }));
  // SUBSCRIBED is the first (and last) thing read from it.
  await once(socket, 'data');
  socket.pause();
  return socket;
}

describe('a subscriber that never reads', { timeout: 300_000 }, () => {
  const temp = tempDir('dtp-e2e-subscriber-');
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  it(`costs the coordinator at most ${GROWTH_BOUND_MIB} MiB more while ${JOBS.toLocaleString('en')} jobs run`, async () => {
    const c = await startCoordinatorProcess(['--database', join(temp.dir, 'dtp.db')]);
    procs.push(c.proc);
    for (const id of ['w1', 'w2']) {
      procs.push(
        ScriptProcess.start('worker.sh', [
          ...['--coordinator-host', HOST, '--coordinator-port', String(c.workerPort)],
          ...['--id', id, '--capacity', '8', '--log-format', 'json'],
        ]),
      );
    }
    const client = await DtpClient.connect({ host: HOST, port: c.clientPort });
    const subscriber = await silentSubscriber(c.clientPort);
    let peakMib = 0;
    let warmMib: number | null = null;
    const sampler = setInterval(() => {
      if (warmMib !== null) peakMib = Math.max(peakMib, c.proc.rssMb());
    }, 100);
    try {
      await until(async () => (await client.workers()).length === 2, {
        timeoutMs: 30_000,
        what: 'both workers',
      });
      const lastOfBatch: string[] = [];
      for (let done = 0; done < JOBS; done += BATCH) {
        const jobs = Array.from({ length: BATCH }, (_, i) => ({
          taskType: 'SHA256',
          payload: { text: `job ${done + i}` },
        }));
        const ids = await client.submitMany(jobs);
        lastOfBatch.push(ids.at(-1) ?? '');
        const behind = lastOfBatch.length - BATCHES_IN_FLIGHT;
        if (behind > 0) await client.wait(lastOfBatch[behind - 1] ?? '', 60_000);
        if (warmMib === null && done + BATCH >= WARM_UP_JOBS) {
          await client.wait(ids.at(-1) ?? '', 60_000);
          warmMib = c.proc.rssMb();
          peakMib = warmMib;
        }
      }
      const last = await client.wait(lastOfBatch.at(-1) ?? '', 60_000);
      assert.equal(last.state, 'COMPLETED');
      peakMib = Math.max(peakMib, c.proc.rssMb());
      // The scenario held: the subscriber fell behind and its events were dropped.
      assert.match(c.proc.output, /subscriber fell behind: job events dropped/);
      const growth = peakMib - (warmMib ?? 0);
      console.log(
        `coordinator RSS: ${warmMib?.toFixed(1)} MiB after ${WARM_UP_JOBS} jobs, peak ${peakMib.toFixed(1)} MiB over ${JOBS} jobs (+${growth.toFixed(1)})`,
      );
      assert.ok(
        growth <= GROWTH_BOUND_MIB,
        `the coordinator grew by ${growth.toFixed(1)} MiB (from ${warmMib} to ${peakMib})`,
      );
    } finally {
      clearInterval(sampler);
      subscriber.destroy();
      await client.close();
    }
  });
});
