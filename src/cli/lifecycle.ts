/**
 * What the long-running entry points (coordinator, worker) share: reading
 * their flags with `--help` and usage errors handled, and stopping cleanly on
 * SIGINT/SIGTERM.
 */
import { constants } from 'node:os';
import { LOG_FORMATS, LOG_LEVELS, createLogger, type Logger } from '../observability/logger.js';
import { describeError } from '../protocol/errors.js';
import { UsageError, formatFlagHelp, parseFlags } from './flags.js';
import type { FlagSpec, FlagValues } from './flags.js';

/** `--log-format` and `--log-level`, shared by the coordinator and the worker. */
export const LOG_FLAGS: readonly FlagSpec[] = [
  {
    name: 'log-format',
    type: 'enum',
    values: LOG_FORMATS,
    default: 'pretty',
    help: 'log lines as key=value text or JSON',
  },
  {
    name: 'log-level',
    type: 'enum',
    values: LOG_LEVELS,
    default: 'info',
    help: 'info: a line per job event; warn: only trouble',
  },
];

/** The logger the log flags ask for. */
export function loggerFrom(values: FlagValues, name: string): Logger {
  return createLogger({
    name,
    format: values.enum('log-format', LOG_FORMATS),
    level: values.enum('log-level', LOG_LEVELS),
  });
}

/** A close() that takes longer than this after a signal ends the process anyway, in ms. */
export const FORCE_EXIT_AFTER_MS = 15_000;

/** Usage text generated from a flag table. */
export function formatUsage(program: string, summary: string, specs: readonly FlagSpec[]): string {
  return [
    `Usage: ${program} [flags]`,
    '',
    summary,
    '',
    'Flags (each also read from the environment as DTP_<NAME>; an explicit flag wins):',
    formatFlagHelp(specs),
    '',
  ].join('\n');
}

/**
 * Parses the flags of a server process. `--help` prints usage and exits 0; a
 * usage error prints the problem and exits 2.
 */
export function parseServerFlags(
  argv: readonly string[],
  program: string,
  summary: string,
  specs: readonly FlagSpec[],
): FlagValues {
  try {
    const parsed = parseFlags(argv, specs);
    if (parsed.help) {
      process.stdout.write(formatUsage(program, summary, specs));
      process.exit(0);
    }
    return parsed.values;
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`${program}: ${err.message}\nRun \`${program} --help\` for usage.\n`);
    process.exit(2);
  }
}

/** Prints why a server could not start and exits 1. */
export function exitOnStartFailure(program: string, err: unknown): never {
  process.stderr.write(`${program}: cannot start: ${describeError(err)}\n`);
  process.exit(1);
}

function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/**
 * On the first SIGINT/SIGTERM: `close()`, then exit 0 (1 if it failed or took
 * longer than `forceExitAfterMs`, default {@link FORCE_EXIT_AFTER_MS}). A second signal exits at once
 * with 128 + its number, for an operator who does not want to wait.
 */
export function stopOnSignals(
  log: Logger,
  close: () => Promise<void>,
  forceExitAfterMs = FORCE_EXIT_AFTER_MS,
): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(signalExitCode(signal));
    }
    stopping = true;
    log.info({ signal }, 'stopping');
    const force = setTimeout(() => {
      log.error({ timeoutMs: forceExitAfterMs }, 'clean stop took too long: exiting');
      process.exit(1);
    }, forceExitAfterMs);
    force.unref();
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err: describeError(err) }, 'clean stop failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
