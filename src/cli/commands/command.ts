/**
 * What a client CLI command is: its positional arguments and flags (which
 * also drive `--help`) and a `run` that talks to the coordinator and returns
 * both renderings of its result. Parsing lives in client-cli.ts; printing
 * and exit codes in output.ts; the table of commands in client-commands.ts.
 */
import type { DtpClient } from '../../client/client.js';
import type { ConnectionSecurity } from '../../client/connection.js';
import type { FlagSpec, FlagValues } from '../flags.js';
import type { ExitCode } from '../output.js';

/** A command's result: the `--json` document, the human text, and the exit code (default 0). */
export interface CommandOutput {
  json: unknown;
  human: string;
  exitCode?: ExitCode;
  /** The command printed its output itself, as it went ({@link CommandContext.emit}). */
  streamed?: boolean;
}

export interface CommandContext {
  values: FlagValues;
  /** Positional arguments after the command name (for `submit`: the task type first). */
  args: readonly string[];
  /** Connects on first use. */
  client(): Promise<DtpClient>;
  /** TLS and token of every connection, from the flags (for commands that open their own). */
  security(): ConnectionSecurity;
  color: boolean;
  /** Progress notes and warnings for a person (stderr); silent under `--json`. */
  note(text: string): void;
  /** Live progress (stderr); null unless stdout is a terminal and not `--json`. */
  progress: ((text: string) => void) | null;
  /** The text of a file; `-` = standard input. */
  readInput(path: string): Promise<string>;
  /** Prints one item of a streaming command now: `doc` as a JSON line under `--json`, else `human`. */
  emit(doc: unknown, human: string): void;
  /** A warning on stderr, also under `--json` (stdout stays machine-readable). */
  warn(text: string): void;
}

/** A positional argument: `<name>` in the usage line. */
export interface ArgSpec {
  readonly name: string;
  readonly help: string;
  /** May be left out (`[name]` in the usage line). */
  readonly optional?: boolean;
}

export interface CommandSpec {
  readonly name: string;
  readonly summary: string;
  readonly args: readonly ArgSpec[];
  /** Flags of this command (the global ones live on the program). */
  readonly flags: readonly FlagSpec[];
  run(ctx: CommandContext): Promise<CommandOutput>;
}
