/**
 * Entry point of `scripts/client.sh <command> [args] [flags]`.
 *
 * Picks the command, parses its flags (global flags may appear anywhere),
 * runs it and prints either the human text or exactly one JSON document.
 * Exit codes: 0 ok, 1 runtime failure or error reply, 2 usage, 3 rejected.
 */
import { DtpClient } from '../client/client.js';
import {
  COMMANDS,
  GLOBAL_FLAGS,
  SUBMIT_FLAGS,
  TASKS,
  allClientFlags,
  findCommand,
  findTask,
} from './client-commands.js';
import type { CommandOutput, CommandSpec } from './client-commands.js';
import { UsageError, envVarName, formatFlagHelp, parseFlags, scanPositionals } from './flags.js';
import { EXIT_CODES, errorDocument, exitCodeFor, formatErrorText, toJsonLine } from './output.js';
import type { ExitCode } from './output.js';

interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  env: NodeJS.ProcessEnv;
  /** stdout is a terminal and colour is not switched off. */
  color: boolean;
  /** stdout is a terminal (live progress is shown then, on stderr). */
  interactive: boolean;
}

type Outcome = { kind: 'help'; text: string } | ({ kind: 'done' } & CommandOutput);

const PROGRAM = 'client.sh';

function globalUsage(): string {
  const width = Math.max(...COMMANDS.map((c) => `${c.name} ${c.args.join(' ')}`.length)) + 2;
  const commands = COMMANDS.map(
    (c) => `  ${`${c.name} ${c.args.join(' ')}`.padEnd(width)}${c.summary}`,
  );
  const tasks = TASKS.map(
    (t) =>
      `  ${t.name} ${t.flags.map((f) => `--${f.name} <${f.type === 'int' ? 'n' : 'text'}>`).join(' ')}`,
  );
  return [
    `Usage: ${PROGRAM} <command> [args] [flags]`,
    '',
    'Commands:',
    ...commands,
    '',
    'Tasks (submit <task> <task flags>):',
    ...tasks,
    '',
    'Global flags:',
    formatFlagHelp(GLOBAL_FLAGS),
    '',
    `Run \`${PROGRAM} <command> --help\` for the flags of one command.`,
    'Exit codes: 0 ok, 1 failure or error reply, 2 usage error, 3 submission rejected.',
    '',
  ].join('\n');
}

/** `submit --help` before a task is named: every task with its own flags. */
function submitUsage(): string {
  return [
    `Usage: ${PROGRAM} submit <task> <task flags> [flags]`,
    '',
    'Tasks:',
    ...TASKS.flatMap((t) => [`  ${t.name} (${t.taskType})`, formatFlagHelp(t.flags, 4)]),
    '',
    'Flags:',
    formatFlagHelp([...SUBMIT_FLAGS, ...GLOBAL_FLAGS]),
    '',
  ].join('\n');
}

function commandUsage(command: CommandSpec, args: readonly string[]): string {
  if (command.name === 'submit' && args[0] === undefined) return submitUsage();
  const head =
    command.name === 'submit'
      ? `submit ${findTask(args[0]).name}`
      : `${command.name} ${command.args.join(' ')}`.trim();
  return [
    `Usage: ${PROGRAM} ${head} [flags]`,
    '',
    command.summary,
    '',
    'Flags:',
    formatFlagHelp([...command.flags(args), ...GLOBAL_FLAGS]),
    '',
  ].join('\n');
}

function wantsJson(argv: readonly string[], env: NodeJS.ProcessEnv): boolean {
  if (argv.includes('--json')) return true;
  const raw = (env[envVarName('json')] ?? '').trim().toLowerCase();
  return ['1', 'true', 'yes', 'on'].includes(raw);
}

async function dispatch(
  argv: readonly string[],
  io: CliIo,
  json: boolean,
  connect: (host: string, port: number) => Promise<DtpClient>,
): Promise<Outcome> {
  const wantsHelp = argv.includes('--help') || argv.includes('-h');
  const positionals = scanPositionals(argv, allClientFlags());
  const name = positionals[0];
  if (name === undefined) {
    if (wantsHelp) return { kind: 'help', text: globalUsage() };
    throw new UsageError('missing command', { showUsage: true });
  }
  const command = findCommand(name);
  const args = positionals.slice(1);
  if (wantsHelp) return { kind: 'help', text: commandUsage(command, args) };
  const specs = [...command.flags(args), ...GLOBAL_FLAGS];
  const parsed = parseFlags(argv, specs, { env: io.env, maxPositionals: 1 + command.args.length });
  if (parsed.positionals.length < 1 + command.args.length) {
    throw new UsageError(`missing ${command.args.join(' ')} for ${command.name}`);
  }
  const { values } = parsed;
  const output = await command.run({
    values,
    args: parsed.positionals.slice(1),
    client: () => connect(values.string('host'), values.int('port')),
    color: io.color && !json,
    note: (text) => {
      if (!json) io.stderr(text);
    },
    progress: io.interactive && !json ? (text) => io.stderr(text) : null,
  });
  return { kind: 'done', ...output };
}

function humanFailure(err: unknown): string {
  if (!(err instanceof UsageError)) return formatErrorText(err);
  if (err.showUsage) return `${globalUsage()}\n${formatErrorText(err)}`;
  return `${formatErrorText(err)}Run \`${PROGRAM} --help\` for usage.\n`;
}

/** Runs one command line; resolves with the exit code. */
async function runClientCli(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  // Decided before parsing, so that a usage error is reported as JSON too.
  const json = wantsJson(argv, io.env);
  let connecting: Promise<DtpClient> | null = null;
  const connect = (host: string, port: number): Promise<DtpClient> =>
    (connecting ??= DtpClient.connect({ host, port }));
  try {
    const outcome = await dispatch(argv, io, json, connect);
    if (outcome.kind === 'help') io.stdout(outcome.text);
    else io.stdout(json ? toJsonLine(outcome.json) : outcome.human);
    return EXIT_CODES.ok;
  } catch (err) {
    if (json) io.stdout(toJsonLine(errorDocument(err)));
    else io.stderr(humanFailure(err));
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

const exitCode = await runClientCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
  color: process.stdout.isTTY === true && (process.env.NO_COLOR ?? '') === '',
  interactive: process.stdout.isTTY === true,
});
process.exitCode = exitCode;
