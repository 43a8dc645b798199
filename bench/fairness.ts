/**
 * Scheduling cost with many groups and many queues, on the pure core (no
 * sockets), and the memory a group costs.
 *
 * Throughput: the same result → next-assignment cycles as queue-depth.ts
 * (10 workers × 100 slots), with the queued jobs spread over one group of one
 * queue (the baseline), over 10,000 group keys of one queue, or over 100
 * queues. Every group and queue keeps a backlog for the whole run, so all of
 * them stay active: if a pick scanned the groups or the queues, the large
 * cases would fall behind the baseline.
 *
 * Memory: the heap (after a full collection) with `groups` groups of one
 * queued job each against the same jobs in one group (a group with a
 * backlog), and after all of them ran to completion against the same run in
 * one group (an idle group: no jobs, no settings).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { CoreInput } from '../src/coordinator/core/types.js';
import { assignmentsIn, newCore, registerWorkers, resultCycles, type Sent } from './queue-depth.js';

const WORKERS = 10;
const CAPACITY = 100;

export interface FairnessCase {
  label: string;
  groups: number;
  queues: number;
}

export const FAIRNESS_CASES: readonly FairnessCase[] = [
  { label: 'one queue, one group (baseline)', groups: 1, queues: 1 },
  { label: 'one queue, 10,000 groups', groups: 10_000, queues: 1 },
  { label: '100 queues, one group each', groups: 1, queues: 100 },
  { label: '100 queues × 100 groups', groups: 100, queues: 100 },
];

function submit(requestId: number, queue: string, groupKey: string | null): CoreInput {
  return {
    kind: 'clientRequest',
    connId: 1,
    requestId,
    msg: {
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: `j${requestId}` },
      maxAttempts: null,
      idempotencyKey: null,
      priority: 'NORMAL',
      queue,
      groupKey,
    },
  };
}

/**
 * Assignments per second over `cycles` cycles with `c.queues` × `c.groups`
 * groups, each with enough jobs to stay ready to the end.
 */
export function fairnessAssignmentsPerSecond(c: FairnessCase, cycles: number): number {
  const cells = c.queues * c.groups;
  const perCell = Math.ceil((WORKERS * CAPACITY + cycles) / cells) + 1;
  const total = cells * perCell;
  const { commit, handle } = newCore(total + 10);
  let requestId = 0;
  // Interleaved, so that each group's and queue's jobs are spread over the submission order.
  for (let round = 0; round < perCell; round++) {
    for (let cell = 0; cell < cells; cell++) {
      const queue = c.queues === 1 ? 'default' : `q${cell % c.queues}`;
      const group = c.groups === 1 ? null : `g${Math.floor(cell / c.queues)}`;
      handle(submit(requestId++, queue, group));
      if (requestId % 1_000 === 0) commit();
    }
  }
  commit();
  const running = registerWorkers(handle, commit, WORKERS, CAPACITY);
  return resultCycles(handle, commit, running, cycles);
}

let collect: (() => void) | undefined;

/** A full garbage collection (the flag is set at run time, so `npm run bench` needs no option). */
function gc(): void {
  if (collect === undefined) {
    setFlagsFromString('--expose-gc');
    collect = runInNewContext('gc') as () => void;
  }
  collect();
  collect();
}

/**
 * A core whose batches are acknowledged without being kept anywhere, so that
 * the heap measured is the core's own (the coordinator's store is on disk).
 */
function bareCore(jobs: number): ReturnType<typeof newCore> {
  const made = newCore(jobs + 10);
  const commit = (): void => {
    const batch = made.core.takeBatch();
    if (batch !== null) made.core.handle({ kind: 'committed', batchId: batch.batchId });
  };
  return { ...made, commit };
}

function heapBytes(): number {
  gc();
  return process.memoryUsage().heapUsed;
}

export interface GroupMemory {
  groups: number;
  /** Heap per group with one queued job, beyond the same jobs in a single group. */
  backlogBytesPerGroup: number;
  /** Heap per group once all its jobs ran (no jobs, no settings) against before any job. */
  idleBytesPerGroup: number;
  /** Heap per queued job in a single group (for scale). */
  bytesPerJob: number;
}

/** Heap of a core holding `groups` jobs in one group, or one job in each of `groups` groups. */
function backlogHeap(groups: number, spread: boolean): { empty: number; loaded: number } {
  const { commit, handle, core } = bareCore(groups);
  commit();
  const empty = heapBytes();
  for (let i = 0; i < groups; i++) {
    handle(submit(i, 'default', spread ? `g${i}` : null));
    if (i % 1_000 === 0) commit();
  }
  commit();
  const loaded = heapBytes();
  // Keeps the core reachable until after the measurement.
  if (core.activeCount !== groups) throw new Error('jobs missing');
  return { empty, loaded };
}

/**
 * Heap growth of a core from before to after
 * `jobs` jobs ran to completion, spread over `jobs` groups or in one group.
 */
function ranHeap(jobs: number, spread: boolean): number {
  const { commit, handle, core } = bareCore(jobs);
  const running: Sent[] = [];
  const msg = { type: 'WORKER_REGISTER', workerId: 'w0', capacity: 100, taskTypes: null } as const;
  running.push(...assignmentsIn(handle({ kind: 'workerMessage', connId: 100, msg })));
  commit();
  const before = heapBytes();
  for (let i = 0; i < jobs; i++) {
    running.push(...assignmentsIn(handle(submit(i, 'default', spread ? `g${i}` : null))));
    if (i % 1_000 === 0) commit();
  }
  commit();
  resultCycles(handle, commit, running, jobs);
  commit();
  if (core.activeCount !== 0) throw new Error(`${core.activeCount} jobs still active`);
  return heapBytes() - before;
}

/**
 * The heap a core holds per group: with one queued job each (against the
 * same jobs in one group), and once every job ran (against the same run in
 * one group). A group
 * with no jobs and no settings should leave nothing behind.
 */
export function groupMemory(groups: number): GroupMemory {
  // A first pass of each, so that compiled code does not count as a group's.
  backlogHeap(groups, true);
  ranHeap(groups, true);
  const single = backlogHeap(groups, false);
  const spread = backlogHeap(groups, true);
  const singleBytes = single.loaded - single.empty;
  return {
    groups,
    backlogBytesPerGroup: (spread.loaded - spread.empty - singleBytes) / groups,
    idleBytesPerGroup: (ranHeap(groups, true) - ranHeap(groups, false)) / groups,
    bytesPerJob: singleBytes / groups,
  };
}
