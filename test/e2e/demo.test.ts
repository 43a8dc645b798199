import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ROOT, ScriptProcess, ShellProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';

/** A port that was free a moment ago (the kernel's choice). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

describe('the failure-recovery demo', () => {
  const temp = tempDir('dtp-e2e-demo-');
  after(() => temp.remove());

  it('kills the worker running the job and ends with the job completed on attempt 2', async () => {
    for (const port of [7070, 7071])
      assert.ok(await portIsFree(port), `the demo needs port ${port} free`);
    // As README.md shows it, in the checkout (where it leaves demo-logs/).
    const logs = join(ROOT, 'demo-logs');
    const hadLogs = existsSync(logs);
    const demo = ShellProcess.start('npm run demo', { cwd: ROOT });
    const code = await demo.exited;
    const out = demo.output;
    assert.equal(code, 0, out);
    if (!hadLogs) rmSync(logs, { recursive: true, force: true });
    const victim = /==> Job is RUNNING on: (worker-\d)/.exec(out)?.[1];
    assert.ok(victim, out);
    assert.match(out, new RegExp(`==> Killing ${victim} with SIGKILL \\(pid \\d+\\)`));
    const afterKill = out.slice(out.indexOf('==> Killing'));
    assert.match(afterKill, /State: {4}COMPLETED/);
    assert.match(afterKill, /Attempt: {2}2\/3/);
    assert.match(afterKill, /Result: {3}slept 20000 ms/);
    assert.match(afterKill, /job assigned jobId=\S+ workerId=worker-\d attempt=2\/3/);
    for (const port of [7070, 7071])
      assert.ok(await portIsFree(port), `port ${port} still in use after the demo`);
  });

  it('tells the same story with Python workers (--python), on ports of its choice', async () => {
    const [workerPort, clientPort] = [await freePort(), await freePort()];
    // As README.md shows it, in the checkout (where it leaves demo-logs/).
    const logs = join(ROOT, 'demo-logs');
    const hadLogs = existsSync(logs);
    const demo = ShellProcess.start('npm run demo -- --python', {
      cwd: ROOT,
      env: {
        DTP_DEMO_WORKER_PORT: String(workerPort),
        DTP_DEMO_CLIENT_PORT: String(clientPort),
        // Shorter than the demo's 20 s, yet long enough that a busy machine's
        // slow polls still see it running before it is killed.
        DTP_DEMO_SLEEP_MILLIS: '10000',
      },
    });
    const code = await demo.exited;
    const out = demo.output;
    try {
      assert.equal(code, 0, out);
      assert.match(out, /==> The workers are Python workers \(Python 3\./);
      const victim = /==> Job is RUNNING on: (worker-\d)/.exec(out)?.[1];
      assert.ok(victim, out);
      const afterKill = out.slice(out.indexOf('==> Killing'));
      assert.match(afterKill, /State: {4}COMPLETED/);
      assert.match(afterKill, /Attempt: {2}2\/3/);
      assert.match(afterKill, /Result: {3}slept 10000 ms/);
      const log = readFileSync(join(logs, `${victim}.log`), 'utf8');
      assert.match(log, /INFO dtp.worker: registered coordinator=127\.0\.0\.1:\d+ .*features=/);
    } finally {
      if (!hadLogs) rmSync(logs, { recursive: true, force: true });
    }
    for (const port of [workerPort, clientPort])
      assert.ok(await portIsFree(port), `port ${port} still in use after the demo`);
  });

  it('stops at once, saying why, when its coordinator cannot start (a port is taken)', async () => {
    const dir = join(temp.dir, 'taken');
    mkdirSync(dir);
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const address = taken.address();
    const workerPort = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      const demo = ScriptProcess.start('demo-failure-recovery.sh', [], {
        cwd: dir,
        env: {
          DTP_DEMO_WORKER_PORT: String(workerPort),
          DTP_DEMO_CLIENT_PORT: String(await freePort()),
        },
      });
      const code = await demo.exited;
      assert.equal(code, 1, demo.output);
      assert.match(
        demo.output,
        /demo failed: the coordinator stopped: .*cannot listen on .*EADDRINUSE/,
      );
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it('tells the same story with tokens required, and never logs a token', async () => {
    for (const port of [7070, 7071])
      assert.ok(await portIsFree(port), `the demo needs port ${port} free`);
    // As README.md shows it, in the checkout (where it leaves demo-logs/).
    const logs = join(ROOT, 'demo-logs');
    const hadLogs = existsSync(logs);
    // The job's sleep is shortened as in the Python run: the story is the
    // same, and the first test already runs the demo's full 20 s job.
    const demo = ShellProcess.start('npm run demo -- --tokens', {
      cwd: ROOT,
      env: { DTP_DEMO_SLEEP_MILLIS: '10000' },
    });
    const code = await demo.exited;
    const out = demo.output;
    try {
      assert.equal(code, 0, out);
      assert.match(out, /==> Authentication on/);
      assert.match(out, /==> Recovered: the job survived the loss of worker-\d/);
      const coordinatorLog = readFileSync(join(logs, 'coordinator.log'), 'utf8');
      assert.match(coordinatorLog, /clientTokens=1 workerTokens=1/);
      for (const who of ['client', 'worker']) {
        const file = join(logs, `${who}.token`);
        assert.equal(statSync(file).mode & 0o077, 0, `${who}.token is readable by others`);
        const token = readFileSync(file, 'utf8').trim();
        assert.ok(!coordinatorLog.includes(token) && !out.includes(token), `${who} token logged`);
      }
    } finally {
      if (!hadLogs) rmSync(logs, { recursive: true, force: true });
    }
  });
});
