/**
 * Timing checks, judged at handle time against a model of the core's timers:
 *
 * - a lease is revoked for its deadline only once its own deadline (grant
 *   time + timeout, or recovery time + timeout for an attempt a restart
 *   kept) has strictly passed, and after any tick no current lease is past
 *   its deadline;
 * - a RETRY_WAIT job is requeued only once its back-off has elapsed, and
 *   after any tick no job whose back-off has elapsed is still waiting;
 * - every pending WAIT_JOB on a job is answered by the very input that makes
 *   the job terminal (not later, by its timer), a wait whose timer fires
 *   is answered then, and `releaseWaits` answers every pending wait of its
 *   connection.
 */
import type { CoreConfig } from '../../src/coordinator/core/types.js';
import type { JobRecord } from '../../src/store/store.js';
import type { Judge } from './violation.js';
import type { HandledInput } from './world.js';

export class TimingChecks {
  /** Grant time of each current lease, by jobId. */
  readonly #grantedAtMs = new Map<string, number>();
  /** When each RETRY_WAIT job becomes due, by jobId. */
  readonly #retryAtMs = new Map<string, number>();
  /** Pending waits: "connId/requestId" -> jobId. */
  readonly #waits = new Map<string, string>();
  readonly #judge: Judge;
  readonly #config: CoreConfig;
  readonly #now: () => number;

  constructor(judge: Judge, config: CoreConfig, now: () => number) {
    this.#judge = judge;
    this.#config = config;
    this.#now = now;
  }

  onHandled(h: HandledInput): void {
    const now = this.#now();
    const input = h.input;
    const finished = new Set<string>();
    const expiring = input.kind === 'waitExpired' ? `${input.connId}/${input.requestId}` : null;
    const expiringPending = expiring !== null && this.#waits.has(expiring);
    if (input.kind === 'clientClosed') this.#dropWaits(input.connId);
    // Recovery keeps the attempts it finds running, each with a fresh deadline.
    if (input.kind === 'recovery')
      for (const jobId of this.#grantedAtMs.keys()) this.#grantedAtMs.set(jobId, now);
    for (const effect of h.effects) {
      if (effect.kind === 'armWait') {
        const jobId =
          input.kind === 'clientRequest' && input.msg.type === 'WAIT_JOB' ? input.msg.jobId : '';
        this.#waits.set(`${effect.connId}/${effect.requestId}`, jobId);
      } else if (effect.kind === 'reply') {
        this.#waits.delete(`${effect.connId}/${effect.requestId}`);
      } else if (effect.kind === 'event') {
        this.#onEvent(effect.event, now, finished);
      }
    }
    const judge = this.#judge;
    if (expiringPending) {
      judge.check(!this.#waits.has(expiring), () => `expired wait ${expiring} was not answered`);
    }
    if (input.kind === 'releaseWaits') {
      const left = this.waitsOn(input.connId);
      judge.check(left === 0, () => `releaseWaits on ${input.connId} left ${left} waits pending`);
    }
    for (const [key, jobId] of this.#waits) {
      if (finished.has(jobId)) {
        throw judge.violation(`wait ${key} on job ${jobId} was not answered when the job finished`);
      }
    }
    if (input.kind === 'tick') this.#afterTick(now);
  }

  /** WAIT_JOBs pending on all client connections. */
  get waitsInAll(): number {
    return this.#waits.size;
  }

  /** WAIT_JOBs pending, per client connection holding any. */
  waitsByConn(): Map<number, number> {
    const out = new Map<number, number>();
    for (const key of this.#waits.keys()) {
      const connId = Number(key.slice(0, key.indexOf('/')));
      out.set(connId, (out.get(connId) ?? 0) + 1);
    }
    return out;
  }

  /** WAIT_JOBs pending on a client connection. */
  waitsOn(connId: number): number {
    const prefix = `${connId}/`;
    let count = 0;
    for (const key of this.#waits.keys()) if (key.startsWith(prefix)) count++;
    return count;
  }

  /** The process died: rebuild the timers from the committed rows. */
  onCrash(rows: readonly JobRecord[]): void {
    this.#grantedAtMs.clear();
    this.#retryAtMs.clear();
    this.#waits.clear();
    for (const row of rows) {
      if (row.state === 'RUNNING' && row.deadlineAtMs !== null) {
        this.#grantedAtMs.set(row.jobId, row.deadlineAtMs - row.timeoutMs);
      }
      if (row.state === 'RETRY_WAIT' && row.retryAtMs !== null) {
        this.#retryAtMs.set(row.jobId, row.retryAtMs);
      }
    }
  }

  #onEvent(event: HandledEvent, now: number, finished: Set<string>): void {
    const judge = this.#judge;
    switch (event.type) {
      case 'job.progress':
        return;
      case 'job.assigned':
        this.#grantedAtMs.set(event.jobId, now);
        this.#retryAtMs.delete(event.jobId);
        return;
      case 'job.deadlineExceeded': {
        const granted = this.#grantedAtMs.get(event.jobId);
        judge.check(
          granted !== undefined && now > granted + event.timeoutMs,
          () =>
            `lease ${event.attemptId} of job ${event.jobId} revoked for its deadline at ${now}, granted at ${granted} with ${event.timeoutMs} ms`,
        );
        this.#grantedAtMs.delete(event.jobId);
        return;
      }
      case 'job.retryScheduled':
        this.#grantedAtMs.delete(event.jobId);
        this.#retryAtMs.set(event.jobId, now + event.delayMs);
        return;
      case 'job.suspended':
      case 'job.attemptRequeued':
      case 'job.rateLimited':
        this.#grantedAtMs.delete(event.jobId);
        return;
      case 'job.due':
        judge.check(event.lateMs >= 0, () => `job ${event.jobId} fell due before its time`);
        return;
      case 'schedule.fired':
      case 'schedule.skipped':
        return;
      case 'job.requeued': {
        const due = this.#retryAtMs.get(event.jobId);
        judge.check(
          due !== undefined && now >= due,
          () => `job ${event.jobId} requeued at ${now}, its back-off ends at ${due}`,
        );
        this.#retryAtMs.delete(event.jobId);
        return;
      }
      case 'job.completed':
      case 'job.failed':
      case 'job.cancelled':
      case 'job.recovered':
        this.#grantedAtMs.delete(event.jobId);
        this.#retryAtMs.delete(event.jobId);
        if (event.type !== 'job.recovered' || event.to === 'FAILED') finished.add(event.jobId);
        return;
      case 'job.submitted':
      case 'job.signalled':
      case 'job.resumed':
      case 'event.published':
      case 'job.released':
      case 'job.deduplicated':
      case 'job.dedupMatched':
      case 'job.debounced':
      case 'job.expired':
      case 'job.rejected':
      case 'result.stale':
      case 'call.stale':
      case 'worker.registered':
      case 'worker.rejected':
      case 'worker.suspected':
      case 'worker.lost':
      case 'worker.draining':
      case 'worker.leasesKept':
      case 'worker.leasesReclaimed':
      case 'worker.heldListEnded':
      case 'jobs.purged':
      case 'coordinator.stalled':
      case 'subscriber.dropped':
        return;
    }
  }

  #afterTick(now: number): void {
    const timeoutMs = this.#config.taskTimeoutMs;
    for (const [jobId, granted] of this.#grantedAtMs) {
      if (now > granted + timeoutMs) {
        throw this.#judge.violation(
          `after a tick at ${now}, job ${jobId} still holds a lease granted at ${granted} (timeout ${timeoutMs} ms)`,
        );
      }
    }
    for (const [jobId, due] of this.#retryAtMs) {
      if (due <= now) {
        throw this.#judge.violation(
          `after a tick at ${now}, job ${jobId} still waits for a retry due at ${due}`,
        );
      }
    }
  }

  #dropWaits(connId: number): void {
    const prefix = `${connId}/`;
    for (const key of [...this.#waits.keys()]) if (key.startsWith(prefix)) this.#waits.delete(key);
  }
}

type HandledEvent = Extract<HandledInput['effects'][number], { kind: 'event' }>['event'];
