/**
 * TLS, tokens and refusals through the real scripts: coordinator.sh with a
 * certificate and token files, worker.sh and client.sh with a CA and a token
 * (flags and environment), every refusal exiting 1 with a message that says
 * so (never a hang), SIGHUP taking a rotated token file, no token in any
 * log, and a second coordinator on the same database refused at start.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { testCerts, type CertFiles } from '../helpers/certs.js';
import { ROOT, ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';
const CLIENT_TOKEN = 'e2e-client-token-0a1b2c3d4e5f6789';
const NEW_CLIENT_TOKEN = 'e2e-client-token-rotated-99887766';
const WORKER_TOKEN = 'e2e-worker-token-f0e1d2c3b4a59687';
const certs = testCerts();

describe(
  'security through the scripts',
  { skip: certs === null ? 'openssl is not installed' : false },
  () => {
    const c = certs as CertFiles;
    const temp = tempDir('dtp-e2e-sec-');
    const procs: ScriptProcess[] = [];
    const file = (name: string, text: string): string => {
      const path = join(temp.dir, name);
      writeFileSync(path, text, { mode: 0o600 });
      return path;
    };
    const clientTokens = file('client-tokens', `${CLIENT_TOKEN}\n`);
    const workerTokens = file('worker-tokens', `${WORKER_TOKEN}\n`);
    const myClientToken = file('my-client-token', `${CLIENT_TOKEN}\n`);
    const myWorkerToken = file('my-worker-token', `${WORKER_TOKEN}\n`);
    const database = join(temp.dir, 'coordinator.db');
    let coordinator: { proc: ScriptProcess; workerPort: number; clientPort: number };

    const client = (args: string[], env: NodeJS.ProcessEnv = {}) => {
      const clean: NodeJS.ProcessEnv = {};
      for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DTP_')) clean[k] = v;
      return spawnSync(
        join(ROOT, 'scripts', 'client.sh'),
        [...args, '--host', HOST, '--port', String(coordinator.clientPort)],
        { encoding: 'utf8', timeout: 30_000, env: { ...clean, ...env } },
      );
    };
    const worker = (id: string, extra: string[]): ScriptProcess => {
      const proc = ScriptProcess.start('worker.sh', [
        ...['--coordinator-host', HOST, '--coordinator-port', String(coordinator.workerPort)],
        ...['--id', id, '--heartbeat-interval-millis', '100', '--reconnect-delay-millis', '100'],
        ...extra,
      ]);
      procs.push(proc);
      return proc;
    };

    before(async () => {
      coordinator = await startCoordinatorProcess([
        ...['--database', database, '--tls-cert', c.serverPem, '--tls-key', c.serverKey],
        ...['--client-token-file', clientTokens, '--worker-token-file', workerTokens],
      ]);
      procs.push(coordinator.proc);
    });
    after(async () => {
      await Promise.all(procs.map((p) => p.stop()));
      temp.remove();
    });

    it('runs a job with a worker and a client that use the CA and their tokens', async () => {
      worker('sec-w1', ['--tls-ca', c.caPem, '--token-file', myWorkerToken]);
      await coordinator.proc.waitForOutput(/worker registered workerId=sec-w1/);
      const submitted = client([
        ...['submit', 'sha256', '--text', 'abc', '--json'],
        ...['--tls-ca', c.caPem, '--token-file', myClientToken],
      ]);
      assert.equal(submitted.status, 0, submitted.stdout + submitted.stderr);
      const { jobId } = JSON.parse(submitted.stdout) as { jobId: string };
      // The environment works as well as the flags.
      const waited = client(['wait', jobId, '--json'], {
        DTP_TLS_CA: c.caPem,
        DTP_TOKEN: CLIENT_TOKEN,
      });
      assert.equal(waited.status, 0, waited.stdout + waited.stderr);
      assert.equal((JSON.parse(waited.stdout) as { state: string }).state, 'COMPLETED');
    });

    it('exits 1 with a message for a wrong token, a missing token, no TLS, or an untrusted server', () => {
      const tls = ['--tls-ca', c.caPem];
      const cases: [string[], NodeJS.ProcessEnv, RegExp][] = [
        [['workers', ...tls], { DTP_TOKEN: 'wrong-token' }, /Unauthenticated/],
        [['workers', ...tls], {}, /Unauthenticated/],
        [['workers'], { DTP_TOKEN: CLIENT_TOKEN }, /requires TLS/],
        [['workers', '--tls'], { DTP_TOKEN: CLIENT_TOKEN }, /TLS handshake failed/],
      ];
      for (const [args, env, pattern] of cases) {
        const res = client(args, env);
        assert.equal(res.status, 1, `${args.join(' ')}: ${res.stdout}${res.stderr}`);
        assert.match(res.stdout + res.stderr, pattern);
      }
    });

    it('stops a worker with a refused token, and the older of two workers with one id, with exit 1', async () => {
      const refused = worker('sec-bad', ['--tls-ca', c.caPem, '--token-file', myClientToken]);
      assert.equal(await refused.exited, 1);
      assert.match(refused.output, /refused by the coordinator \(UNAUTHENTICATED\)/);
      const older = worker('sec-twin', ['--tls-ca', c.caPem, '--token-file', myWorkerToken]);
      await older.waitForOutput(/registered/);
      const newer = worker('sec-twin', ['--tls-ca', c.caPem, '--token-file', myWorkerToken]);
      assert.equal(await older.exited, 1);
      assert.match(older.output, /WORKER_REPLACED/);
      assert.equal(newer.running, true);
      const plain = worker('sec-plain', ['--token-file', myWorkerToken]);
      assert.equal(await plain.exited, 1);
      assert.match(plain.output, /TLS_REQUIRED/);
    });

    it('takes a rotated token file on SIGHUP', async () => {
      writeFileSync(clientTokens, `${NEW_CLIENT_TOKEN}\n`);
      coordinator.proc.signal('SIGHUP');
      await coordinator.proc.waitForOutput(/certificates and tokens reloaded/);
      const tls = ['--tls-ca', c.caPem];
      assert.equal(client(['workers', ...tls], { DTP_TOKEN: CLIENT_TOKEN }).status, 1);
      const ok = client(['workers', ...tls], { DTP_TOKEN: NEW_CLIENT_TOKEN });
      assert.equal(ok.status, 0, ok.stdout + ok.stderr);
    });

    it('refuses a second coordinator on the same database, naming the lock and its holder', async () => {
      const second = ScriptProcess.start('coordinator.sh', [
        ...['--bind-host', HOST, '--worker-port', '0', '--client-port', '0'],
        ...['--database', database],
      ]);
      procs.push(second);
      assert.equal(await second.exited, 1);
      assert.match(second.output, /in use by another coordinator/);
      assert.match(second.output, new RegExp(`lock file ${database}\\.lock`));
      assert.match(second.output, new RegExp(`held by pid ${coordinator.proc.pid} `));
    });

    it('exits 1 at start when a certificate file cannot be read', async () => {
      const broken = ScriptProcess.start('coordinator.sh', [
        ...['--bind-host', HOST, '--worker-port', '0', '--client-port', '0'],
        ...[
          '--database',
          ':memory:',
          '--tls-cert',
          join(temp.dir, 'nope.pem'),
          '--tls-key',
          c.serverKey,
        ],
      ]);
      procs.push(broken);
      assert.equal(await broken.exited, 1);
      assert.match(broken.output, /cannot read TLS certificate/);
    });

    it('never writes a token into any log', async () => {
      await until(() => procs.every((p) => p.output.length > 0), { timeoutMs: 5_000 });
      for (const proc of procs) {
        for (const token of [CLIENT_TOKEN, NEW_CLIENT_TOKEN, WORKER_TOKEN]) {
          assert.ok(!proc.output.includes(token), `${proc.name} logged a token`);
        }
      }
    });
  },
);
