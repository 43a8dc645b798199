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
// on tight timing) and its output is printed once it has ended.
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
import { join } from 'node:path';

const ALL = ['unit', 'sim', 'integration', 'e2e', 'package', 'python'];
const suites = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ALL;
const root = join(import.meta.dirname, '..', 'dist', 'test');

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
// However this process ends (a signal, its output pipe closed, an uncaught
// error), the private cluster never outlives the run.
process.on('exit', stopCluster);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => process.exit(1));
process.stdout.on('error', () => process.exit(1));

const pythonScript = join(import.meta.dirname, 'python-checks.sh');
/** The python suite started beside the package suite: its exit, its output's folder. */
let pythonBeside = null;

function startPythonBeside() {
  const dir = mkdtempSync(join(tmpdir(), 'dtp-test-python-'));
  const fd = openSync(join(dir, 'output.txt'), 'w');
  const child = spawn('bash', [pythonScript], { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  // However this process ends, the checks do not outlive it.
  process.on('exit', () => child.exitCode === null && child.kill('SIGTERM'));
  return { exited: once(child, 'exit'), dir };
}

let failed = false;
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
  if (suite === 'python') {
    console.log('\n# suite python: scripts/python-checks.sh');
    const res = spawnSync('bash', [pythonScript], {
      stdio: 'inherit',
    });
    if (res.status !== 0) failed = true;
    continue;
  }
  let files = findTests(join(root, suite));
  if (only !== undefined) {
    const names = only.split(',').map((name) => `${name}.test.js`);
    const missing = names.filter((name) => !files.some((f) => f.endsWith(`/${name}`)));
    if (missing.length > 0) {
      console.error(`no such test file in suite ${suite}: ${missing.join(', ')}`);
      process.exit(2);
    }
    files = files.filter((f) => names.some((name) => f.endsWith(`/${name}`)));
  }
  if (files.length === 0) continue;
  console.log(`\n# suite ${suite}: ${files.length} file(s)`);
  const serial = suite === 'e2e' || suite === 'package';
  const concurrency = process.env.DTP_TEST_CONCURRENCY ?? (serial ? '1' : '2');
  const res = spawnSync(
    process.execPath,
    // A test that hangs fails after 10 minutes instead of holding CI.
    [
      '--test',
      `--test-concurrency=${concurrency}`,
      '--test-timeout=600000',
      '--test-reporter=spec',
      ...files,
    ],
    { stdio: 'inherit' },
  );
  if (res.status !== 0) failed = true;
}
if (pythonBeside !== null) {
  const [code] = await pythonBeside.exited;
  console.log('\n# suite python (run beside package): scripts/python-checks.sh');
  process.stdout.write(readFileSync(join(pythonBeside.dir, 'output.txt'), 'utf8'));
  rmSync(pythonBeside.dir, { recursive: true, force: true });
  if (code !== 0) failed = true;
}
process.exit(failed ? 1 : 0);
