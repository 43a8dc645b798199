/**
 * What subscribers to job events cost: the `default` workload of the
 * side-by-side harness (SHA256 jobs of a short text, 4 producer connections
 * with one job in flight each, 3 workers × 4, completions pushed back by
 * WAIT_JOB), run by `client.sh bench` as a process of its own, once alone
 * and once beside 100 subscribers to every job's events (`client.events()`,
 * each on its connection, all in this process, reading everything).
 * Coordinator and workers are processes; each run gets a fresh database.
 */
import { spawn } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { DtpClient } from '../src/client/index.js';
import { until } from '../test/helpers/until.js';
import { HOST, runBenchCli, startCluster } from './harness.js';

export interface SubscriberRun {
  subscribers: number;
  jobsPerSec: number;
  e2eP50Ms: number;
  /** CPU time of the coordinator process per job of the bench run (its warm-up included), ms. */
  coordinatorCpuMsPerJob: number;
  /** Events the median subscriber received. */
  eventsPerSubscriber: number;
  /** Stretches of events some subscriber missed (it fell behind). */
  gaps: number;
  /**
   * CPU the subscribers used during the bench run, in cores (this process's
   * CPU time ÷ the run's wall time; it runs nothing else meanwhile).
   */
  subscriberCores: number;
}

/** Subscribers that count what they receive, until `stop()`. */
export async function startSubscribers(client: DtpClient, count: number) {
  const abort = new AbortController();
  // Every subscriber listens on the one signal that ends them all.
  setMaxListeners(count + 10, abort.signal);
  const seen = new Array<number>(count).fill(0);
  let gaps = 0;
  const loops = seen.map(async (_, i) => {
    const options = { signal: abort.signal, onGap: () => gaps++ };
    for await (const _event of client.events({}, options)) seen[i] = (seen[i] ?? 0) + 1;
  });
  // Every subscription is in place once each has seen a probe job's events.
  await until(
    async () => {
      if (seen.every((n) => n > 0)) return true;
      await client.submit('SHA256', { text: 'probe' });
      return false;
    },
    { timeoutMs: 60_000, intervalMs: 200, what: `${count} subscriptions` },
  );
  const before = [...seen];
  return {
    gaps: () => gaps,
    /** Events each received since it was ready. */
    received: () => seen.map((n, i) => n - (before[i] ?? 0)),
    stop: async () => {
      abort.abort();
      await Promise.allSettled(loops);
    },
  };
}

/** Where the subscribers run: nowhere, in this process, or in a process of their own at nice 19. */
export type SubscriberPlace = 'none' | 'here' | 'niced';

/** What a subscriber process reports at its end (bench/event-subscribers.ts). */
export interface SubscriberReport {
  received: number[];
  gaps: number;
  cpuMs: number;
}

/**
 * The subscribers in a process of their own at the lowest priority (`nice
 * -n 19`): they get what CPU the workload leaves, so the workload's
 * throughput shows what serving them costs the coordinator, apart from what
 * decoding costs them. Resolves once every subscription has seen an event.
 */
async function startNicedSubscribers(port: number, count: number) {
  const child = spawn(
    'nice',
    [
      ...['-n', '19', process.execPath, join(import.meta.dirname, 'event-subscribers.js')],
      ...['--port', String(port), '--count', String(count)],
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout });
  const next = (): Promise<string> =>
    new Promise((resolve, reject) => {
      lines.once('line', resolve);
      child.once('exit', (code) => reject(new Error(`event-subscribers exited with ${code}`)));
    });
  const ready = await next();
  if (ready !== 'ready') throw new Error(`event-subscribers said ${ready}`);
  return {
    /** Ends the subscribers (their stdin closes) and returns their report. */
    stop: async (): Promise<SubscriberReport> => {
      const report = next();
      child.stdin.end();
      return JSON.parse(await report) as SubscriberReport;
    },
    /** Ends the process at once if it is still there (the run failed before `stop`). */
    kill: (): void => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

export async function subscriberRun(
  dir: string,
  subscribers: number,
  jobs: number,
  rep: number,
  place: SubscriberPlace = subscribers === 0 ? 'none' : 'here',
): Promise<SubscriberRun> {
  const cluster = await startCluster(
    ['--database', `${dir}/subscribers-${subscribers}-${place}-${rep}.db`],
    3,
    4,
  );
  const client = await DtpClient.connect({ host: HOST, port: cluster.clientPort });
  let niced: Awaited<ReturnType<typeof startNicedSubscribers>> | null = null;
  try {
    const subs = place === 'here' ? await startSubscribers(client, subscribers) : null;
    if (place === 'niced') niced = await startNicedSubscribers(cluster.clientPort, subscribers);
    const cpuBeforeMs = cluster.coordinator.cpuMs();
    const ownCpu = process.cpuUsage();
    const wallStart = performance.now();
    const r = await runBenchCli(cluster.clientPort, [
      ...['--task', 'sha256', '--jobs', String(jobs), '--warmup', String(Math.min(jobs, 500))],
      ...['--concurrency', '4', '--in-flight', '1'],
    ]);
    const cpuMs = cluster.coordinator.cpuMs() - cpuBeforeMs;
    const own = process.cpuUsage(ownCpu);
    const wallMs = performance.now() - wallStart;
    let subscriberCores = (own.user + own.system) / 1_000 / wallMs;
    let received = subs?.received() ?? [];
    let gaps = subs?.gaps() ?? 0;
    await subs?.stop();
    if (niced !== null) {
      // Its CPU over the whole run and the short wind-down: an upper bound for the run's.
      const report = await niced.stop();
      received = report.received;
      gaps = report.gaps;
      subscriberCores = report.cpuMs / wallMs;
    }
    const sorted = received.sort((a, b) => a - b);
    return {
      subscribers,
      jobsPerSec: r.throughputJobsPerSec as number,
      e2eP50Ms: (r.endToEndMillis as { p50: number }).p50,
      coordinatorCpuMsPerJob: cpuMs / (jobs + Math.min(jobs, 500)),
      eventsPerSubscriber: sorted[Math.floor(sorted.length / 2)] ?? 0,
      gaps,
      subscriberCores,
    };
  } finally {
    niced?.kill();
    await client.close();
    await cluster.stop();
  }
}
