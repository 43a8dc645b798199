/**
 * The container entry point, run directly on this machine (no container):
 * each role starts the right program, paths resolve from the script's own
 * location, and SIGTERM reaches node because the script execs it.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ROOT, ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const ENTRYPOINT = 'docker-entrypoint.sh';
const HOST = '127.0.0.1';

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the entry point to completion in `cwd`, without this process's DTP_* variables. */
function runEntrypoint(args: string[], cwd: string): Promise<RunResult> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DTP_')) env[k] = v;
  return new Promise((resolve) => {
    execFile(
      join(ROOT, 'scripts', ENTRYPOINT),
      args,
      { cwd, env, timeout: 20_000 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('scripts/docker-entrypoint.sh', () => {
  const temp = tempDir('dtp-e2e-entry-');
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  it(
    'runs coordinator, worker and client roles, checks health, and stops both on SIGTERM',
    { timeout: 60_000 },
    async () => {
      // The coordinator runs in a folder of its own: the relative database
      // path resolves there, the script's paths do not.
      const c = await startCoordinatorProcess(
        ['--database', 'entry.db', '--metrics-port', '0'],
        { workerPort: 0, clientPort: 0 },
        { script: ENTRYPOINT, prefix: ['coordinator'], cwd: temp.dir },
      );
      procs.push(c.proc);
      const metricsPort = (await c.proc.waitForOutput(/metricsPort"?[=:](\d+)/))[1] as string;
      const worker = ScriptProcess.start(ENTRYPOINT, [
        'worker',
        ...['--coordinator-host', HOST, '--coordinator-port', String(c.workerPort)],
        ...['--id', 'entry-w', '--capacity', '2', '--heartbeat-interval-millis', '100'],
      ]);
      procs.push(worker);

      const listed = await until(
        async () => {
          const run = await runEntrypoint(
            ['client', 'workers', '--json', '--host', HOST, '--port', String(c.clientPort)],
            temp.dir,
          );
          assert.equal(run.code, 0, run.stderr);
          const doc = JSON.parse(run.stdout) as {
            workers: { workerId: string; capacity: number }[];
          };
          return doc.workers.find((w) => w.workerId === 'entry-w');
        },
        { timeoutMs: 30_000, intervalMs: 100, what: 'entry-w in client workers --json' },
      );
      assert.equal(listed.capacity, 2);
      assert.ok(existsSync(join(temp.dir, 'entry.db')), 'database created in the working dir');

      const healthy = await runEntrypoint(['healthcheck', metricsPort], temp.dir);
      assert.deepEqual(
        [healthy.code, healthy.stdout],
        [0, `${JSON.stringify({ status: 'ok', role: 'leader' })}\n`],
      );

      worker.signal('SIGTERM');
      assert.equal(await worker.exited, 0);
      c.proc.signal('SIGTERM');
      assert.equal(await c.proc.exited, 0);
      const down = await runEntrypoint(['healthcheck', metricsPort], temp.dir);
      assert.equal(down.code, 1);
    },
  );

  it('rejects an unknown role with exit code 2 and the usage', async () => {
    const run = await runEntrypoint(['scheduler'], temp.dir);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /unknown role scheduler/);
    assert.match(run.stderr, /docker-entrypoint\.sh coordinator \[flags\]/);
  });
});
