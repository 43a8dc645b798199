#!/usr/bin/env node
// Import cycles among the source files, type-only imports included (part of
// `npm run lint`). ESLint's import-x/no-cycle skips `import type`, and a
// cycle of types still ties two modules together: neither can be read, moved
// or tested without the other.
//
//   node scripts/check-imports.mjs [folder...]     (default: src)
//
// Exits 1 listing every cycle found (each as the files around it), else 0.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const SPECIFIER =
  /(?:^|\n)[ \t]*(?:import|export)\b[^'";]*?\bfrom[ \t]*'(\.{1,2}\/[^']+)'|(?:^|\n)[ \t]*import[ \t]*'(\.{1,2}\/[^']+)'|\bimport\([ \t]*'(\.{1,2}\/[^']+)'[ \t]*\)/g;

/** Every `.ts` file under `dir`. */
function sourceFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** The relative imports of one file's text, resolved to `.ts` paths (comments dropped first). */
export function importsOf(file, text) {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/[^\n]*/g, '$1');
  const targets = new Set();
  for (const match of code.matchAll(SPECIFIER)) {
    const specifier = match[1] ?? match[2] ?? match[3];
    targets.add(resolve(dirname(file), specifier).replace(/\.js$/, '.ts'));
  }
  return [...targets];
}

/** The import graph of the `.ts` files under `roots`: file -> files it imports. */
export function importGraph(roots) {
  const graph = new Map();
  for (const root of roots) {
    for (const file of sourceFiles(root)) {
      graph.set(file, importsOf(file, readFileSync(file, 'utf8')));
    }
  }
  return graph;
}

/**
 * The cycles of `graph` (Map of node -> nodes): every strongly connected
 * component with more than one node, or a node importing itself. Tarjan's
 * algorithm, iterative (no recursion limit on deep graphs).
 */
export function findCycles(graph) {
  let counter = 0;
  const index = new Map();
  const low = new Map();
  const onStack = new Set();
  const stack = [];
  const cycles = [];
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work = [{ node: start, next: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const edges = (graph.get(frame.node) ?? []).filter((to) => graph.has(to));
      if (frame.next < edges.length) {
        const to = edges[frame.next++];
        if (!index.has(to)) {
          index.set(to, counter);
          low.set(to, counter++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, next: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node), index.get(to)));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent !== undefined)
        low.set(parent.node, Math.min(low.get(parent.node), low.get(frame.node)));
      if (low.get(frame.node) !== index.get(frame.node)) continue;
      const component = [];
      for (let node = stack.pop(); ; node = stack.pop()) {
        onStack.delete(node);
        component.push(node);
        if (node === frame.node) break;
      }
      const selfLoop = (graph.get(frame.node) ?? []).includes(frame.node);
      if (component.length > 1 || selfLoop) cycles.push(component.sort());
    }
  }
  return cycles;
}

const isMain =
  process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href;
if (isMain) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const folders = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['src'];
  const cycles = findCycles(importGraph(folders.map((f) => resolve(root, f))));
  for (const cycle of cycles) {
    console.error(`import cycle: ${cycle.map((file) => relative(root, file)).join(' <-> ')}`);
  }
  if (cycles.length > 0) {
    console.error(`${cycles.length} import cycle(s), type-only imports included: break each one`);
    process.exit(1);
  }
}
