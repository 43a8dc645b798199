/**
 * The client CLI run in-process against one coordinator port, as the tests
 * of its commands use it: no colour, not interactive, an empty environment,
 * its output collected.
 */
import { runClientCli } from '../../src/cli/client-cli.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `client.sh <argv> --host 127.0.0.1 --port <port>`; `readInput` stands for files and stdin. */
export async function runCliOn(
  port: number,
  argv: readonly string[],
  readInput: (path: string) => Promise<string> = () => Promise.resolve('{}'),
): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await runClientCli([...argv, '--host', '127.0.0.1', '--port', String(port)], {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    env: {},
    color: false,
    interactive: false,
    readInput,
  });
  return { code, stdout, stderr };
}
