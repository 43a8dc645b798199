/**
 * The container entry point, run directly on this machine (no container):
 * each role starts the right program, paths resolve from the script's own
 * location, and SIGTERM reaches node because the script execs it.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
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
function runEntrypoint(
  args: string[],
  cwd: string,
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<RunResult> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DTP_')) env[k] = v;
  Object.assign(env, extraEnv);
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

  it(
    'makes a CA, a certificate and tokens once with init-secrets, which the roles then use',
    { timeout: 90_000 },
    async () => {
      const secrets = join(temp.dir, 'secrets');
      const made = await runEntrypoint(['init-secrets', secrets], temp.dir);
      assert.equal(made.code, 0, made.stderr);
      const names = ['ca.pem', 'server.pem', 'server.key', 'client.tokens', 'worker.tokens'];
      for (const name of names) {
        assert.equal(
          statSync(join(secrets, name)).mode & 0o077,
          0,
          `${name} is readable by others`,
        );
      }
      assert.deepEqual(readdirSync(secrets).sort(), [...names].sort(), 'no CA key or serial left');
      const token = readFileSync(join(secrets, 'client.tokens'), 'utf8');
      assert.match(token, /^[0-9a-f]{64}\n$/);
      const again = await runEntrypoint(['init-secrets', secrets], temp.dir);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(readFileSync(join(secrets, 'client.tokens'), 'utf8'), token, 'kept as it was');

      const at = (name: string): string => join(secrets, name);
      const c = await startCoordinatorProcess(
        [
          ...['--database', ':memory:', '--metrics-port', '0'],
          ...['--tls-cert', at('server.pem'), '--tls-key', at('server.key')],
          ...['--client-token-file', at('client.tokens')],
          ...['--worker-token-file', at('worker.tokens')],
        ],
        { workerPort: 0, clientPort: 0 },
        { script: ENTRYPOINT, prefix: ['coordinator'], cwd: temp.dir },
      );
      procs.push(c.proc);
      const metricsPort = (await c.proc.waitForOutput(/metricsPort"?[=:](\d+)/))[1] as string;
      const worker = ScriptProcess.start(
        ENTRYPOINT,
        [
          'worker',
          ...['--coordinator-host', HOST, '--coordinator-port', String(c.workerPort)],
          ...['--id', 'secret-w', '--heartbeat-interval-millis', '100'],
        ],
        { env: { DTP_TLS_CA: at('ca.pem'), DTP_TOKEN_FILE: at('worker.tokens') } },
      );
      procs.push(worker);
      await c.proc.waitForOutput(/worker registered workerId=secret-w/);
      const clientEnv = { DTP_TLS_CA: at('ca.pem'), DTP_TOKEN_FILE: at('client.tokens') };
      const listed = await runEntrypoint(
        ['client', 'workers', '--json', '--host', HOST, '--port', String(c.clientPort)],
        temp.dir,
        clientEnv,
      );
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /secret-w/);
      const healthy = await runEntrypoint(['healthcheck', metricsPort], temp.dir, {
        DTP_HEALTHCHECK_CA: at('ca.pem'),
      });
      assert.deepEqual(
        [healthy.code, healthy.stdout],
        [0, `${JSON.stringify({ status: 'ok', role: 'leader' })}\n`],
      );
      const plain = await runEntrypoint(['healthcheck', metricsPort], temp.dir);
      assert.equal(plain.code, 1, 'plain HTTP to the HTTPS port is not healthy');
    },
  );

  it('rejects an unknown role with exit code 2 and the usage', async () => {
    const run = await runEntrypoint(['scheduler'], temp.dir);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /unknown role scheduler/);
    assert.match(run.stderr, /docker-entrypoint\.sh coordinator \[flags\]/);
  });
});
