/**
 * Every shell command the documentation shows, in a block or inline in
 * running text, is run by a test, as written (after the few substitutions
 * test/e2e/documented-commands.test.ts lists), or sits in a block marked
 * `template`, or (inline) is listed in NOT_RUN with its reason. The convention: docs/ARCHITECTURE.md,
 * "Tests"; who runs what: test/helpers/doc-coverage.ts.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  commandsIn,
  documentedCommands,
  splitComment,
  type DocCommand,
} from '../helpers/doc-commands.js';
import {
  ANY_DOC,
  coverageOf,
  E2E_TEST,
  ELSEWHERE,
  inSection,
  isPicked,
  NOT_RUN,
  SESSIONS,
  type Elsewhere,
} from '../helpers/doc-coverage.js';
import { ROOT } from '../helpers/processes.js';

const COMMANDS = documentedCommands(ROOT);

function uncoveredMessage(c: DocCommand): string {
  if (c.inline)
    return [
      `${c.doc}:${c.line} (under "${c.heading}"): \`${c.text}\` is shown inline, but no test runs it.`,
      `  To run it, name it in the \`inline\` list of a session in SESSIONS`,
      `  (test/helpers/doc-coverage.ts): ${E2E_TEST} then runs it as written.`,
      '  If another test or script already runs it (placeholders filled in), add an ELSEWHERE',
      '  entry with its `command` naming that file. If it is no command to run (a flag or',
      "  sub-command named in a sentence, another machine's engine), add it to NOT_RUN with",
      '  the reason. See docs/ARCHITECTURE.md, "Commands in the documentation".',
    ].join('\n');
  return [
    `${c.doc}:${c.line} (under "${c.heading}"): \`${c.text}\` is shown, but no test runs it.`,
    `  To run it, add { doc: '${c.doc}', heading: '${c.heading}' } to a session in`,
    `  SESSIONS (test/helpers/doc-coverage.ts): ${E2E_TEST} then runs`,
    '  every command of that section as written (give it CHECKS there, or a substitution',
    '  if it needs one). If another test or script already runs it verbatim, add an',
    '  ELSEWHERE entry naming that file instead. Only if it cannot run on our machines',
    "  (another system's engine), mark its block ```sh template.",
    '  See docs/ARCHITECTURE.md, "Commands in the documentation".',
  ].join('\n');
}

function matches(entry: Elsewhere, c: DocCommand): boolean {
  if (c.doc !== entry.doc && !(c.inline && entry.doc === ANY_DOC)) return false;
  return entry.command !== undefined ? c.text === entry.command : c.heading === entry.heading;
}

describe('reading commands from Markdown', () => {
  it('reads shell blocks, indented blocks and $ lines, and leaves other blocks alone', () => {
    const markdown = [
      '# Title',
      '',
      'Run this:',
      '',
      '    npm ci && npm test',
      '',
      '## Part',
      '',
      '```sh',
      'scripts/a.sh --x "a # b"   # a comment',
      '# a comment line',
      '',
      'scripts/b.sh --long \\',
      '  --more ...',
      '```',
      '',
      '- a list item:',
      '',
      '  ```sh template',
      '  docker run dtp',
      '  ```',
      '',
      '```console',
      '$ node x.js',
      'output',
      '```',
      '',
      '```',
      'client.sh <command>',
      '```',
      '',
      '- item',
      '',
      '    a continued paragraph, not code',
    ].join('\n');
    const got = commandsIn('X.md', markdown).map((c) => [c.line, c.heading, c.text, c.template]);
    assert.deepEqual(got, [
      [5, 'Title', 'npm ci && npm test', false],
      [10, 'Part', 'scripts/a.sh --x "a # b"', false],
      [13, 'Part', 'scripts/b.sh --long --more ...', false],
      [20, 'Part', 'docker run dtp', true],
      [24, 'Part', 'node x.js', false],
    ]);
  });

  it('reads inline code spans that start with a program and give it an argument', () => {
    const markdown = [
      '# Title',
      '',
      'Run `scripts/client.sh list --state FAILED` or `client.sh watch',
      '<job-id>`; `scripts/worker.sh` and `npm` are names, `--json` a flag,',
      '``a `nested` span`` text, `DTP_X=1 npm run demo -- --tokens` and `time .ci/run`,',
      '`A="x y" B=2 other.sh`, `A="x y" other`.',
      '',
      '## Part',
      '',
      '| `npm test` | `kill -9` |',
      '',
      '- an item with `node x.js --flag`',
      '',
      '```sh',
      'echo `npm run no` # inside a block: a command of the block',
      '```',
      '',
      '### `npm run heading-title`',
    ].join('\n');
    const got = commandsIn('X.md', markdown).map((c) => [c.line, c.heading, c.text, c.inline]);
    assert.deepEqual(got, [
      [3, 'Title', 'scripts/client.sh list --state FAILED', true],
      [3, 'Title', 'client.sh watch <job-id>', true],
      [5, 'Title', 'DTP_X=1 npm run demo -- --tokens', true],
      [5, 'Title', 'time .ci/run', true],
      [6, 'Title', 'A="x y" B=2 other.sh', true],
      [10, 'Part', 'npm test', true],
      [12, 'Part', 'node x.js --flag', true],
      [15, 'Part', 'echo `npm run no`', false],
    ]);
  });

  it('splits a trailing comment off outside quotes only', () => {
    assert.deepEqual(splitComment(`echo 'a # b' "c#d" x#y  # note`), {
      command: `echo 'a # b' "c#d" x#y`,
      comment: 'note',
    });
    assert.deepEqual(splitComment('# only'), { command: '', comment: 'only' });
  });
});

describe('the commands the documentation shows', () => {
  it('finds them in README.md, python/README.md and docs/*.md', () => {
    const docs = new Set(COMMANDS.map((c) => c.doc));
    for (const doc of ['README.md', 'python/README.md', 'docs/OPERATIONS.md'])
      assert.ok(docs.has(doc), doc);
  });

  it('are each run by a test, or marked as a template', () => {
    const uncovered = COMMANDS.filter((c) => coverageOf(c, COMMANDS) === null);
    assert.ok(uncovered.length === 0, `\n${uncovered.map(uncoveredMessage).join('\n\n')}\n`);
  });

  it('are covered by sessions whose sections still show commands', () => {
    const stale = SESSIONS.flatMap((session) =>
      session.sections
        .filter((section) => !COMMANDS.some((c) => inSection(c, section)))
        .map((p) => `session "${session.name}": ${p.doc} shows no command under "${p.heading}"`),
    );
    assert.deepEqual(stale, []);
  });

  it('are covered elsewhere only by files that exist and hold what they run', () => {
    const problems = ELSEWHERE.flatMap((entry) => {
      const what = `ELSEWHERE ${entry.doc} ${entry.command ?? `"${entry.heading ?? ''}"`}`;
      if (!COMMANDS.some((c) => matches(entry, c))) return [`${what}: not in the document`];
      const file = join(ROOT, entry.by);
      if (!existsSync(file)) return [`${what}: ${entry.by} does not exist`];
      const text = readFileSync(file, 'utf8');
      return entry.contains
        .filter((needle) => !text.includes(needle))
        .map((needle) => `${what}: ${entry.by} does not hold ${needle}`);
    });
    assert.deepEqual(problems, []);
  });

  it('are picked inline by sessions, or left unrun, only where the documents show them', () => {
    const shown = (doc: string, text: string) =>
      COMMANDS.some((c) => c.inline && (doc === ANY_DOC || c.doc === doc) && c.text === text);
    const stale = [
      ...SESSIONS.flatMap((session) =>
        (session.inline ?? [])
          .filter((pick) => !COMMANDS.some((c) => isPicked(c, pick)))
          .map((p) => `session "${session.name}": ${p.doc} shows no \`${p.command}\` inline`),
      ),
      ...NOT_RUN.filter((e) => !shown(e.doc, e.command)).map(
        (e) => `NOT_RUN ${e.doc} \`${e.command}\`: not shown inline`,
      ),
    ];
    assert.deepEqual(stale, []);
  });

  it('lists the templates and the inline commands not run', (t) => {
    for (const c of COMMANDS.filter((d) => d.template))
      t.diagnostic(`template (not run): ${c.doc}:${c.line} ${c.text}`);
    for (const c of COMMANDS) {
      const covered = coverageOf(c, COMMANDS);
      if (covered?.kind === 'not-run')
        t.diagnostic(
          `${covered.entry.reason} (not run): ${c.doc}:${c.line} ${c.text}: ${covered.entry.why}`,
        );
    }
  });
});
