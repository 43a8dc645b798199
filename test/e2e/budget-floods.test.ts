/**
 * Floods that try to exhaust the coordinator's shared budgets, against a
 * working cluster (coordinator.sh, worker.sh and clients as processes of
 * their own; the floods from a flood-peer process):
 *
 * - peers that declare 1 MiB frames and send most of them, on both ports,
 *   while a real worker returns 300 KB results and a real client submits a
 *   300 KB payload: every job completes and the worker is never lost (without
 *   tokens the flood comes from an address of its own; with tokens also from
 *   the victims' own address, holding no token);
 * - 400 idle connections from the client's own address holding the pending
 *   pool (tokens on): `client.sh submit` still succeeds, every time.
 *
 * The budget is 16 MiB instead of 256 MiB so that small floods fill it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { Flood } from '../helpers/flood.js';
import type { FloodPlan } from '../helpers/flood-peer.js';
import { ROOT, ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';

const HOST = '127.0.0.1';
const FLOOD_FROM = '127.0.0.2';
const CLIENT_TOKEN = 'e2e-budget-client-token-7a6b5c4d3e2f';
const WORKER_TOKEN = 'e2e-budget-worker-token-1f2e3d4c5b6a';
const LARGE_RESULTS = join(ROOT, 'dist', 'test', 'fixtures', 'large-results.js');
const RESULT_BYTES = 300_000;
const BUDGET_BYTES = 16 * 1024 * 1024;
const FLOOD_PER_PORT = 40;
const BOUNDED = { timeout: 90_000 };

describe('budget floods against a working cluster', () => {
  const temp = tempDir('dtp-e2e-budget-');
  const stops: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const stop of stops.reverse()) await stop();
    temp.remove();
  });
  const file = (name: string, text: string): string => {
    const path = join(temp.dir, name);
    writeFileSync(path, text, { mode: 0o600 });
    return path;
  };
  const tokenArgs = (tokens: boolean): string[] =>
    tokens
      ? [
          ...['--client-token-file', file('client-tokens', `${CLIENT_TOKEN}\n`)],
          ...['--worker-token-file', file('worker-tokens', `${WORKER_TOKEN}\n`)],
        ]
      : [];

  async function coordinator(args: string[]) {
    const c = await startCoordinatorProcess(['--database', ':memory:', ...args]);
    stops.push(() => c.proc.stop());
    return c;
  }

  function flood(plan: FloodPlan): Flood {
    const f = Flood.start(plan);
    stops.push(() => f.stop());
    return f;
  }

  /** Stalled 1 MiB frames, ~1 MB of each sent, on one port from one address. */
  function largeFrames(port: number, localAddress: string): Flood {
    return flood({
      port,
      host: HOST,
      localAddress,
      mode: 'half-frame',
      bytes: 1_000_000,
      count: FLOOD_PER_PORT,
      holdMs: 80_000,
    });
  }

  async function largeFrameStory(tokens: boolean): Promise<void> {
    const c = await coordinator([
      '--max-inbound-bytes',
      String(BUDGET_BYTES),
      ...tokenArgs(tokens),
    ]);
    const worker = ScriptProcess.start('worker.sh', [
      ...['--coordinator-host', HOST, '--coordinator-port', String(c.workerPort)],
      ...['--id', 'budget-victim', '--capacity', '3', '--tasks', LARGE_RESULTS],
      ...['--heartbeat-interval-millis', '200', '--reconnect-delay-millis', '100'],
      ...(tokens ? ['--token-file', file('my-worker-token', `${WORKER_TOKEN}\n`)] : []),
    ]);
    stops.push(() => worker.stop());
    await c.proc.waitForOutput(/worker registered workerId=budget-victim/, 30_000);
    const sources = tokens ? [FLOOD_FROM, HOST] : [FLOOD_FROM];
    const floods = sources.flatMap((from) => [
      largeFrames(c.workerPort, from),
      largeFrames(c.clientPort, from),
    ]);
    for (const f of floods) await f.until((s) => s.opened >= FLOOD_PER_PORT, 'the flood');
    const client = await DtpClient.connect({
      host: HOST,
      port: c.clientPort,
      token: tokens ? CLIENT_TOKEN : null,
    });
    stops.push(() => client.close());
    // A round trip behind the flood: the coordinator has read what it sent.
    await client.workers();
    const waitDone = async (jobId: string): Promise<void> => {
      const done = await client.wait(jobId, 60_000);
      assert.equal(done.state, 'COMPLETED', `${jobId}: ${done.error ?? ''}`);
      assert.equal(done.result?.length, RESULT_BYTES);
    };
    // Large results first (small submissions), then a large submission.
    const jobs = await Promise.all(
      [1, 2, 3].map(() => client.submit('blob', { bytes: RESULT_BYTES }, { maxAttempts: 1 })),
    );
    for (const job of jobs) await waitDone(job.jobId);
    const large = await client.submit(
      'blob',
      { text: 'y'.repeat(RESULT_BYTES) },
      { maxAttempts: 1 },
    );
    await waitDone(large.jobId);
    const lost = c.proc.output.split('\n').filter((line) => /worker lost/.test(line));
    assert.deepEqual(lost, [], 'the victim worker was lost (the lines say why)');
    assert.ok(worker.running, 'the worker is still there');
    for (const f of floods) await f.stop();
  }

  it(
    'completes every job with 300 KB results and payloads during a large-frame flood (no tokens)',
    BOUNDED,
    () => largeFrameStory(false),
  );

  it(
    'completes them during a large-frame flood from the victims own address too (tokens on)',
    BOUNDED,
    () => largeFrameStory(true),
  );

  it(
    'lets client.sh submit through 400 idle connections from its own address',
    BOUNDED,
    async () => {
      const c = await coordinator(['--max-pending-connections', '64', ...tokenArgs(true)]);
      const idle = flood({
        port: c.clientPort,
        host: HOST,
        mode: 'idle',
        count: 400,
        holdMs: 60_000,
      });
      await idle.until((s) => s.opened + s.closed >= 400, 'the idle flood');
      const env: NodeJS.ProcessEnv = { DTP_TOKEN: CLIENT_TOKEN };
      for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DTP_')) env[k] = v;
      for (let i = 0; i < 3; i++) {
        const res = spawnSync(
          join(ROOT, 'scripts', 'client.sh'),
          ['submit', 'sha256', '--text', `t${i}`, '--host', HOST, '--port', String(c.clientPort)],
          { encoding: 'utf8', timeout: 30_000, env },
        );
        assert.equal(res.status, 0, res.stdout + res.stderr);
        assert.match(res.stdout, /Job submitted/);
      }
      await idle.stop();
    },
  );
});
