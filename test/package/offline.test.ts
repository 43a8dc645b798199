/**
 * The test command on a machine without package registries, each run for
 * real against a registry that cannot be reached (a port nothing listens
 * on, or a server that accepts connections and never answers):
 *
 * - the packed-package test, as a separate `node --test` with npm pointed
 *   there, learns so within seconds and skips, saying why;
 * - scripts/python-checks.sh, with pip's index there and no local sources,
 *   says so within a minute, not after pip's per-request timeout on every
 *   request, installs the package with no index and checks it with the
 *   tools the machine has, naming each one it lacks;
 *
 * and neither leaves a process or a folder behind. Then the bounded commands
 * the packed-package test runs its tools with: killed with everything they
 * started at their time limit, when the test runner's timeout cancels the
 * hook that waits for them, and when the test process is terminated.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, it } from 'node:test';
import {
  commandTempDir,
  processesWithEnv,
  runCommand,
  type CommandResult,
} from '../helpers/bounded-command.js';
import { cleanEnv, ROOT, ScriptProcess } from '../helpers/processes.js';
import { until } from '../helpers/until.js';

const PACKAGE_TEST = join(ROOT, 'dist', 'test', 'package', 'packed-install.test.js');
const HELPER = pathToFileURL(join(ROOT, 'dist', 'test', 'helpers', 'bounded-command.js')).href;
/** The variable every process started below inherits, to find any left running. */
const MARK = 'PACKAGE_TEST_MARK';
/** "A few seconds", with room for a busy machine. */
const SKIP_WITHIN_MS = 30_000;

/** Runs `command` with a fresh mark and a private TMPDIR; what it printed, and what it left behind. */
async function runMarked(
  command: string,
  args: string[],
  extraEnv: NodeJS.ProcessEnv,
  cwd = ROOT,
): Promise<{
  result: CommandResult;
  elapsedMs: number;
  leftInTmp: string[];
  leftRunning: number[];
}> {
  const mark = randomUUID();
  const tmp = commandTempDir('dtp-offline-');
  try {
    const env = cleanEnv({ ...extraEnv, [MARK]: mark, TMPDIR: tmp.dir });
    // A `node --test` started from a test file would otherwise take itself for
    // one of the runner's file processes and run nothing.
    delete env.NODE_TEST_CONTEXT;
    const startedAt = Date.now();
    const result = await runCommand(command, args, { cwd, env, timeoutMs: 120_000 });
    const elapsedMs = Date.now() - startedAt;
    // A SIGKILL is delivered at once, but let the kernel finish the job.
    const leftRunning = await until(() => processesWithEnv(MARK, mark).length === 0, {
      timeoutMs: 5_000,
    })
      .then(() => [])
      .catch(() => processesWithEnv(MARK, mark));
    // npm on newer Node.js keeps its compiled-module cache in the temporary
    // folder on purpose (module.enableCompileCache): npm's, not a leftover of ours.
    const leftInTmp = readdirSync(tmp.dir).filter((name) => name !== 'node-compile-cache');
    return { result, elapsedMs, leftInTmp, leftRunning };
  } finally {
    tmp.remove();
  }
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  return address.port;
}

/** A port on the loopback that nothing listens on (bound once, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  const port = await listen(server);
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function assertSkipsOffline(registry: string): Promise<void> {
  const run = await runMarked(process.execPath, ['--test', '--test-reporter=spec', PACKAGE_TEST], {
    npm_config_registry: registry,
  });
  const output = `${run.result.stdout}\n${run.result.stderr}`;
  assert.equal(run.result.status, 0, output);
  // The whole suite skipped, the reason beside it.
  const skipped = `^﹣ the packed package, installed into an empty folder .*# the npm registry ${registry} is out of reach`;
  assert.match(output, new RegExp(skipped, 'm'));
  assert.match(output, /ℹ fail 0\b/);
  assert.ok(run.elapsedMs < SKIP_WITHIN_MS, `took ${run.elapsedMs} ms:\n${output}`);
  assert.deepEqual(run.leftRunning, [], 'processes left running');
  assert.deepEqual(run.leftInTmp, [], 'left in the temporary folder');
}

describe('the packed-package test without the npm registry', () => {
  const held: Socket[] = [];
  const silent = createServer((socket) => held.push(socket));
  after(async () => {
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  });

  it('skips within seconds, saying why, when nothing listens at the registry', async () => {
    await assertSkipsOffline(`http://127.0.0.1:${await closedPort()}/`);
  });

  it('skips within seconds, saying why, when the registry accepts and never answers', async () => {
    await assertSkipsOffline(`http://127.0.0.1:${await listen(silent)}/`);
  });
});

const python = spawnSync('python3', ['-c', 'import venv'], { encoding: 'utf8' });
const noPython = python.status === 0 ? false : 'no python3 with venv here';

describe('the Python checks without a package index', { skip: noPython }, () => {
  const held: Socket[] = [];
  const silent = createServer((socket) => held.push(socket));
  after(async () => {
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  });

  it('say so within a minute when the index never answers, and check with what the machine has', async () => {
    const index = `http://127.0.0.1:${await listen(silent)}/simple/`;
    // pytest only collects: the fallback's steps are what is under test, not the Python tests.
    const script = join(ROOT, 'scripts', 'python-checks.sh');
    const run = await runMarked('bash', [script, '--collect-only'], {
      // pip's configuration files (extra indexes, local wheels) left out: the index alone.
      PIP_CONFIG_FILE: '/dev/null',
      PIP_FIND_LINKS: '',
      PIP_INDEX_URL: index,
    });
    const output = `${run.result.stdout}\n${run.result.stderr}`;
    assert.equal(run.result.status, 0, output);
    assert.match(output, new RegExp(`# python: the package index is out of reach \\(${index}: `));
    assert.match(output, /# python: pip could not install python\/\[dev\] \(no package index\?\)/);
    // The package itself installs with no index; each missing tool is named.
    assert.match(output, /# python: checking with the tools this machine has/);
    for (const tool of ['ruff', 'mypy', 'pytest']) {
      const said = new RegExp(
        `# python: (${tool}[^\\n]* is not installed here: skipped|.*\\b${tool}\\b.* done in)`,
      );
      assert.match(output, said, `${tool} neither ran nor was said skipped:\n${output}`);
    }
    assert.ok(run.elapsedMs < 90_000, `took ${run.elapsedMs} ms:\n${output}`);
    assert.deepEqual(run.leftRunning, [], 'processes left running');
    assert.deepEqual(run.leftInTmp, [], 'left in the temporary folder');
  });
});

/** A module that runs a command starting a grandchild, under the given limit; it prints the folder it made. */
function fixture(commandTimeoutMs: number): string {
  return `
import { commandTempDir, runCommand } from ${JSON.stringify(HELPER)};
const temp = commandTempDir('dtp-package-');
console.log('folder ' + temp.dir);
const r = await runCommand('bash', ['-c', 'sleep 600 & echo started; wait'], {
  cwd: temp.dir, env: process.env, timeoutMs: ${commandTimeoutMs} });
console.log(JSON.stringify({ timedOut: r.timedOut, status: r.status }));
temp.remove();
`;
}

describe('bounded commands', () => {
  it('are killed with what they started at their time limit', async () => {
    const run = await runMarked(process.execPath, ['--input-type=module', '-e', fixture(500)], {});
    assert.equal(run.result.status, 0, run.result.stderr);
    assert.match(run.result.stdout, /\{"timedOut":true,"status":null\}/);
    assert.deepEqual(run.leftRunning, []);
    assert.deepEqual(run.leftInTmp, []);
  });

  it("are killed, and their folders removed, when the test runner's timeout cancels the hook", async () => {
    const dir = commandTempDir('dtp-offline-fixture-');
    try {
      const file = join(dir.dir, 'cancelled.test.mjs');
      writeFileSync(
        file,
        `
import { after, before, describe, it } from 'node:test';
import { commandTempDir, killCommands, runCommand } from ${JSON.stringify(HELPER)};
describe('a set-up longer than its timeout', () => {
  let temp = null;
  before(async () => {
    temp = commandTempDir('dtp-package-');
    await runCommand('bash', ['-c', 'sleep 600 & wait'], { cwd: temp.dir, env: process.env, timeoutMs: 600_000 });
  }, { timeout: 500 });
  after(() => { killCommands(); temp?.remove(); });
  it('never runs', () => {});
});
`,
      );
      const run = await runMarked(process.execPath, ['--test', '--test-reporter=spec', file], {});
      assert.equal(run.result.status, 1, 'the cancelled hook fails the file');
      assert.match(run.result.stdout, /timed out after 500ms/);
      assert.ok(run.elapsedMs < SKIP_WITHIN_MS, `took ${run.elapsedMs} ms`);
      assert.deepEqual(run.leftRunning, []);
      assert.deepEqual(run.leftInTmp, []);
    } finally {
      dir.remove();
    }
  });

  it('are killed, and their folders removed, when the test process is terminated', async () => {
    const mark = randomUUID();
    const tmp = commandTempDir('dtp-offline-');
    try {
      const proc = ScriptProcess.start(
        process.execPath,
        ['--input-type=module', '-e', fixture(600_000)],
        { cwd: ROOT, env: { [MARK]: mark, TMPDIR: tmp.dir } },
      );
      // The test process, its bash and the bash's sleep: terminate the test process alone.
      await until(() => processesWithEnv(MARK, mark).length >= 3, { timeoutMs: 20_000 });
      proc.signal('SIGTERM');
      assert.equal(await proc.exited, null, `ended by the signal:\n${proc.output}`);
      await until(() => processesWithEnv(MARK, mark).length === 0, { timeoutMs: 5_000 });
      assert.deepEqual(readdirSync(tmp.dir), []);
    } finally {
      tmp.remove();
    }
  });
});
