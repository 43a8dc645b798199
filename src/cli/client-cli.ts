/**
 * `scripts/client.sh <command> [args] [flags]`: builds the commander program
 * from the command table (client-commands.ts), runs the chosen command and
 * prints either the human text or exactly one JSON document.
 *
 * Global flags (`--host`, `--port`, `--json`, and the TLS and token flags
 * `--tls`, `--tls-ca`, `--tls-cert`, `--tls-key`, `--token-file`) may appear
 * anywhere and are the only ones read from the environment (DTP_HOST,
 * DTP_PORT, DTP_JSON, DTP_TLS..., DTP_TOKEN_FILE, and DTP_TOKEN for the token
 * itself): a `DTP_*` variable meant for a coordinator or worker never changes what a
 * client command does. Exit codes: 0 ok, 1 runtime failure or error reply,
 * 2 usage, 3 rejected, 4 `wait --exit-status` saw FAILED or CANCELLED.
 */
import { readFile } from 'node:fs/promises';
import { DtpClient } from '../client/client.js';
import type { ConnectionSecurity } from '../client/connection.js';
import { RemoteError } from '../client/errors.js';
import { ErrorCode } from '../protocol/error-codes.js';
import type { Command } from 'commander';
import {
  COMMANDS,
  GLOBAL_FLAGS,
  SUBMIT_COMMAND,
  TASKS,
  runShortcut,
  suggestShortcut,
} from './client-commands.js';
import type { CommandContext, CommandOutput, CommandSpec } from './client-commands.js';
import { addFlags, createProgram, parseCommandLine, readFlags } from './command-line.js';
import type { ParseOutcome } from './command-line.js';
import { FlagValues, UsageError, envVarName, parseBoolean } from './flags.js';
import { clientTlsFrom, tokenFrom } from './security-flags.js';
import type { FlagSpec } from './flags.js';
import { EXIT_CODES, errorDocument, exitCodeFor, formatErrorText, toJsonLine } from './output.js';
import type { ExitCode } from './output.js';

export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  env: NodeJS.ProcessEnv;
  /** stdout is a terminal and colour is not switched off. */
  color: boolean;
  /** stdout is a terminal (live progress is shown then, on stderr). */
  interactive: boolean;
  /** The text of a file; `-` = standard input (default: the real ones). */
  readInput?: (path: string) => Promise<string>;
  /** Opens the client (default {@link DtpClient.connect}). */
  connect?: Connect;
  /** The name the program was started by, for usage and errors (default `client.sh`). */
  program?: string;
}

/** Opens a client to host:port with the TLS and token settings of the command line. */
type Connect = (host: string, port: number, security: ConnectionSecurity) => Promise<DtpClient>;

const DEFAULT_PROGRAM = 'client.sh';
const V1_NOTE =
  'the coordinator does not understand WAIT_JOB (a v1 coordinator); polling the job state';
const EXIT_NOTE =
  'Exit codes: 0 ok, 1 failure or error reply, 2 usage error, 3 submission rejected, ' +
  '4 wait --exit-status saw FAILED or CANCELLED.';

/** The command chosen by the command line, with its commander command for reading flags. */
interface Selection {
  spec: CommandSpec;
  run: (ctx: CommandContext) => Promise<CommandOutput>;
  /** The chosen command and its ancestors up to (not including) the program, leaf first. */
  commands: { command: Command; flags: readonly FlagSpec[] }[];
  args: string[];
}

function declareCommand(
  parent: Command,
  spec: CommandSpec,
  select: (command: Command, args: string[]) => void,
): Command {
  const command = parent.command(spec.name).description(spec.summary);
  for (const arg of spec.args) {
    command.argument(arg.optional === true ? `[${arg.name}]` : `<${arg.name}>`, arg.help);
  }
  addFlags(command, spec.flags, false);
  command.action((...params: unknown[]) => {
    // commander passes the arguments, then the options and the command itself.
    const args = params.slice(0, spec.args.length).filter((a) => typeof a === 'string');
    select(command, args);
  });
  return command;
}

/** The whole program; `selected` receives the command the line names. */
function buildProgram(
  name: string,
  writeHelp: (text: string) => void,
  selected: (s: Selection) => void,
): Command {
  const program = createProgram(name, 'The dtp client: submit jobs and look at them.', writeHelp);
  addFlags(program, GLOBAL_FLAGS, true).addHelpText('after', `\n${EXIT_NOTE}\n`);
  for (const spec of COMMANDS) {
    const command = declareCommand(program, spec, (cmd, args) =>
      selected({
        spec,
        run: (ctx) => spec.run(ctx),
        commands: [{ command: cmd, flags: spec.flags }],
        args,
      }),
    );
    if (spec !== SUBMIT_COMMAND) continue;
    command.usage('<shortcut> <its flags> [options]  |  submit <TYPE> --payload <json> [options]');
    for (const task of TASKS) {
      const sub = command
        .command(task.name)
        .description(`submit ${task.taskType}: ${task.summary}`);
      addFlags(sub, task.flags, false);
      sub.action(() =>
        selected({
          spec,
          run: (ctx) => runShortcut(task, ctx),
          commands: [
            { command: sub, flags: task.flags },
            { command, flags: spec.flags },
          ],
          args: [task.name],
        }),
      );
    }
  }
  return program;
}

/** Decided before parsing, so that a usage error is reported as JSON too. */
function wantsJson(argv: readonly string[], env: NodeJS.ProcessEnv): boolean {
  if (argv.includes('--json')) return true;
  const raw = env[envVarName('json')] ?? '';
  if (raw.trim() === '') return false;
  try {
    return parseBoolean(raw, envVarName('json'));
  } catch {
    return false;
  }
}

type Outcome = { kind: 'help'; text: string } | ({ kind: 'done' } & CommandOutput);

/**
 * Parses the command line; when it fails on `submit <task>` and the task is a
 * near miss of a shortcut (`submit sha265 --text hi`: --text is unknown
 * because sha265 is taken for a task type of its own), says which shortcut
 * it resembles.
 */
function parseWithHint(program: Command, argv: readonly string[]): ParseOutcome {
  try {
    return parseCommandLine(program, argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    // commander has set the command's operands before it reports an unknown option.
    const task = program.commands.find((c) => c.name() === SUBMIT_COMMAND.name)?.args[0];
    const hint = task === undefined ? '' : suggestShortcut(task);
    if (hint === '' || TASKS.some((t) => t.name === task)) throw err;
    throw new UsageError(`${err.message}: ${JSON.stringify(task)} is not a shortcut${hint}`);
  }
}

async function dispatch(
  argv: readonly string[],
  io: CliIo,
  json: boolean,
  connect: Connect,
  usage: { text: string },
  seen: { token: boolean },
): Promise<Outcome> {
  let help = '';
  let selection: Selection | null = null;
  const program = buildProgram(
    io.program ?? DEFAULT_PROGRAM,
    (text) => (help += text),
    (s) => (selection = s),
  );
  usage.text = program.helpInformation();
  if (parseWithHint(program, argv) === 'help') return { kind: 'help', text: help };
  const chosen = selection as Selection | null;
  if (chosen === null) throw new UsageError('missing command', { showUsage: true });
  // Only the global flags fall back to the environment.
  const levels = [
    readFlags(program, GLOBAL_FLAGS, io.env),
    ...chosen.commands.map(({ command, flags }) => readFlags(command, flags, null)),
  ];
  const values = FlagValues.merge(levels);
  const security = (): ConnectionSecurity => {
    const token = tokenFrom(values, io.env);
    seen.token = token !== null;
    return { tls: clientTlsFrom(values), token };
  };
  const output = await chosen.run({
    values,
    args: chosen.args,
    client: () => connect(values.string('host'), values.int('port'), security()),
    security,
    color: io.color && !json,
    note: (text) => {
      if (!json) io.stderr(text);
    },
    progress: io.interactive && !json ? (text) => io.stderr(text) : null,
    readInput: io.readInput ?? readInputDefault,
    emit: (doc, human) => io.stdout(json ? toJsonLine(doc) : human),
    warn: (text) => io.stderr(text),
  });
  return { kind: 'done', ...output };
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function readInputDefault(path: string): Promise<string> {
  return path === '-' ? readStdin() : readFile(path, 'utf8');
}

/** A coordinator that wants a token, told by a client that gave none: say how to give one. */
function withTokenHint(err: unknown): unknown {
  if (!(err instanceof RemoteError) || err.code !== ErrorCode.Unauthenticated) return err;
  return new RemoteError({
    code: err.code,
    message: `${err.message}; this coordinator needs a client token: give it with --token-file <file> or DTP_TOKEN`,
  });
}

function humanFailure(err: unknown, usage: string, program: string): string {
  if (!(err instanceof UsageError)) return formatErrorText(err);
  if (err.showUsage) return `${usage}\n${formatErrorText(err)}`;
  return `${formatErrorText(err)}Run \`${program} --help\` for usage.\n`;
}

/** Runs one command line; resolves with the exit code. */
export async function runClientCli(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const json = wantsJson(argv, io.env);
  const note = (text: string): void => {
    if (!json) io.stderr(text);
  };
  const open: Connect =
    io.connect ??
    ((host, port, security) =>
      DtpClient.connect({
        host,
        port,
        ...security,
        onFeatures: (features) => {
          if (!features.waitJob) note(`Note: ${V1_NOTE}\n`);
        },
      }));
  let connecting: Promise<DtpClient> | null = null;
  const connect: Connect = (host, port, security) => (connecting ??= open(host, port, security));
  const usage = { text: '' };
  const seen = { token: false };
  try {
    const outcome = await dispatch(argv, io, json, connect, usage, seen);
    if (outcome.kind === 'help') {
      io.stdout(outcome.text);
      return EXIT_CODES.ok;
    }
    if (outcome.streamed !== true) io.stdout(json ? toJsonLine(outcome.json) : outcome.human);
    return outcome.exitCode ?? EXIT_CODES.ok;
  } catch (caught) {
    const err = seen.token ? caught : withTokenHint(caught);
    if (json) io.stdout(toJsonLine(errorDocument(err)));
    else io.stderr(humanFailure(err, usage.text, io.program ?? DEFAULT_PROGRAM));
    return exitCodeFor(err);
  } finally {
    if (connecting !== null) {
      await (connecting as Promise<DtpClient>).then(
        (client) => client.close(),
        () => undefined,
      );
    }
  }
}
