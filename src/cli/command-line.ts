/**
 * The glue between flag tables (flags.ts) and commander, which tokenizes the
 * command line, finds subcommands, writes the help text and suggests a near
 * name for an unknown command or flag.
 *
 * Commander only tokenizes here: every flag is declared as taking a string
 * (or as a switch), and the values are checked and converted by
 * `resolveFlags`, the same way whether they came from argv or from the
 * environment. Commander never exits the process and never prints an error:
 * its errors become {@link UsageError}s, and the caller decides how to report
 * them (text, or one JSON document under `--json`).
 */
import { Command, CommanderError, Option } from 'commander';
import { UsageError, describeFlag, flagSignature, resolveFlags } from './flags.js';
import type { FlagSpec, FlagValues, GivenValue } from './flags.js';

/** Where commander writes help text. */
export interface HelpSink {
  (text: string): void;
}

/**
 * A commander program set up the dtp way: errors thrown instead of exiting,
 * commander's own error printing off, help written to `writeHelp`, "did you
 * mean" suggestions on. Subcommands made with `.command()` inherit all of it.
 */
export function createProgram(name: string, summary: string, writeHelp: HelpSink): Command {
  const program = new Command(name);
  program
    .description(summary)
    .exitOverride()
    .configureOutput({
      writeOut: (text) => writeHelp(text),
      // Only the error-help of a command without subcommand lands here; the
      // caller prints its own usage text instead.
      writeErr: () => undefined,
      outputError: () => undefined,
    })
    .showSuggestionAfterError(true)
    .allowExcessArguments(false)
    .helpOption('-h, --help', 'show this help')
    .configureHelp({ showGlobalOptions: true, helpWidth: 100 });
  return program;
}

/** Declares each flag of the table on `command`; `fromEnv` only changes the help text. */
export function addFlags(command: Command, specs: readonly FlagSpec[], fromEnv: boolean): Command {
  for (const spec of specs) {
    const option = new Option(flagSignature(spec), describeFlag(spec, fromEnv));
    if (spec.type === 'list') {
      option.argParser((value: string, previous: readonly string[] | undefined) => [
        ...(previous ?? []),
        value,
      ]);
    }
    command.addOption(option);
  }
  return command;
}

/** The flags of the table that were given on `command`'s part of the command line. */
export function givenFlags(command: Command, specs: readonly FlagSpec[]): Map<string, GivenValue> {
  const given = new Map<string, GivenValue>();
  for (const spec of specs) {
    const option = command.options.find((o) => o.long === `--${spec.name}`);
    if (option === undefined) throw new Error(`flag --${spec.name} is not declared`);
    const key = option.attributeName();
    if (command.getOptionValueSource(key) !== 'cli') continue;
    given.set(spec.name, command.getOptionValue(key) as GivenValue);
  }
  return given;
}

/** Given flags, then the environment (unless `env` is null), then defaults. */
export function readFlags(
  command: Command,
  specs: readonly FlagSpec[],
  env: NodeJS.ProcessEnv | null,
): FlagValues {
  return resolveFlags(specs, givenFlags(command, specs), { env });
}

/** What parsing a command line came to (anything else is thrown as a UsageError). */
export type ParseOutcome = 'parsed' | 'help';

/**
 * Parses argv (user arguments only); action handlers must be synchronous. Returns `help` when help was printed
 * (`--help`, `-h`, `help <command>`); throws {@link UsageError} for every
 * problem, `showUsage` set when no command was named.
 */
export function parseCommandLine(program: Command, argv: readonly string[]): ParseOutcome {
  try {
    program.parse([...argv], { from: 'user' });
    return 'parsed';
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return 'help';
    // `help <command>` exits 0; a command line naming no command exits non-zero.
    if (err.code === 'commander.help') {
      if (err.exitCode === 0) return 'help';
      throw new UsageError('missing command', { showUsage: true });
    }
    throw usageErrorFrom(err);
  }
}

/** `error: unknown option '--x'\n(Did you mean --y?)` -> `unknown option '--x' (Did you mean --y?)`. */
export function usageErrorFrom(err: CommanderError): UsageError {
  const text = err.message
    .replace(/^error:\s*/, '')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .join(' ');
  return new UsageError(text === '' ? 'bad command line' : text);
}
