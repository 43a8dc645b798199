/**
 * Shared pieces of the benchmarks: a coordinator and workers started through
 * the real scripts as separate processes (on 127.0.0.1, free ports), the
 * `bench` command run as a process with `--json`, and a machine description.
 */
import { execFile, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { cpus, totalmem } from 'node:os';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DtpClient } from '../src/client/index.js';
import { ROOT, ScriptProcess } from '../test/helpers/processes.js';
import { until } from '../test/helpers/until.js';

export const HOST = '127.0.0.1';

export interface Cluster {
  coordinator: ScriptProcess;
  workers: ScriptProcess[];
  workerPort: number;
  clientPort: number;
  stop(): Promise<void>;
}

/** A port that was free a moment ago (benchmarks only: there is a small race). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** `count` distinct ports that were free a moment ago (all held open while they are picked). */
export async function freePorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  try {
    return await Promise.all(
      servers.map(
        (server) =>
          new Promise<number>((resolve, reject) => {
            server.once('error', reject);
            server.listen(0, HOST, () => {
              const address = server.address();
              resolve(typeof address === 'object' && address !== null ? address.port : 0);
            });
          }),
      ),
    );
  } finally {
    await Promise.all(
      servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
    );
  }
}

/**
 * Starts a coordinator that logs only warnings (so logging does not distort
 * the measurement) and waits until its client port answers. With `http`,
 * it also gets an HTTP port (`/metrics`), distinct from the other two.
 */
export async function startQuietCoordinator(
  args: string[],
  http = false,
): Promise<{
  proc: ScriptProcess;
  workerPort: number;
  clientPort: number;
  httpPort: number | null;
}> {
  const [workerPort = 0, clientPort = 0, httpPort = null] = await freePorts(http ? 3 : 2);
  const proc = ScriptProcess.start('coordinator.sh', [
    ...[
      '--bind-host',
      HOST,
      '--worker-port',
      String(workerPort),
      '--client-port',
      String(clientPort),
    ],
    ...(httpPort === null ? [] : ['--http-port', String(httpPort)]),
    ...['--log-level', 'warn', ...args],
  ]);
  await until(
    async () => {
      if (!proc.running) throw new Error(`coordinator exited: ${proc.output}`);
      const client = await DtpClient.connect({ host: HOST, port: clientPort });
      await client.close();
      return true;
    },
    { timeoutMs: 120_000, intervalMs: 20, what: 'the coordinator' },
  );
  return { proc, workerPort, clientPort, httpPort };
}

/** Starts a coordinator with `coordinatorArgs` and `workers` workers of `capacity`. */
export async function startCluster(
  coordinatorArgs: string[],
  workers: number,
  capacity: number,
  workerArgs: string[] = [],
): Promise<Cluster> {
  const c = await startQuietCoordinator(coordinatorArgs);
  const procs: ScriptProcess[] = [];
  for (let i = 1; i <= workers; i++) {
    procs.push(
      ScriptProcess.start('worker.sh', [
        ...['--coordinator-host', HOST, '--coordinator-port', String(c.workerPort)],
        ...[
          '--id',
          `bench-${i}`,
          '--capacity',
          String(capacity),
          '--log-format',
          'json',
          ...workerArgs,
        ],
      ]),
    );
  }
  const client = await DtpClient.connect({ host: HOST, port: c.clientPort });
  try {
    await until(async () => (await client.workers()).length === workers, {
      timeoutMs: 30_000,
      what: 'workers',
    });
  } finally {
    await client.close();
  }
  return {
    coordinator: c.proc,
    workers: procs,
    workerPort: c.workerPort,
    clientPort: c.clientPort,
    stop: async () => {
      await Promise.all([...procs, c.proc].map((p) => p.stop()));
    },
  };
}

/**
 * Runs `client.sh bench ... --json` as a separate process and returns its
 * JSON document. Asynchronous on purpose: this process keeps draining the
 * coordinator's and workers' output pipes meanwhile.
 */
export async function runBenchCli(
  clientPort: number,
  args: string[],
): Promise<Record<string, unknown>> {
  const { stdout } = await promisify(execFile)(
    join(ROOT, 'scripts', 'client.sh'),
    ['bench', '--host', HOST, '--port', String(clientPort), '--json', ...args],
    { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024, timeout: 600_000 },
  );
  return JSON.parse(stdout) as Record<string, unknown>;
}

/** Resident memory of a process, in MiB. */
export function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return Math.round((kb / 1024) * 10) / 10;
}

/** One line about the machine, for the record. */
export function machine(): string {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const load = spawnSync('cat', ['/proc/loadavg'], { encoding: 'utf8' })
    .stdout.split(' ')
    .slice(0, 3)
    .join(' ');
  return `${cpus().length} × ${cpu}, ${Math.round(totalmem() / 2 ** 30)} GiB RAM, Node ${process.version}, load average ${load}`;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}
