/**
 * Handle-time checks: after every input, what the core did is judged from the
 * input and the effects it returned, against a model kept from those effects.
 *
 * The model follows the core's own two layers. "Live" facts (attempts per
 * job, the current lease per job) change as inputs are handled, including
 * writes not yet committed; after a crash they are rebuilt from the committed
 * rows. "Durable" facts (terminal states, idempotency keys) are staged with
 * the batch being built, travel with it when it is flushed, and are promoted
 * when that batch commits; a crash throws away only the uncommitted ones, so a
 * terminal state or a key that was ever committed is remembered for the
 * whole run, across restarts.
 *
 * Requests answered by a later input (after a read of history, or held
 * behind a key lookup) are remembered and judged when their reply appears.
 *
 * A shard of several: a job another shard's flow made is created by the
 * outbox message that brings it, or by the read of the store that message
 * waited for (its submission is the row the message carries, `sentRow`),
 * and a parent of another shard is judged by what `elsewhere` says of it
 * (its committed terminal state there).
 */
import type { CoreConfig, CoreEvent, Effect } from '../../src/coordinator/core/types.js';
import type { MemoryStore } from '../../src/store/memory-store.js';
import type { JobRecord } from '../../src/store/store.js';
import {
  isTerminalState,
  type JobEventFilter,
  type EnqueueChild,
  type JobState,
  type SubmitJob,
} from '../../src/protocol/messages.js';
import {
  checkDeferredAnswer,
  checkRequest,
  type Before,
  type KeyOwner,
  type RequestContext,
} from './request-checks.js';
import type { ClientRequest } from '../../src/protocol/messages.js';
import { collectSnapshots, snapshotProblem, type SnapshotSeen } from './snapshots.js';
import type { Judge } from './violation.js';
import type { HandledInput } from './world.js';
import { batchParts, flowParts } from './clients.js';
import { ScheduleChecks, firedJob, type TickFact } from './schedule-checks.js';
import { MAX_FREE_REQUEUES } from '../../src/protocol/limits.js';
import { EXPIRED_PREFIX } from '../../src/coordinator/core/job.js';
import { isSuspensionStep } from '../../src/coordinator/core/step-names.js';
import type { RateLimitedResult } from '../../src/protocol/messages.js';
import { DedupChecks, type DedupAnswer } from './dedup-checks.js';

export interface Lease {
  attemptId: string;
  workerId: string;
}

export interface TrackerCounts {
  created: number;
  completed: number;
  failed: number;
  cancelled: number;
  staleResults: number;
  deduplicated: number;
  rejected: number;
  recovered: number;
  /** Attempts kept for a worker whose session ended right after a stall of the core, or that a restart found running. */
  keptLeases: number;
  /** Attempts a new session took back (`heldAttempts`). */
  reclaimedLeases: number;
  /** Connections whose end the core was told of before their last frames. */
  endingConnections: number;
  /** Jobs created with parents. */
  dependents: number;
  /** Child jobs made by ENQUEUE_CHILD. */
  children: number;
  /** Dependents seen cancelled by the failure of a parent. */
  cascaded: number;
  /** Attempts that ended in a sleep or a wait (durable steps). */
  suspended: number;
  /** Attempts requeued by their worker without counting (`TASK_RESULT.requeue`). */
  requeued: number;
  /** Requeues past the free ones, which counted as failed attempts. */
  requeuesCounted: number;
  /** Held lists that came in several parts (`moreHeld`) and ended. */
  heldLists: number;
  /** Submissions a dedup key answered with an existing job, and those that replaced its payload (debounce). */
  dedupMatched: number;
  replaced: number;
  /** Jobs that expired before an attempt started. */
  expired: number;
  /** Attempts their handler ended rate limited (not counted), by scope. */
  rateLimited: number;
  rateLimitedGroup: number;
  rateLimitedQueue: number;
}

/** A queue's (group null: the whole queue) or a group's place for holds. */
const holdKey = (queue: string, group?: string | null): string =>
  group === undefined ? `q\t${queue}` : `g\t${queue}\t${group ?? ''}`;

export class JobTracker {
  /** Every job the live core knows (committed, or staged by it), with its attempts. */
  readonly attempts = new Map<string, number>();
  readonly maxAttempts = new Map<string, number>();
  /** Attempts of each job that ended in a suspension (durable steps): not counted toward maxAttempts. */
  readonly suspensions = new Map<string, number>();
  /** Attempts of each job its worker requeued without counting (at most MAX_FREE_REQUEUES). */
  readonly requeues = new Map<string, number>();
  /** Jobs whose attempt was requeued in the input being judged: QUEUED (or assigned) at once. */
  readonly requeuedNow: string[] = [];
  /** Attempts of each job its handler ended rate limited: not counted toward maxAttempts. */
  readonly rateLimits = new Map<string, number>();
  /** Jobs rate limited in the input being judged, and until when: SCHEDULED then. */
  readonly rateLimitedNow: { jobId: string; untilMs: number }[] = [];
  /** The expiry of each job the live core knows (fixed at submission). */
  readonly expiresAt = new Map<string, number>();
  /** Queue and group of each job the live core knows (for the holds). */
  readonly #placeOf = new Map<string, { queue: string; group: string | null }>();
  /**
   * Holds handlers set (scope `queue` or `group`), until when: the live
   * core's (committed and staged), and the committed ones, which alone
   * survive a crash.
   */
  #liveHolds = new Map<string, number>();
  readonly #committedHolds = new Map<string, number>();
  /** Deduplication keys: their model and rules (dedup-checks.ts). */
  readonly dedup: DedupChecks;
  /** Replies of the input being judged that a dedup key answered, in effect order. */
  #dedupAnswers: DedupAnswer[] = [];
  /**
   * The `traceparent` each job was submitted with (null: none). Fixed at
   * submission, so kept across crashes: a job that survives one must still
   * carry it (every simulated worker asks for it).
   */
  readonly #traceOf = new Map<string, string | null>();
  /** The current lease of each RUNNING job, as the events tell it. */
  readonly leases = new Map<string, Lease>();
  /** Jobs whose attempt the last recovery found running: kept until their worker is back, or ended as interrupted. */
  #keptByRecovery = new Set<string>();
  /** Terminal states that are committed, with a copy of the row as committed then. */
  readonly terminal = new Map<string, { state: JobState; row: Readonly<JobRecord> }>();
  /** Jobs submitted with a due time ahead: they may live only in the store while active. */
  readonly delayed = new Set<string>();
  /** Idempotency key -> the job it created, committed. */
  readonly keys = new Map<string, KeyOwner>();
  readonly counts: TrackerCounts = {
    created: 0,
    completed: 0,
    failed: 0,
    cancelled: 0,
    staleResults: 0,
    deduplicated: 0,
    rejected: 0,
    recovered: 0,
    keptLeases: 0,
    reclaimedLeases: 0,
    endingConnections: 0,
    dependents: 0,
    children: 0,
    cascaded: 0,
    suspended: 0,
    requeued: 0,
    requeuesCounted: 0,
    heldLists: 0,
    dedupMatched: 0,
    replaced: 0,
    expired: 0,
    rateLimited: 0,
    rateLimitedGroup: 0,
    rateLimitedQueue: 0,
  };
  /** Jobs created with parents: their parents and policy (never rolled back: ids are unique). */
  readonly #parentsOf = new Map<string, { parents: string[]; run: boolean }>();
  readonly #dependentsOf = new Map<string, string[]>();
  /** Jobs that became terminal in the input being judged. */
  readonly #endedNow: string[] = [];
  /** Durable facts of the batch being built. */
  #building = stagedFacts();
  /**
   * Children by parent and key ("parent key"): the first child each (parent,
   * key) made. Rebuilt from the committed rows after a crash (a child that
   * was not committed never existed, and was never acknowledged).
   */
  readonly #childOf = new Map<string, string>();
  /** ENQUEUE_CHILD calls by "connId/requestId", for children made when a held call goes on. */
  readonly #childCalls = new Map<string, EnqueueChild>();
  /** Durable facts of flushed batches that are not committed yet, by batch id. */
  readonly #inFlight = new Map<number, StagedFacts>();
  /**
   * Requests whose reply comes with a later input, by "connId/requestId".
   * Kept when the client leaves: the core still settles them (a held
   * submission still creates its job), only the shell drops the reply.
   */
  readonly #deferred = new Map<string, ClientRequest>();
  /** Of those, the ones about a job the model did not know when the request was read. */
  readonly #askedUnknown = new Set<string>();
  readonly #judge: Judge;
  /** SUBSCRIBE_JOBS filters the core accepted, by client connection (gone with a crash). */
  readonly #subscriptions = new Map<number, JobEventFilter[]>();
  readonly #config: CoreConfig;
  readonly #store: MemoryStore;
  readonly #invalid: WeakSet<object>;
  readonly #linkWorker: (connId: number) => string | null;
  readonly #waitsOn: (connId: number) => number;
  readonly #waitsInAll: () => number;
  readonly #waitsFromAddress: (address: string) => number;
  readonly #elsewhere: (jobId: string) => JobState | undefined;
  readonly #sentRow: (jobId: string) => JobRecord | undefined;
  /** Recurring schedules: their model and invariants (schedule-checks.ts). */
  readonly schedules: ScheduleChecks;

  constructor(options: {
    judge: Judge;
    config: CoreConfig;
    store: MemoryStore;
    /** Requests the clients built invalid on purpose. */
    invalid: WeakSet<object>;
    /** The worker registered on a connection (at handle time). */
    linkWorker: (connId: number) => string | null;
    /** Pending WAIT_JOBs of a client connection (before the input). */
    waitsOn?: (connId: number) => number;
    /** Pending WAIT_JOBs of all connections (before the input). */
    waitsInAll?: () => number;
    /** Pending WAIT_JOBs of the connections from one address (before the input). */
    waitsFromAddress?: (address: string) => number;
    /** A job of another shard: its committed terminal state there (default: none ever ends). */
    elsewhere?: (jobId: string) => JobState | undefined;
    /** A job another shard's flow made: its row as the outbox message carries it (default: none). */
    sentRow?: (jobId: string) => JobRecord | undefined;
  }) {
    this.#judge = options.judge;
    this.#config = options.config;
    this.#store = options.store;
    this.#invalid = options.invalid;
    this.#linkWorker = options.linkWorker;
    this.#waitsOn = options.waitsOn ?? (() => 0);
    this.#waitsInAll = options.waitsInAll ?? (() => 0);
    this.#waitsFromAddress = options.waitsFromAddress ?? (() => 0);
    this.#elsewhere = options.elsewhere ?? (() => undefined);
    this.#sentRow = options.sentRow ?? (() => undefined);
    this.schedules = new ScheduleChecks({
      judge: options.judge,
      store: options.store,
      maxActiveJobs: options.config.maxActiveJobs,
      terminal: (jobId) => this.terminalState(jobId),
    });
    this.dedup = new DedupChecks(options.judge, {
      live: (jobId) => this.attempts.has(jobId) && this.terminalState(jobId) === undefined,
      attempts: (jobId) => this.attempts.get(jobId) ?? 0,
    });
  }

  /** Until when a handler's rate limit holds the queue (or one group of it) back, in the live core; 0 = never. */
  heldUntil(queue: string, group?: string | null): number {
    return this.#liveHolds.get(holdKey(queue, group)) ?? 0;
  }

  /** True when a hold of the queue or of any of its groups lasts past `sinceMs`. */
  anyHoldAfter(queue: string, sinceMs: number): boolean {
    for (const [key, untilMs] of this.#liveHolds) {
      if (untilMs > sinceMs && key.split('\t')[1] === queue) return true;
    }
    return false;
  }

  leaseCurrent(jobId: string, attemptId: string): boolean {
    return this.leases.get(jobId)?.attemptId === attemptId;
  }

  /** The job's terminal state, committed or staged. */
  terminalState(jobId: string): JobState | undefined {
    const committed = this.terminal.get(jobId)?.state ?? this.#building.terminal.get(jobId);
    if (committed !== undefined) return committed;
    for (const staged of this.#inFlight.values()) {
      const state = staged.terminal.get(jobId);
      if (state !== undefined) return state;
    }
    return undefined;
  }

  /** The job an idempotency key names, committed or staged. */
  keyOwner(key: string): KeyOwner | undefined {
    const owner = this.keys.get(key) ?? this.#building.keys.get(key);
    if (owner !== undefined) return owner;
    for (const staged of this.#inFlight.values()) {
      const staging = staged.keys.get(key);
      if (staging !== undefined) return staging;
    }
    return undefined;
  }

  onHandled(h: HandledInput): void {
    const judge = this.#judge;
    const input = h.input;
    if (input.kind === 'workerEnding') this.counts.endingConnections++;
    if (input.kind === 'workerMessage' && h.linkClosedByCore) {
      // Only a log line (result.stale) may come of it.
      judge.check(
        h.effects.every((e) => e.kind === 'event' && e.event.type === 'result.stale'),
        () =>
          `a ${input.msg.type} on connection ${input.connId}, already closed by the core, changed something`,
      );
    }
    const snapshots = collectSnapshots(h.effects);
    for (const seen of snapshots) this.#snapshotBefore(seen);
    const before = this.#captureBefore(h);
    if (input.kind === 'recovery') this.schedules.onRecovery(h.nowMs);
    if (input.kind === 'tick' || input.kind === 'wake') {
      // Ticks fire first in a timed input, before anything in it ends a job.
      for (const fact of this.schedules.onTimedInput(h)) {
        const fired = h.effects.find(
          (e) =>
            e.kind === 'event' &&
            e.event.type === 'schedule.fired' &&
            e.event.name === fact.name &&
            e.event.tickMs === fact.tickMs,
        );
        if (fired?.kind === 'event' && fired.event.type === 'schedule.fired') {
          this.#building.ticks.set(fired.event.jobId, fact);
        }
      }
    }
    this.#dedupAnswers = this.#collectDedupAnswers(h);
    let created = 0;
    let finished = 0;
    for (const effect of h.effects) {
      if (effect.kind !== 'event') continue;
      if (effect.event.type === 'job.submitted') created++;
      if (isFinishing(effect.event)) finished++;
      this.#apply(effect.event, h);
    }
    for (const seen of snapshots) this.#snapshotAfter(seen);
    this.#checkCascade(this.#endedNow.splice(0));
    for (const effect of h.effects) {
      // TASK_CANCEL is advisory: the lease is revoked before it is sent.
      if (effect.kind === 'send' && effect.msg.type === 'TASK_CANCEL') {
        const { jobId, attemptId } = effect.msg;
        judge.check(
          !this.leaseCurrent(jobId, attemptId),
          () => `TASK_CANCEL for ${jobId}/${attemptId}, which is still the current lease`,
        );
      }
    }
    if (input.kind !== 'recovery') {
      judge.check(
        h.activeAfter - h.activeBefore === created - finished,
        () =>
          `activeCount went ${h.activeBefore} -> ${h.activeAfter} on ${input.kind} with ${created} created and ${finished} finished`,
      );
    }
    const ctx = this.#requestContext();
    if (input.kind === 'clientRequest' && !checkRequest(ctx, input, h, before)) {
      const key = `${input.connId}/${input.requestId}`;
      this.#deferred.set(key, input.msg);
      if (!before.known) this.#askedUnknown.add(key);
    }
    if (input.kind === 'clientRequest') this.#followSchedules(input, h);
    this.#judgeDeferred(h);
    if (input.kind === 'workerMessage' && input.msg.type === 'TASK_RESULT') {
      this.#checkResult(input.msg.jobId, input.msg.attemptId, input.msg, h, before.lease);
    }
    if (input.kind === 'workerMessage' && input.msg.type === 'TASK_PROGRESS') {
      this.#checkProgress(input.msg, h, before.lease);
    }
    this.#checkPushes(h);
  }

  /** The batch being built was flushed as `batchId` (null: without writes). */
  onFlushed(batchId: number | null): void {
    const staged = this.#building;
    this.#building = stagedFacts();
    if (batchId !== null) {
      this.#inFlight.set(batchId, staged);
      return;
    }
    this.#judge.check(
      staged.terminal.size === 0 &&
        staged.keys.size === 0 &&
        staged.ticks.size === 0 &&
        staged.holds.size === 0,
      () => `a batch with ${staged.terminal.size} terminal state(s) had nothing to write`,
    );
  }

  /** The facts of batch `batchId` are durable now. */
  onCommitted(batchId: number): void {
    const judge = this.#judge;
    const staged = this.#inFlight.get(batchId);
    this.#inFlight.delete(batchId);
    if (staged === undefined) return;
    for (const [jobId, state] of staged.terminal) {
      const row = this.#store.committedJob(jobId);
      judge.check(
        row?.state === state,
        () => `job ${jobId} became ${state} but the committed row says ${row?.state ?? 'nothing'}`,
      );
      const expected = staged.results.get(jobId);
      judge.check(
        expected === undefined || row?.result === expected,
        () =>
          `job ${jobId} completed with result ${row?.result}, the accepted attempt sent ${expected}`,
      );
      // An expired job, and only one, ends CANCELLED with an error that says so.
      const expired = staged.expired.has(jobId);
      judge.check(
        expired === (state === 'CANCELLED' && (row?.error ?? '').startsWith(EXPIRED_PREFIX)),
        () =>
          `job ${jobId} ended ${state} with error ${JSON.stringify(row?.error)} (expired: ${expired})`,
      );
      if (row !== undefined) this.terminal.set(jobId, { state, row });
    }
    for (const [key, untilMs] of staged.holds) {
      this.#committedHolds.set(key, Math.max(this.#committedHolds.get(key) ?? 0, untilMs));
    }
    for (const [key, owner] of staged.keys) this.keys.set(key, owner);
    this.schedules.onCommitted(staged.ticks);
  }

  /** The process died: staged facts vanish, live facts are rebuilt from committed rows. */
  onCrash(): void {
    this.#subscriptions.clear();
    this.#building = stagedFacts();
    this.#inFlight.clear();
    this.#deferred.clear();
    this.#askedUnknown.clear();
    this.schedules.onCrash();
    this.attempts.clear();
    this.maxAttempts.clear();
    this.suspensions.clear();
    this.requeues.clear();
    this.rateLimits.clear();
    this.expiresAt.clear();
    this.#placeOf.clear();
    this.leases.clear();
    this.#childOf.clear();
    // Holds staged in batches that never committed are gone with the process.
    this.#liveHolds = new Map(this.#committedHolds);
    const rows = this.#store.committedJobs();
    this.dedup.rebuild(rows);
    for (const row of rows) {
      this.#placeOf.set(row.jobId, { queue: row.queue, group: row.groupKey ?? null });
      if (row.expiresAtMs != null) this.expiresAt.set(row.jobId, row.expiresAtMs);
      if (row.attempts > 0) {
        const limited = this.#store
          .committedAttempts(row.jobId)
          .filter((attempt) => attempt.outcome === 'RATE_LIMITED').length;
        if (limited > 0) this.rateLimits.set(row.jobId, limited);
      }
      if (row.parentJobId != null && row.childKey != null) {
        this.#childOf.set(`${row.parentJobId} ${row.childKey}`, row.jobId);
      }
      this.attempts.set(row.jobId, row.attempts);
      this.suspensions.set(row.jobId, committedSuspensions(this.#store, row.jobId));
      // The core's rows carry the count of its REQUEUED attempts.
      this.requeues.set(row.jobId, row.requeues ?? 0);
      this.maxAttempts.set(row.jobId, row.maxAttempts);
      if (row.state === 'RUNNING' && row.attemptId !== null && row.workerId !== null) {
        this.leases.set(row.jobId, { attemptId: row.attemptId, workerId: row.workerId });
      }
    }
    this.#keptByRecovery = new Set(this.leases.keys());
  }

  #captureBefore(h: HandledInput): Before & { lease: Lease | undefined } {
    const input = h.input;
    let jobId: string | null = null;
    let key: string | null = null;
    if (
      input.kind === 'workerMessage' &&
      (input.msg.type === 'TASK_RESULT' || input.msg.type === 'TASK_PROGRESS')
    ) {
      jobId = input.msg.jobId;
    }
    let schedule: Pick<Before, 'schedule' | 'scheduleModels'> = {};
    if (input.kind === 'clientRequest') {
      const msg = input.msg;
      if (msg.type === 'SUBMIT_JOB') key = msg.idempotencyKey;
      if (msg.type === 'SET_SCHEDULE')
        schedule = { schedule: this.schedules.get(msg.schedule.name) };
      if (
        msg.type === 'GET_SCHEDULE' ||
        msg.type === 'PAUSE_SCHEDULE' ||
        msg.type === 'RESUME_SCHEDULE' ||
        msg.type === 'DELETE_SCHEDULE' ||
        msg.type === 'TRIGGER_SCHEDULE'
      ) {
        schedule = { schedule: this.schedules.get(msg.name) };
      }
      if (msg.type === 'LIST_SCHEDULES') {
        const models = new Map<string, NonNullable<Before['schedule']>>();
        for (const name of this.schedules.names()) {
          models.set(name, this.schedules.get(name) as NonNullable<Before['schedule']>);
        }
        schedule = { scheduleModels: models };
      }
      if (msg.type === 'CANCEL_JOB' || msg.type === 'GET_JOB_STATUS' || msg.type === 'WAIT_JOB') {
        jobId = msg.jobId;
      }
    }
    return {
      lease: jobId === null ? undefined : this.leases.get(jobId),
      keyOwner: key === null ? undefined : this.keyOwner(key),
      terminal: jobId === null ? undefined : this.terminalState(jobId),
      known: jobId !== null && this.attempts.has(jobId),
      waitsOnConnection: input.kind === 'clientRequest' ? this.#waitsOn(input.connId) : 0,
      waitsInAll: this.#waitsInAll(),
      waitsFromAddress:
        input.kind === 'clientRequest' && input.address !== undefined
          ? this.#waitsFromAddress(input.address)
          : null,
      ...schedule,
    };
  }

  /** The model of schedules follows what a schedule request did (already judged). */
  #followSchedules(
    input: Extract<HandledInput['input'], { kind: 'clientRequest' }>,
    h: HandledInput,
  ): void {
    const msg = input.msg;
    for (const effect of h.effects) {
      if (
        effect.kind !== 'reply' ||
        effect.connId !== input.connId ||
        effect.requestId !== input.requestId
      ) {
        continue;
      }
      const reply = effect.msg;
      if (
        (msg.type === 'SET_SCHEDULE' ||
          msg.type === 'PAUSE_SCHEDULE' ||
          msg.type === 'RESUME_SCHEDULE') &&
        reply.type === 'SCHEDULE_INFO'
      ) {
        if (msg.type === 'SET_SCHEDULE') this.schedules.counts.set++;
        this.schedules.onInfo(reply.schedule, h.nowMs);
      }
      if (msg.type === 'SET_SCHEDULE' && reply.type === 'ERROR') this.schedules.counts.invalid++;
      if (msg.type === 'DELETE_SCHEDULE' && reply.type === 'SCHEDULE_DELETED') {
        this.schedules.onDeleted(msg.name);
      }
      if (msg.type === 'TRIGGER_SCHEDULE' && reply.type === 'JOB_SUBMITTED') {
        this.schedules.onTriggered(msg.name, reply.jobId, h.nowMs);
      }
    }
  }

  #snapshotBefore(seen: SnapshotSeen): void {
    const judge = this.#judge;
    const problem = snapshotProblem(seen.snapshot, this.rateLimits.get(seen.jobId) ?? 0);
    judge.check(problem === null, () => `${seen.where}: job ${seen.jobId}: ${problem}`);
    const terminal = this.terminalState(seen.jobId);
    judge.check(
      terminal === undefined || terminal === seen.state,
      () => `terminal job ${seen.jobId} (${terminal}) shows as ${seen.state} in ${seen.where}`,
    );
    const attempts = this.attempts.get(seen.jobId);
    judge.check(
      attempts === undefined || seen.attempts >= attempts,
      () =>
        `${seen.where} shows job ${seen.jobId} with ${seen.attempts} attempts, fewer than ${attempts}`,
    );
  }

  #snapshotAfter(seen: SnapshotSeen): void {
    const judge = this.#judge;
    const attempts = this.attempts.get(seen.jobId);
    judge.check(attempts !== undefined, () => `${seen.where} shows unknown job ${seen.jobId}`);
    judge.check(
      seen.attempts <= (attempts as number),
      () =>
        `${seen.where} shows job ${seen.jobId} with ${seen.attempts} attempts, more than ${attempts}`,
    );
    if (isTerminalState(seen.state)) {
      const terminal = this.terminalState(seen.jobId);
      judge.check(
        terminal === seen.state,
        () =>
          `${seen.where} shows job ${seen.jobId} ${seen.state}, but it is ${terminal ?? 'not terminal'}`,
      );
    }
  }

  #terminate(jobId: string, state: JobState): void {
    const before = this.terminalState(jobId);
    this.#judge.check(
      before === undefined,
      () => `terminal job ${jobId} changed again: ${before} -> ${state}`,
    );
    this.#building.terminal.set(jobId, state);
    this.#endedNow.push(jobId);
  }

  #apply(event: CoreEvent, h: HandledInput): void {
    const judge = this.#judge;
    switch (event.type) {
      case 'job.submitted':
        return this.#applySubmitted(event, h);
      case 'job.assigned':
        return this.#applyAssigned(event, h.effects, h.nowMs);
      case 'job.suspended':
        judge.check(
          this.leaseCurrent(event.jobId, event.attemptId),
          () => `job ${event.jobId} suspended by lease ${event.attemptId}, which is not current`,
        );
        this.leases.delete(event.jobId);
        this.suspensions.set(event.jobId, (this.suspensions.get(event.jobId) ?? 0) + 1);
        this.counts.suspended++;
        return;
      case 'job.attemptRequeued':
        return this.#applyRequeued(event, h);
      case 'job.completed':
        return this.#applyCompleted(event, h);
      case 'job.retryScheduled':
      case 'job.failed':
        return this.#applyAttemptFailed(event);
      case 'job.cancelled':
        judge.check(
          (event.from === 'RUNNING') === this.leases.has(event.jobId),
          () =>
            `job ${event.jobId} cancelled from ${event.from}, lease known: ${this.leases.has(event.jobId)}`,
        );
        this.leases.delete(event.jobId);
        this.counts.cancelled++;
        return this.#terminate(event.jobId, 'CANCELLED');
      case 'job.deadlineExceeded':
        judge.check(
          h.input.kind === 'tick' && this.leaseCurrent(event.jobId, event.attemptId),
          () =>
            `deadline of job ${event.jobId} exceeded for a lease that is not current, on ${h.input.kind}`,
        );
        this.leases.delete(event.jobId);
        return;
      case 'job.recovered':
        return this.#applyRecovered(event, h);
      case 'job.due':
        judge.check(
          !this.leases.has(event.jobId) && this.terminalState(event.jobId) === undefined,
          () => `delayed job ${event.jobId} fell due while leased or terminal`,
        );
        this.dedup.onDue(event.jobId);
        return;
      case 'job.dedupMatched': {
        const answer = this.#dedupAnswers.find((a) => !a.consumed && a.jobId === event.jobId);
        if (answer !== undefined) answer.consumed = true;
        this.dedup.onMatched(event, answer, h.nowMs);
        this.counts.dedupMatched++;
        if (event.replaced) this.counts.replaced++;
        return;
      }
      case 'job.debounced':
        return; // judged with its job.dedupMatched
      case 'job.expired':
        return this.#applyExpired(event, h);
      case 'job.rateLimited':
        return this.#applyRateLimited(event, h);
      case 'schedule.fired':
      case 'schedule.skipped':
        return; // judged with their input (ScheduleChecks.onTimedInput)
      case 'job.requeued':
      case 'job.released':
        judge.check(
          !this.leases.has(event.jobId) && this.terminalState(event.jobId) === undefined,
          () => `job ${event.jobId} ${event.type} while leased or terminal`,
        );
        return;
      case 'job.deduplicated':
        this.counts.deduplicated++;
        return;
      case 'job.rejected':
        this.counts.rejected++;
        return;
      case 'result.stale':
        this.counts.staleResults++;
        return;
      case 'job.progress':
        return; // judged with its TASK_PROGRESS (#checkProgress)
      case 'call.stale':
        return; // a refused call changes nothing (judged by the counts of this input)
      case 'worker.leasesKept':
        this.counts.keptLeases += event.jobs;
        return;
      case 'worker.leasesReclaimed':
        this.counts.reclaimedLeases += event.jobs;
        return;
      case 'worker.heldListEnded':
        this.counts.heldLists++;
        return;
      case 'worker.registered':
      case 'worker.rejected':
      case 'worker.suspected':
      case 'worker.lost':
      case 'worker.draining':
      case 'jobs.purged':
      case 'coordinator.stalled':
      case 'subscriber.dropped':
        return;
      case 'job.signalled':
      case 'job.resumed':
      case 'event.published':
        return; // judged by SignalChecks (signal-checks.ts)
    }
  }

  /** Attempts of a job that do not count toward its maxAttempts: suspensions, free requeues, rate limits. */
  uncounted(jobId: string): number {
    return (
      (this.suspensions.get(jobId) ?? 0) +
      (this.requeues.get(jobId) ?? 0) +
      (this.rateLimits.get(jobId) ?? 0)
    );
  }

  /**
   * Expiry: a job expires only once its expiry has come, never from
   * RUNNING, and ends CANCELLED in the same input (its row then says
   * `EXPIRED:`, checked when it commits).
   */
  #applyExpired(event: Extract<CoreEvent, { type: 'job.expired' }>, h: HandledInput): void {
    const at = this.expiresAt.get(event.jobId);
    this.#judge.check(
      at === event.expiresAtMs &&
        h.nowMs >= at &&
        event.from !== 'RUNNING' &&
        !this.leases.has(event.jobId) &&
        this.terminalState(event.jobId) === 'CANCELLED',
      () =>
        `job ${event.jobId} expired from ${event.from} at ${h.nowMs} (expiry ${event.expiresAtMs}, submitted with ${at}), now ${this.terminalState(event.jobId) ?? 'not terminal'}`,
    );
    this.#building.expired.add(event.jobId);
    this.counts.expired++;
  }

  /**
   * Rate limits: an attempt ends rate limited only on its own worker's
   * TASK_RESULT with `rateLimited` under the current lease; it is not
   * counted, and the job is due after `retryAfterMillis` (checked on the core
   * after the input). A hold of the group or queue is staged with the batch
   * and lives through a crash only once committed.
   */
  #applyRateLimited(event: Extract<CoreEvent, { type: 'job.rateLimited' }>, h: HandledInput): void {
    const judge = this.#judge;
    const input = h.input;
    const limited =
      input.kind === 'workerMessage' && input.msg.type === 'TASK_RESULT'
        ? input.msg.rateLimited
        : undefined;
    const lease = this.leases.get(event.jobId);
    judge.check(
      limited != null &&
        input.kind === 'workerMessage' &&
        input.msg.type === 'TASK_RESULT' &&
        input.msg.jobId === event.jobId &&
        lease?.attemptId === input.msg.attemptId &&
        lease.workerId === event.workerId &&
        event.scope === limited.scope &&
        event.untilMs === h.nowMs + limited.retryAfterMillis &&
        event.attempt === this.attempts.get(event.jobId),
      () =>
        `job ${event.jobId} rate limited (${event.scope} until ${event.untilMs}, attempt ${event.attempt}) on a ${input.kind} input, not on its current lease's rateLimited result`,
    );
    this.leases.delete(event.jobId);
    this.rateLimits.set(event.jobId, (this.rateLimits.get(event.jobId) ?? 0) + 1);
    this.rateLimitedNow.push({ jobId: event.jobId, untilMs: event.untilMs });
    this.counts.rateLimited++;
    if (event.scope === 'job') return;
    const place = this.#placeOf.get(event.jobId);
    if (place === undefined) throw judge.violation(`rate limited job ${event.jobId} has no queue`);
    const key = event.scope === 'queue' ? holdKey(place.queue) : holdKey(place.queue, place.group);
    if (event.scope === 'queue') this.counts.rateLimitedQueue++;
    else this.counts.rateLimitedGroup++;
    const untilMs = Math.max(this.#liveHolds.get(key) ?? 0, event.untilMs);
    this.#liveHolds.set(key, untilMs);
    this.#building.holds.set(key, Math.max(this.#building.holds.get(key) ?? 0, untilMs));
  }

  /**
   * Expiry and holds at an attempt's start: no attempt of a job starts at
   * or after its expiry, nor in a queue or group a handler holds back.
   */
  #checkStartAllowed(jobId: string, nowMs: number): void {
    const judge = this.#judge;
    const expiresAt = this.expiresAt.get(jobId);
    judge.check(
      expiresAt === undefined || nowMs < expiresAt,
      () => `job ${jobId} started at ${nowMs}, at or after its expiry ${expiresAt}`,
    );
    const place = this.#placeOf.get(jobId);
    if (place === undefined) throw judge.violation(`assigned job ${jobId} has no queue`);
    const queueHold = this.heldUntil(place.queue);
    const groupHold = this.heldUntil(place.queue, place.group);
    judge.check(
      nowMs >= queueHold && nowMs >= groupHold,
      () =>
        `job ${jobId} of ${place.queue}/${place.group ?? '-'} started at ${nowMs}, held back until ${Math.max(queueHold, groupHold)} by a handler's rate limit`,
    );
  }

  /**
   * The replies of this input that a dedup key answered, with their
   * submissions (the request of this input, or one held and settled now).
   */
  #collectDedupAnswers(h: HandledInput): DedupAnswer[] {
    const input = h.input;
    const answers: DedupAnswer[] = [];
    for (const effect of h.effects) {
      if (effect.kind !== 'reply') continue;
      const reply = effect.msg;
      if (reply.type !== 'JOB_SUBMITTED' && reply.type !== 'JOBS_SUBMITTED') continue;
      const request =
        input.kind === 'clientRequest' &&
        input.connId === effect.connId &&
        input.requestId === effect.requestId
          ? input.msg
          : this.#deferred.get(`${effect.connId}/${effect.requestId}`);
      if (reply.type === 'JOB_SUBMITTED' && reply.deduplicated === true) {
        if (request?.type !== 'SUBMIT_JOB') continue;
        answers.push({
          jobId: reply.jobId,
          replaced: reply.replaced === true,
          submission: request,
          snapshot: reply.job,
          consumed: false,
        });
      }
      if (reply.type === 'JOBS_SUBMITTED' && request?.type === 'SUBMIT_JOBS') {
        const parts = batchParts(request);
        reply.jobIds.forEach((jobId, i) => {
          if (reply.deduplicated?.[i] !== true) return;
          answers.push({
            jobId,
            replaced: reply.replaced?.[i] === true,
            submission: parts[i] as SubmitJob,
            snapshot: null,
            consumed: false,
          });
        });
      }
    }
    return answers;
  }

  /**
   * Requeue invariant: an attempt ends REQUEUED (not counted) only on its
   * worker's TASK_RESULT with `requeue` under the current lease, and only
   * while the job has had fewer than MAX_FREE_REQUEUES such attempts; the
   * job is QUEUED at once (checked on the rows after the step).
   */
  #applyRequeued(
    event: Extract<CoreEvent, { type: 'job.attemptRequeued' }>,
    h: HandledInput,
  ): void {
    const judge = this.#judge;
    const input = h.input;
    const before = this.requeues.get(event.jobId) ?? 0;
    judge.check(
      this.leaseCurrent(event.jobId, event.attemptId) &&
        input.kind === 'workerMessage' &&
        input.msg.type === 'TASK_RESULT' &&
        input.msg.requeue === true &&
        input.msg.attemptId === event.attemptId,
      () =>
        `job ${event.jobId} requeued on a ${input.kind} input, not on its current lease's requeue`,
    );
    judge.check(
      before < MAX_FREE_REQUEUES && event.requeues === before + 1,
      () =>
        `job ${event.jobId} requeued for free as number ${event.requeues} after ${before} free requeues (at most ${MAX_FREE_REQUEUES})`,
    );
    this.leases.delete(event.jobId);
    this.requeues.set(event.jobId, before + 1);
    this.requeuedNow.push(event.jobId);
    this.counts.requeued++;
  }

  #applyCompleted(event: Extract<CoreEvent, { type: 'job.completed' }>, h: HandledInput): void {
    const judge = this.#judge;
    const lease = this.leases.get(event.jobId);
    judge.check(
      lease !== undefined && lease.workerId === event.workerId,
      () => `job ${event.jobId} completed by ${event.workerId} without holding its current lease`,
    );
    judge.check(
      h.input.kind === 'workerMessage' &&
        h.input.msg.type === 'TASK_RESULT' &&
        h.input.msg.jobId === event.jobId,
      () => `job ${event.jobId} completed on a ${h.input.kind} input, not on its TASK_RESULT`,
    );
    this.leases.delete(event.jobId);
    this.counts.completed++;
    this.#terminate(event.jobId, 'COMPLETED');
  }

  #applyAttemptFailed(
    event: Extract<CoreEvent, { type: 'job.retryScheduled' | 'job.failed' }>,
  ): void {
    const judge = this.#judge;
    this.leases.delete(event.jobId);
    if (event.type === 'job.retryScheduled') {
      const used = event.attempt - this.uncounted(event.jobId);
      judge.check(
        event.attempt === this.attempts.get(event.jobId) && used < event.maxAttempts,
        () =>
          `retry of job ${event.jobId} after attempt ${event.attempt} (${used} counted) of ${event.maxAttempts}`,
      );
      return;
    }
    const uncounted = this.uncounted(event.jobId);
    judge.check(
      event.attempts === this.attempts.get(event.jobId) &&
        (event.cause === 'non_retryable' ||
          event.attempts - uncounted >= (this.maxAttempts.get(event.jobId) ?? 0)),
      () => `job ${event.jobId} failed after ${event.attempts} attempts with attempts left`,
    );
    this.counts.failed++;
    this.#terminate(event.jobId, 'FAILED');
  }

  #applySubmitted(event: Extract<CoreEvent, { type: 'job.submitted' }>, h: HandledInput): void {
    const judge = this.#judge;
    const submission = this.#submissionOf(event.jobId, h);
    judge.check(!this.attempts.has(event.jobId), () => `job id ${event.jobId} created twice`);
    const key = event.idempotencyKey;
    if (key !== null) {
      const owner = this.keyOwner(key);
      judge.check(
        owner === undefined,
        () => `idempotency key ${key} maps to two jobs: ${owner?.jobId} and ${event.jobId}`,
      );
      this.#building.keys.set(key, { jobId: event.jobId, submission });
    }
    this.attempts.set(event.jobId, 0);
    if (typeof submission.runAtMillis === 'number' && submission.runAtMillis > h.nowMs)
      this.delayed.add(event.jobId);
    if (submission.expiresAtMillis != null) {
      this.expiresAt.set(event.jobId, submission.expiresAtMillis);
    }
    this.#placeOf.set(event.jobId, { queue: event.queue, group: submission.groupKey ?? null });
    this.dedup.onCreated(event, submission, h.nowMs);
    this.maxAttempts.set(event.jobId, event.maxAttempts);
    this.#traceOf.set(event.jobId, submission.traceparent ?? null);
    this.counts.created++;
    const parents = submission.dependsOn ?? null;
    if (parents !== null && parents.length > 0) {
      const run = submission.onParentFailure === 'run';
      this.#parentsOf.set(event.jobId, { parents: [...new Set(parents)], run });
      for (const parent of parents) {
        const list = this.#dependentsOf.get(parent) ?? [];
        list.push(event.jobId);
        this.#dependentsOf.set(parent, list);
      }
      this.counts.dependents++;
    }
  }

  /**
   * Dependencies: a dependent starts only after every parent COMPLETED (or
   * ended at all, with `run`).
   */
  #checkParentsDone(jobId: string): void {
    const deps = this.#parentsOf.get(jobId);
    if (deps === undefined) return;
    for (const parent of deps.parents) {
      // A parent this shard does not know is another shard's.
      const state = this.attempts.has(parent)
        ? this.terminalState(parent)
        : this.#elsewhere(parent);
      this.#judge.check(
        state === 'COMPLETED' || (deps.run && state !== undefined),
        () =>
          `dependent ${jobId} assigned while its parent ${parent} is ${state ?? 'not terminal'}`,
      );
    }
  }

  /**
   * A parent that ended FAILED or CANCELLED in this input has cancelled every
   * dependent without `run`, in the same input (so in the same commit).
   */
  #checkCascade(ended: readonly string[]): void {
    for (const parent of ended) {
      const state = this.terminalState(parent);
      if (state !== 'FAILED' && state !== 'CANCELLED') continue;
      for (const dependent of this.#dependentsOf.get(parent) ?? []) {
        if (this.#parentsOf.get(dependent)?.run !== false || !this.attempts.has(dependent))
          continue;
        const after = this.terminalState(dependent);
        this.#judge.check(
          after === 'CANCELLED',
          () =>
            `parent ${parent} ended ${state}, its dependent ${dependent} is ${after ?? 'not terminal'}`,
        );
        if (after === 'CANCELLED') this.counts.cascaded++;
      }
    }
  }

  #applyAssigned(
    event: Extract<CoreEvent, { type: 'job.assigned' }>,
    effects: readonly Effect[],
    nowMs: number,
  ): void {
    const judge = this.#judge;
    const jobId = event.jobId;
    const held = this.leases.get(jobId);
    judge.check(
      held === undefined,
      () =>
        `job ${jobId} got lease ${event.attemptId} on ${event.workerId} while lease ${held?.attemptId} on ${held?.workerId} is current`,
    );
    judge.check(
      this.terminalState(jobId) === undefined,
      () => `terminal job ${jobId} was assigned`,
    );
    this.#checkParentsDone(jobId);
    const attempts = this.attempts.get(jobId);
    judge.check(
      attempts !== undefined && event.attempt === attempts + 1,
      () => `job ${jobId} assigned as attempt ${event.attempt} after ${attempts} attempts`,
    );
    const uncounted = this.uncounted(jobId);
    judge.check(
      event.attempt - uncounted <= (this.maxAttempts.get(jobId) ?? 0),
      () =>
        `job ${jobId} assigned attempt ${event.attempt} (${uncounted} suspended or requeued) beyond maxAttempts ${event.maxAttempts}`,
    );
    const send = effects.find(
      (e) =>
        e.kind === 'send' && e.msg.type === 'TASK_ASSIGN' && e.msg.attemptId === event.attemptId,
    );
    judge.check(
      send?.kind === 'send' &&
        send.msg.type === 'TASK_ASSIGN' &&
        send.msg.jobId === jobId &&
        send.msg.attemptNumber === event.attempt &&
        this.#linkWorker(send.connId) === event.workerId,
      () =>
        `job ${jobId} assigned to ${event.workerId} without a matching TASK_ASSIGN on its connection`,
    );
    const traceparent =
      send?.kind === 'send' && send.msg.type === 'TASK_ASSIGN' ? send.msg.traceparent : undefined;
    const recorded = this.#traceOf.get(jobId);
    judge.check(
      recorded === undefined || (traceparent ?? null) === recorded,
      () =>
        `job ${jobId} was submitted with trace context ${recorded}, assigned with ${traceparent}`,
    );
    this.#checkStartAllowed(jobId, nowMs);
    if (send?.kind === 'send' && send.msg.type === 'TASK_ASSIGN') {
      this.dedup.onAssigned(jobId, send.msg.payload);
    }
    this.leases.set(jobId, { attemptId: event.attemptId, workerId: event.workerId });
    this.attempts.set(jobId, event.attempt);
    this.#keptByRecovery.delete(jobId);
  }

  #applyRecovered(event: Extract<CoreEvent, { type: 'job.recovered' }>, h: HandledInput): void {
    const judge = this.#judge;
    if (event.from === 'WAITING') return this.#recoveredBlocked(event.jobId, event.to);
    // Suspended attempts (sleeps, waits) and free requeues do not count toward maxAttempts.
    const attempts = (this.attempts.get(event.jobId) ?? 0) - this.uncounted(event.jobId);
    const max = this.maxAttempts.get(event.jobId) ?? 0;
    // Recovery keeps the attempts it found running; one whose worker does
    // not come back for it ends later (a tick, or the worker's registration).
    judge.check(
      this.#keptByRecovery.has(event.jobId) &&
        event.from === 'RUNNING' &&
        this.leases.has(event.jobId),
      () =>
        `job ${event.jobId} recovered from ${event.from} (${h.input.kind}) without a lease kept by the last recovery`,
    );
    this.#keptByRecovery.delete(event.jobId);
    judge.check(
      event.to === 'FAILED' ? attempts >= max : event.to === 'QUEUED' && attempts < max,
      () => `job ${event.jobId} recovered to ${event.to} after ${attempts} of ${max} attempts`,
    );
    this.leases.delete(event.jobId);
    this.counts.recovered++;
    if (event.to === 'FAILED') {
      this.counts.failed++;
      this.#terminate(event.jobId, 'FAILED');
    }
  }

  /**
   * A shard's recovery found a waiting job whose parent of another shard
   * has ended so that it must not run (that end is stored for another child
   * of the same parent): the job was cancelled with it (job.cancelled came
   * first), before its own `parentEnded` arrived.
   */
  #recoveredBlocked(jobId: string, to: JobState): void {
    const deps = this.#parentsOf.get(jobId);
    const blocker = deps?.parents.find((parent) => {
      if (this.attempts.has(parent)) return false;
      const state = this.#elsewhere(parent);
      return state !== undefined && state !== 'COMPLETED' && !deps.run;
    });
    this.#judge.check(
      to === 'CANCELLED' && blocker !== undefined && this.terminalState(jobId) === 'CANCELLED',
      () =>
        `job ${jobId} recovered from WAITING to ${to}; no parent of another shard had ended so (parents ${JSON.stringify(deps)})`,
    );
  }

  /**
   * Subscriber invariant: a job event goes only to a connection holding a
   * subscription whose filter matches the job, at most once per matching
   * subscription and input, and shows the job's terminal state once it has
   * one. A closed connection's subscriptions are gone.
   */
  #checkPushes(h: HandledInput): void {
    const input = h.input;
    if (input.kind === 'clientClosed') this.#subscriptions.delete(input.connId);
    const counts = new Map<string, number>();
    for (const effect of h.effects) {
      // A subscriber dropped for a newcomer: its subscriptions are gone at once.
      if (effect.kind === 'close') this.#subscriptions.delete(effect.connId);
      if (effect.kind === 'reply' && effect.msg.type === 'SUBSCRIBED') {
        const request = input.kind === 'clientRequest' ? input.msg : null;
        this.#judge.check(
          request?.type === 'SUBSCRIBE_JOBS' &&
            input.kind === 'clientRequest' &&
            input.connId === effect.connId,
          () => `SUBSCRIBED on ${effect.connId} without its SUBSCRIBE_JOBS`,
        );
        if (request?.type !== 'SUBSCRIBE_JOBS') continue;
        const list = this.#subscriptions.get(effect.connId) ?? [];
        list.push(request.filter);
        this.#subscriptions.set(effect.connId, list);
      }
      if (effect.kind !== 'push') continue;
      const job = effect.msg.job;
      for (const connId of effect.connIds) {
        const matching = (this.#subscriptions.get(connId) ?? []).filter(
          (f) =>
            (f.jobId == null || f.jobId === job.jobId) &&
            (f.taskType == null || f.taskType === job.taskType) &&
            (f.queue == null || f.queue === 'default'),
        ).length;
        const key = `${connId}/${job.jobId}`;
        const n = (counts.get(key) ?? 0) + 1;
        counts.set(key, n);
        this.#judge.check(
          n <= matching,
          () =>
            `job event #${n} for ${job.jobId} to connection ${connId}, which has ${matching} matching subscriptions`,
        );
      }
      const terminal = this.terminalState(job.jobId);
      this.#judge.check(
        terminal === undefined || terminal === job.state,
        () => `job event shows ${job.jobId} ${job.state}, but it ended ${terminal}`,
      );
    }
  }

  /**
   * Progress fencing: a TASK_PROGRESS is accepted exactly when it carries the
   * current lease of its sender and a fraction within 0..1, and an accepted
   * one was current when it was sent.
   */
  #checkProgress(
    msg: { jobId: string; attemptId: string; fraction: number },
    h: HandledInput,
    leaseBefore: Lease | undefined,
  ): void {
    const judge = this.#judge;
    const accepted = h.effects.some(
      (e) =>
        e.kind === 'event' &&
        e.event.type === 'job.progress' &&
        e.event.jobId === msg.jobId &&
        e.event.accepted,
    );
    const current =
      !h.linkClosedByCore &&
      leaseBefore !== undefined &&
      leaseBefore.attemptId === msg.attemptId &&
      leaseBefore.workerId === h.linkWorkerId;
    const inRange = msg.fraction >= 0 && msg.fraction <= 1;
    judge.check(
      accepted === (current && inRange),
      () =>
        `TASK_PROGRESS ${msg.jobId}/${msg.attemptId} (${msg.fraction}) was ${accepted ? 'accepted' : 'ignored'}, but the current lease is ${leaseBefore?.attemptId ?? 'none'} on ${leaseBefore?.workerId ?? 'nobody'}`,
    );
    judge.check(
      !accepted || h.currentAtSend,
      () =>
        `TASK_PROGRESS ${msg.jobId}/${msg.attemptId} was accepted but was not current when sent`,
    );
  }

  /** A TASK_RESULT is accepted exactly when it carries the current lease of its sender. */
  #checkResult(
    jobId: string,
    attemptId: string,
    msg: {
      success: boolean;
      result: string | null;
      requeue?: boolean | null;
      rateLimited?: RateLimitedResult | null;
    },
    h: HandledInput,
    leaseBefore: Lease | undefined,
  ): void {
    const judge = this.#judge;
    const ended = (type: 'job.completed' | 'job.attemptRequeued'): boolean =>
      h.effects.some(
        (e) =>
          e.kind === 'event' &&
          (e.event.type === 'job.completed' || e.event.type === 'job.attemptRequeued') &&
          e.event.type === type &&
          e.event.jobId === jobId,
      );
    const counted = h.effects.some(
      (e) =>
        e.kind === 'event' &&
        (e.event.type === 'job.retryScheduled' || e.event.type === 'job.failed') &&
        e.event.cause === 'task_failure' &&
        e.event.jobId === jobId,
    );
    const requeued = ended('job.attemptRequeued');
    const rateLimited = h.effects.some(
      (e) => e.kind === 'event' && e.event.type === 'job.rateLimited' && e.event.jobId === jobId,
    );
    const accepted = ended('job.completed') || counted || requeued || rateLimited;
    const current =
      !h.linkClosedByCore &&
      leaseBefore !== undefined &&
      leaseBefore.attemptId === attemptId &&
      leaseBefore.workerId === h.linkWorkerId;
    judge.check(
      accepted === current,
      () =>
        `TASK_RESULT ${jobId}/${attemptId} from ${h.linkWorkerId ?? 'an unregistered connection'} was ${accepted ? 'accepted' : 'ignored'}, but the current lease is ${leaseBefore?.attemptId ?? 'none'} on ${leaseBefore?.workerId ?? 'nobody'}`,
    );
    if (!accepted) return;
    judge.check(
      h.currentAtSend,
      () => `TASK_RESULT ${jobId}/${attemptId} was accepted but was not current when sent`,
    );
    const completed = h.effects.some(
      (e) => e.kind === 'event' && e.event.type === 'job.completed' && e.event.jobId === jobId,
    );
    judge.check(
      completed === msg.success,
      () => `TASK_RESULT success=${msg.success} for ${jobId} was handled the other way`,
    );
    if (completed) this.#building.results.set(jobId, msg.result ?? '');
    // Rate limited: never counted (the bound of 1,000 in a row is never reached here).
    judge.check(
      rateLimited === (!msg.success && msg.rateLimited != null) && !(rateLimited && counted),
      () =>
        `TASK_RESULT ${jobId} with rateLimited ${JSON.stringify(msg.rateLimited)} was ${rateLimited ? '' : 'not '}taken as rate limited${counted ? ', and counted' : ''}`,
    );
    if (msg.success || msg.requeue !== true) return;
    // A requeue is free while the job has had fewer than the bound, and always counts after.
    const free = (this.requeues.get(jobId) ?? 0) - (requeued ? 1 : 0) < MAX_FREE_REQUEUES;
    judge.check(
      requeued === free && counted === !free,
      () =>
        `requeue of ${jobId} after ${this.requeues.get(jobId) ?? 0} free ones was ${requeued ? 'free' : 'counted'}`,
    );
    if (counted) this.counts.requeuesCounted++;
  }

  /**
   * The submission that created a job: the request of this input, or a
   * held one whose JOB_SUBMITTED for that job is among the effects.
   */
  #submissionOf(jobId: string, h: HandledInput): SubmitJob {
    const input = h.input;
    if (input.kind === 'clientRequest' && input.msg.type === 'SUBMIT_JOB') return input.msg;
    const child = this.#childCallOf(jobId, h);
    if (child !== undefined) return child;
    if (input.kind === 'outboxMessages' || input.kind === 'readDone') {
      const row = this.#sentRow(jobId);
      if (row !== undefined) return rowSubmission(row);
    }
    // A schedule's tick, or a trigger of it: the schedule's definition.
    const scheduleName =
      firedJob(h.effects, jobId)?.name ??
      (input.kind === 'clientRequest' && input.msg.type === 'TRIGGER_SCHEDULE'
        ? input.msg.name
        : undefined);
    if (scheduleName !== undefined) {
      const submission = this.schedules.submissionOf(scheduleName);
      if (submission === undefined) {
        throw this.#judge.violation(`job ${jobId} made by unknown schedule ${scheduleName}`);
      }
      return submission;
    }
    for (const effect of h.effects) {
      if (effect.kind !== 'reply') continue;
      const reply = effect.msg;
      const request =
        input.kind === 'clientRequest' &&
        input.connId === effect.connId &&
        input.requestId === effect.requestId
          ? input.msg
          : this.#deferred.get(`${effect.connId}/${effect.requestId}`);
      if (reply.type === 'JOB_SUBMITTED' && reply.jobId === jobId && request?.type === 'SUBMIT_JOB')
        return request;
      // A trigger's job, made by the event this reply reports (it has no key, no delay).
      if (reply.type === 'EVENT_PUBLISHED' && reply.jobIds.includes(jobId)) {
        const made = h.effects.find(
          (e) => e.kind === 'event' && e.event.type === 'job.submitted' && e.event.jobId === jobId,
        );
        const taskType =
          made?.kind === 'event' && made.event.type === 'job.submitted' ? made.event.taskType : '';
        return {
          type: 'SUBMIT_JOB',
          taskType,
          payload: {},
          maxAttempts: null,
          idempotencyKey: null,
          priority: null,
        };
      }
      if (reply.type === 'JOBS_SUBMITTED' && request?.type === 'SUBMIT_JOBS') {
        const part = batchParts(request)[reply.jobIds.indexOf(jobId)];
        if (part !== undefined) return part;
      }
      if (reply.type === 'FLOW_SUBMITTED' && request?.type === 'SUBMIT_FLOW') {
        const at = reply.jobs.findIndex((job) => job.jobId === jobId);
        const part = flowParts(request, reply)[at];
        if (part !== undefined) return part;
      }
    }
    throw this.#judge.violation(`job ${jobId} created on a ${input.kind} input by no submission`);
  }

  /**
   * The child job an ENQUEUE_CHILD made in this input (the call itself, or
   * one held for its parent's children and answered now), as a submission;
   * checks that no (parent, key) makes two children.
   */
  #childCallOf(jobId: string, h: HandledInput): SubmitJob | undefined {
    const input = h.input;
    if (input.kind === 'workerMessage' && input.msg.type === 'ENQUEUE_CHILD') {
      this.#childCalls.set(`${input.connId}/${input.msg.requestId}`, input.msg);
    }
    for (const effect of h.effects) {
      if (effect.kind !== 'send' || effect.msg.type !== 'CHILD_ENQUEUED') continue;
      if (effect.msg.jobId !== jobId || !effect.msg.created) continue;
      const call = this.#childCalls.get(`${effect.connId}/${effect.msg.requestId}`);
      if (call === undefined) continue;
      const key = `${call.jobId} ${call.key}`;
      const earlier = this.#childOf.get(key);
      this.#judge.check(
        earlier === undefined,
        () => `child key ${call.key} of ${call.jobId} made two children: ${earlier} and ${jobId}`,
      );
      this.#childOf.set(key, jobId);
      this.counts.children++;
      return {
        type: 'SUBMIT_JOB',
        taskType: call.taskType,
        payload: call.payload,
        maxAttempts: call.maxAttempts ?? null,
        idempotencyKey: null,
        priority: call.priority ?? null,
        ...(call.queue != null && { queue: call.queue }),
      };
    }
    return undefined;
  }

  /** Judges every reply in this input to a request that was answered late. */
  #judgeDeferred(h: HandledInput): void {
    const ctx = this.#requestContext();
    const after = {
      nowMs: h.nowMs,
      heldUntil: (queue: string, group?: string | null) => this.heldUntil(queue, group),
      known: (jobId: string) => this.attempts.has(jobId),
      terminal: (jobId: string) => this.terminalState(jobId),
      keyOwner: (key: string) => this.keyOwner(key),
      schedule: (name: string) => this.schedules.get(name),
      delayed: (jobId: string) => this.delayed.has(jobId),
      madeElsewhere: (jobId: string) => this.#sentRow(jobId) !== undefined,
    };
    for (const effect of h.effects) {
      if (effect.kind !== 'reply') continue;
      const key = `${effect.connId}/${effect.requestId}`;
      const msg = this.#deferred.get(key);
      if (msg === undefined) continue;
      this.#deferred.delete(key);
      const unknownWhenAsked = this.#askedUnknown.delete(key);
      checkDeferredAnswer(ctx, msg, effect.msg, { ...after, unknownWhenAsked });
    }
  }

  #requestContext(): RequestContext {
    return {
      judge: this.#judge,
      config: this.#config,
      invalid: this.#invalid,
      madeElsewhere: (jobId) => this.#sentRow(jobId) !== undefined,
    };
  }

  /** Requests still waiting for a late answer. */
  get deferredCount(): number {
    return this.#deferred.size;
  }
}

interface StagedFacts {
  terminal: Map<string, JobState>;
  /** Jobs that expired (their terminal row must say so). */
  expired: Set<string>;
  /** Holds handlers set (rate limits of a group or queue), by place: the latest end. */
  holds: Map<string, number>;
  keys: Map<string, KeyOwner>;
  /** Results of accepted TASK_RESULTs, checked against the row when committed. */
  results: Map<string, string>;
  /** Jobs made by schedule ticks. */
  ticks: Map<string, TickFact>;
}

function stagedFacts(): StagedFacts {
  return {
    terminal: new Map(),
    expired: new Set(),
    holds: new Map(),
    keys: new Map(),
    results: new Map(),
    ticks: new Map(),
  };
}

function isFinishing(event: CoreEvent): boolean {
  return (
    event.type === 'job.completed' ||
    event.type === 'job.failed' ||
    event.type === 'job.cancelled' ||
    (event.type === 'job.recovered' && event.to === 'FAILED')
  );
}

/** A job made elsewhere (by a flow of another shard) as the submission it stands for. */
function rowSubmission(row: JobRecord): SubmitJob {
  return {
    type: 'SUBMIT_JOB',
    taskType: row.taskType,
    payload: JSON.parse(row.payloadJson) as SubmitJob['payload'],
    maxAttempts: row.maxAttempts,
    idempotencyKey: row.idempotencyKey,
    priority: row.priority,
    queue: row.queue,
    ...(row.groupKey != null && { groupKey: row.groupKey }),
    ...(row.runAtMs != null && { runAtMillis: row.runAtMs }),
    ...(row.expiresAtMs != null && { expiresAtMillis: row.expiresAtMs }),
    ...(row.dependsOn != null && { dependsOn: row.dependsOn }),
    ...(row.onParentFailure != null && { onParentFailure: row.onParentFailure }),
    ...(row.traceContext != null && { traceparent: row.traceContext.traceparent }),
  };
}

/** Suspended attempts of a committed job: its recorded sleeps and waits. */
export function committedSuspensions(store: MemoryStore, jobId: string): number {
  return store.committedSteps(jobId).filter((step) => isSuspensionStep(step.name)).length;
}
