/**
 * Scheduling cost against queue depth, on the pure core (no sockets): with N
 * jobs queued, each worker result frees a slot and the core assigns the next
 * job. We measure assignments per second at a shallow and a deep queue; if
 * scheduling scanned or sorted the queue, the deep one would collapse.
 */
import { createCronEvaluator } from '../src/coordinator/cron.js';
import { CoordinatorCore } from '../src/coordinator/core/core.js';
import type { CoreInput, Effect } from '../src/coordinator/core/types.js';
import type { TaskAssign } from '../src/protocol/messages.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { createBuiltinRegistry } from '../src/tasks/builtin/index.js';

const WORKERS = 10;
const CAPACITY = 100;
const PRIORITIES = ['HIGH', 'NORMAL', 'LOW'] as const;

export interface Sent {
  connId: number;
  assign: TaskAssign;
}

export function assignmentsIn(effects: Effect[]): Sent[] {
  return effects.flatMap((e) =>
    e.kind === 'send' && e.msg.type === 'TASK_ASSIGN' ? [{ connId: e.connId, assign: e.msg }] : [],
  );
}

/**
 * Registers WORKERS workers of CAPACITY slots (`w<n>` on connection 100 + n)
 * and commits; returns the assignments they got.
 */
export function registerWorkers(
  handle: (i: CoreInput) => Effect[],
  commit: () => void,
  workers = WORKERS,
  capacity = CAPACITY,
): Sent[] {
  const running: Sent[] = [];
  for (let w = 0; w < workers; w++) {
    const msg = { type: 'WORKER_REGISTER', workerId: `w${w}`, capacity, taskTypes: null } as const;
    running.push(...assignmentsIn(handle({ kind: 'workerMessage', connId: 100 + w, msg })));
  }
  commit();
  return running;
}

/**
 * Assignments per second over `cycles` turns of "the oldest running
 * assignment's result arrives, the core assigns what it frees". Workers are
 * `w<n>` on connection 100 + n; a batch is committed every 100 results.
 */
export function resultCycles(
  handle: (i: CoreInput) => Effect[],
  commit: () => void,
  running: Sent[],
  cycles: number,
): number {
  const started = performance.now();
  let assigned = 0;
  for (let i = 0; i < cycles; i++) {
    const { connId, assign } = running.shift() as Sent;
    const msg = {
      type: 'TASK_RESULT',
      workerId: `w${connId - 100}`,
      jobId: assign.jobId,
      attemptId: assign.attemptId,
      success: true,
      result: 'x',
      error: null,
    } as const;
    const next = assignmentsIn(handle({ kind: 'workerMessage', connId, msg }));
    assigned += next.length;
    running.push(...next);
    if (i % 100 === 0) commit();
  }
  return Math.round(assigned / ((performance.now() - started) / 1000));
}

export function newCore(maxActiveJobs: number): {
  core: CoordinatorCore;
  commit: () => void;
  handle: (i: CoreInput) => Effect[];
  /** The core's clock (each input advances it by 1 ms). */
  now: () => number;
  /** Sets the clock so that the next input is handled at `atMs` (never backwards). */
  advanceTo: (atMs: number) => void;
} {
  let clock = 1_700_000_000_000;
  let ids = 0;
  const store = new MemoryStore();
  const core = new CoordinatorCore(
    {
      heartbeatTimeoutMs: 3_600_000,
      taskTimeoutMs: 3_600_000,
      defaultMaxAttempts: 3,
      retryBaseDelayMs: 100,
      retryMaxDelayMs: 1_000,
      maxActiveJobs,
      maxScheduledJobs: 1_000_000,
      agingStepMs: 60_000,
      sweepIntervalMs: 500,
      retainTerminalMs: null,
      maxWaitsPerConnection: 10_000,
      maxWaits: 100_000,
      maxWaitsPerAddress: 100_000,
      maxSubscriptions: 1_024,
      maxSubscriptionsPerAddress: 1_024,
      subscriberStallMs: 10_000,
    },
    {
      now: () => clock,
      newId: () => `id-${++ids}`,
      validator: createBuiltinRegistry(),
      cron: createCronEvaluator(),
    },
    store.recoverNow(),
  );
  const handle = (input: CoreInput): Effect[] => {
    clock += 1;
    return core.handle(input);
  };
  /** What the shell does at the end of a turn: the batch goes to the store. */
  const commit = (): void => {
    const batch = core.takeBatch();
    if (batch === null) return;
    store.commitNow(batch);
    core.handle({ kind: 'committed', batchId: batch.batchId });
  };
  const now = (): number => clock;
  const advanceTo = (atMs: number): void => {
    clock = Math.max(clock, atMs - 1);
  };
  return { core, commit, handle, now, advanceTo };
}

/**
 * Assignments per second while about `depth` jobs stay queued (mixed
 * priorities), measured over `cycles` result → next-assignment cycles.
 */
export function assignmentsPerSecond(depth: number, cycles: number): number {
  const total = depth + WORKERS * CAPACITY + cycles;
  const { commit, handle } = newCore(total + 10);
  for (let i = 0; i < total; i++) {
    const priority = PRIORITIES[i % 3] as (typeof PRIORITIES)[number];
    const msg = {
      type: 'SUBMIT_JOB',
      taskType: 'SHA256',
      payload: { text: `j${i}` },
      maxAttempts: null,
      idempotencyKey: null,
      priority,
    } as const;
    handle({ kind: 'clientRequest', connId: 1, requestId: i, msg });
    if (i % 1_000 === 0) commit();
  }
  commit();
  const running = registerWorkers(handle, commit);
  return resultCycles(handle, commit, running, cycles);
}
