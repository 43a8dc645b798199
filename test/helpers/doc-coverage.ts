/**
 * Which test runs each command the documentation shows (see doc-commands.ts
 * for how commands are read, and docs/ARCHITECTURE.md, "Tests", for the
 * convention):
 *
 * - SESSIONS: test/e2e/documented-commands.test.ts runs every command under
 *   these headings, in order, in a temporary folder, against real processes;
 * - ELSEWHERE: another test or CI script runs them (every command under a
 *   heading, or one command), and its file holds the text it runs;
 * - a block marked `template` is not run.
 *
 * A command shown inline (a code span of running text) is never run by a
 * session through its heading: a session runs it only when it names it in
 * `inline`, an ELSEWHERE entry names it by its `command`, or a block shows the
 * same text and that block is covered. NOT_RUN lists, with the reason, the
 * spans that read like commands but are not run: a program's sub-command or
 * flag named in a sentence, another machine's engine, a measurement's own
 * long run.
 *
 * test/unit/documented-commands.test.ts fails on any command that none of
 * these covers, and on entries here that no longer match the documents.
 */
import type { DocCommand } from './doc-commands.js';

export const E2E_TEST = 'test/e2e/documented-commands.test.ts';

export interface DocSection {
  doc: string;
  /** A heading's text without its `#`s, as doc-commands.ts reads it. */
  heading: string;
}

/** What a session prepares before its first command. */
export type SessionNeed =
  /** A fresh database on the test's PostgreSQL server, for `postgres://` URLs. */
  | 'postgres'
  /** A CA, a server certificate and token files in `/etc/dtp` (`init-secrets`). */
  | 'secrets'
  /** Coordinators also open their HTTP port (`DTP_HTTP_PORT=0`), for `curl` lines. */
  | 'http-port';

/** One command shown inline, by its document and its text. */
export interface InlinePick {
  doc: string;
  command: string;
}

export interface Session {
  /** Part of the test's title. */
  name: string;
  /** Run in this order, in one folder, sharing processes, ports and job ids. */
  sections: readonly DocSection[];
  /** Then these inline commands, in this order. */
  inline?: readonly InlinePick[];
  needs?: readonly SessionNeed[];
  /** Files the commands read, written into the folder first. */
  files?: Readonly<Record<string, string>>;
}

const README = 'README.md';
const OPERATIONS = 'docs/OPERATIONS.md';
const HTTP = 'docs/HTTP.md';
const SECURITY = 'docs/SECURITY.md';
const CLI = 'docs/CLI.md';
const MEASURED = 'docs/MEASURED_BEHAVIOR.md';
/** An ELSEWHERE or NOT_RUN entry for a command shown inline in any document. */
export const ANY_DOC = '*';

export const SESSIONS: readonly Session[] = [
  {
    name: 'README "Running it yourself", then OPERATIONS "Backups" of its database',
    sections: [
      { doc: README, heading: 'Running it yourself' },
      { doc: README, heading: 'Queues and limits' },
      { doc: OPERATIONS, heading: 'Containing an incident' },
      { doc: OPERATIONS, heading: 'Backups' },
    ],
    files: {
      'job.json': '{"width": 80}\n',
      'jobs.ndjson':
        '{"taskType": "SHA256", "payload": {"text": "a"}}\n' +
        '{"taskType": "WORD_COUNT", "payload": {"text": "b c"}, "priority": "HIGH"}\n',
    },
  },
  {
    name: 'README "The dashboard", the job queries and an event of HTTP.md',
    sections: [
      { doc: README, heading: 'The dashboard' },
      { doc: HTTP, heading: '`GET /api/jobs`' },
      { doc: HTTP, heading: '`POST /api/events`' },
    ],
  },
  {
    name: 'README "Jobs that depend on jobs"',
    sections: [{ doc: README, heading: 'Jobs that depend on jobs' }],
    files: {
      'flow.json': JSON.stringify({
        jobs: [
          {
            ref: 'thumbs',
            taskType: 'SHA256',
            payload: { text: 'thumbnails' },
            dependsOn: ['resize'],
          },
          { ref: 'resize', taskType: 'SHA256', payload: { text: 'resize' } },
        ],
      }),
    },
  },
  {
    name: 'README "Later and on a schedule", then "Deduplication and expiry"',
    sections: [
      { doc: README, heading: 'Later and on a schedule' },
      { doc: README, heading: 'Deduplication and expiry' },
    ],
  },
  {
    name: 'README "Jobs that wait for people and for the world"',
    sections: [{ doc: README, heading: 'Jobs that wait for people and for the world' }],
    files: {
      // The README's TypeScript module, as the JavaScript it compiles to.
      'approvals.mjs':
        'export default {\n' +
        "  'orders.approve': async ({ order }, ctx) => {\n" +
        "    const approval = await ctx.waitForSignal('approve', { timeout: 86_400_000 });\n" +
        '    if (approval === null) return { order, approved: false };\n' +
        '    return { order, approved: true, by: approval.payload.by };\n' +
        '  },\n' +
        '};\n',
    },
  },
  {
    name: 'OPERATIONS "Running"',
    sections: [{ doc: OPERATIONS, heading: 'Running' }],
  },
  {
    name: 'SECURITY "Deploying safely" (TLS, then tokens) and the live stream of HTTP.md',
    sections: [
      { doc: SECURITY, heading: 'Deploying safely' },
      { doc: HTTP, heading: 'The live stream: `GET /api/events`' },
    ],
    needs: ['secrets', 'http-port'],
  },
  {
    name: 'OPERATIONS "Running highly available" on PostgreSQL',
    sections: [{ doc: OPERATIONS, heading: 'Topology' }],
    needs: ['postgres'],
  },
  {
    // One coordinator of the three (each host runs the same line), 16 shards.
    name: 'OPERATIONS "Running sharded" on PostgreSQL',
    sections: [{ doc: OPERATIONS, heading: 'Starting a sharded cluster' }],
    needs: ['postgres'],
  },
  {
    name: 'the coordinator, worker and client commands shown inline',
    sections: [],
    inline: [
      { doc: HTTP, command: 'scripts/coordinator.sh --http-port 8080' },
      { doc: SECURITY, command: 'scripts/worker.sh --task-memory-mb 256' },
      { doc: README, command: 'client.sh submit sha256 --help' },
      { doc: OPERATIONS, command: 'scripts/client.sh --help' },
      { doc: OPERATIONS, command: 'scripts/client.sh <command> --help' },
      { doc: CLI, command: 'client.sh help <command>' },
      { doc: CLI, command: 'client.sh <command> --help' },
      { doc: README, command: 'scripts/client.sh submit-many --file jobs.ndjson' },
      { doc: README, command: 'client.sh watch <job-id>' },
      { doc: HTTP, command: 'client.sh queue list --json' },
      { doc: HTTP, command: 'client.sh schedule list --json' },
      { doc: OPERATIONS, command: 'client.sh workers' },
      { doc: OPERATIONS, command: 'scripts/client.sh list --state FAILED' },
      { doc: OPERATIONS, command: 'scripts/client.sh purge --state COMPLETED --older-than 7d' },
    ],
    files: { 'jobs.ndjson': '{"taskType": "SHA256", "payload": {"text": "a"}}\n' },
  },
];

/** Commands run by another test or script, whose file holds `contains`. */
export interface Elsewhere {
  /** A document, or ANY_DOC (with `command`): that command wherever it is shown. */
  doc: string;
  /** Every command of a block under this heading ... */
  heading?: string;
  /**
   * ... or this one command, as doc-commands.ts reads it. One with
   * placeholders (`<job-id>`, `[--queue q]`, `…`) is covered by a test that
   * runs it with them filled in: `contains` holds that filled-in command.
   */
  command?: string;
  /** The test or script that runs it, relative to the repository root. */
  by: string;
  /** Text `by` must hold: the heading it reads, or the command it runs. */
  contains: readonly string[];
}

export const ELSEWHERE: readonly Elsewhere[] = [
  {
    doc: 'docs/DESIGN_DECISIONS.md',
    command: 'scripts/ci-node24.sh --prepare',
    by: '.ci/run',
    // Started in the background while npm ci compiles; `--in` runs the tests later.
    contains: [
      'scripts/ci-node24.sh --prepare "$node24dir"',
      'scripts/ci-node24.sh --in "$node24dir"',
    ],
  },
  {
    doc: 'docs/MEASURED_BEHAVIOR.md',
    command: 'scripts/ci-node24.sh --prepare',
    by: '.ci/run',
    // How the Node.js 24 copy of the benchmark run was made: as CI prepares its copy.
    contains: ['scripts/ci-node24.sh --prepare "$node24dir"'],
  },
  {
    doc: README,
    command: 'npm ci && npm test',
    by: '.ci/run',
    // CI is the fresh machine: a clean clone, `npm ci`, then `npm test`.
    contains: ['npm ci', 'npm test'],
  },
  {
    doc: README,
    command:
      "chromium --headless --no-sandbox --window-size=1280,860 --virtual-time-budget=5000 --screenshot=dashboard.png 'http://localhost:8080/?snapshot'",
    by: 'test/e2e/dashboard.test.ts',
    // Run as written against the test's coordinator (its HTTP port for 8080),
    // where Chromium is installed; the documents' sessions need none.
    contains: [
      "chromium --headless --no-sandbox --window-size=1280,860 --virtual-time-budget=5000 --screenshot=dashboard.png 'http://localhost:8080/?snapshot'",
    ],
  },
  {
    doc: README,
    command: 'npm ci && npm run demo',
    by: 'test/e2e/demo.test.ts',
    // `npm ci` as above (the suite runs in the installed checkout).
    contains: ["'npm run demo'"],
  },
  {
    doc: README,
    command: 'scripts/build.sh',
    by: 'scripts/ci-node24.sh',
    // In a copy of the checkout without node_modules and dist: install and compile.
    contains: ['(cd "$work/project" && scripts/build.sh)'],
  },
  {
    doc: README,
    heading: 'Write your own task',
    by: 'test/package/packed-install.test.ts',
    contains: ["readmeSection(ROOT, 'Write your own task')"],
  },
  {
    doc: README,
    heading: 'Workers in Python',
    by: 'python/tests/test_readme.py',
    contains: ['"## Workers in Python"'],
  },
  {
    doc: 'python/README.md',
    heading: 'Signals, events and triggers',
    by: 'python/tests/test_readme.py',
    contains: ['package_section("Signals, events and triggers")'],
  },
  {
    doc: 'python/README.md',
    heading: 'Run a worker',
    by: 'python/tests/test_readme.py',
    contains: ['"## Run a worker"'],
  },
  {
    doc: 'python/README.md',
    heading: 'Durable handlers, children and parents',
    by: 'python/tests/test_readme.py',
    contains: ['package_section("Durable handlers, children and parents")'],
  },
  {
    doc: 'python/README.md',
    heading: 'Use the client',
    by: 'python/tests/test_readme.py',
    contains: ['package_section("Use the client")'],
  },
  {
    doc: 'python/README.md',
    heading: 'Deduplicate, expire, back off',
    by: 'python/tests/test_readme.py',
    contains: ['package_section("Deduplicate, expire, back off")'],
  },
  {
    doc: 'python/README.md',
    command: 'python3 -m venv .venv && .venv/bin/pip install -e "./python[dev]"',
    by: 'scripts/python-checks.sh',
    contains: [`'python3 -m venv .venv && .venv/bin/pip install -e "./python[dev]"'`],
  },
  {
    doc: 'python/README.md',
    command: 'cd python && ../.venv/bin/ruff check . && ../.venv/bin/mypy && ../.venv/bin/pytest',
    by: 'scripts/python-checks.sh',
    contains: [
      "'cd python && ../.venv/bin/ruff check . && ../.venv/bin/mypy && ../.venv/bin/pytest'",
    ],
  },
  {
    doc: OPERATIONS,
    command:
      'podman-compose -f docker-compose.postgres.yml run --rm --no-deps client-cli submit sha256 --text hi',
    by: 'scripts/verify-image.sh',
    contains: [
      '"podman-compose -f docker-compose.postgres.yml run --rm --no-deps client-cli submit sha256 --text hi"',
    ],
  },
  {
    doc: OPERATIONS,
    command: 'podman-compose up',
    by: 'scripts/verify-image.sh',
    // Named in the cost of its second story, which starts the compose file so.
    contains: ['podman-compose -f docker-compose.postgres.yml "$@"', 'compose up -d'],
  },
  // Commands shown inline.
  {
    doc: ANY_DOC,
    command: 'npm ci',
    by: '.ci/run',
    contains: ['\nnpm ci\n'],
  },
  {
    doc: ANY_DOC,
    command: 'npm test',
    by: '.ci/run',
    contains: ['\nnpm test\n'],
  },
  {
    doc: ANY_DOC,
    command: 'npm run build',
    by: 'package.json',
    // `npm test` (CI, above) runs `npm run build` first, then every suite (lint among them).
    contains: ['"test": "npm run build && node scripts/run-tests.mjs"'],
  },
  {
    doc: ANY_DOC,
    command: 'npm run lint',
    by: 'scripts/run-tests.mjs',
    // `npm test` runs the runner with every suite, lint among them.
    contains: ["if (suite === 'lint') return ['npm', ['run', 'lint']];"],
  },
  {
    doc: OPERATIONS,
    command: 'npm ci && npm run build',
    by: '.ci/run',
    // CI runs `npm ci`, then `npm test`, whose first step is `npm run build`.
    contains: ['\nnpm ci\n', '\nnpm test\n'],
  },
  {
    doc: ANY_DOC,
    command: 'npm run demo',
    by: 'test/e2e/demo.test.ts',
    contains: ["ShellProcess.start('npm run demo', { cwd: ROOT })"],
  },
  {
    doc: README,
    command: 'npm run demo -- --tokens',
    by: 'test/e2e/demo.test.ts',
    contains: ["ShellProcess.start('npm run demo -- --tokens', {\n      cwd: ROOT,"],
  },
  {
    doc: README,
    command: 'npm run demo -- --python',
    by: 'test/e2e/demo.test.ts',
    contains: ["ShellProcess.start('npm run demo -- --python', {\n      cwd: ROOT,"],
  },
  // `npm run bench` builds, then runs dist/bench/run.js (package.json); the
  // smoke test runs that file with `--smoke` (every benchmark, small) and
  // requires each benchmark's table. The figures are not judged.
  ...[
    { command: 'npm run bench', name: null },
    { command: 'npm run bench -- <name>', name: null },
    ...[
      'bulk',
      'fairness',
      'rate',
      'latency',
      'security',
      'subscribers',
      'delayed',
      'flows',
      'many-attempts',
      'dedup',
      'signals',
      'sharded',
    ].map((name) => ({ command: `npm run bench -- ${name}`, name })),
  ].map(({ command, name }): Elsewhere => ({
    doc: ANY_DOC,
    command,
    by: 'test/e2e/bench-smoke.test.ts',
    contains: ["'run.js'", "'--smoke'", ...(name === null ? [] : [`'${name}',`])],
  })),
  // --reps is accepted (and checked) by the smoke run, which still runs each once.
  {
    doc: ANY_DOC,
    command: 'npm run bench -- subscribers --reps 5',
    by: 'test/e2e/bench-smoke.test.ts',
    contains: ["'run.js'", "'--smoke', '--reps', '5'", "'subscribers',"],
  },
  {
    doc: ANY_DOC,
    command: 'npm pack',
    by: 'test/package/packed-install.test.ts',
    contains: ["run('npm', ['pack'"],
  },
  {
    doc: README,
    command: 'npm install-scripts approve better-sqlite3',
    by: 'test/package/packed-install.test.ts',
    contains: ["shell('npm install-scripts approve better-sqlite3', app)"],
  },
  {
    doc: README,
    command: 'node --import tsx node_modules/.bin/dtp-worker --tasks ./tasks.ts',
    by: 'test/package/packed-install.test.ts',
    // In the installed app, with its TypeScript module named direct.ts (Node.js 22 and later).
    contains: ["'--import',\n        'tsx',\n        bin('dtp-worker'),", "'./direct.ts'"],
  },
  {
    doc: README,
    command: 'client.sh events [--queue q] [--type t]',
    by: 'test/e2e/watch-events.test.ts',
    contains: ["'events', '--type', 'reverse'"],
  },
  {
    doc: ANY_DOC,
    command: 'python -m dtp.worker',
    by: 'python/tests/support.py',
    // With the interpreter that runs the tests.
    contains: ['[sys.executable, "-m", "dtp.worker", '],
  },
  {
    doc: 'docs/ARCHITECTURE.md',
    command: 'python -m dtp.worker._child',
    by: 'python/src/dtp/worker/pool.py',
    // The worker starts its children so, in every test that runs a Python worker.
    contains: ['[sys.executable, "-m", "dtp.worker._child", '],
  },
  {
    doc: 'python/README.md',
    command: 'pip install ./python',
    by: 'python/tests/test_readme.py',
    // README's "Workers in Python" installs the checkout's python folder by its path.
    contains: ['setup.replace("/path/to/dtp", str(ROOT))'],
  },
  {
    doc: 'python/README.md',
    command: 'python bench/throughput.py',
    by: 'python/tests/test_bench.py',
    // A small run (`--jobs 20 --runs 1`): that the benchmark runs, not its figures.
    contains: ['[sys.executable, str(BENCH), "--jobs", "20", "--runs", "1"]'],
  },
  {
    doc: 'python/README.md',
    command: 'python bench/many_attempts.py',
    by: 'python/tests/test_bench.py',
    // A small run (40 jobs, capacity 20): that the benchmark runs, not its figures.
    contains: ['[sys.executable, str(MANY), "--jobs", "40", "--capacity", "20"]'],
  },
  {
    doc: MEASURED,
    command: 'node --test dist/test/e2e/subscriber-memory.test.js',
    by: 'scripts/run-tests.mjs',
    // `npm test` runs every compiled e2e file, this one too, with `node --test`.
    contains: ["'--test',", 'findTests(join(root, suite))'],
  },
  {
    doc: OPERATIONS,
    command: 'npm prune --omit=dev',
    by: 'Dockerfile',
    // scripts/verify-image.sh builds the image from it.
    contains: ['npm prune --omit=dev'],
  },
  {
    doc: OPERATIONS,
    command: 'docker-entrypoint.sh init-secrets <dir>',
    by: E2E_TEST,
    contains: ['/scripts/docker-entrypoint.sh init-secrets ${this.dir}/etc/dtp'],
  },
  {
    doc: SECURITY,
    command: 'docker-entrypoint.sh init-secrets /secrets',
    by: 'scripts/verify-image.sh',
    // In the image, under podman.
    contains: ['"$image" init-secrets /secrets'],
  },
  ...['docker-entrypoint.sh healthcheck [port [host]]', 'docker-entrypoint.sh healthcheck'].map(
    (command): Elsewhere => ({
      doc: OPERATIONS,
      command,
      by: 'test/e2e/container-entry.test.ts',
      contains: ["runEntrypoint(['healthcheck', metricsPort]"],
    }),
  ),
  ...[
    { doc: CLI, command: 'scripts/docker-entrypoint.sh coordinator|worker|client …' },
    { doc: OPERATIONS, command: 'scripts/docker-entrypoint.sh coordinator|worker|client ...' },
  ].map((shown): Elsewhere => ({
    ...shown,
    by: 'test/e2e/container-entry.test.ts',
    contains: ["prefix: ['coordinator']", "'worker',", "['client', 'workers', '--json'"],
  })),
];

/** Why a span that reads like a command is not run. */
export type NotRunReason =
  /** A program's sub-command or flag named in a sentence, not a command line. */
  | 'mention'
  /** Needs what this machine has not: a Docker engine, another project's harness. */
  | 'elsewhere'
  /** A measurement's own run, minutes to hours long; a test runs the same program smaller. */
  | 'measurement';

export interface NotRun {
  /** A document, or ANY_DOC. */
  doc: string;
  command: string;
  reason: NotRunReason;
  why: string;
}

const mention = (doc: string, command: string, why: string): NotRun => ({
  doc,
  command,
  reason: 'mention',
  why,
});

export const NOT_RUN: readonly NotRun[] = [
  mention('docs/ARCHITECTURE.md', 'npm ci &&', 'the start of a command line, quoted'),
  mention('docs/DESIGN_DECISIONS.md', 'curl -N', "curl's flag, named"),
  mention(MEASURED, 'node --cpu-prof', "node's flag, named"),
  mention(ANY_DOC, 'client.sh submit', 'the sub-command, named'),
  mention(ANY_DOC, 'client.sh bench', 'the sub-command, named'),
  mention(ANY_DOC, 'client.sh status', 'the sub-command, named'),
  mention(ANY_DOC, 'client.sh shards', 'the sub-command, named'),
  mention(CLI, 'docker-entrypoint.sh client', 'the program name usage text shows'),
  mention(CLI, 'node dist/src/cli/client-main.js', 'the program name usage text shows'),
  mention(OPERATIONS, 'docker stop', "the engine's command, named"),
  mention(OPERATIONS, 'podman kill', "the engine's command, named"),
  ...[
    'docker build -t dtp .',
    'docker run -v $PWD/tasks:/tasks:ro dtp worker --tasks /tasks/tasks.mjs ...',
    'docker compose run --rm client-cli submit sha256 --text hi',
    'docker-compose config',
  ].map((command): NotRun => ({
    doc: OPERATIONS,
    command,
    reason: 'elsewhere',
    why: 'no Docker engine here; scripts/verify-image.sh runs the image with podman',
  })),
  {
    doc: SECURITY,
    command: 'docker compose kill -s HUP coordinator',
    reason: 'elsewhere',
    why: 'no Docker engine here; test/e2e/security-scripts.test.ts sends SIGHUP to a coordinator',
  },
  {
    doc: MEASURED,
    command:
      'DTP_ROOT=<build> node dtp/bench.mjs --jobs 30000 --producers 4 --workers 3 --concurrency 4 --task sha256 --submit-batch 500',
    reason: 'elsewhere',
    why: 'the side-by-side harness is not part of the repository',
  },
  {
    doc: MEASURED,
    command:
      'DTP_ROOT=<build> node dtp/bench.mjs --jobs 10000 --producers 4 --workers 3 --concurrency 4 --task sha256',
    reason: 'elsewhere',
    why: 'the side-by-side harness is not part of the repository',
  },
  {
    doc: MEASURED,
    command:
      'DTP_ROOT=<build> node dtp/bench.mjs --jobs 20000 --producers 4 --workers 3 --concurrency 4 --task sha256 --database-url /tmp/dbw/db.sqlite',
    reason: 'elsewhere',
    why: 'the side-by-side harness is not part of the repository',
  },
  ...[
    'DTP_ROOT=<build> node dtp/bench.mjs --jobs 20000 --producers 32 --workers 3 --concurrency 4 --task sha256',
  ].map((command): NotRun => ({
    doc: MEASURED,
    command,
    reason: 'elsewhere',
    why: 'the side-by-side harness is not part of the repository',
  })),
  {
    doc: MEASURED,
    command:
      'DTP_ROOT=<build> node dtp/bench.mjs --durability normal --jobs 20000 --producers 32 --workers 3 --concurrency 4 --task sha256',
    reason: 'elsewhere',
    why: 'the side-by-side harness is not part of the repository',
  },
  ...[
    'SYSTEMS="dtp-normal bullmq-everysec dtp-full bullmq-always" SCENARIOS="default wide paced-100" REPS=3 compare.sh',
    'SYSTEMS="dtp-normal bullmq-everysec dtp-full bullmq-always" SCENARIOS="default wide bulk" REPS=3 compare.sh',
    'SYSTEMS="dtp-normal" SCENARIOS="default wide" REPS=1 compare.sh',
    'SYSTEMS="dtp-pg pgboss graphile" compare.sh',
    'SYSTEMS="dtp-pg pgboss graphile" SCENARIOS="default bulk" REPS=3 compare.sh',
    'SYSTEMS="dtp-normal bullmq-everysec bullmq-sandboxed" SCENARIOS="io default bulk" REPS=3 compare.sh',
    'SYSTEMS="dtp-normal bullmq-everysec" SCENARIOS="io" REPS=3 compare.sh',
    'DTP_ISOLATE=SHA256 SYSTEMS="dtp-normal bullmq-sandboxed" SCENARIOS="default" REPS=3 compare.sh',
  ].map((command): NotRun => ({
    doc: MEASURED,
    command,
    reason: 'elsewhere',
    why: 'the side-by-side harness is not part of the repository',
  })),
  ...[
    'node dist/test/sim/run.js --seeds 500',
    'node dist/test/sim/run.js --seeds 2000',
    'node dist/test/sim/run.js --start 1 --seeds 300',
    'node dist/test/sim/run.js --seeds 10000',
    'npm run sim -- --seeds 10000',
  ].map((command): NotRun => ({
    doc: MEASURED,
    command,
    reason: 'measurement',
    why: 'test/sim/sim.test.ts runs the same simulation on its fixed seeds in every `npm test`',
  })),
  {
    doc: MEASURED,
    command: 'time npm test',
    reason: 'measurement',
    why: 'the time of the test command itself, which CI runs as `npm test`',
  },
  {
    doc: MEASURED,
    command: 'time .ci/run',
    reason: 'measurement',
    why: 'the time of CI itself, which runs .ci/run in a fresh clone',
  },
  {
    doc: OPERATIONS,
    command: 'time scripts/verify-image.sh',
    reason: 'measurement',
    why: 'the time of the image check, which .ci/run runs (`scripts/verify-image.sh --install`)',
  },
  {
    doc: MEASURED,
    command: 'node dist/bench/fanout.js --reps 5',
    reason: 'measurement',
    why: 'test/e2e/bench-smoke.test.ts runs the same program with 5 subscribers, 100 jobs, 1 rep',
  },
  {
    doc: MEASURED,
    command: 'node dist/bench/codec.js',
    reason: 'measurement',
    why: 'test/e2e/bench-smoke.test.ts runs the same program with 1,000 calls, 1 round',
  },
  {
    doc: MEASURED,
    command: 'node --expose-gc dist/bench/held-costs.js',
    reason: 'measurement',
    why: 'test/e2e/bench-smoke.test.ts runs the same program with 20 connections, 200 waits, 4 stalled subscribers',
  },
  {
    doc: MEASURED,
    command: 'node dist/bench/thread-hop.js',
    reason: 'measurement',
    why: 'test/e2e/bench-smoke.test.ts runs the same program with 200 round trips, 1 round',
  },
  {
    doc: MEASURED,
    command: 'node dist/bench/http-paging.js 1000000',
    reason: 'measurement',
    why: 'a million jobs; test/e2e/dashboard.test.ts and the HTTP unit tests page through small sets',
  },
  {
    doc: MEASURED,
    command: 'client.sh bench --jobs 30000 --concurrency 16',
    reason: 'measurement',
    why: "a documentation session runs README's `scripts/client.sh bench --jobs 500 --concurrency 8`",
  },
];

export type Coverage =
  | { kind: 'template' }
  | { kind: 'not-run'; entry: NotRun }
  | { kind: 'session'; session: Session }
  | { kind: 'elsewhere'; entry: Elsewhere }
  | { kind: 'as-block'; block: DocCommand };

function forDoc(entryDoc: string, command: DocCommand): boolean {
  return entryDoc === command.doc || (command.inline && entryDoc === ANY_DOC);
}

/** The entry of ELSEWHERE that covers a command, if any (an inline one only by its text). */
export function elsewhereFor(command: DocCommand): Elsewhere | undefined {
  const here = ELSEWHERE.filter((e) => forDoc(e.doc, command));
  return (
    here.find((e) => e.command === command.text) ??
    (command.inline
      ? undefined
      : here.find((e) => e.command === undefined && e.heading === command.heading))
  );
}

export function notRunFor(command: DocCommand): NotRun | undefined {
  return command.inline
    ? NOT_RUN.find((e) => forDoc(e.doc, command) && e.command === command.text)
    : undefined;
}

export function inSection(command: DocCommand, section: DocSection): boolean {
  return !command.inline && command.doc === section.doc && command.heading === section.heading;
}

export function isPicked(command: DocCommand, pick: InlinePick): boolean {
  return command.inline && command.doc === pick.doc && command.text === pick.command;
}

/**
 * How a command is covered, or null when nothing runs it. `all` (every
 * command the documents show) lets an inline command be covered by a block
 * that shows the same text.
 */
export function coverageOf(command: DocCommand, all: readonly DocCommand[] = []): Coverage | null {
  if (command.template) return { kind: 'template' };
  const notRun = notRunFor(command);
  if (notRun !== undefined) return { kind: 'not-run', entry: notRun };
  const entry = elsewhereFor(command);
  if (entry !== undefined) return { kind: 'elsewhere', entry };
  const session = SESSIONS.find(
    (s) =>
      s.sections.some((p) => inSection(command, p)) ||
      (s.inline ?? []).some((p) => isPicked(command, p)),
  );
  if (session !== undefined) return { kind: 'session', session };
  if (!command.inline) return null;
  const block = all.find((b) => {
    const covered = b.inline || b.text !== command.text ? null : coverageOf(b);
    return covered !== null && covered.kind !== 'template';
  });
  return block === undefined ? null : { kind: 'as-block', block };
}

/**
 * The commands a session runs, in its order (those run elsewhere or templates
 * left out): its sections' block commands, then its inline picks (the first
 * place each is shown).
 */
export function sessionCommands(session: Session, commands: DocCommand[]): DocCommand[] {
  const blocks = session.sections.flatMap((section) =>
    commands.filter((c) => inSection(c, section) && coverageOf(c)?.kind === 'session'),
  );
  const picks = (session.inline ?? []).flatMap((pick) => {
    const shown = commands.find((c) => isPicked(c, pick));
    return shown === undefined ? [] : [shown];
  });
  return [...blocks, ...picks];
}
