#!/usr/bin/env node
// Runs the compiled test files with node:test, by explicit path (Node 21+
// would treat directory arguments as globs, Node 20 would not).
//
//   node scripts/run-tests.mjs [unit|integration|e2e|sim|package|python ...]
//   node scripts/run-tests.mjs integration=cluster,worker,tls
//
// With no argument every suite runs. `suite=a,b` runs only the files
// a.test.js and b.test.js of that suite. Suites run one after another; files of
// one suite run with the concurrency given by DTP_TEST_CONCURRENCY (default 2).
// The python suite is scripts/python-checks.sh (the Python package: ruff,
// mypy, pytest against real coordinators). When both package and python run,
// python runs beside package (each keeps about one core busy, neither leans
// on tight timing) and its output is printed once it has ended. The e2e
// suite runs in two lanes, one file at a time in each: the files of
// E2E_BESIDE (they depend on no tight timing and load the machine little)
// beside the others; the second lane's output is printed once both have
// ended. Each suite's wall time is printed after it, and all of them at the
// end.
//
// Every suite runs in a process group of its own: when this runner is
// interrupted or terminated, each group gets SIGTERM (the tests' own
// clean-up runs: their commands killed, their folders removed), then
// SIGKILL after a grace; what a suite left running when it ended is killed
// with its group too.
//
// The PostgreSQL tests use the server named by DTP_TEST_PG_URL. Without it,
// a private cluster is started for the run (scripts/pg-cluster.sh, when
// PostgreSQL is installed) and stopped at the end; where none can be
// started those tests are skipped and say why.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  readdirSync,
  statSync,
  existsSync,
  mkdtempSync,
  openSync,
  closeSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { join } from 'node:path';

const ALL = ['unit', 'sim', 'integration', 'e2e', 'package', 'python'];
const suites = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ALL;
const root = join(import.meta.dirname, '..', 'dist', 'test');
/** After SIGTERM, how long a suite's group has to clean up before SIGKILL. */
const TERMINATE_GRACE_MS = 5_000;
/**
 * The e2e files that run in a lane beside the rest of the suite: none stops
 * a process to judge a reaction time against the clock, measures CPU or
 * memory, or floods the machine, and none uses a port another e2e file may
 * take. A file not named here runs in the first lane, never beside another
 * of that lane.
 */
const E2E_BESIDE = [
  'demo',
  'documented-commands',
  'dashboard',
  'task-modules',
  'database-paths',
  'security-scripts',
  'queues',
  'container-entry',
  'flow-crash',
  'bulk-crash',
  'steps-crash',
  'misdirected',
  'program-names',
  'examples',
  'http-port',
];

function findTests(dir) {
  if (!existsSync(dir)) return [];
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...findTests(path));
    else if (name.endsWith('.test.js')) out.push(path);
  }
  return out;
}

/** The process groups of the suites still running (each group's id is its leader's PID). */
const groups = new Set();

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    // The group has ended.
  }
}

/**
 * Runs a command in a process group of its own, its output to `stdio`
 * ('inherit' or a file descriptor); resolves with its exit status.
 */
function runGroup(command, args, stdio = 'inherit') {
  const child = spawn(command, args, { stdio: ['ignore', stdio, stdio], detached: true });
  groups.add(child.pid);
  const closed = once(child, 'close').then(([code, signal]) => {
    // Whatever the suite left running goes with its group.
    signalGroup(child.pid, 'SIGKILL');
    groups.delete(child.pid);
    return code ?? (signal === null ? 1 : 128);
  });
  child.once('exit', () => signalGroup(child.pid, 'SIGKILL'));
  return { exited: closed };
}

const clusterScript = join(import.meta.dirname, 'pg-cluster.sh');
let clusterDir = null;
if (!process.env.DTP_TEST_PG_URL) {
  const dir = mkdtempSync(join(tmpdir(), 'dtp-test-pg-'));
  const started = spawnSync(clusterScript, ['start', dir], { encoding: 'utf8' });
  if (started.status === 0) {
    clusterDir = dir;
    process.env.DTP_TEST_PG_URL = started.stdout.trim().split('\n').at(-1);
    console.log(`# PostgreSQL for the tests: ${process.env.DTP_TEST_PG_URL}`);
  } else {
    spawnSync(clusterScript, ['stop', dir]);
    console.log(`# no PostgreSQL for the tests (${started.stderr.trim()}): those tests skip`);
  }
}
const stopCluster = () => {
  if (clusterDir !== null) spawnSync(clusterScript, ['stop', clusterDir]);
  clusterDir = null;
};

/** Folders of output kept for suites run beside another; removed however the run ends. */
const outputDirs = new Set();
// However this process ends (a signal, its output pipe closed, an uncaught
// error), no suite and no private cluster outlives the run.
process.on('exit', () => {
  for (const pid of groups) signalGroup(pid, 'SIGKILL');
  stopCluster();
  for (const dir of outputDirs) rmSync(dir, { recursive: true, force: true });
});
let terminating = false;
async function terminate() {
  if (terminating) return;
  terminating = true;
  for (const pid of groups) signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + TERMINATE_GRACE_MS;
  while (groups.size > 0 && Date.now() < deadline) {
    await delay(50);
  }
  process.exit(1);
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => void terminate());
process.stdout.on('error', () => void terminate());

const pythonScript = join(import.meta.dirname, 'python-checks.sh');

/** The python suite started beside the package suite: its exit, its output's folder. */
function startPythonBeside() {
  const dir = mkdtempSync(join(tmpdir(), 'dtp-test-python-'));
  outputDirs.add(dir);
  const fd = openSync(join(dir, 'output.txt'), 'w');
  const run = runGroup('bash', [pythonScript], fd);
  closeSync(fd);
  return { exited: run.exited, dir, startedAt: Date.now() };
}

/** The files of one suite argument (`suite` or `suite=a,b`); exits on a name that is not there. */
function filesOf(suite, only) {
  const files = findTests(join(root, suite));
  if (only === undefined) return files;
  const names = only.split(',').map((name) => `${name}.test.js`);
  const missing = names.filter((name) => !files.some((f) => f.endsWith(`/${name}`)));
  if (missing.length > 0) {
    console.error(`no such test file in suite ${suite}: ${missing.join(', ')}`);
    process.exit(2);
  }
  return files.filter((f) => names.some((name) => f.endsWith(`/${name}`)));
}

function nodeTestArgs(concurrency, files) {
  return [
    '--test',
    `--test-concurrency=${concurrency}`,
    // A test that hangs fails after 10 minutes instead of holding CI.
    '--test-timeout=600000',
    '--test-reporter=spec',
    ...files,
  ];
}

/**
 * How a suite's files run: one `node --test` per lane, the lanes side by
 * side (the first lane's output as it comes, the others' once all ended).
 */
function lanesOf(suite, files, whole) {
  const given = process.env.DTP_TEST_CONCURRENCY;
  if (given !== undefined) return [{ files, concurrency: given }];
  if (suite === 'package') return [{ files, concurrency: '1' }];
  if (suite !== 'e2e') return [{ files, concurrency: '2' }];
  const beside = (f) => E2E_BESIDE.some((name) => f.endsWith(`/${name}.test.js`));
  const second = files.filter(beside);
  if (!whole || second.length === 0 || second.length === files.length)
    return [{ files, concurrency: '1' }];
  return [
    { files: files.filter((f) => !beside(f)), concurrency: '1' },
    { files: second, concurrency: '1' },
  ];
}

/** Runs the lanes side by side; resolves with the worst exit status. */
async function runLanes(lanes) {
  const runs = lanes.map((lane, i) => {
    if (i === 0)
      return {
        exited: runGroup(process.execPath, nodeTestArgs(lane.concurrency, lane.files)).exited,
      };
    const dir = mkdtempSync(join(tmpdir(), 'dtp-test-lane-'));
    outputDirs.add(dir);
    const fd = openSync(join(dir, 'output.txt'), 'w');
    const run = runGroup(process.execPath, nodeTestArgs(lane.concurrency, lane.files), fd);
    closeSync(fd);
    return { exited: run.exited, dir, files: lane.files.length };
  });
  const codes = await Promise.all(runs.map((r) => r.exited));
  for (const run of runs.slice(1)) {
    console.log(`\n# the lane beside it: ${run.files} file(s)`);
    process.stdout.write(readFileSync(join(run.dir, 'output.txt'), 'utf8'));
    rmSync(run.dir, { recursive: true, force: true });
    outputDirs.delete(run.dir);
  }
  return codes.find((code) => code !== 0) ?? 0;
}

const seconds = (ms) => `${Math.round(ms / 1000)} s`;
/** Wall time per suite, in the order they ended. */
const times = [];
let failed = false;
const runStartedAt = Date.now();
let pythonBeside = null;
for (const arg of suites) {
  const [suite, only] = arg.split('=', 2);
  if (!ALL.includes(suite)) {
    console.error(`unknown suite ${suite}; expected one of ${ALL.join(', ')}`);
    process.exit(2);
  }
  if (suite === 'python' && pythonBeside !== null) continue;
  if (suite === 'package' && only === undefined && suites.indexOf('python') > suites.indexOf(arg)) {
    pythonBeside = startPythonBeside();
  }
  const startedAt = Date.now();
  let code;
  if (suite === 'python') {
    console.log('\n# suite python: scripts/python-checks.sh');
    code = await runGroup('bash', [pythonScript]).exited;
  } else {
    const files = filesOf(suite, only);
    if (files.length === 0) continue;
    const lanes = lanesOf(suite, files, only === undefined);
    const shape =
      lanes.length > 1
        ? ` in ${lanes.length} lanes (${lanes.map((l) => l.files.length).join(' + ')})`
        : '';
    console.log(`\n# suite ${suite}: ${files.length} file(s)${shape}`);
    code = await runLanes(lanes);
  }
  if (code !== 0) failed = true;
  times.push(`${suite} ${seconds(Date.now() - startedAt)}`);
  console.log(
    `# suite ${suite}: ${code === 0 ? 'passed' : 'FAILED'} in ${seconds(Date.now() - startedAt)}`,
  );
}
if (pythonBeside !== null) {
  const code = await pythonBeside.exited;
  times.push(`python ${seconds(Date.now() - pythonBeside.startedAt)} (beside package)`);
  console.log('\n# suite python (run beside package): scripts/python-checks.sh');
  process.stdout.write(readFileSync(join(pythonBeside.dir, 'output.txt'), 'utf8'));
  rmSync(pythonBeside.dir, { recursive: true, force: true });
  outputDirs.delete(pythonBeside.dir);
  if (code !== 0) failed = true;
}
console.log(`\n# wall time: ${times.join(', ')}; all ${seconds(Date.now() - runStartedAt)}`);
process.exit(failed ? 1 : 0);
