/**
 * The `msg key=value key=value` rendering of a log record, shared by the
 * human-readable format (on a transport thread, or inline when a test
 * captures lines).
 */
const HIDDEN_KEYS = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'name']);

function renderValue(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  if (text === undefined) return 'undefined';
  return /[\s"=]/.test(text) || text === '' ? JSON.stringify(text) : text;
}

/** `msg key=value key=value`, in the order the fields were given. */
export function formatKeyValues(record: Record<string, unknown>, message: string): string {
  const parts = [message];
  for (const [key, value] of Object.entries(record)) {
    if (HIDDEN_KEYS.has(key) || value === undefined) continue;
    parts.push(`${key}=${renderValue(value)}`);
  }
  return parts.join(' ');
}
