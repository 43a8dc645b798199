/**
 * The name a command-line program gives itself in its usage text and its
 * errors ("Run `<name> --help` for usage"): the name it was started by.
 *
 * - The wrappers that start node (scripts/*.sh, scripts/docker-entrypoint.sh,
 *   the installed commands in bin/) say who they are in
 *   {@link PROGRAM_NAME_VARIABLE}: `coordinator.sh`, `docker-entrypoint.sh
 *   worker`, `dtp-coordinator`.
 * - Without it, node ran the compiled entry point itself: `node <path>`, the
 *   path relative to the working directory when it lies below it.
 *
 * The variable is read once and removed from the environment, so that what
 * the program starts (task threads, a child process) does not inherit it.
 */
import { isAbsolute, relative } from 'node:path';

/** Set by the wrappers to the name they were started by. */
export const PROGRAM_NAME_VARIABLE = 'DTP_PROGRAM_NAME';

/** Where the name comes from; the defaults are this process's. */
export interface ProgramNameSource {
  env: NodeJS.ProcessEnv;
  /** The script node was given (`process.argv[1]`). */
  script: string | undefined;
  cwd: string;
}

/** The name, from the wrapper's variable or from the script node runs. */
export function programNameOf(source: ProgramNameSource, fallback: string): string {
  const named = (source.env[PROGRAM_NAME_VARIABLE] ?? '').trim();
  if (named !== '') return named;
  if (source.script === undefined || source.script === '') return fallback;
  const below = relative(source.cwd, source.script);
  const shown =
    below !== '' && !below.startsWith('..') && !isAbsolute(below) ? below : source.script;
  return `node ${shown}`;
}

/** This process's program name; takes the variable out of `process.env`. */
export function takeProgramName(fallback: string): string {
  const name = programNameOf(
    { env: process.env, script: process.argv[1], cwd: process.cwd() },
    fallback,
  );
  delete process.env[PROGRAM_NAME_VARIABLE];
  return name;
}
