/**
 * The human-readable log format, run as a pino transport: pino hands each
 * line to this module on a thread of its own, so turning JSON into
 * `msg key=value …` text never costs the coordinator's or worker's event
 * loop anything.
 */
import type { DestinationStream } from 'pino';
import pretty from 'pino-pretty';
import { formatKeyValues } from './key-values.js';

/** A pino-pretty stream writing `msg key=value …` lines to `destination` (default stdout). */
export default function prettyTransport(
  options: { destination?: number | DestinationStream } = {},
): DestinationStream {
  return pretty({
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
}
