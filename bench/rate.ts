/**
 * Rate-limit accuracy: a real coordinator (SQLite) and 3 workers × 8 slots
 * as processes, one queue limited to `max` starts per 1 s, and more instant
 * jobs (SHA256 of a short text) than the run can start. After `seconds`
 * seconds from the first start, the attempts' start times (each job's
 * `startedAtMillis`, coordinator clock) give the starts per second over the
 * run and the most starts in any sliding 1-s window `[t, t + 1 s)`.
 */
import { DtpClient } from '../src/client/index.js';
import type { JobSnapshot } from '../src/protocol/messages.js';
import type { CoreInput, Effect } from '../src/coordinator/core/types.js';
import { until } from '../test/helpers/until.js';
import { assignmentsIn, newCore, type Sent } from './queue-depth.js';
import { HOST, startCluster } from './harness.js';

export interface RateRun {
  /** Starts per second over the run (starts in [first, first + seconds) / seconds). */
  meanPerSec: number;
  /** Most starts in any half-open 1-s window within the run. */
  maxWindow: number;
  /** Starts counted in the run. */
  starts: number;
}

const QUEUE = 'rated';
const WINDOW_MS = 1_000;

/** Most start times in any window [t, t + width) (times sorted ascending). */
export function maxInWindow(times: readonly number[], width: number): number {
  let most = 0;
  let tail = 0;
  for (let head = 0; head < times.length; head++) {
    while ((times[head] as number) - (times[tail] as number) >= width) tail++;
    most = Math.max(most, head - tail + 1);
  }
  return most;
}

async function allJobs(client: DtpClient): Promise<JobSnapshot[]> {
  const jobs: JobSnapshot[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 1_000; page++) {
    const result = await client.listPage({
      queue: QUEUE,
      limit: 5_000,
      ...(cursor !== undefined && { cursor }),
    });
    jobs.push(...result.jobs);
    if (result.nextCursor === null) break;
    cursor = result.nextCursor;
  }
  return jobs;
}

export async function rateRun(dir: string, max: number, seconds: number): Promise<RateRun> {
  const jobs = Math.ceil(max * seconds * 1.2) + 100;
  const cluster = await startCluster(
    [...['--database', `${dir}/rate-${Date.now()}.db`], ...['--max-active-jobs', String(jobs * 2)]],
    3,
    8,
  );
  const client = await DtpClient.connect({ host: HOST, port: cluster.clientPort });
  try {
    await client.queues.set(QUEUE, { rateLimit: { max, intervalMillis: WINDOW_MS } });
    for (let sent = 0; sent < jobs; sent += 1_000) {
      const n = Math.min(1_000, jobs - sent);
      await client.submitMany(
        Array.from({ length: n }, (_, i) => ({
          taskType: 'SHA256',
          payload: { text: `r${sent + i}` },
          queue: QUEUE,
        })),
      );
    }
    // Until `seconds` past the first start (polled; bounded).
    let firstMs = 0;
    await until(
      async () => {
        const started = (await allJobs(client))
          .map((j) => j.startedAtMillis)
          .filter((t): t is number => typeof t === 'number');
        if (started.length === 0) return false;
        firstMs = Math.min(...started);
        const latest = Math.max(...started);
        return latest >= firstMs + seconds * 1_000 + 500;
      },
      { timeoutMs: (seconds + 120) * 1_000, intervalMs: 500, what: 'the rated run' },
    );
    const times = (await allJobs(client))
      .map((j) => j.startedAtMillis)
      .filter(
        (t): t is number => typeof t === 'number' && t >= firstMs && t < firstMs + seconds * 1_000,
      )
      .sort((a, b) => a - b);
    return {
      meanPerSec: times.length / seconds,
      maxWindow: maxInWindow(times, WINDOW_MS),
      starts: times.length,
    };
  } finally {
    await client.close();
    await cluster.stop();
  }
}

/**
 * The same rate on the pure core, with simulated time: 3 workers × 8 slots
 * whose results arrive 1 ms after each assignment, the core woken exactly
 * when it asks (`wakeAt`). What the scheduler itself allows, without the
 * processes, sockets, timers and store of a real run.
 */
export function coreRateRun(max: number, seconds: number): RateRun {
  const { commit, handle, now, advanceTo } = newCore(max * seconds * 2 + 100);
  let clock = 0;
  const step = (input: CoreInput): Effect[] => {
    const effects = handle(input);
    commit();
    return effects;
  };
  let wake: number | null = null;
  const starts: number[] = [];
  let t0 = 0;
  const assigned = (effects: Effect[]): Sent[] => {
    for (const e of effects) if (e.kind === 'wakeAt') wake = e.atMs;
    const sent = assignmentsIn(effects);
    // Each was assigned (started) at the instant of the input that made it.
    for (let i = 0; i < sent.length; i++) starts.push(now() - t0);
    return sent;
  };
  step({
    kind: 'clientRequest',
    connId: 1,
    requestId: 0,
    msg: { type: 'SET_QUEUE', name: QUEUE, rateLimit: { max, intervalMillis: WINDOW_MS } },
  });
  for (let i = 1; i <= Math.ceil(max * seconds * 1.2); i++) {
    const msg = {
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: `r${i}` },
      maxAttempts: null,
      idempotencyKey: null,
      priority: null,
      queue: QUEUE,
    } as const;
    handle({ kind: 'clientRequest', connId: 1, requestId: i, msg });
    if (i % 1_000 === 0) commit();
  }
  commit();
  const pending: Sent[] = [];
  t0 = now() + 1;
  for (let w = 0; w < 3; w++) {
    const msg = {
      type: 'WORKER_REGISTER',
      workerId: `w${w}`,
      capacity: 8,
      taskTypes: null,
    } as const;
    pending.push(...assigned(step({ kind: 'workerMessage', connId: 100 + w, msg })));
  }
  for (let guard = 0; clock < seconds * 1_000 && guard < 10_000_000; guard++) {
    const next = pending.shift();
    if (next !== undefined) {
      const msg = {
        type: 'TASK_RESULT',
        workerId: `w${next.connId - 100}`,
        jobId: next.assign.jobId,
        attemptId: next.assign.attemptId,
        success: true,
        result: 'x',
        error: null,
      } as const;
      pending.push(...assigned(step({ kind: 'workerMessage', connId: next.connId, msg })));
      clock = now() - t0;
      continue;
    }
    const at: number | null = wake;
    wake = null;
    if (at === null) break;
    advanceTo(at);
    pending.push(...assigned(step({ kind: 'wake' })));
    clock = now() - t0;
  }
  const times = starts.filter((t) => t < seconds * 1_000);
  return {
    meanPerSec: times.length / seconds,
    maxWindow: maxInWindow(times, WINDOW_MS),
    starts: times.length,
  };
}
