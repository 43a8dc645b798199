/**
 * A subscriber that never reads costs the coordinator bounded memory: one
 * connection subscribes to every job's events and then reads nothing while
 * 50,000 jobs run through a coordinator and two workers (real processes).
 * The coordinator's resident memory is sampled throughout, and compared with
 * the same run without the subscriber: its peak may be at most
 * {@link EXTRA_BOUND_MIB} higher (figures in docs/MEASURED_BEHAVIOR.md). The
 * subscriber stays connected: its events are dropped and counted once more
 * than 256 KiB wait for it. Without that bound they would queue until the
 * connection's own 16 MiB cap, and it would be closed.
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
/** Peak RSS the subscriber may add to the coordinator's, MiB. */
const EXTRA_BOUND_MIB = 32;

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

interface Run {
  peakMib: number;
  /** The subscriber's connection was still open at the end (null: no subscriber). */
  subscriberOpen: boolean | null;
  output: string;
}

describe('a subscriber that never reads', { timeout: 600_000 }, () => {
  const temp = tempDir('dtp-e2e-subscriber-');
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  /** 50,000 jobs through a fresh coordinator and two workers; its peak RSS. */
  async function run(name: string, withSubscriber: boolean): Promise<Run> {
    const c = await startCoordinatorProcess(['--database', join(temp.dir, `${name}.db`)]);
    const workers = ['w1', 'w2'].map((id) =>
      ScriptProcess.start('worker.sh', [
        ...['--coordinator-host', HOST, '--coordinator-port', String(c.workerPort)],
        ...['--id', id, '--capacity', '8', '--log-format', 'json'],
      ]),
    );
    procs.push(c.proc, ...workers);
    const client = await DtpClient.connect({ host: HOST, port: c.clientPort });
    const subscriber = withSubscriber ? await silentSubscriber(c.clientPort) : null;
    let closedByPeer = false;
    subscriber?.on('close', () => (closedByPeer = true));
    let peakMib = c.proc.rssMb();
    const sampler = setInterval(() => (peakMib = Math.max(peakMib, c.proc.rssMb())), 100);
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
        lastOfBatch.push((await client.submitMany(jobs)).at(-1) ?? '');
        const behind = lastOfBatch.length - BATCHES_IN_FLIGHT;
        if (behind > 0) await client.wait(lastOfBatch[behind - 1] ?? '', 60_000);
      }
      const last = await client.wait(lastOfBatch.at(-1) ?? '', 60_000);
      assert.equal(last.state, 'COMPLETED');
      peakMib = Math.max(peakMib, c.proc.rssMb());
      return {
        peakMib,
        subscriberOpen: subscriber === null ? null : !closedByPeer && !subscriber.destroyed,
        output: c.proc.output,
      };
    } finally {
      clearInterval(sampler);
      subscriber?.destroy();
      await client.close();
      await Promise.all([c.proc, ...workers].map((p) => p.stop()));
    }
  }

  it(`adds at most ${EXTRA_BOUND_MIB} MiB to the coordinator while ${JOBS.toLocaleString('en')} jobs run`, async () => {
    const alone = await run('alone', false);
    const beside = await run('beside', true);
    console.log(
      `coordinator peak RSS over ${JOBS} jobs: ${alone.peakMib.toFixed(1)} MiB without the subscriber, ${beside.peakMib.toFixed(1)} MiB with it`,
    );
    // The scenario held: the subscriber fell behind and its events were dropped.
    assert.match(beside.output, /subscriber fell behind: job events dropped/);
    assert.equal(beside.subscriberOpen, true, 'the subscriber was disconnected');
    const extra = beside.peakMib - alone.peakMib;
    assert.ok(
      extra <= EXTRA_BOUND_MIB,
      `the subscriber added ${extra.toFixed(1)} MiB (${alone.peakMib} -> ${beside.peakMib})`,
    );
  });
});
