/**
 * Signals and events, on the pure core (no sockets; batches committed to
 * the in-memory store).
 *
 * Wake: `waiting` jobs each suspended in `ctx.waitForEvent(name)`; one
 * PUBLISH_EVENT wakes them all. Reported: the core's milliseconds for that
 * one input (every woken job's step written, every job queued) and for the
 * commit of its batch.
 *
 * Signals: `jobs` jobs each waiting in `ctx.waitForSignal`; one SIGNAL_JOB
 * to each, in turn, committed every 100. Reported: the core's microseconds
 * per signal, and so the signals a second one core could take.
 */
import type { CoreInput, Effect } from '../src/coordinator/core/types.js';
import { assignmentsIn, newCore, type Sent } from './queue-depth.js';

const CONN = 100;

/** Submits `jobs` jobs, registers a worker for them all and suspends each with `how`. */
function waitingJobs(
  jobs: number,
  how: (i: number) => Record<string, unknown>,
): ReturnType<typeof newCore> & { ids: string[] } {
  const made = newCore(jobs + 10);
  const { handle, commit } = made;
  for (let i = 0; i < jobs; i++) {
    handle({
      kind: 'clientRequest',
      connId: 1,
      requestId: i,
      msg: {
        type: 'SUBMIT_JOB',
        taskType: 'SHA256',
        payload: { text: `j${i}` },
        maxAttempts: null,
        idempotencyKey: null,
        priority: null,
      },
    });
    if (i % 1_000 === 999) commit();
  }
  commit();
  const register: CoreInput = {
    kind: 'workerMessage',
    connId: CONN,
    msg: {
      type: 'WORKER_REGISTER',
      workerId: 'w',
      capacity: Math.min(jobs, 1_024),
      ...(jobs > 1_024 && { slots: jobs }),
      taskTypes: null,
      steps: true,
    },
  };
  const running: Sent[] = assignmentsIn(handle(register));
  commit();
  const ids: string[] = [];
  for (const [i, sent] of running.entries()) {
    ids.push(sent.assign.jobId);
    handle({
      kind: 'workerMessage',
      connId: CONN,
      msg: {
        type: 'TASK_SUSPEND',
        workerId: 'w',
        jobId: sent.assign.jobId,
        attemptId: sent.assign.attemptId,
        ...how(i),
      },
    });
    if (i % 1_000 === 999) commit();
  }
  commit();
  if (ids.length !== jobs) throw new Error(`${ids.length} of ${jobs} jobs were assigned`);
  return { ...made, ids };
}

function woken(effects: Effect[]): number {
  for (const e of effects) {
    if (e.kind === 'reply' && e.msg.type === 'EVENT_PUBLISHED') return e.msg.resumed;
  }
  throw new Error('no EVENT_PUBLISHED');
}

export interface WakeRun {
  waiting: number;
  publishMs: number;
  commitMs: number;
}

/** One publish that wakes `waiting` jobs. */
export function wakeRun(waiting: number): WakeRun {
  const { handle, commit } = waitingJobs(waiting, () => ({ waitForEvent: { name: 'paid' } }));
  const started = performance.now();
  const effects = handle({
    kind: 'clientRequest',
    connId: 1,
    requestId: 1_000_000,
    msg: { type: 'PUBLISH_EVENT', name: 'paid', payload: { amount: 1 } },
  });
  const published = performance.now();
  commit();
  const committed = performance.now();
  const resumed = woken(effects);
  if (resumed !== waiting) throw new Error(`woke ${resumed} of ${waiting}`);
  return { waiting, publishMs: published - started, commitMs: committed - published };
}

/** Core microseconds per signal to `jobs` distinct waiting jobs. */
export function signalMicros(jobs: number): number {
  const { handle, commit, ids } = waitingJobs(jobs, () => ({
    waitForSignal: { name: 'approve' },
  }));
  const started = performance.now();
  for (const [i, jobId] of ids.entries()) {
    handle({
      kind: 'clientRequest',
      connId: 1,
      requestId: 2_000_000 + i,
      msg: { type: 'SIGNAL_JOB', jobId, name: 'approve', payload: { by: 'bench' } },
    });
    if (i % 100 === 99) commit();
  }
  commit();
  return ((performance.now() - started) * 1000) / jobs;
}
