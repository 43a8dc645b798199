/**
 * `scripts/coordinator.sh --database <path>` as a user runs it:
 *
 * - A second coordinator on another name of a live database (a symbolic
 *   link, a hard link) exits 1 saying the database is in use, and the live
 *   one goes on. Once the first is killed (SIGKILL, no cleanup), a
 *   coordinator on the symbolic link starts and finds the first one's job;
 *   a hard-linked file is refused under either name (two names would mean
 *   two write-ahead logs) until the other name is removed.
 * - A path that cannot be created or opened ends the coordinator at once,
 *   exit 1, with the path and the reason, instead of hanging.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { ROOT, ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';

const HOST = '127.0.0.1';
/** A refusal is immediate; this only turns a hang into a failure. */
const EXIT_DEADLINE_MS = 15_000;

/** Runs coordinator.sh on `database` and returns its exit code and output. */
async function refusedStart(
  database: string,
  options: { asUser?: number } = {},
): Promise<{ code: number | null; output: string; elapsedMs: number }> {
  const flags = ['--database', database, '--bind-host', HOST, '--worker-port', '0'];
  flags.push('--client-port', '0', '--http-port', '0');
  const startedMs = performance.now();
  const proc =
    options.asUser === undefined
      ? ScriptProcess.start('coordinator.sh', flags)
      : ScriptProcess.start('/usr/bin/setpriv', [
          ...[`--reuid=${options.asUser}`, `--regid=${options.asUser}`, '--clear-groups'],
          join(ROOT, 'scripts', 'coordinator.sh'),
          ...flags,
        ]);
  const timer = setTimeout(() => void proc.kill(), EXIT_DEADLINE_MS);
  try {
    const code = await proc.exited;
    return { code, output: proc.output, elapsedMs: performance.now() - startedMs };
  } finally {
    clearTimeout(timer);
  }
}

describe('a second coordinator on another name of a live database', () => {
  const temp = tempDir('dtp-e2e-alias-');
  const cleanups: (() => Promise<unknown> | void)[] = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    temp.remove();
  });

  /** Starts a coordinator on `database` and checks that `jobId` is there. */
  async function findsJob(database: string, jobId: string): Promise<void> {
    const next = await startCoordinatorProcess(['--database', database, '--http-port', '0']);
    cleanups.push(() => next.proc.stop());
    const client = await DtpClient.connect({ host: HOST, port: next.clientPort });
    cleanups.push(() => client.close());
    assert.equal((await client.status(jobId)).state, 'QUEUED');
    await client.close();
    await next.proc.stop();
  }

  /** A live coordinator on `dir/coord.db` holding one queued job, and `alias.db` made by `ln`. */
  async function liveWithAlias(
    name: string,
    lnArgs: string[],
  ): Promise<{ live: string; alias: string; jobId: string; kill: () => Promise<void> }> {
    const dir = join(temp.dir, name);
    mkdirSync(dir);
    const live = join(dir, 'coord.db');
    const alias = join(dir, 'alias.db');
    const first = await startCoordinatorProcess(['--database', live, '--http-port', '0']);
    cleanups.push(() => first.proc.stop());
    // As docs/SECURITY.md shows it: `ln -s coord.db alias.db`, `ln coord.db alias.db`.
    execFileSync('ln', lnArgs, { cwd: dir });
    const client = await DtpClient.connect({ host: HOST, port: first.clientPort });
    cleanups.push(() => client.close());
    const { jobId } = await client.submit({ taskType: 'SLEEP', payload: { durationMillis: 1 } });

    const second = await refusedStart(alias);
    assert.equal(second.code, 1, second.output);
    assert.match(
      second.output,
      /cannot start: database .*alias\.db is in use by another coordinator/,
    );
    // The live coordinator is untouched and still answers.
    assert.equal((await client.status(jobId)).state, 'QUEUED');
    await client.close();
    return { live, alias, jobId, kill: () => first.proc.kill() };
  }

  it('exits 1 on a symbolic link, and starts there once the first was killed', async () => {
    const { alias, jobId, kill } = await liveWithAlias('symlink', ['-s', 'coord.db', 'alias.db']);
    await kill();
    await findsJob(alias, jobId);
  });

  it('exits 1 on a hard link, even once the first was killed, until one name is left', async () => {
    const { live, alias, jobId, kill } = await liveWithAlias('hardlink', ['coord.db', 'alias.db']);
    await kill();
    // The killed coordinator's last writes are in coord.db-wal, which a
    // coordinator on alias.db would never read.
    for (const database of [alias, live]) {
      const refused = await refusedStart(database);
      assert.equal(refused.code, 1, refused.output);
      assert.match(refused.output, /has 2 hard links: .*remove the other names/);
    }
    unlinkSync(alias);
    await findsJob(live, jobId);
  });
});

/** A user id without root's powers to run as, or null when this test runs unprivileged. */
function unprivilegedUser(): number | null {
  return process.getuid?.() === 0 ? 65_534 : null;
}

function setprivWorks(): boolean {
  try {
    execFileSync('/usr/bin/setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'true']);
    return true;
  } catch {
    return false;
  }
}

describe('a database path that cannot be used', () => {
  const temp = tempDir('dtp-e2e-paths-');
  after(() => temp.remove());

  const cases: [what: string, path: () => string, reason: RegExp][] = [
    [
      'a directory that cannot be made',
      () => '/proc/nope/x.db',
      /cannot create directory \/proc\/nope: no such file or directory/,
    ],
    ['a directory', () => temp.dir, /: is a directory$/m],
    [
      'a path under a regular file',
      () => {
        writeFileSync(join(temp.dir, 'plain'), '');
        return join(temp.dir, 'plain', 'x.db');
      },
      /plain is not a directory/,
    ],
    [
      'a lock file path that is a directory',
      () => {
        mkdirSync(join(temp.dir, 'locked'));
        mkdirSync(join(temp.dir, 'locked', 'x.db.lock'));
        return join(temp.dir, 'locked', 'x.db');
      },
      /cannot open lock file .*x\.db\.lock: is a directory/,
    ],
  ];
  for (const [what, path, reason] of cases) {
    it(`exits 1 at once, naming the path and the reason, for ${what}`, async () => {
      const database = path();
      const { code, output, elapsedMs } = await refusedStart(database);
      assert.equal(code, 1, output);
      assert.ok(output.includes(database), output);
      assert.match(output, reason);
      assert.ok(elapsedMs < EXIT_DEADLINE_MS, `took ${Math.round(elapsedMs)} ms`);
    });
  }

  const asUser = unprivilegedUser();
  const skip = asUser !== null && !setprivWorks() ? 'setpriv cannot drop root here' : false;
  it('exits 1 for a read-only directory and a read-only file', { skip }, async () => {
    // A directory everyone may enter (the temporary one is private to root).
    const shared = join(temp.dir, 'shared');
    mkdirSync(shared);
    chmodSync(temp.dir, 0o755);
    chmodSync(shared, 0o777);
    const readOnlyDir = join(shared, 'ro-dir');
    mkdirSync(readOnlyDir);
    chmodSync(readOnlyDir, 0o555);
    const readOnlyFile = join(shared, 'ro.db');
    writeFileSync(readOnlyFile, '');
    chmodSync(readOnlyFile, 0o444);
    const user = asUser === null ? {} : { asUser };
    for (const [database, reason] of [
      [join(readOnlyDir, 'x.db'), /cannot open database .*x\.db: permission denied/],
      [join(readOnlyDir, 'sub', 'x.db'), /cannot create directory .*sub: permission denied/],
      [readOnlyFile, /cannot open database .*ro\.db: permission denied/],
    ] as const) {
      const { code, output } = await refusedStart(database, user);
      assert.equal(code, 1, output);
      assert.match(output, reason);
    }
  });
});
