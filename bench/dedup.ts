/**
 * Deduplication keys and handler holds, on the pure core (no sockets).
 *
 * Submission cost: microseconds of the core per SUBMIT_JOB (and its share
 * of the commit), the same jobs without a key, each with a fresh `active`
 * key (a new key every time: the index grows), each answered by a key
 * already held (nothing is created), and each with a fresh `throttle` key.
 *
 * Holds: assignments per second in the result → next-assignment cycles of
 * fairness.ts, with jobs spread over `active` groups of one queue, against
 * the same with as many more groups of that queue held back by a handler
 * (`rateLimited`, scope `group`, for a day) and a backlog each. A held group
 * is parked out of the picks, so the held ones should cost nothing per pick.
 */
import type { CoreInput, Effect } from '../src/coordinator/core/types.js';
import type { DedupMode, SubmitJob } from '../src/protocol/messages.js';
import { assignmentsIn, newCore, registerWorkers, resultCycles, type Sent } from './queue-depth.js';

export type KeyCase =
  'no key' | 'fresh active key' | 'held key (deduplicated)' | 'fresh throttle key';
export const KEY_CASES: readonly KeyCase[] = [
  'no key',
  'fresh active key',
  'held key (deduplicated)',
  'fresh throttle key',
];

function submitJob(i: number, key: string | null, mode: DedupMode | null): SubmitJob {
  return {
    type: 'SUBMIT_JOB',
    taskType: 'SHA256',
    payload: { text: `j${i}` },
    maxAttempts: null,
    idempotencyKey: null,
    priority: null,
    ...(key !== null && { dedupKey: key }),
    ...(mode !== null && { dedupMode: mode }),
    ...(mode === 'throttle' && { dedupWindowMillis: 3_600_000 }),
  };
}

/** Core microseconds per submission of `jobs` submissions of one kind (commits every 1,000). */
export function submissionMicros(kind: KeyCase, jobs: number): number {
  const { commit, handle } = newCore(jobs + 10);
  const held = 100;
  // The held keys' jobs exist before the clock starts.
  if (kind === 'held key (deduplicated)') {
    for (let k = 0; k < held; k++) handle(request(k, submitJob(k, `held-${k}`, 'active')));
    commit();
  }
  const started = performance.now();
  for (let i = 0; i < jobs; i++) {
    const msg =
      kind === 'no key'
        ? submitJob(i, null, null)
        : kind === 'fresh active key'
          ? submitJob(i, `key-${i}`, null)
          : kind === 'fresh throttle key'
            ? submitJob(i, `key-${i}`, 'throttle')
            : submitJob(i, `held-${i % held}`, 'active');
    handle(request(held + i, msg));
    if (i % 1_000 === 999) commit();
  }
  commit();
  return ((performance.now() - started) * 1000) / jobs;
}

function request(requestId: number, msg: SubmitJob): CoreInput {
  return { kind: 'clientRequest', connId: 1, requestId, msg };
}

const WORKERS = 10;
const CAPACITY = 100;

function submittedId(effects: Effect[]): string {
  for (const e of effects) {
    if (e.kind === 'reply' && e.msg.type === 'JOB_SUBMITTED') return e.msg.jobId;
  }
  throw new Error('no JOB_SUBMITTED');
}

/**
 * Assignments per second over `cycles` cycles with `active` groups running
 * and `held` more groups held back by a handler (each with a backlog).
 */
export function heldGroupsAssignmentsPerSecond(
  active: number,
  held: number,
  cycles: number,
): number {
  const perGroup = Math.ceil((WORKERS * CAPACITY + cycles) / active) + 2;
  const total = (active + held) * perGroup + held;
  const { commit, handle } = newCore(total + 10);
  const heldGroup = new Map<string, string>(); // jobId -> group, for the held groups' jobs
  let requestId = 0;
  // The held groups come first, so the first picks reach each of them.
  const order = [
    ...Array.from({ length: held }, (_, i) => active + i),
    ...Array.from({ length: active }, (_, i) => i),
  ];
  for (let round = 0; round < perGroup; round++) {
    for (const g of order) {
      const group = `g${g}`;
      const effects = handle(
        request(requestId++, { ...submitJob(requestId, null, null), groupKey: group }),
      );
      if (g >= active) heldGroup.set(submittedId(effects), group);
      if (requestId % 1_000 === 0) commit();
    }
  }
  commit();
  let running = registerWorkers(handle, commit, WORKERS, CAPACITY);
  // Every held group's first attempt is rate limited for a day: its group is held from then on.
  const holding = new Set<string>();
  for (
    let pass = 0;
    running.some((sent) => heldGroup.has(sent.assign.jobId)) && pass < 1_000;
    pass++
  ) {
    const next: Sent[] = [];
    for (const sent of running) {
      const group = heldGroup.get(sent.assign.jobId);
      if (group === undefined) {
        next.push(sent);
        continue;
      }
      holding.add(group);
      const msg = {
        type: 'TASK_RESULT',
        workerId: `w${sent.connId - 100}`,
        jobId: sent.assign.jobId,
        attemptId: sent.assign.attemptId,
        success: false,
        result: null,
        error: 'RATE_LIMITED: bench',
        rateLimited: { retryAfterMillis: 86_400_000, scope: 'group' },
      } as const;
      next.push(...assignmentsIn(handle({ kind: 'workerMessage', connId: sent.connId, msg })));
    }
    commit();
    running = next;
  }
  if (holding.size < held) throw new Error(`only ${holding.size} of ${held} groups held`);
  return resultCycles(handle, commit, running, cycles);
}
