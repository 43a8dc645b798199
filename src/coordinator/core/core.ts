/**
 * The coordinator core: the single writer of all scheduling state.
 *
 * `handle(input)` applies one input completely (state changes staged in the
 * store) and returns the effects. It reads the clock once per input, draws ids
 * from an injected source, and performs no I/O besides the store, so a test or
 * a seeded simulation can drive it step by step.
 *
 * The caller must commit the store before releasing the effects of an input:
 * a reply or an assignment never leaves before the state it reports is durable.
 */
import { handleClientRequest, clientClosed, expireWait } from './client-requests.js';
import { expireDeadlines, requeueDue, schedule } from './job-lifecycle.js';
import { recover } from './recovery.js';
import { CoreState } from './state.js';
import type { JobRecord } from '../../store/store.js';
import type { CoreConfig, CoreDeps, CoreInput, Effect } from './types.js';
import { handleWorkerMessage, sweepHeartbeats, workerGone } from './worker-sessions.js';

export class CoordinatorCore {
  readonly #s: CoreState;

  /**
   * Builds the core from whatever the store holds (restart recovery). The
   * recovery's writes are staged; `takeRecoveryEffects()` returns its events.
   */
  constructor(config: CoreConfig, deps: CoreDeps) {
    this.#s = new CoreState(config, deps);
    this.#s.begin();
    recover(this.#s);
  }

  /** Events of the recovery done by the constructor (call once, before any input). */
  takeRecoveryEffects(): Effect[] {
    return this.#s.takeEffects();
  }

  handle(input: CoreInput): Effect[] {
    const s = this.#s;
    s.begin();
    switch (input.kind) {
      case 'workerMessage':
        handleWorkerMessage(s, input.connId, input.msg);
        break;
      case 'workerViolation':
        workerGone(s, input.connId, `protocol violation: ${input.reason}`, false);
        break;
      case 'workerClosed':
        workerGone(s, input.connId, input.reason, true);
        break;
      case 'clientRequest':
        handleClientRequest(s, input.connId, input.requestId, input.msg);
        break;
      case 'clientClosed':
        clientClosed(s, input.connId);
        break;
      case 'waitExpired':
        expireWait(s, input.connId, input.requestId);
        break;
      case 'tick':
        sweep(s);
        break;
    }
    return s.takeEffects();
  }

  /** Non-terminal jobs right now (admission control's count). */
  get activeCount(): number {
    return this.#s.activeCount;
  }

  get maxActiveJobs(): number {
    return this.#s.config.maxActiveJobs;
  }

  /** Read-only views for metrics, tests and the simulation's invariant checks. */
  inspect(): CoreInspection {
    const s = this.#s;
    return {
      activeJobs: [...s.jobs.values()].map((job) => ({ ...job })),
      workers: [...s.workers.sessions()].map((w) => ({
        workerId: w.workerId,
        connId: w.connId,
        capacity: w.capacity,
        running: [...w.running],
        draining: w.draining,
        taskTypes: w.taskTypes === null ? null : [...w.taskTypes],
      })),
      servedTaskTypes: s.workers.servedTaskTypes(),
      activeCount: s.activeCount,
      freeSlots: s.workers.freeSlots,
      pendingWaits: s.waits.size,
    };
  }
}

function sweep(s: CoreState): void {
  sweepHeartbeats(s);
  expireDeadlines(s);
  requeueDue(s);
  schedule(s);
}

export interface CoreInspection {
  activeJobs: JobRecord[];
  workers: {
    workerId: string;
    connId: number;
    capacity: number;
    running: string[];
    draining: boolean;
    /** Declared task types; null = the five built-ins. */
    taskTypes: string[] | null;
  }[];
  /** Task types some live, non-draining worker declared. */
  servedTaskTypes: string[];
  activeCount: number;
  freeSlots: number;
  pendingWaits: number;
}
