/**
 * `client.sh bench`: a load generator that measures what one coordinator
 * sustains, including how it sheds load. It never retries a
 * rejection: a SUBMIT_REJECTED is counted, not hidden.
 *
 * The load loop. `--concurrency` lanes, each owning one connection (one
 * {@link DtpClient}), take job numbers from a shared counter until `--jobs`
 * are taken; for each, a lane sends SUBMIT_JOB and, once accepted, WAIT_JOB
 * (the coordinator pushes the reply the moment the job is terminal), then
 * takes the next number. So exactly `--concurrency` jobs are in flight and
 * a fast lane does more of the jobs than a slow one.
 *
 * Why one job in flight per connection by default: the client port answers
 * requests in the order they arrived (docs/PROTOCOL.md), so a second job pipelined
 * behind a pending WAIT_JOB would have its acknowledgement, and its own
 * completion, held back until the first job ended. Its latencies would
 * measure the queue on our side of the socket, not the coordinator.
 *
 * `--in-flight N` (N > 1) is for open-loop bursts such as the overload
 * experiment: each lane then keeps up to N jobs outstanding over two
 * connections, one carrying only SUBMIT_JOBs (so acks are never held behind
 * a wait) and one carrying only WAIT_JOBs. A wait reply can still be held
 * behind an earlier job's wait on the same connection; with FIFO scheduling
 * and equal task durations jobs end nearly in submission order, so that bias
 * is small, but it is there.
 *
 * Clocks: each latency starts right before SUBMIT_JOB is written (the client
 * writes synchronously) and ends when the reply is in hand: submit-ack at
 * JOB_SUBMITTED, end-to-end at the JOB_STATUS of a terminal state.
 * `--warmup` jobs run first through the same lanes and are not measured; the
 * measured phase starts after all of them have ended.
 */
import { randomBytes } from 'node:crypto';
import { MAX_TIMER_MS, tableProblem, type BoundsTable } from '../common/bounds.js';
import { MAX_PORT } from '../protocol/limits.js';
import { LocalErrorCode } from '../protocol/error-codes.js';
import { buildBenchReport } from '../client/bench-stats.js';
import type { BenchCounts, BenchReport, LatencySummary } from '../client/bench-stats.js';
import type { ConnectionSecurity } from '../client/connection.js';
import { DtpClient } from '../client/client.js';
import type { SubmitRequest } from '../client/client.js';
import { RemoteError, SubmitRejectedError, WaitTimeoutError } from '../client/errors.js';
import { DtpError } from '../protocol/errors.js';
import type { JobState, JsonObject } from '../protocol/messages.js';
import { BUILTIN_TASKS, builtinPayload } from '../protocol/task-types.js';
import { boundedFlag, type FlagSpec, type FlagValues } from './flags.js';
import { formatTable } from './output.js';

/** Tasks the bench can submit, by CLI name. */
export const BENCH_TASKS = ['sha256', 'sleep', 'prime-count'] as const;
export type BenchTask = (typeof BENCH_TASKS)[number];

/** Most jobs outstanding per lane (`--in-flight`). */
export const MAX_BENCH_IN_FLIGHT = 1_000;
/** Most connections (`--concurrency`). */
export const MAX_BENCH_CONCURRENCY = 1_024;
/** Most queues the jobs are spread over (`--queues`). */
export const MAX_BENCH_QUEUES = 1_024;
/** Most jobs per phase; bounds the memory held by latency samples. */
export const MAX_BENCH_JOBS = 1_000_000;
/** A SUBMIT_JOB unanswered this long ends the run: the coordinator is stuck. */
export const DEFAULT_SUBMIT_TIMEOUT_MS = 60_000;
/** Least time between two progress-bar redraws, in ms (at most ~10 per second). */
export const PROGRESS_INTERVAL_MS = 100;

/**
 * Inclusive bounds of the bench's own numeric settings (the flags take theirs
 * from here). A task's payload values are the coordinator's to judge: the
 * bench sends them as given, so a bad one shows as failed jobs.
 */
export const BENCH_BOUNDS: BoundsTable<Omit<BenchPlan, 'sleepMillis' | 'primeLimit'>> = {
  port: { min: 1, max: MAX_PORT },
  jobs: { min: 1, max: MAX_BENCH_JOBS },
  concurrency: { min: 1, max: MAX_BENCH_CONCURRENCY },
  warmup: { min: 0, max: MAX_BENCH_JOBS },
  inFlight: { min: 1, max: MAX_BENCH_IN_FLIGHT, optional: true },
  waitTimeoutMs: { min: 0, max: MAX_TIMER_MS },
  submitTimeoutMs: { min: 1, max: MAX_TIMER_MS, optional: true },
  queues: { min: 1, max: MAX_BENCH_QUEUES, optional: true },
};

export const BENCH_FLAGS: readonly FlagSpec[] = [
  boundedFlag('jobs', BENCH_BOUNDS.jobs, { default: 200, help: 'measured jobs' }),
  boundedFlag('concurrency', BENCH_BOUNDS.concurrency, {
    default: 4,
    help: 'connections, each with one job in flight',
  }),
  boundedFlag('warmup', BENCH_BOUNDS.warmup, { default: 25, help: 'unmeasured jobs run first' }),
  boundedFlag('in-flight', BENCH_BOUNDS.inFlight, {
    default: 1,
    help: 'jobs outstanding per connection (> 1: submits and waits on separate connections)',
  }),
  { name: 'task', type: 'enum', values: BENCH_TASKS, default: 'sha256', help: 'task to submit' },
  boundedFlag('queues', BENCH_BOUNDS.queues, {
    default: 1,
    help: 'spread the jobs round-robin over this many queues (bench-0, bench-1, …)',
  }),
  boundedFlag('sleep-millis', BUILTIN_TASKS.SLEEP.field, {
    default: 1_000,
    help: 'duration of each sleep task',
  }),
  boundedFlag('prime-limit', BUILTIN_TASKS.PRIME_COUNT.field, {
    default: 100_000,
    help: 'limit of each prime-count task',
  }),
  boundedFlag('wait-timeout-millis', BENCH_BOUNDS.waitTimeoutMs, {
    default: 600_000,
    help: 'a job not terminal this long after its ack counts as failed',
  }),
];

/** One bench run. */
export interface BenchPlan {
  host: string;
  port: number;
  /** Measured jobs, 1..1000000. */
  jobs: number;
  /** Connections, 1..1024 (fewer are opened when there are fewer jobs). */
  concurrency: number;
  /** Unmeasured jobs run first, >= 0. */
  warmup: number;
  /** Jobs outstanding per lane, 1..1000 (default 1). */
  inFlight?: number;
  task: BenchTask;
  /** Duration of each `sleep` task, in ms. */
  sleepMillis: number;
  /** `limit` of each `prime-count` task. */
  primeLimit: number;
  /** Per job, from its ack: not terminal by then = failed (timed out), in ms. */
  waitTimeoutMs: number;
  /** Bound on one submission's ack, in ms (default 60000); exceeding it ends the run. */
  submitTimeoutMs?: number;
  /** Jobs go round-robin into this many queues, `bench-0` … (default 1: the default queue). */
  queues?: number;
}

/** Where the bench is after each job. */
export interface BenchProgress {
  phase: 'warmup' | 'measure';
  done: number;
  total: number;
  completed: number;
  rejected: number;
  failed: number;
}

/** The part of {@link DtpClient} a lane uses. */
export type BenchClient = Pick<DtpClient, 'submit' | 'wait' | 'close'>;

export interface BenchDeps {
  /** Opens one connection (default: {@link DtpClient.connect}). */
  connect?: (host: string, port: number) => Promise<BenchClient>;
  /** Monotonic ms (default performance.now). */
  nowMs?: () => number;
  /** Told after every finished job, warmup included. */
  onProgress?: (progress: BenchProgress) => void;
}

/** The `--json` document: the documented fields plus what the run was. */
export interface BenchRunReport extends BenchReport {
  task: BenchTask;
  concurrency: number;
  connections: number;
  warmup: number;
}

/** How one submitted job ended, as a lane saw it. */
type JobOutcome =
  | { kind: 'rejected' }
  /** ERROR to the submission (ackMs null) or to the wait of an accepted job. */
  | { kind: 'error'; ackMs: number | null }
  | { kind: 'timedOut'; ackMs: number }
  | { kind: 'terminal'; state: JobState; ackMs: number; endToEndMs: number };

/** Counts and latency samples of one phase. */
class Tally {
  readonly counts: BenchCounts = {
    jobs: 0,
    accepted: 0,
    rejected: 0,
    completed: 0,
    failed: 0,
    errors: 0,
    timedOut: 0,
  };
  readonly submitAckMs: number[] = [];
  readonly endToEndMs: number[] = [];

  record(outcome: JobOutcome): void {
    const c = this.counts;
    c.jobs++;
    if (outcome.kind === 'rejected') {
      c.rejected++;
      return;
    }
    if (outcome.ackMs !== null) {
      c.accepted++;
      this.submitAckMs.push(outcome.ackMs);
    }
    if (outcome.kind === 'terminal') {
      this.endToEndMs.push(outcome.endToEndMs);
      if (outcome.state === 'COMPLETED') c.completed++;
      else c.failed++;
      return;
    }
    c.failed++;
    if (outcome.kind === 'error') c.errors++;
    else c.timedOut++;
  }
}

function validatePlan(plan: BenchPlan): void {
  const problem = tableProblem(plan, BENCH_BOUNDS, (key) => key);
  if (problem !== null) throw new RangeError(problem);
}

/** The submission of job `index` (`label`); sha256 texts are unique per run and job. */
function benchRequest(plan: BenchPlan, label: string, index: number): SubmitRequest {
  let payload: JsonObject;
  let task;
  switch (plan.task) {
    case 'sha256':
      task = BUILTIN_TASKS.SHA256;
      payload = builtinPayload(task, `bench ${label}`);
      break;
    case 'sleep':
      task = BUILTIN_TASKS.SLEEP;
      payload = builtinPayload(task, plan.sleepMillis);
      break;
    case 'prime-count':
      task = BUILTIN_TASKS.PRIME_COUNT;
      payload = builtinPayload(task, plan.primeLimit);
      break;
  }
  const taskType = task.taskType;
  const queues = plan.queues ?? 1;
  return {
    taskType,
    payload,
    maxAttempts: null,
    idempotencyKey: null,
    priority: null,
    ...(queues > 1 && { queue: `bench-${index % queues}` }),
  };
}

/** Settles like `promise`, or fails with `SUBMIT_TIMEOUT` after `timeoutMs`. */
async function withSubmitTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(
        new DtpError(LocalErrorCode.SubmitTimeout, `no reply to SUBMIT_JOB within ${timeoutMs} ms`),
      );
    }, timeoutMs);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

interface JobContext {
  plan: BenchPlan;
  nowMs: () => number;
}

/**
 * Submits one job (no retry) and waits for it by push. Rejections, ERROR
 * replies and wait timeouts are outcomes; anything else (a lost connection,
 * a stuck coordinator) is thrown and ends the run.
 */
async function runOneJob(lane: Lane, request: SubmitRequest, ctx: JobContext): Promise<JobOutcome> {
  const submitTimeoutMs = ctx.plan.submitTimeoutMs ?? DEFAULT_SUBMIT_TIMEOUT_MS;
  const sentMs = ctx.nowMs();
  let jobId: string;
  try {
    ({ jobId } = await withSubmitTimeout(
      lane.submitter.submit(request, { retries: 0 }),
      submitTimeoutMs,
    ));
  } catch (err) {
    if (err instanceof SubmitRejectedError) return { kind: 'rejected' };
    if (err instanceof RemoteError) return { kind: 'error', ackMs: null };
    throw err;
  }
  const ackMs = ctx.nowMs() - sentMs;
  try {
    const job = await lane.waiter.wait(jobId, ctx.plan.waitTimeoutMs);
    return { kind: 'terminal', state: job.state, ackMs, endToEndMs: ctx.nowMs() - sentMs };
  } catch (err) {
    if (err instanceof WaitTimeoutError) return { kind: 'timedOut', ackMs };
    if (err instanceof RemoteError) return { kind: 'error', ackMs };
    throw err;
  }
}

/** One lane's connections: the same one twice unless `--in-flight` > 1. */
interface Lane {
  submitter: BenchClient;
  waiter: BenchClient;
}

/** Pairs the opened connections into lanes (one or two connections each). */
function lanesOf(clients: readonly BenchClient[], perLane: 1 | 2): Lane[] {
  const lanes: Lane[] = [];
  for (let i = 0; i + perLane <= clients.length; i += perLane) {
    const submitter = clients[i] as BenchClient;
    lanes.push({ submitter, waiter: clients[i + perLane - 1] as BenchClient });
  }
  return lanes;
}

async function closeAll(clients: readonly BenchClient[]): Promise<void> {
  await Promise.allSettled(clients.map((client) => client.close()));
}

/** Opens `count` connections at once; if any fails, closes the others and throws. */
async function connectAll(count: number, open: () => Promise<BenchClient>): Promise<BenchClient[]> {
  const settled = await Promise.allSettled(Array.from({ length: count }, () => open()));
  const clients = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failure !== undefined) {
    await closeAll(clients);
    throw failure.reason;
  }
  return clients;
}

/**
 * Runs `total` jobs over the lanes and tallies them. The first thrown error
 * stops every lane (its connection is closed, which ends a pending wait) and
 * is rethrown once all lanes have returned.
 */
async function runPhase(
  clients: readonly BenchClient[],
  lanes: readonly Lane[],
  phase: BenchProgress['phase'],
  total: number,
  ctx: JobContext & { runId: string; onProgress: (progress: BenchProgress) => void },
): Promise<Tally> {
  const tally = new Tally();
  const failures: unknown[] = [];
  let next = 0;
  const take = (): number | null => (failures.length === 0 && next < total ? next++ : null);
  const runner = async (lane: Lane): Promise<void> => {
    try {
      for (let index = take(); index !== null; index = take()) {
        const request = benchRequest(ctx.plan, `${ctx.runId} ${phase} ${index}`, index);
        tally.record(await runOneJob(lane, request, ctx));
        const { completed, rejected, failed } = tally.counts;
        ctx.onProgress({ phase, done: tally.counts.jobs, total, completed, rejected, failed });
      }
    } catch (err) {
      failures.push(err);
      if (failures.length === 1) await closeAll(clients);
    }
  };
  const inFlight = ctx.plan.inFlight ?? 1;
  await Promise.all(lanes.flatMap((lane) => Array.from({ length: inFlight }, () => runner(lane))));
  if (failures.length > 0) throw failures[0];
  return tally;
}

/**
 * Runs a bench: connects `concurrency` clients (fewer when there are fewer
 * jobs), runs the warmup, then the measured jobs, and reports the latter.
 * Throws a TransportError when a connection cannot be made or breaks.
 */
export async function runBench(plan: BenchPlan, deps: BenchDeps = {}): Promise<BenchRunReport> {
  validatePlan(plan);
  const connect = deps.connect ?? ((host, port) => DtpClient.connect({ host, port }));
  const nowMs = deps.nowMs ?? (() => performance.now());
  const ctx = {
    plan,
    nowMs,
    runId: randomBytes(4).toString('hex'),
    onProgress: deps.onProgress ?? (() => undefined),
  };
  const perLane = (plan.inFlight ?? 1) > 1 ? 2 : 1;
  const connections = Math.min(plan.concurrency, Math.max(plan.jobs, plan.warmup)) * perLane;
  const clients = await connectAll(connections, () => connect(plan.host, plan.port));
  const lanes = lanesOf(clients, perLane);
  try {
    if (plan.warmup > 0) await runPhase(clients, lanes, 'warmup', plan.warmup, ctx);
    const startMs = nowMs();
    const tally = await runPhase(clients, lanes, 'measure', plan.jobs, ctx);
    const report = buildBenchReport(tally.counts, tally, nowMs() - startMs);
    const { task, concurrency, warmup } = plan;
    return { ...report, task, concurrency, connections, warmup };
  } finally {
    await closeAll(clients);
  }
}

/** A one-line progress bar on a terminal, redrawn at most every 100 ms. */
export class ProgressBar {
  readonly #write: (text: string) => void;
  readonly #nowMs: () => number;
  #lastDrawMs = Number.NEGATIVE_INFINITY;
  #shown = false;

  constructor(write: (text: string) => void, nowMs: () => number = () => performance.now()) {
    this.#write = write;
    this.#nowMs = nowMs;
  }

  /** Redraws unless the last redraw was recent; a phase's last job always redraws. */
  update(progress: BenchProgress): void {
    const now = this.#nowMs();
    if (progress.done < progress.total && now - this.#lastDrawMs < PROGRESS_INTERVAL_MS) return;
    this.#lastDrawMs = now;
    this.#shown = true;
    this.#write(`\r${renderProgress(progress)}\x1b[K`);
  }

  /** Erases the bar, so that the report starts on a clean line. Idempotent. */
  clear(): void {
    if (this.#shown) this.#write('\r\x1b[2K');
    this.#shown = false;
  }
}

const BAR_WIDTH = 30;

/** `measure [#########-----] 120/200  completed 118  rejected 0  failed 2`. */
export function renderProgress(p: BenchProgress): string {
  const filled = p.total > 0 ? Math.floor((p.done / p.total) * BAR_WIDTH) : BAR_WIDTH;
  const bar = '#'.repeat(filled) + '-'.repeat(BAR_WIDTH - filled);
  const counts = `completed ${p.completed}  rejected ${p.rejected}  failed ${p.failed}`;
  return `${p.phase.padEnd(7)} [${bar}] ${p.done}/${p.total}  ${counts}`;
}

function formatMs(value: number): string {
  return value.toFixed(2);
}

/** A table row; `-` instead of numbers when nothing was measured (JSON says 0). */
function latencyRow(name: string, summary: LatencySummary, samples: number): { text: string }[] {
  const numbers = [summary.p50, summary.p95, summary.p99, summary.max];
  const values = numbers.map((value) => (samples === 0 ? '-' : formatMs(value)));
  return [name, ...values, String(samples)].map((text) => ({ text }));
}

/** The human report of a run. */
export function formatBenchReport(r: BenchRunReport): string {
  const line = (label: string, value: string): string => `  ${`${label}:`.padEnd(13)}${value}`;
  const table = formatTable(
    ['LATENCY (ms)', 'P50', 'P95', 'P99', 'MAX', 'SAMPLES'],
    [
      latencyRow('submit-ack', r.submitAckMillis, r.submitAckSamples),
      latencyRow('end-to-end', r.endToEndMillis, r.endToEndSamples),
    ],
  );
  return [
    `Bench: ${r.task}, ${r.connections} connection(s), ${r.warmup} warmup job(s)`,
    line('Jobs', String(r.jobs)),
    line('Accepted', String(r.accepted)),
    line('Rejected', `${r.rejected} (never retried)`),
    line('Completed', String(r.completed)),
    line('Failed', `${r.failed} (${r.errors} error replies, ${r.timedOut} timed out)`),
    line('Elapsed', `${formatMs(r.elapsedMillis)} ms`),
    line('Throughput', `${r.throughputJobsPerSec.toFixed(2)} jobs/s`),
    '',
    ...table
      .trimEnd()
      .split('\n')
      .map((row) => `  ${row}`),
    '',
  ].join('\n');
}

/** The plan of a parsed `bench` command line. */
export function benchPlanFrom(values: FlagValues): BenchPlan {
  return {
    host: values.string('host'),
    port: values.int('port'),
    jobs: values.int('jobs'),
    concurrency: values.int('concurrency'),
    warmup: values.int('warmup'),
    inFlight: values.int('in-flight'),
    task: values.enum('task', BENCH_TASKS),
    sleepMillis: values.int('sleep-millis'),
    primeLimit: values.int('prime-limit'),
    waitTimeoutMs: values.int('wait-timeout-millis'),
    queues: values.int('queues'),
  };
}

/**
 * The `bench` command: runs the plan and renders the report. `progress`
 * writes to stderr and is given only when stdout is a terminal and the
 * output is not JSON.
 */
export async function runBenchCommand(
  values: FlagValues,
  progress: ((text: string) => void) | null,
  security: ConnectionSecurity = {},
): Promise<{ json: BenchRunReport; human: string }> {
  const bar = progress === null ? null : new ProgressBar(progress);
  try {
    const report = await runBench(benchPlanFrom(values), {
      // Every connection of the bench uses the command line's TLS and token.
      connect: (host, port) => DtpClient.connect({ host, port, ...security }),
      ...(bar !== null && { onProgress: (p: BenchProgress) => bar.update(p) }),
    });
    return { json: report, human: formatBenchReport(report) };
  } finally {
    bar?.clear();
  }
}
