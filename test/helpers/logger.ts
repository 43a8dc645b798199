/** Loggers for tests and benchmarks. */
import { pino, type Logger } from 'pino';

/** A logger that drops everything. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** A logger that keeps every line it writes, parsed (tests that read what was logged). */
export function capturingLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = {
    write(line: string): void {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    },
  };
  return { logger: pino({ level: 'debug' }, stream), lines };
}
