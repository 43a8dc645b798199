/**
 * Logging: pino underneath; human-readable `key=value` lines by default, one
 * JSON object per line with `--log-format json` (for log shippers).
 *
 * Every event is logged as `log.info({ jobId, workerId, ... }, 'job assigned')`;
 * the pretty format renders it as
 * `[2026-11-29 09:29:12.123] INFO (coordinator): job assigned jobId=... workerId=...`.
 */
import { pino, type Logger, type DestinationStream } from 'pino';
import prettyTransport from './pretty-transport.js';

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

export { formatKeyValues } from './key-values.js';

export function createLogger(options: LoggerOptions): Logger {
  const level = options.level ?? 'info';
  if (options.format === 'json') {
    // Lines are buffered and written without blocking; pino flushes the
    // buffer when the process exits.
    return pino(
      { name: options.name, level, base: { pid: process.pid } },
      options.destination ?? pino.destination({ sync: false }),
    );
  }
  if (options.destination === undefined) {
    const transport = pino.transport({
      target: new URL('./pretty-transport.js', import.meta.url).href,
      options: { destination: 1 },
    }) as DestinationStream;
    return pino({ name: options.name, level }, transport);
  }
  return pino({ name: options.name, level }, prettyTransport({ destination: options.destination }));
}
