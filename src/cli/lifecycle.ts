/**
 * What the long-running entry points (coordinator, worker) share: reading
 * their flags with `--help` and usage errors handled, and stopping cleanly on
 * SIGINT/SIGTERM.
 */
import { constants } from 'node:os';
import { LOG_FORMATS, LOG_LEVELS, createLogger, type Logger } from '../observability/logger.js';
import { describeError } from '../protocol/errors.js';
import { addFlags, createProgram, parseCommandLine, readFlags } from './command-line.js';
import { UsageError } from './flags.js';
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

const ENV_NOTE =
  '\nEvery flag may also come from the environment as DTP_<NAME> (--log-level <-> ' +
  'DTP_LOG_LEVEL); an explicit flag wins.\n';

/** What parsing a server's command line came to. */
export type ServerCommandLine =
  | { kind: 'run'; values: FlagValues }
  | { kind: 'help'; text: string }
  | { kind: 'usage-error'; message: string };

/**
 * Reads the flags of a server process: every flag also from `env` as
 * DTP_<NAME>. Pure: the caller prints and exits.
 */
export function readServerCommandLine(
  argv: readonly string[],
  program: string,
  summary: string,
  specs: readonly FlagSpec[],
  env: NodeJS.ProcessEnv,
): ServerCommandLine {
  let help = '';
  const command = createProgram(program, summary, (text) => (help += text));
  addFlags(command, specs, true).addHelpText('after', ENV_NOTE);
  try {
    if (parseCommandLine(command, argv) === 'help') return { kind: 'help', text: help };
    return { kind: 'run', values: readFlags(command, specs, env) };
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    return { kind: 'usage-error', message: err.message };
  }
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
  const line = readServerCommandLine(argv, program, summary, specs, process.env);
  if (line.kind === 'run') return line.values;
  if (line.kind === 'help') {
    process.stdout.write(line.text);
    process.exit(0);
  }
  process.stderr.write(`${program}: ${line.message}\nRun \`${program} --help\` for usage.\n`);
  process.exit(2);
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
