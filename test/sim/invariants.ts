/**
 * The invariants checked after every simulation step, plus the world's hooks
 * that feed the handle-time checks of {@link JobTracker}.
 *
 * "The rows" below are the store as it will be once the batches in flight
 * have committed: the committed rows with the uncommitted batches laid over
 * them. After every step:
 * - every acknowledged job is committed, answers GET_JOB_STATUS, and is in
 *   one of the six states;
 * - the rows are self-consistent (lease fields only while RUNNING, worker
 *   and attempt of the last attempt on a COMPLETED row,
 *   attempts <= maxAttempts, one job per idempotency key) and agree with the
 *   model: attempts, committed terminal rows byte-identical since they became
 *   terminal, committed keys never remapped;
 * - the core's memory agrees with the rows for every active job;
 *   `activeCount` is the number of non-terminal jobs; each RUNNING job holds
 *   exactly the model's current lease, either on a live session whose
 *   `running` set holds it or kept for its worker (never both); each
 *   session's running count equals its RUNNING jobs and stays within
 *   capacity; free slots add up;
 * - after a tick, no kept lease is past its grace period.
 */
import { BudgetChecks } from './budget-checks.js';
import { FairnessChecks } from './fairness-checks.js';
import { QueueChecks } from './queue-checks.js';
import type { CoreConfig, CoreInput, Effect } from '../../src/coordinator/core/types.js';
import {
  JOB_STATES,
  isTerminalState,
  type ClientReply,
  type SubmitJob,
} from '../../src/protocol/messages.js';
import type { JobRecord } from '../../src/store/store.js';
import { SessionChecks } from './sessions.js';
import { SignalChecks } from './signal-checks.js';
import { TimingChecks } from './timing.js';
import { JobTracker } from './tracker.js';
import { SimulationViolation, type Judge } from './violation.js';
import type { HandledInput, World, WorldObserver } from './world.js';

/**
 * How long after a handler's hold of a group ends its queue's rings are
 * still left out of the fairness checks: the held group rejoins its ring
 * only when the core next wakes, at the back.
 */
const HELD_RING_SLACK_MS = 10_000;

/** A connection id no simulated peer ever gets: the checker's own GET_JOB_STATUS requests. */
const CHECKER_CONN_ID = 0;

const JOB_FIELDS: readonly (keyof JobRecord)[] = [
  'seq',
  'jobId',
  'taskType',
  'payloadJson',
  'state',
  'priority',
  'attempts',
  'maxAttempts',
  'timeoutMs',
  'idempotencyKey',
  'workerId',
  'attemptId',
  'deadlineAtMs',
  'retryAtMs',
  'result',
  'resultFormat',
  'error',
  'createdAtMs',
  'updatedAtMs',
  'startedAtMs',
  'finishedAtMs',
];

export class Invariants implements WorldObserver {
  readonly tracker: JobTracker;
  readonly #timing: TimingChecks;
  /** Pause, concurrency and rate of named queues. */
  readonly queues: QueueChecks;
  /** The group turns' bound. */
  readonly fairness: FairnessChecks;
  readonly #sessions: SessionChecks;
  /** Waits and subscriptions per address; stalled subscribers dropped for newcomers. */
  readonly budgets: BudgetChecks;
  /** Signals, events and triggers (signal-checks.ts). */
  readonly signals: SignalChecks;
  /** Acknowledged jobs (a client received JOB_SUBMITTED), in order of first ack. */
  readonly ackedIds: string[] = [];
  /** Checks that found a worker holding more leases than its capacity (prefetch at work). */
  prefetchedChecks = 0;

  readonly #acked = new Set<string>();
  readonly #world: World;
  readonly #judge: Judge;
  #checkerRequestId = 0;

  /**
   * @param shards a shard of several: a job of another shard, its committed
   * terminal state there; a job another shard's flow made, its row as sent.
   */
  constructor(
    world: World,
    judge: Judge,
    config: CoreConfig,
    invalid: WeakSet<object>,
    shards?: Pick<ConstructorParameters<typeof JobTracker>[0], 'elsewhere' | 'sentRow'>,
  ) {
    this.#world = world;
    this.#judge = judge;
    this.#timing = new TimingChecks(judge, config, () => world.clock.nowMs);
    this.budgets = new BudgetChecks(judge, config);
    this.tracker = new JobTracker({
      judge,
      config,
      store: world.store,
      invalid,
      linkWorker: (connId) => world.workerLinks.get(connId)?.registeredAs ?? null,
      ...shards,
      waitsOn: (connId) => this.#timing.waitsOn(connId),
      waitsInAll: () => this.#timing.waitsInAll,
      waitsFromAddress: (address) => {
        let n = 0;
        for (const [connId, count] of this.#timing.waitsByConn()) {
          if (this.budgets.addressOf(connId) === address) n += count;
        }
        return n;
      },
    });
    this.#sessions = new SessionChecks(judge, config, () => world.clock.nowMs);
    this.queues = new QueueChecks(judge);
    this.fairness = new FairnessChecks(judge);
    this.signals = new SignalChecks(
      judge,
      world.store,
      (jobId) => this.tracker.terminalState(jobId) !== undefined,
    );
  }

  // ---- world hooks ---------------------------------------------------------

  leaseCurrent(jobId: string, attemptId: string): boolean {
    return this.tracker.leaseCurrent(jobId, attemptId);
  }

  onHandled(handled: HandledInput): void {
    this.tracker.onHandled(handled);
    this.signals.onHandled(handled);
    if (handled.input.kind === 'recovery') this.#checkSignalsRecovered();
    this.#checkRequeuedAtOnce(handled);
    this.#checkRateLimited(handled.nowMs);
    if (handled.input.kind === 'tick' || handled.input.kind === 'wake') {
      this.#checkExpiredAfterTimedInput(handled.nowMs);
    }
    this.#timing.onHandled(handled);
    this.budgets.onHandled(handled);
    this.#sessions.onHandled(handled);
    this.queues.onHandled(handled, this.#world.clock.nowMs, this.#world.core);
    this.fairness.onHandled(handled, this.#world.core, (queue) =>
      this.tracker.anyHoldAfter(queue, handled.nowMs - HELD_RING_SLACK_MS),
    );
    if (handled.input.kind === 'tick') this.#checkKeptAfterTick();
  }

  /**
   * A job whose attempt its worker requeued (for free) is QUEUED at once, no
   * back-off: still QUEUED after the input, or already RUNNING again.
   */
  #checkRequeuedAtOnce(handled: HandledInput): void {
    const requeued = this.tracker.requeuedNow.splice(0);
    if (requeued.length === 0) return;
    const jobs = new Map(this.#world.core.activeJobs().map((job) => [job.jobId, job]));
    for (const jobId of requeued) {
      const job = jobs.get(jobId);
      const assignedAgain = handled.effects.some(
        (e) => e.kind === 'event' && e.event.type === 'job.assigned' && e.event.jobId === jobId,
      );
      // Unless its expiry passed while the attempt ran: then it expired at once.
      const expired =
        job === undefined &&
        this.tracker.terminalState(jobId) === 'CANCELLED' &&
        (this.tracker.expiresAt.get(jobId) ?? Infinity) <= handled.nowMs;
      this.#judge.check(
        expired ||
          (job !== undefined &&
            job.retryAtMs === null &&
            (job.state === 'QUEUED' || (job.state === 'RUNNING' && assignedAgain))),
        () => `job ${jobId} requeued by its worker is ${job?.state ?? 'gone'}, not QUEUED at once`,
      );
    }
  }

  /**
   * A job its handler rate limited is SCHEDULED at once, due when the limit
   * ends (now + retryAfter), unless its expiry had passed: then it expired.
   */
  #checkRateLimited(nowMs: number): void {
    const limited = this.tracker.rateLimitedNow.splice(0);
    if (limited.length === 0) return;
    const jobs = new Map(this.#world.core.activeJobs().map((job) => [job.jobId, job]));
    for (const { jobId, untilMs } of limited) {
      const job = jobs.get(jobId);
      const expired =
        job === undefined &&
        this.tracker.terminalState(jobId) === 'CANCELLED' &&
        (this.tracker.expiresAt.get(jobId) ?? Infinity) <= nowMs;
      this.#judge.check(
        expired || (job?.state === 'SCHEDULED' && job.runAtMs === untilMs),
        () =>
          `job ${jobId} rate limited until ${untilMs} is ${job?.state ?? this.tracker.terminalState(jobId) ?? 'gone'}, due ${job?.runAtMs}`,
      );
    }
  }

  /**
   * A timed input ends every job in memory whose expiry has come and that
   * no attempt runs (expiry.ts): none is left waiting after it.
   */
  #checkExpiredAfterTimedInput(nowMs: number): void {
    for (const job of this.#world.core.activeJobs()) {
      const at = job.expiresAtMs ?? null;
      if (at === null || at > nowMs || job.state === 'RUNNING') continue;
      throw this.#judge.violation(
        `after a timed input at ${nowMs}, job ${job.jobId} is still ${job.state} with its expiry ${at} passed`,
      );
    }
  }

  /** A tick revokes every kept lease whose grace period has ended. */
  #checkKeptAfterTick(): void {
    const now = this.#world.clock.nowMs;
    for (const kept of this.#world.core.inspect().keptLeases) {
      this.#judge.check(
        kept.untilMs >= now,
        () =>
          `after a tick at ${now}, ${kept.jobIds.length} lease(s) of ${kept.workerId} are still kept until ${kept.untilMs}`,
      );
    }
  }

  onFlushed(batchId: number | null): void {
    this.tracker.onFlushed(batchId);
    this.signals.onFlushed(batchId);
  }

  onCommitted(batchId: number): void {
    this.tracker.onCommitted(batchId);
    this.signals.onCommitted(batchId);
  }

  onCrash(): void {
    this.tracker.onCrash();
    this.signals.onCrash();
    this.#timing.onCrash(this.#world.store.committedJobs());
    this.#sessions.onCrash();
    this.fairness.onCrash();
    this.budgets.onCrash();
  }

  onReleased(effect: Effect): void {
    this.signals.onReleased(effect);
  }

  fatal(what: string, err: unknown): Error {
    // A check that failed inside the store (the sharded simulation's outbox) says so itself.
    if (err instanceof SimulationViolation) return err;
    const detail = err instanceof Error ? (err.stack ?? err.message) : String(err);
    return this.#judge.violation(`${what} threw: ${detail}`);
  }

  // ---- client hooks --------------------------------------------------------

  /**
   * A client received JOB_SUBMITTED: the job must already be durable.
   * `deduplicated`: its dedup key named an existing job (so the submission's
   * idempotency key was not taken).
   */
  onAck(jobId: string, submission: SubmitJob, deduplicated = false): void {
    const judge = this.#judge;
    const store = this.#world.store;
    judge.check(
      store.committedJob(jobId) !== undefined,
      () => `JOB_SUBMITTED ${jobId} released before the job was committed`,
    );
    const key = submission.idempotencyKey;
    if (key !== null && !deduplicated) {
      const owner = this.tracker.keys.get(key);
      judge.check(
        owner?.jobId === jobId,
        () => `key ${key} acknowledged as ${jobId} but is committed for ${owner?.jobId}`,
      );
    }
    if (!this.#acked.has(jobId)) {
      this.#acked.add(jobId);
      this.ackedIds.push(jobId);
    }
  }

  // ---- after every step ----------------------------------------------------

  checkStep(): void {
    const committed = new Map<string, JobRecord>();
    for (const row of this.#world.store.committedJobRows()) committed.set(row.jobId, row);
    const rows = new Map(committed);
    for (const batch of this.#world.uncommittedBatches) {
      for (const { job } of batch.jobs) rows.set(job.jobId, job);
    }
    this.#checkRows(rows, committed);
    this.#checkAcked(rows);
    this.#checkCore(rows);
    const core = this.#world.core;
    this.budgets.checkStep(
      core.budgets(),
      core.inspect().subscriptions,
      this.#timing.waitsByConn(),
    );
  }

  /** Null when the system is at rest: every job terminal, every request answered. */
  quiescenceProblem(unansweredRequests: number): string | null {
    const core = this.#world.core;
    for (const row of this.#world.store.committedJobs()) {
      if (!isTerminalState(row.state)) {
        const acked = this.#acked.has(row.jobId) ? 'acknowledged ' : '';
        return `${acked}job ${row.jobId} is still ${row.state} (attempts ${row.attempts}/${row.maxAttempts})`;
      }
    }
    if (core.activeCount !== 0) return `activeCount is ${core.activeCount} with every job terminal`;
    if (core.inspect().pendingWaits !== 0) return `${core.inspect().pendingWaits} waits pending`;
    if (unansweredRequests > 0) return `${unansweredRequests} client requests unanswered`;
    return this.signals.quiescenceProblem();
  }

  #checkRows(rows: Map<string, JobRecord>, committed: Map<string, JobRecord>): void {
    const judge = this.#judge;
    const tracker = this.tracker;
    const keys = new Map<string, string>();
    // Plain ifs in this loop: it runs over every job after every step.
    for (const row of rows.values()) {
      const problem = rowProblem(row, tracker.uncounted(row.jobId));
      if (problem !== null) throw judge.violation(`job ${row.jobId}: ${problem}`);
      if (tracker.attempts.get(row.jobId) !== row.attempts) {
        throw judge.violation(
          `job ${row.jobId} has ${row.attempts} attempts, but ${tracker.attempts.get(row.jobId)} assignments were seen`,
        );
      }
      const terminal = tracker.terminal.get(row.jobId);
      if (terminal !== undefined) {
        const field = differingField(terminal.row, row);
        if (field !== undefined) {
          throw judge.violation(
            `terminal job ${row.jobId} changed: ${field} was ${JSON.stringify(terminal.row[field])}, now ${JSON.stringify(row[field])}`,
          );
        }
      } else if (isTerminalState(row.state) && tracker.terminalState(row.jobId) !== row.state) {
        throw judge.violation(
          `job ${row.jobId} is ${row.state} in a batch, the model says otherwise`,
        );
      }
      const key = row.idempotencyKey;
      if (key === null) continue;
      if (keys.has(key))
        throw judge.violation(`key ${key} is on jobs ${keys.get(key)} and ${row.jobId}`);
      keys.set(key, row.jobId);
      const owner = committed.has(row.jobId) ? tracker.keys.get(key) : tracker.keyOwner(key);
      if (owner?.jobId !== row.jobId) {
        throw judge.violation(`key ${key} is on ${row.jobId}, but was given to ${owner?.jobId}`);
      }
    }
    judge.check(
      tracker.attempts.size === rows.size && tracker.terminal.size <= rows.size,
      () => `the model knows ${tracker.attempts.size} jobs, the store holds ${rows.size}`,
    );
    for (const [key, owner] of tracker.keys) {
      if (keys.get(key) !== owner.jobId)
        throw judge.violation(`key ${key} of ${owner.jobId} vanished`);
    }
  }

  /**
   * After a restart, every job the signal model holds something for shows
   * it in its snapshot: the held signals and the wait survived.
   */
  #checkSignalsRecovered(): void {
    for (const jobId of this.signals.jobs()) {
      const effects = this.#world.core
        .handle({
          kind: 'clientRequest',
          connId: CHECKER_CONN_ID,
          requestId: this.#checkerRequestId++,
          msg: { type: 'GET_JOB_STATUS', jobId },
        })
        .filter((e) => e.kind !== 'wakeAt');
      const reply = effects.length === 1 && effects[0]?.kind === 'reply' ? effects[0].msg : null;
      this.signals.checkSnapshot(jobId, reply?.type === 'JOB_STATUS' ? reply.job : null);
    }
  }

  #checkAcked(rows: Map<string, JobRecord>): void {
    const judge = this.#judge;
    const core = this.#world.core;
    for (const jobId of this.ackedIds) {
      const row = rows.get(jobId);
      if (row === undefined) throw judge.violation(`acknowledged job ${jobId} is not in the store`);
      const requestId = this.#checkerRequestId++;
      // A wake-up time is not part of the answer (the simulation arms none yet).
      const answer = (input: CoreInput): Effect[] =>
        core.handle(input).filter((e) => e.kind !== 'wakeAt');
      let effects = answer({
        kind: 'clientRequest',
        connId: CHECKER_CONN_ID,
        requestId,
        msg: { type: 'GET_JOB_STATUS', jobId },
      });
      // History is read from the store: answer the read as the shell would.
      const read = effects.length === 1 && effects[0]?.kind === 'read' ? effects[0] : undefined;
      if (read !== undefined) {
        const result = this.#world.store.readNow(read.read);
        effects = answer({ kind: 'readDone', readId: read.readId, result });
      }
      const reply: ClientReply | undefined =
        effects.length === 1 && effects[0]?.kind === 'reply' ? effects[0].msg : undefined;
      // Its suspensions and free requeues are those the run saw:
      // attempts − suspensions − requeues is what counted.
      const suspensions = this.tracker.suspensions.get(jobId) ?? 0;
      const requeues = this.tracker.requeues.get(jobId) ?? 0;
      judge.check(
        reply?.type === 'JOB_STATUS' &&
          reply.job.jobId === jobId &&
          reply.job.state === row?.state &&
          reply.job.attempts === row.attempts &&
          (reply.job.suspensions ?? 0) === suspensions &&
          (reply.job.requeues ?? 0) === requeues,
        () =>
          `GET_JOB_STATUS ${jobId} answered ${JSON.stringify(effects)}; the store says ${row?.state}, ${suspensions} suspensions and ${requeues} requeues seen`,
      );
    }
  }

  #checkCore(rows: Map<string, JobRecord>): void {
    const judge = this.#judge;
    const view = this.#world.core.inspect();
    const activeJobs = this.#world.core.activeJobs();
    const active = [...rows.values()].filter((row) => !isTerminalState(row.state));
    judge.check(
      view.activeCount + view.farScheduledCount === active.length &&
        activeJobs.length === view.activeCount,
      () =>
        `activeCount ${view.activeCount} + ${view.farScheduledCount} far, ${activeJobs.length} jobs in memory, ${active.length} non-terminal in the rows`,
    );
    // The near window: a non-terminal job memory does not hold is a delayed
    // job without parents beyond the horizon, and every delayed job at or
    // before the horizon is held.
    const held = new Set(activeJobs.map((job) => job.jobId));
    const horizon = view.scheduledHorizon;
    for (const row of active) {
      if (held.has(row.jobId)) continue;
      const at = row.runAtMs ?? 0;
      judge.check(
        row.state === 'SCHEDULED' &&
          row.dependsOn === null &&
          (at > horizon.atMs || (at === horizon.atMs && row.seq > horizon.seq)),
        () =>
          `job ${row.jobId} (${row.state}, due ${row.runAtMs}, seq ${row.seq}) is not in memory, horizon ${horizon.atMs}/${horizon.seq}`,
      );
    }
    const sessions = new Map(view.workers.map((w) => [w.workerId, w]));
    judge.check(sessions.size === view.workers.length, () => `two sessions share a worker id`);
    const runningOn = new Map<string, number>();
    const keptFor = new Map<string, string>();
    for (const kept of view.keptLeases) {
      for (const jobId of kept.jobIds) keptFor.set(jobId, kept.workerId);
    }
    let keptRunning = 0;
    const scheduled = activeJobs.filter((job) => job.state === 'SCHEDULED').length;
    judge.check(
      view.scheduledCount === scheduled,
      () => `scheduledCount ${view.scheduledCount}, ${scheduled} SCHEDULED jobs in memory`,
    );
    for (const job of activeJobs) {
      // No attempt starts before the job's time, on the coordinator's clock
      // (a job that slept has a new time, after its last attempt, until it runs again).
      // So has a job its handler rate limited (due when the limit ends).
      const slept =
        job.state !== 'RUNNING' &&
        ((job.steps ?? []).length > 0 || this.tracker.rateLimits.has(job.jobId));
      judge.check(
        slept || job.runAtMs === null || job.startedAtMs === null || job.startedAtMs >= job.runAtMs,
        () => `job ${job.jobId} started at ${job.startedAtMs}, before its time ${job.runAtMs}`,
      );
      judge.check(
        job.state !== 'SCHEDULED' || job.runAtMs !== null,
        () => `SCHEDULED job ${job.jobId} has no runAtMs`,
      );
      const row = rows.get(job.jobId);
      const field = row === undefined ? 'jobId' : differingField(row, job);
      judge.check(
        field === undefined,
        () =>
          `job ${job.jobId} field ${field} is ${JSON.stringify(job[field as keyof JobRecord])} in memory, ${JSON.stringify(row?.[field as keyof JobRecord])} committed`,
      );
      const lease = this.tracker.leases.get(job.jobId);
      if (job.state !== 'RUNNING') {
        judge.check(
          lease === undefined,
          () => `${job.state} job ${job.jobId} still has lease ${lease?.attemptId}`,
        );
        continue;
      }
      judge.check(
        lease !== undefined && lease.attemptId === job.attemptId && lease.workerId === job.workerId,
        () =>
          `RUNNING job ${job.jobId} holds ${job.attemptId} on ${job.workerId}; current lease is ${lease?.attemptId} on ${lease?.workerId}`,
      );
      const workerId = job.workerId as string;
      const inSession = sessions.get(workerId)?.running.includes(job.jobId) === true;
      const isKept = keptFor.get(job.jobId) === workerId;
      judge.check(
        inSession !== isKept,
        () =>
          `RUNNING job ${job.jobId} is ${inSession ? 'both kept and' : 'neither kept nor'} in the running set of worker ${workerId}`,
      );
      if (isKept) keptRunning++;
      else runningOn.set(workerId, (runningOn.get(workerId) ?? 0) + 1);
    }
    const leased = [...runningOn.values()].reduce((a, b) => a + b, 0) + keptRunning;
    judge.check(
      this.tracker.leases.size === leased,
      () => `${this.tracker.leases.size} current leases but ${leased} RUNNING jobs`,
    );
    judge.check(
      keptRunning === keptFor.size,
      () => `${keptFor.size} leases kept, ${keptRunning} of them on RUNNING jobs`,
    );
    this.#checkSessions(view.workers, runningOn, view.freeSlots);
    this.#sessions.checkAgainst(view.workers);
  }

  #checkSessions(
    workers: ReturnType<World['core']['inspect']>['workers'],
    runningOn: Map<string, number>,
    freeSlots: number,
  ): void {
    const judge = this.#judge;
    let free = 0;
    if (workers.some((w) => w.running.length > w.capacity)) this.prefetchedChecks++;
    for (const w of workers) {
      const count = runningOn.get(w.workerId) ?? 0;
      judge.check(
        w.running.length === count && new Set(w.running).size === count,
        () =>
          `worker ${w.workerId} counts ${w.running.length} tasks, ${count} RUNNING jobs are leased to it`,
      );
      judge.check(
        w.running.length <= w.capacity + w.prefetch,
        () =>
          `worker ${w.workerId} holds ${w.running.length} leases with capacity ${w.capacity} + prefetch ${w.prefetch}`,
      );
      const link = this.#world.workerLinks.get(w.connId);
      judge.check(
        link !== undefined && link.registeredAs === w.workerId && !link.closedByCore,
        () => `session ${w.workerId} is on connection ${w.connId}, which is closed or not its own`,
      );
      const window = w.capacity + (w.prefetching ? w.prefetch : 0);
      if (!w.draining && !w.ending && !w.listingHeld) {
        free += Math.max(0, window - w.running.length);
      }
    }
    judge.check(freeSlots === free, () => `freeSlots is ${freeSlots}, sessions have ${free}`);
  }
}

/** The first field in which two versions of a job differ, or undefined. */
function differingField(
  a: Readonly<JobRecord>,
  b: Readonly<JobRecord>,
): keyof JobRecord | undefined {
  for (const field of JOB_FIELDS) if (a[field] !== b[field]) return field;
  return undefined;
}

/** What is wrong with a committed row on its own, or null. */
function rowProblem(row: Readonly<JobRecord>, uncounted: number): string | null {
  if (!JOB_STATES.includes(row.state)) return `state ${row.state}`;
  // Suspended attempts (a sleep, a wait) and free requeues do not count toward maxAttempts.
  if (row.attempts - uncounted > row.maxAttempts) {
    return `${row.attempts} attempts (${uncounted} suspended or requeued) of ${row.maxAttempts}`;
  }
  const running = row.state === 'RUNNING';
  // A COMPLETED row names the worker and attempt that completed it.
  const named = running || row.state === 'COMPLETED';
  if (
    (row.workerId !== null) !== named ||
    (row.attemptId !== null) !== named ||
    (row.deadlineAtMs !== null) !== running
  ) {
    return `${row.state} with lease fields ${row.workerId}/${row.attemptId}/${row.deadlineAtMs}`;
  }
  if ((row.state === 'RETRY_WAIT') !== (row.retryAtMs !== null)) {
    return `${row.state} with retryAtMs ${row.retryAtMs}`;
  }
  return null;
}
