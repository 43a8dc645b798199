/**
 * Sharded coordinators against one: a private PostgreSQL, then on it in
 * turn one unsharded coordinator, and clusters of 2 and 3 coordinators
 * with 16 shards, each run through the real scripts as processes with the
 * same two workers and the same load (SHA256 jobs spread round-robin over
 * 16 queues, submitted through every coordinator's client port).
 *
 * Measured per run: throughput; CPU per job of each coordinator, of the
 * workers and of PostgreSQL (the postmaster and its backends, from /proc,
 * those that exited included); and, for the clusters, the takeover time of
 * each shard of a coordinator killed with SIGKILL (from the kill until
 * LIST_SHARDS names a live leader of that shard again).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { DtpClient } from '../src/client/index.js';
import { ROOT, ScriptProcess } from '../test/helpers/processes.js';
import { until } from '../test/helpers/until.js';
import { HOST, startQuietCoordinator } from './harness.js';
import { promisify } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';
import { execFile } from 'node:child_process';

export const SHARDS = 16;
const QUEUES = 16;
/**
 * The lease (the defaults: a busy machine must not move shards in the middle
 * of a measurement) and how long the coordinators' CPU is watched with no
 * load; a smoke run, whose figures mean nothing, takes shorter ones.
 */
export interface ShardedTimings {
  leaseTtlMs: number;
  idleMs: number;
}

export const MEASURED_TIMINGS: ShardedTimings = { leaseTtlMs: 5_000, idleMs: 5_000 };
export const SMOKE_TIMINGS: ShardedTimings = { leaseTtlMs: 1_500, idleMs: 500 };

export interface ShardedRun {
  /** 0 = one unsharded coordinator. */
  coordinators: number;
  jobs: number;
  jobsPerSec: number;
  /** CPU µs per job of each coordinator. */
  coordinatorUs: number[];
  workersUs: number;
  postgresUs: number;
  /** Per shard of the killed coordinator, ms from SIGKILL to a new live leader (clusters only). */
  takeoverMs: number[];
  /** PostgreSQL transactions the coordinators committed, per job (from their /metrics). */
  commitsPerJob: number;
  /** Shards' parts of those transactions (calls of a shard's commit_batch), per job. */
  partsPerJob: number;
  /** CPU ms per second of each coordinator with the workers connected and no load. */
  idleMsPerSec: number[];
}

/** A private PostgreSQL for the run; `stop` removes it. */
export function startPostgres(): { url: string; dir: string; stop: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'dtp-bench-pg-'));
  const script = join(ROOT, 'scripts', 'pg-cluster.sh');
  const started = spawnSync(script, ['start', dir], { encoding: 'utf8' });
  if (started.status !== 0) throw new Error(`no PostgreSQL for the benchmark: ${started.stderr}`);
  const url = started.stdout.trim().split('\n').at(-1) as string;
  return { url, dir, stop: () => void spawnSync(script, ['stop', dir]) };
}

/** CPU ms of the postmaster of `dataDir` and all its children, the reaped ones included. */
function postgresCpuMs(dataDir: string): number {
  const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const ticks =
    Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  const statOf = (p: number): string[] | null => {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    } catch {
      return null;
    }
  };
  const own = statOf(pid);
  if (own === null) return 0;
  // utime, stime, cutime, cstime: fields 14..17 (11..14 after the name).
  let total = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
  for (const entry of spawnSync('ls', ['/proc'], { encoding: 'utf8' }).stdout.split('\n')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statOf(Number(entry));
    if (fields !== null && Number(fields[1]) === pid)
      total += Number(fields[11]) + Number(fields[12]);
  }
  return (total * 1000) / ticks;
}

async function freshDatabase(baseUrl: string): Promise<string> {
  const name = `bench_${Date.now().toString(36)}_${Math.floor(performance.now())}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

interface Node {
  proc: ScriptProcess;
  workerPort: number;
  clientPort: number;
  /** Read once the load is done (commit counts). */
  httpPort: number | null;
}

async function startNode(url: string, shards: number, timings: ShardedTimings): Promise<Node> {
  const lease = [
    ...['--lease-ttl-millis', String(timings.leaseTtlMs)],
    ...['--lease-renew-interval-millis', String(timings.leaseTtlMs / 5)],
  ];
  return startQuietCoordinator(
    [...['--database', url, ...lease], ...(shards > 1 ? ['--shards', String(shards)] : [])],
    true,
  );
}

/** The value of one series without labels in a Prometheus text exposition (0 when absent). */
function sampleOf(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.slice(name.length + 1));
}

/** Transactions and shards' parts a coordinator committed so far, from its /metrics. */
async function commitCounts(node: Node): Promise<{ commits: number; parts: number }> {
  const response = await fetch(`http://${HOST}:${node.httpPort}/metrics`);
  const text = await response.text();
  const sharded = text.includes('dtp_shard_commits_total');
  if (!sharded) {
    const commits = sampleOf(text, 'dtp_store_commit_seconds_count');
    return { commits, parts: commits };
  }
  return {
    commits: sampleOf(text, 'dtp_shard_commits_total'),
    parts: sampleOf(text, 'dtp_shard_commit_parts_total'),
  };
}

/** Every shard led by a live coordinator; with several, each leading its share. */
async function sharedOut(client: DtpClient, nodes: number): Promise<void> {
  await until(
    async () => {
      const map = await client.shards();
      if (map.shards.some((s) => s.leader === null)) return false;
      const counts = map.coordinators.filter((c) => c.shards > 0).map((c) => c.shards);
      return counts.length === nodes && Math.max(...counts) - Math.min(...counts) <= 1;
    },
    { timeoutMs: 120_000, intervalMs: 100, what: 'the shards shared out' },
  );
}

export async function shardedRun(
  postgres: { url: string; dir: string },
  coordinators: number,
  jobs: number,
  timings: ShardedTimings = MEASURED_TIMINGS,
): Promise<ShardedRun> {
  const url = await freshDatabase(postgres.url);
  const shards = coordinators === 0 ? 1 : SHARDS;
  const nodes: Node[] = [];
  const workers: ScriptProcess[] = [];
  try {
    for (let i = 0; i < Math.max(coordinators, 1); i++)
      nodes.push(await startNode(url, shards, timings));
    const hosts = nodes.map((n) => `${HOST}:${n.clientPort}`).join(',');
    const client = await DtpClient.connect({ host: hosts, port: nodes[0]?.clientPort ?? 0 });
    try {
      if (coordinators > 0) await sharedOut(client, coordinators);
      for (let i = 1; i <= 2; i++) {
        workers.push(
          ScriptProcess.start('worker.sh', [
            ...['--coordinator-host', nodes.map((n) => `${HOST}:${n.workerPort}`).join(',')],
            ...['--id', `bench-${i}`, '--capacity', '8', '--log-level', 'warn'],
          ]),
        );
      }
      await until(async () => (await client.workers()).length === 2, {
        timeoutMs: 60_000,
        what: 'the workers',
      });
      // Idle: what the coordinators spend per second on their own (rounds, leases, polls).
      const idleBefore = nodes.map((n) => n.proc.cpuMs());
      await delay(timings.idleMs);
      const idleMsPerSec = nodes.map(
        (n, i) => ((n.proc.cpuMs() - (idleBefore[i] ?? 0)) * 1000) / timings.idleMs,
      );
      const cpuBefore = nodes.map((n) => n.proc.cpuMs());
      const workersBefore = workers.reduce((t, w) => t + w.cpuMs(), 0);
      const pgBefore = postgresCpuMs(join(postgres.dir, 'data'));
      const { stdout } = await promisify(execFile)(
        join(ROOT, 'scripts', 'client.sh'),
        [
          ...['bench', '--host', hosts, '--json', '--task', 'sha256'],
          ...['--jobs', String(jobs), '--warmup', String(Math.min(jobs, 500))],
          ...['--concurrency', '16', '--queues', String(QUEUES)],
        ],
        { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024, timeout: 600_000 },
      );
      const report = JSON.parse(stdout) as { throughputJobsPerSec: number; completed: number };
      if (report.completed !== jobs)
        throw new Error(`only ${report.completed} of ${jobs} jobs completed`);
      // Warmup jobs ran too: CPU is per job of all of them.
      const all = jobs + Math.min(jobs, 500);
      const us = (ms: number): number => Math.round((ms * 1000) / all);
      const run: ShardedRun = {
        coordinators,
        jobs,
        jobsPerSec: Math.round(report.throughputJobsPerSec),
        coordinatorUs: nodes.map((n, i) => us(n.proc.cpuMs() - (cpuBefore[i] ?? 0))),
        workersUs: us(workers.reduce((t, w) => t + w.cpuMs(), 0) - workersBefore),
        postgresUs: us(postgresCpuMs(join(postgres.dir, 'data')) - pgBefore),
        takeoverMs: [],
        commitsPerJob: 0,
        partsPerJob: 0,
        idleMsPerSec,
      };
      // Counted from the start (recovery's few commits included).
      const counts = await Promise.all(nodes.map((n) => commitCounts(n)));
      run.commitsPerJob = counts.reduce((t, c) => t + c.commits, 0) / all;
      run.partsPerJob = counts.reduce((t, c) => t + c.parts, 0) / all;
      if (coordinators >= 2) run.takeoverMs = await takeover(client, nodes);
      return run;
    } finally {
      await client.close();
    }
  } catch (err) {
    // What the coordinators said is the first thing to read when a run fails.
    for (const [i, n] of nodes.entries()) {
      process.stderr.write(`--- coordinator ${i + 1}:\n${n.proc.output.slice(-4_000)}\n`);
    }
    throw err;
  } finally {
    await Promise.all([...workers, ...nodes.map((n) => n.proc)].map((p) => p.stop(2_000)));
  }
}

/** Kills the last coordinator; per shard it led, ms until another leads it. */
async function takeover(client: DtpClient, nodes: Node[]): Promise<number[]> {
  const victim = nodes[nodes.length - 1] as Node;
  const address = `${HOST}:${victim.clientPort}`;
  const before = await client.shards();
  const orphans = new Set(before.shards.filter((s) => s.leader === address).map((s) => s.shard));
  const killedAt = performance.now();
  await victim.proc.kill();
  const times = new Map<number, number>();
  await until(
    async () => {
      const map = await client.shards().catch(() => null);
      for (const s of map?.shards ?? []) {
        if (
          orphans.has(s.shard) &&
          !times.has(s.shard) &&
          s.leader !== null &&
          s.leader !== address
        ) {
          times.set(s.shard, Math.round(performance.now() - killedAt));
        }
      }
      return times.size === orphans.size;
    },
    { timeoutMs: 60_000, intervalMs: 25, what: 'the shards of the killed coordinator taken over' },
  );
  return [...times.values()].sort((a, b) => a - b);
}
