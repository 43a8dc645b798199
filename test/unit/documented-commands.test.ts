/**
 * Every shell command the documentation shows is run by a test, as written
 * (after the few substitutions test/e2e/documented-commands.test.ts lists),
 * or sits in a block marked `template`. The convention: docs/ARCHITECTURE.md,
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
  coverageOf,
  E2E_TEST,
  ELSEWHERE,
  inSection,
  SESSIONS,
  type Elsewhere,
} from '../helpers/doc-coverage.js';
import { ROOT } from '../helpers/processes.js';

const COMMANDS = documentedCommands(ROOT);

function uncoveredMessage(c: DocCommand): string {
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
  if (c.doc !== entry.doc) return false;
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
    const uncovered = COMMANDS.filter((c) => coverageOf(c) === null);
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

  it('lists the templates', (t) => {
    for (const c of COMMANDS.filter((d) => d.template))
      t.diagnostic(`template (not run): ${c.doc}:${c.line} ${c.text}`);
  });
});
