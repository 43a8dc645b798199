/**
 * Whether the npm registry can be reached, asked the way npm itself would
 * reach it: `npm ping` reads the registry, proxy and certificate settings of
 * .npmrc and npm_config_* variables. One try, a few seconds at most, so a
 * machine without the registry learns it at once instead of through an
 * install that waits minutes on every request.
 */
import { spawnSync } from 'node:child_process';

/** How long npm waits for the registry's answer (one try, no retries). */
export const REGISTRY_PING_TIMEOUT_MS = 5_000;
/** npm's own start-up on a busy machine, on top of that; then it is killed. */
const PING_STARTUP_ALLOWANCE_MS = 10_000;

/** Null when the registry answers `npm ping`; otherwise why not, for a skip message. */
export function registryUnreachable(env: NodeJS.ProcessEnv = process.env): string | null {
  const ping = spawnSync(
    'npm',
    ['ping', '--fetch-retries=0', `--fetch-timeout=${REGISTRY_PING_TIMEOUT_MS}`],
    {
      env,
      encoding: 'utf8',
      timeout: REGISTRY_PING_TIMEOUT_MS + PING_STARTUP_ALLOWANCE_MS,
      killSignal: 'SIGKILL',
    },
  );
  if (ping.status === 0) return null;
  const output = `${ping.stdout ?? ''}\n${ping.stderr ?? ''}`;
  const registry = /PING (\S+)/.exec(output)?.[1] ?? "npm's configured registry";
  const code = /npm (?:error|ERR!) code (\S+)/.exec(output)?.[1];
  const why =
    ping.error !== undefined
      ? `npm ping did not end within ${REGISTRY_PING_TIMEOUT_MS + PING_STARTUP_ALLOWANCE_MS} ms`
      : `npm ping failed${code === undefined ? '' : ` with ${code}`}`;
  return `the npm registry ${registry} is out of reach (${why})`;
}
