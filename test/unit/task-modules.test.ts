/**
 * Loading users' task modules on the worker's main thread: where a
 * specifier points (paths, package names with `exports`, `main`), what a
 * module may export, and every way a module is refused, each with a message
 * naming the module and the problem.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { BUILTIN_TASK_TYPES } from '../../src/protocol/task-types.js';
import { resolveExports } from '../../src/worker/module-resolution.js';
import {
  TaskModuleError,
  isStandardSchema,
  loadTaskModules,
  readTaskMap,
} from '../../src/worker/task-modules.js';
import { tempDir } from '../helpers/test-coordinator.js';

const GOOD = `export default { resize: async (p) => p, 'emails.send': { run: async () => 'sent' } };`;

describe('loadTaskModules', () => {
  let dir: string;
  let remove: () => void;

  function file(name: string, text: string): string {
    const path = join(dir, name);
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, text);
    return path;
  }

  async function refusal(specifiers: string[]): Promise<TaskModuleError> {
    try {
      await loadTaskModules(specifiers, dir);
    } catch (err) {
      assert.ok(err instanceof TaskModuleError, `expected a TaskModuleError, got ${String(err)}`);
      return err;
    }
    assert.fail(`${specifiers.join(', ')} loaded`);
  }

  before(() => {
    ({ dir, remove } = tempDir('dtp-modules-'));
    file('good.mjs', GOOD);
    file('other.mjs', `export default { thumbnail: async () => 'ok' };`);
    // A package with conditional exports and a subpath, and one with only `main`.
    file(
      'node_modules/@acme/tasks/package.json',
      JSON.stringify({
        name: '@acme/tasks',
        type: 'module',
        exports: {
          '.': { require: './cjs.cjs', import: './esm.mjs' },
          './images': { default: './images.mjs' },
        },
      }),
    );
    file('node_modules/@acme/tasks/esm.mjs', `export default { 'acme.root': async () => 1 };`);
    file('node_modules/@acme/tasks/images.mjs', `export default { 'acme.images': async () => 1 };`);
    file(
      'node_modules/legacy/package.json',
      JSON.stringify({ name: 'legacy', main: 'lib/main.js' }),
    );
    file('node_modules/legacy/lib/main.js', `module.exports = { legacy: async () => 'old' };`);
  });
  after(() => remove());

  it('declares the built-ins then every task of every module, in order', async () => {
    const loaded = await loadTaskModules(['./good.mjs', join(dir, 'other.mjs')], dir);
    assert.deepEqual(loaded.taskTypes, [
      ...BUILTIN_TASK_TYPES,
      'resize',
      'emails.send',
      'thumbnail',
    ]);
    assert.deepEqual(
      loaded.modules.map((m) => [m.specifier, m.url, m.taskTypes]),
      [
        ['./good.mjs', pathToFileURL(join(dir, 'good.mjs')).href, ['resize', 'emails.send']],
        [join(dir, 'other.mjs'), pathToFileURL(join(dir, 'other.mjs')).href, ['thumbnail']],
      ],
    );
  });

  it('finds a bare file name in the working directory, and packages as import would', async () => {
    assert.deepEqual((await loadTaskModules(['good.mjs'], dir)).modules[0]?.taskTypes, [
      'resize',
      'emails.send',
    ]);
    const loaded = await loadTaskModules(['@acme/tasks', '@acme/tasks/images', 'legacy'], dir);
    assert.deepEqual(
      loaded.modules.map((m) => m.taskTypes),
      [['acme.root'], ['acme.images'], ['legacy']],
    );
    assert.match(loaded.modules[0]?.url ?? '', /esm\.mjs$/, 'the import condition, not require');
  });

  it('refuses a module that cannot be found or loaded, naming it', async () => {
    file('syntax.mjs', 'export default {');
    file('throws.mjs', `throw new Error('no config');`);
    for (const [specifier, problem] of [
      ['./missing.mjs', /^task module \.\/missing\.mjs: cannot be found: no such file/],
      ['no-such-package', /^task module no-such-package: cannot be found: cannot find package/],
      ['./syntax.mjs', /^task module \.\/syntax\.mjs: cannot be loaded: /],
      ['./throws.mjs', /^task module \.\/throws\.mjs: cannot be loaded: no config/],
      ['@acme/tasks/nothing', /exports nothing importable at \.\/nothing/],
    ] as const) {
      const err = await refusal([specifier]);
      assert.match(err.message, problem);
      assert.equal(err.module, specifier);
      assert.equal(err.code, 'TASK_MODULE_INVALID');
    }
  });

  it('refuses a module whose export is not a usable map of handlers', async () => {
    const cases: [string, RegExp][] = [
      ['export const resize = async () => 1;', /has no default export/],
      ['export default async () => 1;', /must map task names to handlers, got a function/],
      ['export default [async () => 1];', /must map task names to handlers, got an array/],
      ['export default {};', /exports no tasks/],
      [
        'export default { resize: 42 };',
        /task "resize": expected an async function .*got a number/,
      ],
      ['export default { resize: { schema: {} } };', /task "resize": expected an async function/],
      [
        'export default { resize: { run: async () => 1, schema: { parse() {} } } };',
        /task "resize": its schema is not a Standard Schema/,
      ],
    ];
    let n = 0;
    for (const [source, problem] of cases) {
      const name = `bad-${n++}.mjs`;
      file(name, source);
      const err = await refusal([`./${name}`]);
      assert.match(err.message, new RegExp(`^task module \\./${name}: `));
      assert.match(err.message, problem);
    }
  });

  it('refuses invalid and reserved names, in any case', async () => {
    const names = [
      'bad name',
      '9lives',
      'x'.repeat(65),
      'SHA256',
      'sha256',
      'Word-Count',
      'PRIME_count',
    ];
    for (const [i, name] of names.entries()) {
      file(`name-${i}.mjs`, `export default { ${JSON.stringify(name)}: async () => 1 };`);
      const err = await refusal([`./name-${i}.mjs`]);
      assert.match(err.message, /does not match|is reserved/, name);
    }
  });

  it('refuses a name declared by two modules, and a module listed twice', async () => {
    file('again.mjs', `export default { resize: async () => 2 };`);
    const twice = await refusal(['./good.mjs', './again.mjs']);
    assert.equal(
      twice.message,
      'task module ./again.mjs: task "resize" is already declared by task module ./good.mjs',
    );
    const listed = await refusal(['./good.mjs', join(dir, 'good.mjs')]);
    assert.match(listed.message, /is listed twice \(as \.\/good\.mjs\)/);
  });
});

describe('readTaskMap', () => {
  it('accepts functions and { run, schema } objects, calling run as a method', async () => {
    const definition = {
      prefix: 'hello ',
      run(payload: unknown): string {
        return this.prefix + String(payload);
      },
    };
    const handlers = readTaskMap('inline', {
      default: { greet: definition, echo: (p: unknown) => p },
    });
    assert.deepEqual([...handlers.keys()], ['greet', 'echo']);
    const ctx = {} as never;
    assert.equal(await handlers.get('greet')?.run('you', ctx), 'hello you');
    assert.equal(await handlers.get('echo')?.run(7, ctx), 7);
  });

  it('recognises Standard Schemas of any shape (objects and callable schemas)', () => {
    const props = { version: 1, vendor: 'x', validate: () => ({ value: 1 }) };
    assert.equal(isStandardSchema({ '~standard': props }), true);
    assert.equal(isStandardSchema(Object.assign(() => undefined, { '~standard': props })), true);
    assert.equal(isStandardSchema({ '~standard': { ...props, version: 2 } }), false);
    assert.equal(isStandardSchema({ parse: () => 1 }), false);
  });
});

describe('resolveExports', () => {
  it('follows strings, condition objects (first matching key), arrays and * patterns', () => {
    assert.equal(resolveExports('./index.js', '.'), './index.js');
    assert.equal(resolveExports('./index.js', './sub'), null);
    assert.equal(
      resolveExports({ node: { import: './a.mjs' }, default: './b.js' }, '.'),
      './a.mjs',
    );
    assert.equal(resolveExports({ require: './a.cjs' }, '.'), null);
    assert.equal(resolveExports({ '.': ['bad', './ok.js'] }, '.'), './ok.js');
    assert.equal(
      resolveExports({ './tasks/*': './dist/*.js' }, './tasks/images'),
      './dist/images.js',
    );
    assert.equal(resolveExports({ './a': './a.js' }, './b'), null);
  });
});
