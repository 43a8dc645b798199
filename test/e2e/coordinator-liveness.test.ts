/**
 * A worker notices a coordinator that went silent, when the coordinator
 * confirmed `heartbeatAck`: a frozen coordinator process (SIGSTOP), and a cut
 * network link (a network namespace and a veth pair this test creates and
 * removes, needing root and `ip`). In both cases the worker drops the
 * connection after `--coordinator-timeout-millis`, redials until the
 * coordinator is back, and the job it was running is retried elsewhere in
 * time (here: on it, once it registers again) and completes.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import type { Worker } from '../../src/worker/worker.js';
import { ROOT, startCoordinatorProcess } from '../helpers/processes.js';
import { startTaskWorker, tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';

describe('a worker and a frozen coordinator (SIGSTOP)', () => {
  const temp = tempDir('dtp-e2e-frozen-');
  const cleanups: (() => Promise<unknown> | void)[] = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    temp.remove();
  });

  it('drops the frozen coordinator, redials, and finishes the job once it thaws', async () => {
    const c = await startCoordinatorProcess([
      ...['--database', join(temp.dir, 'db'), '--heartbeat-timeout-millis', '1500'],
      ...['--retry-base-delay-millis', '50', '--retry-max-delay-millis', '100'],
    ]);
    cleanups.push(() => c.proc.stop());
    const w = await startTaskWorker(c.workerPort, 'frozen-w', {
      heartbeatIntervalMs: 100,
      coordinatorTimeoutMs: 500,
      connectTimeoutMs: 400,
    });
    cleanups.push(() => w.close());
    await once(w.events, 'registered');
    assert.ok(w.features.has('heartbeatAck'));
    const client = await DtpClient.connect({ host: HOST, port: c.clientPort });
    cleanups.push(() => client.close());
    const { jobId } = await client.submit({
      taskType: 'SLEEP',
      payload: { durationMillis: 3_000 },
    });
    await once(w.events, 'started');

    c.proc.signal('SIGSTOP');
    const stoppedAtMs = performance.now();
    const [reason] = (await once(w.events, 'disconnected')) as [string];
    const noticedMs = performance.now() - stoppedAtMs;
    assert.match(reason, /coordinator silent/);
    assert.ok(noticedMs < 5_000, `noticed after ${Math.round(noticedMs)} ms`);

    c.proc.signal('SIGCONT');
    await until(() => w.registered, { timeoutMs: 15_000, what: 'the worker to register again' });
    const job = await client.wait(jobId, 30_000);
    assert.equal(job.state, 'COMPLETED');
  });
});

/** Why this machine cannot run the namespace test, or null when it can. */
function netnsUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'not root: network namespace test skipped';
  try {
    execFileSync('ip', ['-V'], { stdio: 'ignore' });
  } catch {
    return 'the ip command is missing: network namespace test skipped';
  }
  return null;
}

const ip = (...args: string[]): void => {
  execFileSync('ip', args, { stdio: 'ignore' });
};

describe('a worker and a cut network link', { skip: netnsUnavailable() ?? false }, () => {
  const tag = String(process.pid % 100_000);
  const ns = `dtp-test-${tag}`;
  const hostIf = `dtph${tag}`;
  const nsIf = `dtpn${tag}`;
  const octet = 16 + (process.pid % 200);
  const hostAddr = `10.251.${octet}.1`;
  const nsAddr = `10.251.${octet}.2`;
  const temp = tempDir('dtp-e2e-cut-');
  const cleanups: (() => Promise<unknown> | void)[] = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    temp.remove();
  });

  it('drops the unreachable coordinator, redials until the link is back, and finishes the job', async () => {
    ip('netns', 'add', ns);
    cleanups.push(() => {
      // Deleting the namespace deletes its end of the pair, and so the pair.
      try {
        ip('netns', 'del', ns);
      } catch {
        // already gone
      }
    });
    ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf);
    ip('link', 'set', nsIf, 'netns', ns);
    ip('addr', 'add', `${hostAddr}/30`, 'dev', hostIf);
    ip('link', 'set', hostIf, 'up');
    ip('netns', 'exec', ns, 'ip', 'addr', 'add', `${nsAddr}/30`, 'dev', nsIf);
    ip('netns', 'exec', ns, 'ip', 'link', 'set', nsIf, 'up');
    ip('netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up');

    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DTP_')) env[k] = v;
    const coordinator = spawn(
      'ip',
      [
        ...['netns', 'exec', ns, join(ROOT, 'scripts', 'coordinator.sh')],
        ...['--bind-host', nsAddr, '--worker-port', '0', '--client-port', '0'],
        ...['--database', join(temp.dir, 'db'), '--heartbeat-timeout-millis', '1500'],
        ...['--retry-base-delay-millis', '50', '--retry-max-delay-millis', '100'],
      ],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    coordinator.stdout.on('data', (d: Buffer) => (output += d.toString('utf8')));
    coordinator.stderr.on('data', (d: Buffer) => (output += d.toString('utf8')));
    cleanups.push(async () => {
      if (coordinator.exitCode === null) {
        coordinator.kill('SIGKILL');
        await once(coordinator, 'exit');
      }
    });
    const ports = await until(() => /workerPort=(\d+) clientPort=(\d+)/.exec(output), {
      timeoutMs: 30_000,
      what: `the coordinator in ${ns} to start`,
    });
    const [workerPort, clientPort] = [Number(ports[1]), Number(ports[2])];

    let w: Worker | null = null;
    cleanups.push(() => w?.close());
    w = await startTaskWorker(workerPort, 'cut-w', {
      coordinatorHost: nsAddr,
      heartbeatIntervalMs: 100,
      coordinatorTimeoutMs: 500,
      connectTimeoutMs: 400,
    });
    const worker = w;
    await once(worker.events, 'registered');
    const client = await DtpClient.connect({ host: nsAddr, port: clientPort });
    cleanups.push(() => client.close());
    const { jobId } = await client.submit({
      taskType: 'SLEEP',
      payload: { durationMillis: 2_000 },
    });
    await once(worker.events, 'started');

    // Cut: packets vanish, no FIN or RST reaches either side.
    ip('link', 'set', hostIf, 'down');
    const [reason] = (await once(worker.events, 'disconnected')) as [string];
    assert.match(reason, /coordinator silent/);
    await until(() => output.includes('worker lost workerId=cut-w'), {
      timeoutMs: 10_000,
      what: 'the coordinator to lose the worker behind the cut',
    });

    ip('link', 'set', hostIf, 'up');
    await until(() => worker.registered, { timeoutMs: 20_000, what: 'the worker to come back' });
    const job = await client.wait(jobId, 30_000);
    assert.equal(job.state, 'COMPLETED');
    assert.equal(job.attempts, 2);
  });
});
