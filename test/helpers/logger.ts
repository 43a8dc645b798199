/** Loggers for tests and benchmarks. */
import { pino, type Logger } from 'pino';

/** A logger that drops everything. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
