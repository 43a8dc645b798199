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

export interface Session {
  /** Part of the test's title. */
  name: string;
  /** Run in this order, in one folder, sharing processes, ports and job ids. */
  sections: readonly DocSection[];
  needs?: readonly SessionNeed[];
  /** Files the commands read, written into the folder first. */
  files?: Readonly<Record<string, string>>;
}

const README = 'README.md';
const OPERATIONS = 'docs/OPERATIONS.md';
const HTTP = 'docs/HTTP.md';
const SECURITY = 'docs/SECURITY.md';

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
    name: 'README "The dashboard" and the job queries of HTTP.md',
    sections: [
      { doc: README, heading: 'The dashboard' },
      { doc: HTTP, heading: '`GET /api/jobs`' },
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
    name: 'README "Later and on a schedule"',
    sections: [{ doc: README, heading: 'Later and on a schedule' }],
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
];

/** Commands run by another test or script, whose file holds `contains`. */
export interface Elsewhere {
  doc: string;
  /** Every command under this heading ... */
  heading?: string;
  /** ... or this one command, as doc-commands.ts reads it. */
  command?: string;
  /** The test or script that runs it, relative to the repository root. */
  by: string;
  /** Text `by` must hold: the heading it reads, or the command it runs. */
  contains: readonly string[];
}

export const ELSEWHERE: readonly Elsewhere[] = [
  {
    doc: README,
    command: 'npm ci && npm test',
    by: '.ci/run',
    // CI is the fresh machine: a clean clone, `npm ci`, then `npm test`.
    contains: ['npm ci', 'npm test'],
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
    contains: ['\nscripts/build.sh\n'],
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
    heading: 'Run a worker',
    by: 'python/tests/test_readme.py',
    contains: ['"## Run a worker"'],
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
];

export type Coverage =
  | { kind: 'template' }
  | { kind: 'session'; session: Session }
  | { kind: 'elsewhere'; entry: Elsewhere };

/** The entry of ELSEWHERE that covers a command, if any. */
export function elsewhereFor(command: DocCommand): Elsewhere | undefined {
  const here = ELSEWHERE.filter((e) => e.doc === command.doc);
  return (
    here.find((e) => e.command === command.text) ??
    here.find((e) => e.command === undefined && e.heading === command.heading)
  );
}

export function inSection(command: DocCommand, section: DocSection): boolean {
  return command.doc === section.doc && command.heading === section.heading;
}

/** How a command is covered, or null when nothing runs it. */
export function coverageOf(command: DocCommand): Coverage | null {
  if (command.template) return { kind: 'template' };
  const entry = elsewhereFor(command);
  if (entry !== undefined) return { kind: 'elsewhere', entry };
  const session = SESSIONS.find((s) => s.sections.some((p) => inSection(command, p)));
  return session === undefined ? null : { kind: 'session', session };
}

/** The commands a session runs, in its order (those run elsewhere or templates left out). */
export function sessionCommands(session: Session, commands: DocCommand[]): DocCommand[] {
  return session.sections.flatMap((section) =>
    commands.filter((c) => inSection(c, section) && coverageOf(c)?.kind === 'session'),
  );
}
