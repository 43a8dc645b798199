/**
 * Flows: a coordinator and two workers (2 x 8 slots) as separate processes
 * (SQLite), two shapes, each on a fresh database. Before each, every task
 * thread of the workers is started (one `hold` job per slot at once), and
 * the measured jobs go to a queue that is paused while they are submitted
 * and resumed after, so nothing runs before everything is in.
 *
 * - fan-in: `parents` jobs (SUBMIT_JOBS of 1,000), then a flow of joins that
 *   each depend on at most MAX_PARENTS (1,000) of them and one final job
 *   depending on every join: 10,000 parents reach one job through two
 *   levels, because one job may name at most 1,000 parents. The joins are
 *   HIGH priority: released while other parents are still queued, they go
 *   first, so their hand-off is not a wait behind those parents.
 * - layered DAG: `layers` layers of `width` jobs in one SUBMIT_FLOW, each job
 *   of a layer depending on two jobs of the layer above (the same index and
 *   the next one, wrapping); a layer has fewer jobs than the workers have
 *   slots. Measured: the time SUBMIT_FLOW takes until FLOW_SUBMITTED is in
 *   hand (the flow is committed then), and the coordinator's RSS and V8 heap
 *   in use (its `/metrics`; garbage not yet collected included) before and
 *   after.
 *
 * Hand-off, both shapes, for every dependent, measured two ways:
 * - coordinator: its `startedAtMillis` minus the latest `finishedAtMillis`
 *   of its parents, both stamped by the coordinator's clock: the lease is
 *   made in the same input that handles the last parent's COMPLETE, so this
 *   is the core's own part (0 at millisecond resolution). The assignment
 *   leaves after that input's commit.
 * - worker: when its handler started minus when the last parent's handler
 *   ended, both read by the workers (`stamp` returns them) on this
 *   machine's clock, which all the processes share: the whole path, from
 *   the parent's result through COMPLETE, the commit, TASK_ASSIGN, to the
 *   dependent's task thread.
 */
import { join } from 'node:path';
import { DtpClient } from '../src/client/index.js';
import type { FlowJobSpec } from '../src/client/index.js';
import type { JobSnapshot } from '../src/protocol/messages.js';
import { MAX_PARENTS } from '../src/protocol/limits.js';
import { ScriptProcess } from '../test/helpers/processes.js';
import { until } from '../test/helpers/until.js';
import { HOST, rssMiB, startQuietCoordinator } from './harness.js';

export interface HandOff {
  /** Dependents measured. */
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface FanInRun {
  parents: number;
  /** Submitting everything (parents in SUBMIT_JOBS of 1,000, then the joins and the final job), ms. */
  submitMs: number;
  /** Last parent's end -> its join's start, over the joins (coordinator and worker stamps). */
  joinCore: HandOff;
  joinWire: HandOff;
  /** Last join's end -> the final job's start. */
  final: HandOffPair;
  /** The first parent's start -> the final job's end, on the coordinator's clock, ms. */
  runMs: number;
}

export interface LayeredRun {
  jobs: number;
  layers: number;
  submitMs: number;
  rssBeforeMiB: number;
  rssAfterMiB: number;
  heapBeforeMiB: number;
  heapAfterMiB: number;
  handOffCore: HandOff;
  handOffWire: HandOff;
  /** The first job's start -> the last job's end, on the coordinator's clock, ms. */
  runMs: number;
}

const WORKERS = 2;
/**
 * 2 x 8 slots: more than a layer's 10 jobs, so a released job of the layered
 * flow never waits for a slot. (A worker runs each slot's task on a thread
 * of its own, made when first needed: many more slots would measure thread
 * start-up.)
 */
const CAPACITY = 8;

function startWorkers(workerPort: number): ScriptProcess[] {
  return Array.from({ length: WORKERS }, (_, i) =>
    ScriptProcess.start('worker.sh', [
      ...['--coordinator-host', HOST, '--coordinator-port', String(workerPort)],
      ...['--id', `flows-${i + 1}`, '--capacity', String(CAPACITY), '--log-level', 'warn'],
      ...['--tasks', join(import.meta.dirname, 'flow-tasks.js')],
    ]),
  );
}

async function heapMiB(httpPort: number): Promise<number> {
  const text = await (await fetch(`http://${HOST}:${httpPort}/metrics`)).text();
  const bytes = Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? NaN);
  return Math.round((bytes / 2 ** 20) * 10) / 10;
}

/** Every job in `state`, through LIST_JOBS pages of 1,000. */
async function allIn(client: DtpClient, state: 'COMPLETED'): Promise<JobSnapshot[]> {
  const out: JobSnapshot[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 1_000; page++) {
    const got = await client.listPage({ state, limit: 1_000, ...(cursor ? { cursor } : {}) });
    out.push(...got.jobs);
    if (got.nextCursor === null) return out;
    cursor = got.nextCursor;
  }
  throw new Error('too many pages');
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

/** Where a `stamp` job's handler started and ended (the worker's clock). */
function stampOf(job: JobSnapshot): { startMs: number; endMs: number } {
  return JSON.parse(job.result ?? 'null') as { startMs: number; endMs: number };
}

/** A dependent's hand-off measured two ways, ms. */
export interface HandOffPair {
  /** Coordinator stamps: its `startedAtMillis` - the latest parent `finishedAtMillis`. */
  core: number;
  /** Worker stamps: its handler's start - the latest parent handler's end. */
  wire: number;
}

/** The hand-off of every job of `jobs` that has parents, by job id (its parents must be in `jobs`). */
export function handOffs(jobs: readonly JobSnapshot[]): Map<string, HandOffPair> {
  const byId = new Map(jobs.map((job) => [job.jobId, job]));
  const out = new Map<string, HandOffPair>();
  for (const job of jobs) {
    const parents = job.dependsOn ?? [];
    if (parents.length === 0) continue;
    let lastFinished = -Infinity;
    let lastEnd = -Infinity;
    for (const id of parents) {
      const parent = byId.get(id);
      if (parent === undefined) throw new Error(`job ${job.jobId}: parent ${id} is not COMPLETED`);
      lastFinished = Math.max(lastFinished, parent.finishedAtMillis ?? NaN);
      lastEnd = Math.max(lastEnd, stampOf(parent).endMs);
    }
    out.set(job.jobId, {
      core: (job.startedAtMillis ?? NaN) - lastFinished,
      wire: stampOf(job).startMs - lastEnd,
    });
  }
  return out;
}

/** The first start to the last end among `jobs`, on the coordinator's clock. */
function spanMs(jobs: readonly JobSnapshot[]): number {
  const starts = jobs.map((job) => job.startedAtMillis ?? Infinity);
  const ends = jobs.map((job) => job.finishedAtMillis ?? -Infinity);
  return Math.max(...ends) - Math.min(...starts);
}

function summary(values: readonly number[]): HandOff {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.some((v) => !Number.isFinite(v) || v < 0)) {
    throw new Error('a dependent has no start time or started before a parent ended');
  }
  return {
    count: sorted.length,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    maxMs: sorted[sorted.length - 1] ?? NaN,
  };
}

async function nothingLeft(client: DtpClient): Promise<boolean> {
  for (const state of ['WAITING', 'QUEUED', 'RUNNING', 'RETRY_WAIT'] as const) {
    if ((await client.listPage({ state, limit: 1 })).jobs.length > 0) return false;
  }
  return true;
}

async function waitCompleted(client: DtpClient, jobId: string): Promise<void> {
  await until(async () => (await client.status(jobId)).state === 'COMPLETED', {
    timeoutMs: 600_000,
    intervalMs: 20,
    what: `job ${jobId} COMPLETED`,
  });
}

let runs = 0;

/** A database file no run has used (each run starts empty). */
function freshDatabase(dir: string, name: string): string {
  return join(dir, `${name}-${++runs}.db`);
}

/** The queue the measured jobs go to: paused while they are submitted. */
const QUEUE = 'flows';

interface Cluster {
  client: DtpClient;
  httpPort: number;
  pid: number;
}

/**
 * A coordinator and two workers whose task threads are all started (one
 * `hold` job per slot at once), then `body`; everything stopped after. The
 * measured jobs go to the queue {@link QUEUE}, paused here: `body` resumes it.
 */
async function withCluster<T>(args: string[], body: (c: Cluster) => Promise<T>): Promise<T> {
  const c = await startQuietCoordinator(args, true);
  const client = await DtpClient.connect({ host: HOST, port: c.clientPort });
  const workers = startWorkers(c.workerPort);
  try {
    await until(async () => (await client.workers()).length === WORKERS, {
      timeoutMs: 60_000,
      what: 'the workers',
    });
    const warm = await client.submitMany(
      Array.from({ length: WORKERS * CAPACITY }, () => ({
        taskType: 'hold',
        payload: { ms: 300 },
      })),
    );
    for (const id of warm) await waitCompleted(client, id);
    await client.queues.pause(QUEUE);
    return await body({ client, httpPort: c.httpPort as number, pid: c.proc.pid });
  } finally {
    await client.close();
    await Promise.all([...workers, c.proc].map((p) => p.stop()));
  }
}

export async function fanInRun(dir: string, parents: number): Promise<FanInRun> {
  const args = [
    '--database',
    freshDatabase(dir, `fan-in-${parents}`),
    '--max-active-jobs',
    String(parents * 2),
  ];
  return withCluster(args, async ({ client }) => {
    const started = performance.now();
    const parentIds: string[] = [];
    for (let sent = 0; sent < parents; sent += 1_000) {
      const n = Math.min(1_000, parents - sent);
      const batch = Array.from({ length: n }, (_, i) => ({
        taskType: 'stamp',
        payload: { text: `parent-${sent + i}` },
        queue: QUEUE,
      }));
      parentIds.push(...(await client.submitMany(batch)));
    }
    const joins: FlowJobSpec[] = [];
    for (let from = 0; from < parentIds.length; from += MAX_PARENTS) {
      joins.push({
        ref: `join-${joins.length}`,
        taskType: 'stamp',
        payload: { text: `join-${joins.length}` },
        // Ahead of the parents still queued: the hand-off, not the queue, is measured.
        priority: 'HIGH',
        queue: QUEUE,
        dependsOn: parentIds.slice(from, from + MAX_PARENTS),
      });
    }
    const final: FlowJobSpec = {
      ref: 'final',
      taskType: 'stamp',
      payload: { text: 'final' },
      queue: QUEUE,
      dependsOn: joins.map((join) => join.ref),
    };
    const flow = await client.submitFlow({ jobs: [...joins, final] });
    const submitMs = performance.now() - started;
    await client.queues.resume(QUEUE);
    const finalId = flow.jobs.final as string;
    await waitCompleted(client, finalId);
    const done = (await allIn(client, 'COMPLETED')).filter((job) => job.queue === QUEUE);
    const byJob = handOffs(done);
    const joinIds = joins.map((join) => flow.jobs[join.ref] as string);
    return {
      parents,
      submitMs,
      joinCore: summary(joinIds.map((id) => byJob.get(id)?.core ?? NaN)),
      joinWire: summary(joinIds.map((id) => byJob.get(id)?.wire ?? NaN)),
      final: byJob.get(finalId) ?? { core: NaN, wire: NaN },
      runMs: spanMs(done),
    };
  });
}

/** The layered DAG: `layers` x `width` jobs, one SUBMIT_FLOW (short refs, empty payloads: one frame holds 10,000). */
export function layeredFlow(layers: number, width: number): FlowJobSpec[] {
  const jobs: FlowJobSpec[] = [];
  for (let layer = 0; layer < layers; layer++) {
    for (let i = 0; i < width; i++) {
      const above = (j: number): string => `${layer - 1}.${j % width}`;
      jobs.push({
        ref: `${layer}.${i}`,
        taskType: 'stamp',
        payload: {},
        ...(layer === 0 ? {} : { dependsOn: width === 1 ? [above(i)] : [above(i), above(i + 1)] }),
      });
    }
  }
  return jobs;
}

export async function layeredRun(dir: string, layers: number, width: number): Promise<LayeredRun> {
  const jobs = layers * width;
  const args = [
    '--database',
    freshDatabase(dir, `layered-${jobs}`),
    '--max-active-jobs',
    String(jobs * 2),
  ];
  return withCluster(args, async ({ client, httpPort, pid }) => {
    const spec = layeredFlow(layers, width).map((job) => ({ ...job, queue: QUEUE }));
    const rssBeforeMiB = rssMiB(pid);
    const heapBeforeMiB = await heapMiB(httpPort);
    const started = performance.now();
    await client.submitFlow({ jobs: spec });
    const submitMs = performance.now() - started;
    const rssAfterMiB = rssMiB(pid);
    const heapAfterMiB = await heapMiB(httpPort);
    await client.queues.resume(QUEUE);
    await until(() => nothingLeft(client), {
      timeoutMs: 600_000,
      intervalMs: 20,
      what: 'every job of the flow ended',
    });
    const done = (await allIn(client, 'COMPLETED')).filter((job) => job.queue === QUEUE);
    if (done.length !== jobs) throw new Error(`${done.length} of ${jobs} jobs COMPLETED`);
    const byJob = handOffs(done);
    return {
      jobs,
      layers,
      submitMs,
      rssBeforeMiB,
      rssAfterMiB,
      heapBeforeMiB,
      heapAfterMiB,
      handOffCore: summary([...byJob.values()].map((h) => h.core)),
      handOffWire: summary([...byJob.values()].map((h) => h.wire)),
      runMs: spanMs(done),
    };
  });
}
