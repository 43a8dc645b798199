/**
 * Connection floods against a coordinator process, from a peer process of
 * their own (so the test's file descriptors stay few) and from an address of
 * their own on the loopback network (127.0.0.2), with real clients and
 * workers coming from 127.0.0.1:
 *
 * - 10,000 idle connections from one address do not lock out a client from
 *   another (the per-address cap refuses the excess with LIMIT_EXCEEDED);
 *   700 idle connections, normal for benchmark harnesses, are all accepted;
 * - 3,000 peers trickling a byte at a time on the worker port are closed at
 *   the absolute registration deadline, and a real worker registers while
 *   they flood (a pending slot is freed for it);
 * - 1,500 stalled half-sent frames cost roughly what they sent, not 1 MiB
 *   each, and repeated storms of them and of garbage do not accumulate.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { Flood, rssBytes } from '../helpers/flood.js';
import { ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';

const HOST = '127.0.0.1';
const FLOOD_FROM = '127.0.0.2';
const MIB = 1024 * 1024;

describe('connection floods', () => {
  const temp = tempDir('dtp-e2e-flood-');
  const stops: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const stop of stops.reverse()) await stop();
    temp.remove();
  });

  async function coordinator(args: string[] = []) {
    const c = await startCoordinatorProcess(['--database', ':memory:', ...args]);
    stops.push(() => c.proc.stop());
    return c;
  }

  function flood(plan: Parameters<typeof Flood.start>[0]): Flood {
    const f = Flood.start(plan);
    stops.push(() => f.stop());
    return f;
  }

  async function clientWorks(port: number): Promise<void> {
    const client = await DtpClient.connect({ host: HOST, port });
    try {
      assert.deepEqual(await client.workers(), []);
    } finally {
      await client.close();
    }
  }

  it('keeps serving another address while one address holds 10,000 idle connections', async () => {
    const c = await coordinator(['--metrics-port', '0']);
    const metricsPort = (await c.proc.waitForOutput(/metricsPort=(\d+)/))[1] as string;
    const metric = async (line: RegExp): Promise<number> => {
      const text = await (await fetch(`http://${HOST}:${metricsPort}/metrics`)).text();
      return Number(line.exec(text)?.[1] ?? Number.NaN);
    };
    const f = flood({
      port: c.clientPort,
      host: HOST,
      localAddress: FLOOD_FROM,
      mode: 'idle',
      count: 10_000,
      holdMs: 90_000,
    });
    await f.until((s) => s.opened + s.errors >= 10_000, 'the flood to connect', 60_000);
    await clientWorks(c.clientPort);
    const refused = /^dtp_connections_refused_total\{port="client",limit="per_address"\} (\d+)$/m;
    const open = /^dtp_connections\{port="client",state="open"\} (\d+)$/m;
    assert.ok((await metric(refused)) > 0, 'the per-address cap never refused anyone');
    // The flood holds at most its address's share; the rest was refused.
    assert.ok((await metric(open)) <= 4_096 + 1, `open: ${await metric(open)}`);
    await c.proc.waitForOutput(/connection refused: limit reached port=client limit=per_address/);
    await f.stop();
  });

  it('accepts 700 idle connections from one address without any bound biting', async () => {
    const c = await coordinator();
    const f = flood({ port: c.clientPort, host: HOST, mode: 'idle', count: 700, holdMs: 30_000 });
    await f.until((s) => s.opened >= 700, 'the 700 to connect');
    await clientWorks(c.clientPort);
    assert.equal(f.stats.refused, 0);
    assert.doesNotMatch(c.proc.output, /limit reached/);
    await f.stop();
  });

  it('closes trickling peers at the registration deadline while a real worker registers', async () => {
    const c = await coordinator(['--handshake-timeout-millis', '1000']);
    const f = flood({
      port: c.workerPort,
      host: HOST,
      localAddress: FLOOD_FROM,
      mode: 'trickle',
      intervalMs: 200,
      count: 3_000,
      holdMs: 60_000,
    });
    await f.until((s) => s.opened >= 1_000, 'the flood to start');
    const worker = ScriptProcess.start('worker.sh', [
      ...['--coordinator-host', HOST, '--coordinator-port', String(c.workerPort)],
      ...['--id', 'flood-survivor', '--heartbeat-interval-millis', '200'],
      ...['--reconnect-delay-millis', '100'],
    ]);
    stops.push(() => worker.stop());
    await c.proc.waitForOutput(/worker registered workerId=flood-survivor/, 30_000);
    // Every trickler is gone by its deadline, or made room for a newer
    // connection once the pending slots were full (which of the two depends
    // on how fast the flood connects), or was refused at once.
    await f.until((s) => s.closed >= 3_000, 'every trickler to be closed', 60_000);
    await c.proc.waitForOutput(/limit=(handshake_timeout|pending_evicted)/);
    assert.ok(worker.running, 'the real worker is still there');
  });

  it('holds half-sent frames at their size, and repeated storms do not accumulate memory', async () => {
    const c = await coordinator();
    const rss = (): Promise<number> => rssBytes(c.proc.pid);
    await clientWorks(c.clientPort);
    const base = await rss();
    const halfFrames = async (): Promise<number> => {
      const f = flood({
        port: c.clientPort,
        host: HOST,
        localAddress: FLOOD_FROM,
        mode: 'half-frame',
        bytes: 1_000,
        count: 1_500,
        holdMs: 60_000,
      });
      await f.until((s) => s.opened >= 1_500, '1,500 half frames');
      // The coordinator has read them all once a request behind them is served.
      await clientWorks(c.clientPort);
      const during = await rss();
      await f.stop();
      return during;
    };
    const garbage = async (): Promise<void> => {
      const f = flood({
        port: c.clientPort,
        host: HOST,
        localAddress: FLOOD_FROM,
        mode: 'garbage',
        bytes: 65_536,
        declaredLength: MIB,
        count: 300,
        holdMs: 60_000,
      });
      await f.until((s) => s.closed >= 300, '300 garbage connections');
      await f.stop();
    };
    const during = await halfFrames();
    // 1 MiB per declared frame would be 1.5 GB; what was sent is 1.5 MB.
    assert.ok(during - base < 150 * MIB, `half frames grew RSS by ${(during - base) / MIB} MiB`);
    await garbage();
    await clientWorks(c.clientPort);
    const afterFirst = await rss();
    for (let i = 0; i < 3; i++) {
      await halfFrames();
      await garbage();
    }
    const afterMore = await rss();
    assert.ok(
      afterMore - afterFirst < 60 * MIB,
      `three more storms grew RSS from ${afterFirst / MIB} to ${afterMore / MIB} MiB`,
    );
    assert.ok(
      afterMore - base < 160 * MIB,
      `RSS ${afterMore / MIB} MiB after storms, ${base / MIB} before`,
    );
  });
});
