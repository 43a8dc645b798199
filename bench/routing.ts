/**
 * Routing cost with many task types and many workers, on the pure core (no
 * sockets): each worker result frees a slot and the core assigns the next
 * job of a type that worker declared. Cases vary the number of workers, how
 * many distinct declared lists (classes) they form, and how many task types
 * have queued jobs that no worker serves. If choosing a worker scanned the
 * workers, or scheduling walked every queued type, the large cases would
 * collapse.
 */
import type { CoreInput } from '../src/coordinator/core/types.js';
import { assignmentsIn, newCore, resultCycles, type Sent } from './queue-depth.js';

export interface RoutingCase {
  label: string;
  workers: number;
  capacity: number;
  /** Task types the workers serve (`t0`..). */
  servedTypes: number;
  /** true: every worker declares every served type (one class); false: one type each. */
  oneClass: boolean;
  /** Types with a queued HIGH job that no worker serves. */
  unservedTypes: number;
}

export const ROUTING_CASES: readonly RoutingCase[] = [
  {
    label: 'baseline',
    workers: 10,
    capacity: 100,
    servedTypes: 10,
    oneClass: true,
    unservedTypes: 0,
  },
  {
    label: '1,000 workers, one class of 1,000 types',
    workers: 1_000,
    capacity: 1,
    servedTypes: 1_000,
    oneClass: true,
    unservedTypes: 0,
  },
  {
    label: '1,000 workers, 1,000 classes of one type',
    workers: 1_000,
    capacity: 1,
    servedTypes: 1_000,
    oneClass: false,
    unservedTypes: 0,
  },
  {
    label: 'baseline + 10,000 unserved types queued HIGH',
    workers: 10,
    capacity: 100,
    servedTypes: 10,
    oneClass: true,
    unservedTypes: 10_000,
  },
];

function submit(taskType: string, requestId: number, high: boolean): CoreInput {
  return {
    kind: 'clientRequest',
    connId: 1,
    requestId,
    msg: {
      type: 'SUBMIT_JOB',
      taskType,
      payload: { n: requestId },
      maxAttempts: null,
      idempotencyKey: null,
      priority: high ? 'HIGH' : 'NORMAL',
    },
  };
}

/** Assignments per second over `cycles` result → next-assignment cycles. */
export function routingAssignmentsPerSecond(c: RoutingCase, cycles: number): number {
  const slots = c.workers * c.capacity;
  const served = c.servedTypes;
  const total = c.unservedTypes + slots + cycles + served;
  const { commit, handle } = newCore(total + 10);
  let requestId = 0;
  for (let i = 0; i < c.unservedTypes; i++) handle(submit(`unserved-${i}`, requestId++, true));
  // Enough jobs of every served type for the whole run, interleaved.
  for (let i = 0; i < slots + cycles + served; i++) {
    handle(submit(`t${i % served}`, requestId++, false));
    if (i % 1_000 === 0) commit();
  }
  commit();
  const allTypes = Array.from({ length: served }, (_, i) => `t${i}`);
  const running: Sent[] = [];
  for (let w = 0; w < c.workers; w++) {
    const taskTypes = c.oneClass ? allTypes : [`t${w % served}`];
    const msg = {
      type: 'WORKER_REGISTER',
      workerId: `w${w}`,
      capacity: c.capacity,
      taskTypes,
    } as const;
    running.push(...assignmentsIn(handle({ kind: 'workerMessage', connId: 100 + w, msg })));
    if (w % 100 === 0) commit();
  }
  commit();
  return resultCycles(handle, commit, running, cycles);
}
