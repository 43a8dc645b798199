/** Entry point of `scripts/client.sh <command> [args] [flags]` (see client-cli.ts). */
import { runClientCli } from './client-cli.js';
import { takeProgramName } from './program-name.js';

const program = takeProgramName('client.sh');

process.exitCode = await runClientCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
  color: process.stdout.isTTY === true && (process.env.NO_COLOR ?? '') === '',
  interactive: process.stdout.isTTY === true,
  program,
});
