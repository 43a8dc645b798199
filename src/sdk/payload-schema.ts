/**
 * Payload validation against a task's schema (any Standard Schema: zod 4,
 * valibot, arktype, ...), with one wording for every place that validates:
 * `Invalid payload: <field> <what is wrong>`, the first issue naming its
 * field by path (`items[2].name`), the count of further issues after it.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';

export type PayloadCheck<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly message: string; readonly issues: readonly PayloadIssue[] };

/** One problem, with its field as a dotted path (`(payload)` for the whole payload). */
export interface PayloadIssue {
  readonly field: string;
  readonly message: string;
}

function segmentKey(segment: PropertyKey | StandardSchemaV1.PathSegment): PropertyKey {
  return typeof segment === 'object' ? segment.key : segment;
}

/** `["items", 2, "name"]` -> `items[2].name`; empty -> `(payload)`. */
export function fieldPath(
  path: readonly (PropertyKey | StandardSchemaV1.PathSegment)[] | undefined,
): string {
  if (path === undefined || path.length === 0) return '(payload)';
  let out = '';
  for (const segment of path) {
    const key = segmentKey(segment);
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out;
}

/** The message of a failed check: `Invalid payload: <field> <message>` (+ how many more). */
export function describeIssues(issues: readonly PayloadIssue[]): string {
  const first = issues[0];
  if (first === undefined) return 'Invalid payload';
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  return `Invalid payload: ${first.field} ${first.message}${more}`;
}

/** Validates `payload` with `schema`; never throws for invalid input. */
export async function checkPayload<T>(
  schema: StandardSchemaV1<unknown, T>,
  payload: unknown,
): Promise<PayloadCheck<T>> {
  const result = await schema['~standard'].validate(payload);
  if (result.issues === undefined) return { ok: true, value: result.value };
  const issues = result.issues.map((issue) => ({
    field: fieldPath(issue.path),
    message: issue.message,
  }));
  return { ok: false, message: describeIssues(issues), issues };
}
