/**
 * Each command-line program names itself as it was started: the scripts of a
 * checkout (`coordinator.sh`), the container's entry point
 * (`docker-entrypoint.sh worker`), the installed commands (`dtp`, also
 * through a symlink as npm puts it in node_modules/.bin) and the compiled
 * file run by node itself (`node dist/src/cli/client-main.js`).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ROOT } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';

function run(command: string, args: string[]): { status: number | null; out: string } {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DTP_')) env[k] = v;
  const r = spawnSync(command, args, { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: r.stdout + r.stderr };
}

const script = (name: string) => join(ROOT, 'scripts', name);
const bin = (name: string) => join(ROOT, 'bin', name);

describe('program names', () => {
  const temp = tempDir('dtp-names-');
  after(() => temp.remove());

  it('are the script names for the scripts of a checkout', () => {
    assert.match(run(script('coordinator.sh'), ['--help']).out, /^Usage: coordinator\.sh /);
    const worker = run(script('worker.sh'), ['--bogus']);
    assert.equal(worker.status, 2);
    assert.match(worker.out, /^worker\.sh: unknown option '--bogus'/);
    assert.match(worker.out, /Run `worker\.sh --help` for usage\./);
    assert.match(run(script('client.sh'), ['stauts']).out, /Run `client\.sh --help` for usage\./);
  });

  it('are the command names for the installed commands, also through a symlink', () => {
    const client = run(process.execPath, [bin('dtp.mjs'), 'stauts']);
    assert.equal(client.status, 2);
    assert.match(client.out, /Run `dtp --help` for usage\./);
    assert.doesNotMatch(client.out, /client\.sh/);
    assert.match(
      run(process.execPath, [bin('dtp-coordinator.mjs'), '--help']).out,
      /^Usage: dtp-coordinator /,
    );
    const link = join(temp.dir, 'dtp-worker');
    symlinkSync(bin('dtp-worker.mjs'), link);
    const worker = run(link, ['--bogus']);
    assert.match(worker.out, /^dtp-worker: unknown option '--bogus'/);
    assert.match(worker.out, /Run `dtp-worker --help` for usage\./);
  });

  it('name the role for the container entry point, and node for the compiled file', () => {
    const entry = run(script('docker-entrypoint.sh'), ['worker', '--bogus']);
    assert.match(entry.out, /^docker-entrypoint\.sh worker: unknown option '--bogus'/);
    const direct = run(process.execPath, ['dist/src/cli/client-main.js', 'stauts']);
    assert.match(direct.out, /Run `node dist\/src\/cli\/client-main\.js --help` for usage\./);
  });
});
