#!/usr/bin/env node
// Runs the compiled test files with node:test, by explicit path (Node 21+
// would treat directory arguments as globs, Node 20 would not).
//
//   node scripts/run-tests.mjs [lint|unit|sim|integration|e2e|package|python ...]
//   node scripts/run-tests.mjs integration=cluster,worker,tls
//
// With no argument every suite runs. `suite=a,b` runs only the files
// a.test.js and b.test.js of that suite. Suites run one after another; files of
// one suite run with the concurrency given by DTP_TEST_CONCURRENCY (default 2).
// lint is `npm run lint` (ESLint, Prettier, the import check); the python
// suite is scripts/python-checks.sh (the Python package: ruff, mypy, pytest
// against real coordinators). Two suites run beside others when those are
// asked for whole (see BESIDE): lint beside unit, sim and integration (it
// keeps one core busy; none of those leans on tight timing), python beside
// package (the package suite mostly waits on npm; python-checks.sh runs its
// tests in two processes on a machine of two cores); their output is printed once
// they have ended. The e2e suite runs in two lanes, one file at a time in
// each: the files of E2E_BESIDE (they depend on no tight timing and load the
// machine little) beside the others; the second lane's output is printed
// once both have ended. The package suite's two files run side by side (its
// offline checks mostly wait). Each suite's wall time is printed after it,
// and all of them at the end, followed by the failed tests of every suite
// with their errors again (scripts/failures-reporter.mjs), so the last lines
// of a long run say why it failed.
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

const ALL = ['lint', 'unit', 'sim', 'integration', 'e2e', 'package', 'python'];
const suites = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ALL;
const root = join(import.meta.dirname, '..', 'dist', 'test');
/** After SIGTERM, how long a suite's group has to clean up before SIGKILL. */
const TERMINATE_GRACE_MS = 5_000;
/**
 * Suites that run beside others, and the suites they may run beside: one is
 * started with the first of those that runs whole and waited for before any
 * other suite starts (lint is over before the e2e suite writes into the
 * checkout).
 */
const BESIDE = { lint: ['unit', 'sim', 'integration'], python: ['package'] };
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

/** The command of a suite that is no set of test files. */
function commandOf(suite) {
  if (suite === 'lint') return ['npm', ['run', 'lint']];
  return ['bash', [pythonScript]];
}

/** A suite started beside others, its output kept in a file: its exit, its folder. */
function startBeside(suite, hosts) {
  const dir = mkdtempSync(join(tmpdir(), `dtp-test-${suite}-`));
  outputDirs.add(dir);
  const fd = openSync(join(dir, 'output.txt'), 'w');
  const [command, args] = commandOf(suite);
  const startedAt = Date.now();
  const exited = runGroup(command, args, fd).exited.then((code) => ({
    code,
    ms: Date.now() - startedAt,
  }));
  closeSync(fd);
  return { suite, hosts, exited, dir };
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

/** Where each `node --test` run writes its failed tests (failures-reporter.mjs), in run order. */
const failureFiles = [];
const failuresDir = mkdtempSync(join(tmpdir(), 'dtp-test-failures-'));
outputDirs.add(failuresDir);
const failuresReporter = join(import.meta.dirname, 'failures-reporter.mjs');

function nodeTestArgs(concurrency, files) {
  const failures = join(failuresDir, `${failureFiles.length}.txt`);
  failureFiles.push(failures);
  return [
    '--test',
    `--test-concurrency=${concurrency}`,
    // A test that hangs fails after 10 minutes instead of holding CI.
    '--test-timeout=600000',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    `--test-reporter=${failuresReporter}`,
    `--test-reporter-destination=${failures}`,
    ...files,
  ];
}

/**
 * Prints again, at the very end, the failed tests of every suite with their
 * errors (what a long run's last lines should say), and the suites that are
 * no test files (lint, python) that failed.
 */
function printFailures() {
  const written = failureFiles
    .filter((file) => existsSync(file))
    .map((file) => readFileSync(file, 'utf8'))
    .join('');
  if (written === '' && failedCommands.length === 0) return;
  console.log('\n# what failed in this run (each error as printed above):');
  if (written !== '') process.stdout.write(written);
  for (const suite of failedCommands) console.log(`✖ suite ${suite}: its output is above`);
}

/**
 * How a suite's files run: one `node --test` per lane, the lanes side by
 * side (the first lane's output as it comes, the others' once all ended).
 */
function lanesOf(suite, files, whole) {
  const given = process.env.DTP_TEST_CONCURRENCY;
  if (given !== undefined) return [{ files, concurrency: given }];
  if (suite === 'package') return [{ files, concurrency: '2' }];
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
/** The suites run as a command (lint, python) that failed. */
const failedCommands = [];
const runStartedAt = Date.now();
const parsed = suites.map((arg) => {
  const [suite, only] = arg.split('=', 2);
  if (!ALL.includes(suite)) {
    console.error(`unknown suite ${suite}; expected one of ${ALL.join(', ')}`);
    process.exit(2);
  }
  return { suite, only };
});
/** Suites running beside others now, and those done so. */
const besides = [];
const startedBeside = new Set();

/** Waits for a suite run beside others and prints what it printed. */
async function finishBeside(beside) {
  besides.splice(besides.indexOf(beside), 1);
  const { code, ms } = await beside.exited;
  const where = beside.hosts.join(', ');
  times.push(`${beside.suite} ${seconds(ms)} (beside ${where})`);
  console.log(
    `\n# suite ${beside.suite} (run beside ${where}): ${commandOf(beside.suite).flat().join(' ')}`,
  );
  process.stdout.write(readFileSync(join(beside.dir, 'output.txt'), 'utf8'));
  console.log(`# suite ${beside.suite}: ${code === 0 ? 'passed' : 'FAILED'} in ${seconds(ms)}`);
  rmSync(beside.dir, { recursive: true, force: true });
  outputDirs.delete(beside.dir);
  if (code !== 0) {
    failed = true;
    failedCommands.push(beside.suite);
  }
}

/** Starts the suites asked for that run beside `suite` (run whole), if not started yet. */
function startBesides(suite, only) {
  if (only !== undefined) return;
  for (const { suite: other, only: otherOnly } of parsed) {
    const hosts = BESIDE[other];
    if (hosts === undefined || otherOnly !== undefined || startedBeside.has(other)) continue;
    if (!hosts.includes(suite)) continue;
    startedBeside.add(other);
    besides.push(startBeside(other, hosts));
  }
}

/** Runs one suite in the foreground; resolves with its exit status, or null for no files. */
async function runSuite(suite, only) {
  if (BESIDE[suite] !== undefined) {
    console.log(`\n# suite ${suite}: ${commandOf(suite).flat().join(' ')}`);
    const [command, args] = commandOf(suite);
    return runGroup(command, args).exited;
  }
  const files = filesOf(suite, only);
  if (files.length === 0) return null;
  const lanes = lanesOf(suite, files, only === undefined);
  const shape =
    lanes.length > 1
      ? ` in ${lanes.length} lanes (${lanes.map((l) => l.files.length).join(' + ')})`
      : '';
  console.log(`\n# suite ${suite}: ${files.length} file(s)${shape}`);
  return runLanes(lanes);
}

for (const [index, { suite, only }] of parsed.entries()) {
  if (startedBeside.has(suite)) continue;
  // One that runs beside a later suite waits to start with it.
  const hosts = BESIDE[suite] ?? [];
  if (
    only === undefined &&
    parsed.slice(index + 1).some((p) => hosts.includes(p.suite) && p.only === undefined)
  )
    continue;
  for (const beside of [...besides]) if (!beside.hosts.includes(suite)) await finishBeside(beside);
  startBesides(suite, only);
  const startedAt = Date.now();
  const code = await runSuite(suite, only);
  if (code === null) continue;
  if (code !== 0) {
    failed = true;
    if (BESIDE[suite] !== undefined) failedCommands.push(suite);
  }
  times.push(`${suite} ${seconds(Date.now() - startedAt)}`);
  console.log(
    `# suite ${suite}: ${code === 0 ? 'passed' : 'FAILED'} in ${seconds(Date.now() - startedAt)}`,
  );
}
for (const beside of [...besides]) await finishBeside(beside);
console.log(`\n# wall time: ${times.join(', ')}; all ${seconds(Date.now() - runStartedAt)}`);
printFailures();
process.exit(failed ? 1 : 0);
