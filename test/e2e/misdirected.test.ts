/**
 * Configuration mistakes through the real scripts, each ending at once with
 * exit 1 (2 for bad input) and a message that says what to do, never a
 * worker that retries forever:
 *
 * - worker.sh pointed at the client port; client.sh pointed at the worker port;
 * - worker.sh without a worker token, or with a wrong one;
 * - client.sh submit with a payload over the frame limit.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ROOT, ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';

const HOST = '127.0.0.1';
/** A worker that would retry forever fails the test instead of hanging it. */
const BOUNDED = { timeout: 30_000 };
const WORKER_TOKEN = 'e2e-worker-token-5d4c3b2a19f8e7d6';

describe('misdirected workers and clients through the scripts', () => {
  const temp = tempDir('dtp-e2e-misdirected-');
  const procs: ScriptProcess[] = [];
  const file = (name: string, text: string): string => {
    const path = join(temp.dir, name);
    writeFileSync(path, text, { mode: 0o600 });
    return path;
  };
  let coordinator: { proc: ScriptProcess; workerPort: number; clientPort: number };

  before(async () => {
    coordinator = await startCoordinatorProcess([
      ...['--database', ':memory:', '--worker-token-file', file('tokens', `${WORKER_TOKEN}\n`)],
    ]);
    procs.push(coordinator.proc);
  });
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  const client = (args: string[], port: number) =>
    spawnSync(
      join(ROOT, 'scripts', 'client.sh'),
      [...args, '--host', HOST, '--port', String(port)],
      {
        encoding: 'utf8',
        timeout: 30_000,
        env: Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('DTP_'))),
      },
    );
  const worker = (port: number, extra: string[]): ScriptProcess => {
    const proc = ScriptProcess.start('worker.sh', [
      ...['--coordinator-host', HOST, '--coordinator-port', String(port)],
      ...['--heartbeat-interval-millis', '100', '--reconnect-delay-millis', '100'],
      ...extra,
    ]);
    procs.push(proc);
    return proc;
  };

  it(
    'stops a worker pointed at the client port with exit 1 and the right port to use',
    BOUNDED,
    async () => {
      const { clientPort } = coordinator;
      const misdirected = worker(clientPort, ['--token-file', file('w', `${WORKER_TOKEN}\n`)]);
      assert.equal(await misdirected.exited, 1, misdirected.output);
      assert.match(
        misdirected.output,
        new RegExp(
          `port ${clientPort} is a coordinator's client port; workers connect to its worker port \\(default 7070\\)`,
        ),
      );
    },
  );

  it(
    'fails a client pointed at the worker port with exit 1 and the right port to use',
    BOUNDED,
    () => {
      const { workerPort } = coordinator;
      const res = client(['workers'], workerPort);
      assert.equal(res.status, 1, res.stdout + res.stderr);
      assert.equal(
        res.stderr,
        `Error: port ${workerPort} is a coordinator's worker port; clients connect to its client port (default 7071)\n`,
      );
    },
  );

  it(
    'stops a worker without a worker token with a hint, and one with a wrong token without',
    BOUNDED,
    async () => {
      const none = worker(coordinator.workerPort, []);
      assert.equal(await none.exited, 1, none.output);
      assert.match(none.output, /needs a worker token/);
      assert.match(none.output, /--token-file <file> or DTP_TOKEN/);
      const wrong = worker(coordinator.workerPort, ['--token-file', file('bad', 'not-it\n')]);
      assert.equal(await wrong.exited, 1, wrong.output);
      assert.match(wrong.output, /worker token refused/);
      assert.doesNotMatch(wrong.output, /--token-file <file>/);
    },
  );

  it('refuses a payload over the frame limit with exit 2 before sending anything', BOUNDED, () => {
    const big = file('big.json', JSON.stringify({ text: 'x'.repeat(5_242_898) }));
    const res = client(['submit', 'SHA256', '--payload-file', big], coordinator.clientPort);
    assert.equal(res.status, 2, res.stdout + res.stderr);
    assert.equal(res.stderr, 'Error: payload too large (5,243,056 bytes; the limit is 1 MiB)\n');
    assert.doesNotMatch(coordinator.proc.output, /SUBMIT_JOB|job submitted/);
  });
});
