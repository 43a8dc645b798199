/**
 * Real processes for end-to-end tests: the project's scripts started as
 * separate processes, their output captured, stopped by PID (never by name).
 */
import {
  execFileSync,
  spawn,
  spawnSync,
  type ChildProcess,
  type SpawnSyncReturns,
} from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { until } from './until.js';

export const ROOT = join(import.meta.dirname, '..', '..', '..');

let ticksPerSecond: number | null = null;

/** Clock ticks per second of the times in /proc/<pid>/stat. */
function clockTicksPerSecond(): number {
  if (ticksPerSecond === null) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

export class ScriptProcess {
  readonly name: string;
  readonly child: ChildProcess;
  #output = '';
  readonly exited: Promise<number | null>;

  private constructor(name: string, child: ChildProcess) {
    this.name = name;
    this.child = child;
    child.stdout?.on('data', (d: Buffer) => (this.#output += d.toString('utf8')));
    child.stderr?.on('data', (d: Buffer) => (this.#output += d.toString('utf8')));
    this.exited = once(child, 'exit').then(([code, signal]) =>
      signal === null ? (code as number) : null,
    );
  }

  /**
   * Starts `scripts/<script>` (or `script` itself when it is an absolute
   * path) with arguments; DTP_* variables of this process are not passed on.
   */
  static start(
    script: string,
    args: string[],
    options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
  ): ScriptProcess {
    const command = isAbsolute(script) ? script : join(ROOT, 'scripts', script);
    const child = spawn(command, args, {
      cwd: options.cwd ?? ROOT,
      env: cleanEnv(options.env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new ScriptProcess(script, child);
  }

  get pid(): number {
    return this.child.pid as number;
  }

  get output(): string {
    return this.#output;
  }

  /**
   * User + system CPU time the process (all its threads) has used so far, in
   * ms, from `/proc/<pid>/stat` (Linux; in steps of one clock tick, 10 ms).
   */
  cpuMs(): number {
    const stat = readFileSync(`/proc/${this.pid}/stat`, 'utf8');
    // After the command name (in parentheses) come field 3 onwards: utime
    // and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1_000) / clockTicksPerSecond();
  }

  /** Resident memory of the process now, in MiB, from `/proc/<pid>/status` (Linux). */
  rssMb(): number {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
    if (kib === undefined) throw new Error(`no VmRSS for pid ${this.pid}`);
    return Number(kib) / 1024;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Waits until the output matches; returns the match. */
  async waitForOutput(pattern: RegExp, timeoutMs = 20_000): Promise<RegExpMatchArray> {
    return until(
      () => {
        const match = this.#output.match(pattern);
        if (match === null && !this.running)
          throw new Error(`${this.name} exited; output:\n${this.#output}`);
        return match;
      },
      { timeoutMs, intervalMs: 20, what: `${this.name} output ${pattern}` },
    );
  }

  signal(signal: NodeJS.Signals): void {
    if (this.running) process.kill(this.pid, signal);
  }

  /** SIGTERM (after SIGCONT), then SIGKILL if it is still running after `graceMs`. */
  async stop(graceMs = 5_000): Promise<number | null> {
    if (this.running) {
      this.signal('SIGCONT');
      this.signal('SIGTERM');
      const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
      try {
        return await this.exited;
      } finally {
        clearTimeout(timer);
      }
    }
    return this.exited;
  }

  async kill(): Promise<void> {
    this.signal('SIGCONT');
    this.signal('SIGKILL');
    await this.exited;
  }
}

/** This process's environment without its DTP_* variables, plus `extra`. */
export function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DTP_')) env[k] = v;
  return { ...env, ...extra };
}

/**
 * A command line run by bash in a process group of its own, as a document
 * shows it (a server, or `npx`, which starts the program as its child): the
 * whole group is signalled together, by the group's PID.
 */
export class ShellProcess {
  readonly line: string;
  readonly child: ChildProcess;
  #output = '';
  readonly exited: Promise<number | null>;
  /** Resolves once its output streams are closed too. */
  readonly closed: Promise<unknown>;

  private constructor(line: string, child: ChildProcess) {
    this.line = line;
    this.child = child;
    this.closed = once(child, 'close').catch(() => undefined);
    child.stdout?.on('data', (d: Buffer) => (this.#output += d.toString('utf8')));
    child.stderr?.on('data', (d: Buffer) => (this.#output += d.toString('utf8')));
    this.exited = once(child, 'exit').then(([code, signal]) =>
      signal === null ? (code as number) : null,
    );
  }

  /** Starts `bash -c line` in `cwd`; DTP_* variables of this process are not passed on. */
  static start(line: string, options: { cwd: string; env?: NodeJS.ProcessEnv }): ShellProcess {
    const child = spawn('bash', ['-c', line], {
      cwd: options.cwd,
      env: cleanEnv(options.env),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new ShellProcess(line, child);
  }

  get output(): string {
    return this.#output;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Waits until the output matches; returns the match. Fails at once if the shell ends first. */
  async waitForOutput(pattern: RegExp, timeoutMs = 60_000): Promise<RegExpMatchArray> {
    const seen = await until(() => this.#output.match(pattern) ?? (this.running ? null : 'ended'), {
      timeoutMs,
      intervalMs: 20,
      what: `\`${this.line}\` to print ${String(pattern)}`,
    }).catch((err: unknown) => {
      throw new Error(
        `${err instanceof Error ? err.message : String(err)}; output:\n${this.#output}`,
        { cause: err },
      );
    });
    if (seen !== 'ended') return seen;
    await this.closed;
    const late = this.#output.match(pattern);
    if (late !== null) return late;
    const code = String(await this.exited);
    throw new Error(
      `\`${this.line}\` ended (${code}) before printing ${String(pattern)}; output:\n${this.#output}`,
    );
  }

  #signalGroup(signal: NodeJS.Signals): void {
    try {
      if (this.child.pid !== undefined) process.kill(-this.child.pid, signal);
    } catch {
      // The group is gone already.
    }
  }

  /** SIGTERM to the group, SIGKILL after `graceMs`; then SIGKILL to what is left of it. */
  async stop(graceMs = 10_000): Promise<number | null> {
    if (this.running) {
      this.#signalGroup('SIGTERM');
      const timer = setTimeout(() => this.#signalGroup('SIGKILL'), graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    this.#signalGroup('SIGKILL');
    return this.exited;
  }
}

/** What a command line run to its end printed, and how it ended. */
export interface LineResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `bash -e -c line` in `cwd` to its end (asynchronously, so the output of
 * servers this process started keeps being read meanwhile); killed after
 * `timeoutMs`. DTP_* variables of this process are not passed on.
 */
export async function runLine(
  line: string,
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<LineResult> {
  const child = spawn('bash', ['-e', '-c', line], {
    cwd: options.cwd,
    env: cleanEnv(options.env),
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: options.timeoutMs ?? 120_000,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const [code] = (await once(child, 'close')) as [number | null];
  return { status: code, stdout, stderr };
}

/** How to launch a coordinator: `scripts/<script> <...prefix> <flags>` in `cwd`. */
export interface CoordinatorLaunch {
  /** Default `coordinator.sh`. */
  script?: string;
  /** Arguments before the flags, e.g. the role of `docker-entrypoint.sh`. */
  prefix?: string[];
  /** Working directory (default the repository root). */
  cwd?: string;
  /** Extra environment (DTP_* variables of the test process are never passed on). */
  env?: NodeJS.ProcessEnv;
}

/** Starts a coordinator on free ports and returns it with the ports it logged. */
export async function startCoordinatorProcess(
  args: string[],
  ports: { workerPort: number; clientPort: number } = { workerPort: 0, clientPort: 0 },
  launch: CoordinatorLaunch = {},
): Promise<{ proc: ScriptProcess; workerPort: number; clientPort: number }> {
  const script = launch.script ?? 'coordinator.sh';
  const proc = ScriptProcess.start(
    script,
    [
      ...(launch.prefix ?? []),
      '--bind-host',
      '127.0.0.1',
      '--worker-port',
      String(ports.workerPort),
      '--client-port',
      String(ports.clientPort),
      ...args,
    ],
    { cwd: launch.cwd, env: launch.env },
  );
  // Either log format: `workerPort=1 clientPort=2` or `"workerPort":1,"clientPort":2`.
  const match = await proc
    .waitForOutput(/workerPort"?[=:](\d+)[ ,]"?clientPort"?[=:](\d+)/)
    .catch(async (err: unknown) => {
      await proc.kill();
      throw err;
    });
  return { proc, workerPort: Number(match[1]), clientPort: Number(match[2]) };
}

/**
 * `scripts/worker.sh` on 127.0.0.1 with a 100 ms heartbeat, loading the
 * task modules given, in `cwd`.
 */
export function startWorkerProcess(
  workerPort: number,
  id: string,
  tasks: string,
  cwd: string,
): ScriptProcess {
  return ScriptProcess.start(
    'worker.sh',
    [
      ...['--coordinator-host', '127.0.0.1', '--coordinator-port', String(workerPort)],
      ...['--id', id, '--heartbeat-interval-millis', '100', '--tasks', tasks],
    ],
    { cwd },
  );
}

/** Runs `scripts/client.sh` against 127.0.0.1:`clientPort`, at most 30 s. */
export function runClient(clientPort: number, ...args: string[]): SpawnSyncReturns<string> {
  return spawnSync(
    join(ROOT, 'scripts', 'client.sh'),
    [...args, '--host', '127.0.0.1', '--port', String(clientPort)],
    { encoding: 'utf8', timeout: 30_000 },
  );
}
