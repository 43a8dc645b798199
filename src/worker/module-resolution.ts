/**
 * Where a `--tasks <module>` specifier points: a file path, resolved against
 * the working directory, or a package name, resolved from the working
 * directory the way `import` would from a module there (its `exports` under
 * the `node`, `import` and `default` conditions, else its `main`).
 *
 * A specifier is a path when it is absolute or starts with `.`, or when a
 * file of that name exists in the working directory (so `--tasks tasks.mjs`
 * works); a `file:` URL is used as it is. Anything else is a package name,
 * optionally with a subpath (`my-tasks`, `@acme/tasks/images`).
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/** The conditions an ES module import matches, in the order Node tries them. */
const IMPORT_CONDITIONS: ReadonlySet<string> = new Set(['node', 'import', 'default']);
const PACKAGE_NAME = /^(@[^/]+\/[^/]+|[^@./][^/]*)(\/.*)?$/;

/** A specifier that names no importable module; the message says why. */
export class ModuleResolutionError extends Error {}

function isFile(path: string): boolean {
  return existsSync(path) && statSync(path).isFile();
}

/** The importable URL of a `--tasks` specifier, resolved from `cwd`. */
export function resolveTaskModule(specifier: string, cwd: string): string {
  if (specifier.startsWith('file:')) return specifier;
  const asPath = resolve(cwd, specifier);
  if (isAbsolute(specifier) || specifier.startsWith('.') || isFile(asPath)) {
    if (!existsSync(asPath)) throw new ModuleResolutionError(`no such file: ${asPath}`);
    return pathToFileURL(asPath).href;
  }
  return pathToFileURL(resolvePackage(specifier, cwd)).href;
}

/** The file a package specifier (`name` or `name/sub/path`) resolves to from `cwd`. */
function resolvePackage(specifier: string, cwd: string): string {
  const match = PACKAGE_NAME.exec(specifier);
  if (match === null) throw new ModuleResolutionError(`not a package name: ${specifier}`);
  const name = match[1] as string;
  const subpath = `.${match[2] ?? ''}`;
  const require = createRequire(join(cwd, 'noop.js'));
  const dir = findPackageDir(name, require.resolve.paths(name) ?? []);
  if (dir === null) {
    throw new ModuleResolutionError(
      `cannot find package ${name} from ${cwd} (a file path must start with ./ or /)`,
    );
  }
  const manifest = readManifest(dir);
  if (manifest.exports === undefined || manifest.exports === null) {
    // No `exports`: Node's legacy resolution (main, extensions, index.js),
    // which require implements exactly.
    return require.resolve(specifier);
  }
  const target = resolveExports(manifest.exports, subpath);
  if (target === null) {
    throw new ModuleResolutionError(
      `package ${name} exports nothing importable at ${subpath === '.' ? 'its root' : subpath}`,
    );
  }
  return resolve(dir, target);
}

function findPackageDir(name: string, searchPaths: readonly string[]): string | null {
  for (const base of searchPaths) {
    const dir = join(base, name);
    if (isFile(join(dir, 'package.json'))) return dir;
  }
  return null;
}

function readManifest(dir: string): { exports?: unknown } {
  const path = join(dir, 'package.json');
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
    return typeof parsed === 'object' && parsed !== null ? parsed : {};
  } catch (err) {
    throw new ModuleResolutionError(`cannot read ${path}: ${String(err)}`);
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The relative target of `subpath` in an `exports` field, or null. */
export function resolveExports(exports: unknown, subpath: string): string | null {
  const keys = isRecord(exports) ? Object.keys(exports) : [];
  const isSubpathMap = keys.length > 0 && keys.every((key) => key.startsWith('.'));
  if (!isSubpathMap) return subpath === '.' ? resolveTarget(exports, '') : null;
  const map = exports as Record<string, unknown>;
  if (Object.hasOwn(map, subpath)) return resolveTarget(map[subpath], '');
  for (const key of keys) {
    const star = key.indexOf('*');
    if (star < 0) continue;
    const [prefix, suffix] = [key.slice(0, star), key.slice(star + 1)];
    if (
      subpath.startsWith(prefix) &&
      subpath.endsWith(suffix) &&
      subpath.length >= key.length - 1
    ) {
      return resolveTarget(map[key], subpath.slice(prefix.length, subpath.length - suffix.length));
    }
  }
  return null;
}

/** A target: a string, an array of fallbacks, or conditions (first matching key wins). */
function resolveTarget(target: unknown, starValue: string): string | null {
  if (typeof target === 'string') {
    return target.startsWith('./') ? target.replaceAll('*', starValue) : null;
  }
  if (Array.isArray(target)) {
    for (const candidate of target) {
      const found = resolveTarget(candidate, starValue);
      if (found !== null) return found;
    }
    return null;
  }
  if (!isRecord(target)) return null;
  for (const [condition, value] of Object.entries(target)) {
    if (!IMPORT_CONDITIONS.has(condition)) continue;
    const found = resolveTarget(value, starValue);
    if (found !== null) return found;
  }
  return null;
}
