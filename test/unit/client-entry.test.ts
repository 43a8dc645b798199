/**
 * The client entry point (`dtp/client`, src/client/index.ts) must load no
 * coordinator, worker, store or task code and no native module: a
 * client-only install never needs better-sqlite3. Checked on the compiled
 * files by following every static and dynamic import from the entry point.
 * The one package it may name is the optional peer `@opentelemetry/api`,
 * and only in a dynamic import (observability/tracing.ts).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const DIST = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const ENTRY = join(DIST, 'src', 'client', 'index.js');
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*'([^']+)'|import\(\s*'([^']+)'\s*\)/g;

/** Every module reachable from `entry`: our files (relative to dist) and bare specifiers. */
function reachable(entry: string): {
  files: Set<string>;
  packages: Set<string>;
  dynamicPackages: Set<string>;
} {
  const files = new Set<string>();
  const packages = new Set<string>();
  const dynamicPackages = new Set<string>();
  const pending = [entry];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    const name = relative(DIST, file);
    if (files.has(name)) continue;
    files.add(name);
    for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const specifier = match[1] ?? match[2] ?? '';
      if (specifier.startsWith('.')) pending.push(resolve(dirname(file), specifier));
      else if (match[2] !== undefined) dynamicPackages.add(specifier);
      else packages.add(specifier);
    }
  }
  return { files, packages, dynamicPackages };
}

describe('client entry point', () => {
  it('reaches only client, protocol, net and SDK code, and Node built-ins', () => {
    const { files, packages, dynamicPackages } = reachable(ENTRY);
    assert.ok(files.size > 5, 'the walk found the client files');
    for (const file of files) {
      assert.match(
        file,
        /^src\/((client|protocol|net|sdk)\/|observability\/tracing\.js$)/,
        `${file} is loaded by the client`,
      );
    }
    assert.deepEqual([...dynamicPackages], ['@opentelemetry/api']);
    const builtins = new Set(builtinModules);
    for (const specifier of packages) {
      const bare = specifier.replace(/^node:/, '');
      assert.ok(builtins.has(bare), `the client loads the package ${specifier}`);
    }
  });
});
