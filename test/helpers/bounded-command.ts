/**
 * Commands run to their end in a process group of their own, each under its
 * own time limit, for tests that run long tools (npm, compilers, bash lines):
 * the whole group is killed by its PID when the limit passes, when the
 * command's leader ends (whatever it left running goes with it), when a test
 * calls `killCommands()` (its after hook: the test runner's own timeout
 * cancels a test but cannot stop what the test started), and when this
 * process exits or is terminated. Folders made with `commandTempDir()` are
 * removed on the same exits. Nothing started here outlives the test file.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** How a bounded command ended, and what it printed. */
export interface CommandResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Whether it was killed for passing its time limit. */
  timedOut: boolean;
}

export interface CommandOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Killed (the whole group) after this long. */
  timeoutMs: number;
}

/** Leaders of the process groups still running (each group's id is its leader's PID). */
const liveGroups = new Set<number>();
/** Folders to remove however this process ends. */
const tempDirs = new Set<string>();

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // The group has ended already.
  }
}

/** Kills every group a bounded command started and has not reaped yet. */
export function killCommands(): void {
  for (const pid of liveGroups) killGroup(pid);
}

function cleanUpNow(): void {
  killCommands();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

let exitHooked = false;

/** On exit and on a terminating signal: the groups killed and the folders removed first. */
function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.on('exit', cleanUpNow);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      cleanUpNow();
      // Alone with the signal: end as its default action would.
      if (process.listenerCount(signal) === 1) {
        process.removeListener(signal, onSignal);
        process.kill(process.pid, signal);
      }
    };
    process.on(signal, onSignal);
  }
}

/** A fresh folder under the system's temporary folder, removed by `remove()` or at exit. */
export function commandTempDir(prefix: string): { dir: string; remove: () => void } {
  hookExit();
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.add(dir);
  return {
    dir,
    remove: () => {
      tempDirs.delete(dir);
      rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
    },
  };
}

/** Runs `command args` to its end in a new process group, bounded by `timeoutMs`. */
export async function runCommand(
  command: string,
  args: readonly string[],
  options: CommandOptions,
): Promise<CommandResult> {
  hookExit();
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const closed = once(child, 'close') as Promise<[number | null, NodeJS.Signals | null]>;
  const pid = child.pid;
  if (pid === undefined) {
    // Not started (no such program): 'error' rejects `closed`.
    await closed;
    throw new Error(`${command} did not start`);
  }
  liveGroups.add(pid);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(pid);
  }, options.timeoutMs);
  // Once the leader has ended, what it left running holds its pipes open: kill it too.
  child.once('exit', () => killGroup(pid));
  try {
    const [status, signal] = await closed;
    return { status, signal, stdout, stderr, timedOut };
  } finally {
    clearTimeout(timer);
    liveGroups.delete(pid);
  }
}

/**
 * The PIDs of the processes whose environment holds `name=value` (Linux,
 * /proc): a variable given to a command is inherited by everything it
 * starts, so this finds what a command left running, however far down.
 */
export function processesWithEnv(name: string, value: string): number[] {
  const needle = `${name}=${value}`;
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const vars = readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      if (vars.includes(needle)) found.push(Number(entry));
    } catch {
      // Ended meanwhile, or not ours to read.
    }
  }
  return found;
}
