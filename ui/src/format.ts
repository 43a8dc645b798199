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

/** The browser's own time zone (an IANA name such as `Europe/Paris`). */
export function browserTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone;
}

/** One formatter per zone shown: creating one costs far more than using it. */
const zoneFormatters = new Map<string, Intl.DateTimeFormat>();
/** Zones kept (a page shows a handful; more are formatted afresh). */
const MAX_ZONE_FORMATTERS = 64;

function zoneFormatter(timeZone: string): Intl.DateTimeFormat {
  const known = zoneFormatters.get(timeZone);
  if (known !== undefined) return known;
  const formatter = new Intl.DateTimeFormat('en-GB', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  });
  if (zoneFormatters.size < MAX_ZONE_FORMATTERS) zoneFormatters.set(timeZone, formatter);
  return formatter;
}

/** Whether this browser can show times in `timeZone` (its ICU knows the name). */
export function isKnownTimeZone(timeZone: string): boolean {
  try {
    zoneFormatter(timeZone);
    return true;
  } catch {
    return false;
  }
}

/**
 * `2026-01-02 13:04:05` as the wall clock of `timeZone` (an IANA name) shows
 * it; `-` for null. The zone must be known (`isKnownTimeZone`).
 */
export function formatTimeIn(ms: number | null | undefined, timeZone: string): string {
  if (ms == null) return '-';
  const formatter = zoneFormatter(timeZone);
  const part: Partial<Record<Intl.DateTimeFormatPartTypes, string>> = {};
  for (const { type, value } of formatter.formatToParts(ms)) part[type] = value;
  return `${part.year}-${part.month}-${part.day} ${part.hour}:${part.minute}:${part.second}`;
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

/** `812 B`, `3.4 KiB`, `1.0 MiB`; `-` when not known. */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes == null) return '-';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/**
 * `n/max`: the attempts that count toward the job's maxAttempts, so not
 * those that ended in a suspension (`ctx.sleep`, `ctx.waitFor`), those
 * its worker requeued, nor those its handler ended rate limited.
 */
export function formatAttempts(job: {
  attempts: number;
  maxAttempts: number;
  suspensions?: number | null;
  requeues?: number | null;
  rateLimited?: number | null;
}): string {
  const uncounted = (job.suspensions ?? 0) + (job.requeues ?? 0) + (job.rateLimited ?? 0);
  return `${job.attempts - uncounted}/${job.maxAttempts}`;
}

/** A job id shortened for tables (the full id is in the link title). */
export function shortId(jobId: string): string {
  return jobId.length > 13 ? `${jobId.slice(0, 8)}…${jobId.slice(-4)}` : jobId;
}

/** `in 1 d 2 h 3 min 4 s`, whole seconds rounded up; `due now` once the time has come. */
export function formatCountdown(ms: number): string {
  if (ms <= 0) return 'due now';
  const total = Math.ceil(ms / 1_000);
  const parts: string[] = [];
  const days = Math.floor(total / 86_400);
  const hours = Math.floor((total % 86_400) / 3_600);
  const minutes = Math.floor((total % 3_600) / 60);
  const seconds = total % 60;
  if (days > 0) parts.push(`${days} d`);
  if (hours > 0) parts.push(`${hours} h`);
  if (minutes > 0) parts.push(`${minutes} min`);
  if (seconds > 0 || parts.length === 0) parts.push(`${seconds} s`);
  return `in ${parts.join(' ')}`;
}
