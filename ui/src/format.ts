/** Small renderings of times, durations and JSON for the page. */
import { formatDurationMs } from '../../src/protocol/duration.js';

export { formatDurationMs };

/** `2026-01-02 13:04:05` in the browser's time zone; `-` for null. */
export function formatTime(ms: number | null | undefined): string {
  if (ms == null) return '-';
  const d = new Date(ms);
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** `12 s ago`, `3.0 min ago`. */
export function formatAge(ms: number): string {
  return `${formatDurationMs(Math.max(0, ms))} ago`;
}

/** JSON text pretty-printed when it parses; the text as it is otherwise. */
export function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** A job id shortened for tables (the full id is in the link title). */
export function shortId(jobId: string): string {
  return jobId.length > 13 ? `${jobId.slice(0, 8)}…${jobId.slice(-4)}` : jobId;
}
