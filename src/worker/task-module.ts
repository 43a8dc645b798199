/**
 * Where task threads get their task definitions from.
 *
 * By default a thread uses the built-in registry. A worker may instead name a
 * task module (a file path or a URL): an ES module whose `createRegistry()`
 * export (or default export) returns a {@link TaskRegistry}, or a promise of
 * one. This is how user-defined task types plug in without changing the
 * worker.
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describeError } from '../protocol/errors.js';
import type { TaskDefinition, TaskRegistry } from '../tasks/registry.js';

/** The part of a registry a task thread needs. */
export type TaskSource = Pick<TaskRegistry, 'require'>;

/** Matches `file:`, `data:`, `https:` ... but not a Windows drive such as `C:`. */
const URL_SCHEME = /^[a-z][a-z0-9+.-]+:/i;

/**
 * Turns a task module specifier into an importable URL: URLs stay as they
 * are, paths are resolved against `baseDir` (default: the working directory).
 */
export function resolveTaskModuleUrl(specifier: string, baseDir = process.cwd()): string {
  if (URL_SCHEME.test(specifier)) return specifier;
  const path = isAbsolute(specifier) ? specifier : resolve(baseDir, specifier);
  return pathToFileURL(path).href;
}

function isTaskSource(value: unknown): value is TaskSource {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { require?: unknown }).require === 'function'
  );
}

function isTaskDefinition(value: unknown): value is TaskDefinition {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Partial<Record<keyof TaskDefinition, unknown>>;
  return typeof candidate.validate === 'function' && typeof candidate.run === 'function';
}

function findFactory(mod: unknown): (() => unknown) | null {
  if (typeof mod !== 'object' || mod === null) return null;
  const exports = mod as { createRegistry?: unknown; default?: unknown };
  const factory = exports.createRegistry ?? exports.default;
  return typeof factory === 'function' ? (factory as () => unknown) : null;
}

/**
 * Imports a task module and builds its registry. Rejects with a message that
 * names the module when it cannot be imported or exports no usable registry.
 */
export async function loadTaskSource(url: string): Promise<TaskSource> {
  const shown = url.length > 120 ? `${url.slice(0, 120)}…` : url;
  let mod: unknown;
  try {
    mod = await import(url);
  } catch (err) {
    throw new Error(`cannot load task module ${shown}: ${describeError(err)}`, { cause: err });
  }
  const factory = findFactory(mod);
  if (factory === null) {
    throw new Error(`task module ${shown} exports neither createRegistry() nor a default function`);
  }
  const registry: unknown = await factory();
  if (!isTaskSource(registry)) {
    throw new Error(`task module ${shown}: createRegistry() did not return a task registry`);
  }
  return registry;
}

/** The definition of `taskType`, checked to have the shape a thread relies on. */
export function requireDefinition(source: TaskSource, taskType: string): TaskDefinition {
  const definition: unknown = source.require(taskType);
  if (!isTaskDefinition(definition)) {
    throw new Error(`task type ${taskType} has no validate() and run() functions`);
  }
  return definition;
}
