/**
 * What crosses the boundary of a handler: its payload going in (checked by
 * the task's schema) and its result coming out (encoded for TASK_RESULT).
 *
 * Results. A handler returns any JSON value. A string travels as it is
 * (`resultFormat` text, what a v1 client expects); any other value travels
 * as its JSON text with `resultFormat: "json"`, so the typed client can give
 * the value back unchanged. `undefined` (a handler that returns nothing)
 * counts as `null`, and an object property whose value is `undefined` is
 * left out, as `JSON.stringify` does. Everything else that JSON cannot carry
 * exactly — functions, symbols, bigints, `NaN`/`Infinity`, cycles, class
 * instances such as `Date` or `Map`, `undefined` inside an array — fails the
 * attempt with an error naming where it was found, instead of being silently
 * changed on the way.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { ResultFormat } from '../protocol/messages.js';
import { InvalidPayloadError } from '../tasks/registry.js';

/** Deepest nesting accepted in a result (the same bound as payloads). */
const MAX_RESULT_DEPTH = 1_000;
/** Issues of a failed schema validation shown in the error; the rest are counted. */
const MAX_ISSUES_SHOWN = 5;

/** A handler's value, as TASK_RESULT carries it. */
export interface EncodedResult {
  result: string;
  resultFormat: ResultFormat;
}

/** A handler returned something that is not a JSON value. */
export class ResultNotJsonError extends Error {
  constructor(detail: string) {
    super(`the handler's result is not a JSON value: ${detail}`);
    this.name = 'ResultNotJsonError';
  }
}

function kindOf(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value !== 'object' || value === null) return `a ${typeof value}`;
  const name = (Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null)
    ?.constructor?.name;
  return `an instance of ${name ?? 'a class'} (convert it to plain data first)`;
}

function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Throws {@link ResultNotJsonError} naming the first place that is not JSON. */
function checkJson(value: unknown, path: string, ancestors: Set<object>): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (Number.isFinite(value)) return;
      throw new ResultNotJsonError(`${path} is ${kindOf(value)}`);
    case 'object':
      break;
    case 'bigint':
    case 'function':
    case 'symbol':
    case 'undefined':
      throw new ResultNotJsonError(`${path} is ${kindOf(value)}`);
  }
  if (value === null) return;
  if (ancestors.has(value)) throw new ResultNotJsonError(`${path} refers back to itself (a cycle)`);
  if (ancestors.size >= MAX_RESULT_DEPTH) {
    throw new ResultNotJsonError(`${path} is nested deeper than ${MAX_RESULT_DEPTH} levels`);
  }
  ancestors.add(value);
  if (Array.isArray(value)) {
    value.forEach((item: unknown, i) => {
      if (item === undefined) throw new ResultNotJsonError(`${path}[${i}] is undefined`);
      checkJson(item, `${path}[${i}]`, ancestors);
    });
  } else if (isPlainObject(value)) {
    for (const [key, item] of Object.entries(value)) {
      if (item !== undefined) checkJson(item, `${path}.${key}`, ancestors);
    }
  } else {
    throw new ResultNotJsonError(`${path} is ${kindOf(value)}`);
  }
  ancestors.delete(value);
}

/** Encodes a handler's return value for TASK_RESULT (see the module comment). */
export function encodeResult(value: unknown): EncodedResult {
  if (typeof value === 'string') return { result: value, resultFormat: 'text' };
  if (value === undefined) return { result: 'null', resultFormat: 'json' };
  checkJson(value, 'result', new Set());
  return { result: JSON.stringify(value), resultFormat: 'json' };
}

/** `a.b[2].c` for an issue path; `payload` for the payload itself. */
function formatPath(path: StandardSchemaV1.Issue['path']): string {
  if (path === undefined || path.length === 0) return 'payload';
  let out = '';
  for (const segment of path) {
    const key = typeof segment === 'object' ? segment.key : segment;
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out;
}

/**
 * Validates a payload with a Standard Schema and returns the schema's output
 * (which may be transformed). Throws {@link InvalidPayloadError}
 * (`Invalid payload: <field> <problem>`, not retryable) when it is invalid.
 */
export async function validatePayload(
  schema: StandardSchemaV1,
  payload: unknown,
): Promise<unknown> {
  const outcome = await schema['~standard'].validate(payload);
  if (outcome.issues === undefined) return outcome.value;
  const shown = outcome.issues
    .slice(0, MAX_ISSUES_SHOWN)
    .map((issue) => `${formatPath(issue.path)} ${issue.message}`);
  const more = outcome.issues.length - shown.length;
  const detail = shown.length === 0 ? "payload rejected by the task's schema" : shown.join('; ');
  throw new InvalidPayloadError(detail + (more > 0 ? `; and ${more} more` : ''));
}
