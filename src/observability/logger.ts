/**
 * Logging: pino underneath; human-readable `key=value` lines by default, one
 * JSON object per line with `--log-format json` (for log shippers).
 *
 * Every event is logged as `log.info({ jobId, workerId, ... }, 'job assigned')`;
 * the pretty format renders it as
 * `[2026-11-29 09:29:12.123] INFO (coordinator): job assigned jobId=... workerId=...`.
 */
import { pino, type Logger, type DestinationStream } from 'pino';
import pretty from 'pino-pretty';

export type { Logger } from 'pino';

export type LogFormat = 'pretty' | 'json';
export const LOG_FORMATS: readonly LogFormat[] = ['pretty', 'json'];

/** Levels a user may choose; `info` tells every job's story, `warn` only trouble. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface LoggerOptions {
  /** Component name shown in every line (e.g. `coordinator`). */
  name: string;
  format?: LogFormat;
  /** pino level name (default `info`). */
  level?: string;
  /** Where lines go (default: stdout, synchronously). */
  destination?: DestinationStream;
}

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

export function createLogger(options: LoggerOptions): Logger {
  const level = options.level ?? 'info';
  if (options.format === 'json') {
    return pino(
      { name: options.name, level, base: { pid: process.pid } },
      options.destination ?? pino.destination({ sync: true }),
    );
  }
  const stream = pretty({
    sync: true,
    colorize: false,
    destination: options.destination ?? 1,
    translateTime: 'SYS:yyyy-mm-dd HH:MM:ss.l',
    ignore: 'pid,hostname',
    hideObject: true,
    messageFormat: (log, messageKey) => {
      const message = typeof log[messageKey] === 'string' ? log[messageKey] : '';
      return formatKeyValues(log, message);
    },
  });
  return pino({ name: options.name, level }, stream);
}

/** A logger that drops everything (tests, simulations). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
