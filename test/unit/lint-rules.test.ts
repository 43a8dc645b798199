/**
 * The layering rules bite: each case is a deliberate violation, linted with
 * the project's own ESLint configuration as if it sat at the given path (no
 * file is written), next to the same line done right. And the import-cycle
 * check (part of `npm run lint`) finds a cycle of type-only imports.
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ESLint } from 'eslint';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const LAYER_RULES = new Set([
  'no-restricted-imports',
  'no-restricted-globals',
  'no-restricted-properties',
  'no-restricted-syntax',
]);

const eslint = new ESLint({
  cwd: ROOT,
  // Only the layering rules: they need no type information.
  ruleFilter: ({ ruleId }) => LAYER_RULES.has(ruleId),
  overrideConfig: { languageOptions: { parserOptions: { projectService: false, project: null } } },
});

/** The layering rules `code` breaks at `path` (relative to the project root). */
async function broken(path: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(ROOT, path) });
  return (result?.messages ?? []).map((m) => m.ruleId ?? m.message);
}

const CORE = 'src/coordinator/core/probe.ts';

describe('lint: layers', () => {
  it('lets the core import only itself, protocol/ and store types', async () => {
    for (const source of [
      '../coordinator.js',
      '../term/term.js',
      '../../net/tcp.js',
      'pg',
      'better-sqlite3',
      'node:http',
      'node:os',
      'node:perf_hooks',
      'node:crypto',
    ]) {
      assert.deepEqual(
        await broken(CORE, `import { x } from '${source}';\nexport const y = x;\n`),
        ['no-restricted-imports'],
        source,
      );
    }
    assert.deepEqual(await broken(CORE, `import { Store } from '../../store/store.js';\n`), [
      'no-restricted-imports',
    ]);
    const allowed = [
      `import type { Store } from '../../store/store.js';`,
      `import { ErrorCode } from '../../protocol/error-codes.js';`,
      `import { transition } from './job-state.js';`,
      `import { isDeepStrictEqual } from 'node:util';`,
    ].join('\n');
    assert.deepEqual(await broken(CORE, `${allowed}\n`), []);
  });

  it('keeps time, randomness and the process out of the core', async () => {
    for (const line of [
      'crypto.randomUUID();',
      'process.hrtime();',
      'queueMicrotask(() => undefined);',
      'setTimeout(() => undefined, 1);',
      'performance.now();',
    ]) {
      assert.deepEqual(await broken(CORE, `${line}\n`), ['no-restricted-globals'], line);
    }
    assert.deepEqual(await broken(CORE, 'Date.now();\n'), ['no-restricted-properties']);
    assert.deepEqual(await broken(CORE, 'new Date();\n'), ['no-restricted-syntax']);
  });

  it('keeps the coordinator off the HTTP side, and the HTTP side on the view', async () => {
    const shell = 'src/coordinator/ports/probe.ts';
    assert.deepEqual(await broken(shell, `import { x } from '../../http/http-server.js';\n`), [
      'no-restricted-imports',
    ]);
    const http = 'src/http/probe.ts';
    assert.deepEqual(
      await broken(http, `import type { X } from '../coordinator/core/types.js';\n`),
      ['no-restricted-imports'],
    );
    assert.deepEqual(await broken(http, `import { X } from '../coordinator/view.js';\n`), [
      'no-restricted-imports',
    ]);
    assert.deepEqual(
      await broken(http, `import type { CoordinatorView } from '../coordinator/view.js';\n`),
      [],
    );
  });

  it('refuses an error code written outside the catalogue', async () => {
    const worker = 'src/worker/probe.ts';
    for (const line of [
      `throw new DtpError('INVALID_OPTIONS', 'bad');`,
      `if (err.code === 'CONNECTION_LOST') throw err;`,
      `send({ type: 'ERROR', code: 'NOT_LEADER', message: 'm' });`,
    ]) {
      assert.deepEqual(await broken(worker, `${line}\n`), ['no-restricted-syntax'], line);
    }
    assert.deepEqual(
      await broken(worker, `throw new DtpError(LocalErrorCode.InvalidOptions, 'bad');\n`),
      [],
    );
  });
});

describe('lint: import cycles', () => {
  it('finds a cycle of type-only imports, and none in src/', async () => {
    const checker = (await import(pathToFileURL(join(ROOT, 'scripts/check-imports.mjs')).href)) as {
      importsOf(file: string, text: string): string[];
      findCycles(graph: Map<string, string[]>): string[][];
      importGraph(roots: string[]): Map<string, string[]>;
    };
    const a = join(ROOT, 'src/a.ts');
    const b = join(ROOT, 'src/b.ts');
    const graph = new Map([
      [a, checker.importsOf(a, `import type { B } from './b.js';\n`)],
      [b, checker.importsOf(b, `import type { A } from './a.js';\n`)],
    ]);
    assert.deepEqual(checker.findCycles(graph), [[a, b]]);
    assert.deepEqual(checker.findCycles(checker.importGraph([join(ROOT, 'src')])), []);
  });
});
