/**
 * The worker: a session with the coordinator (worker-session.ts: dial,
 * register, heartbeat, reconnect forever) and the attempts it assigns, one
 * {@link Attempt} each, run in a {@link TaskPool} off the main thread — the
 * attempts of shared tasks many to a thread, those of isolated tasks one to
 * a thread.
 *
 * `drain(timeoutMs)` is the graceful way out: it takes no new task (a
 * TASK_ASSIGN that still arrives is answered with a failed TASK_RESULT
 * "worker is shutting down"), stops reconnecting, lets running tasks finish
 * for up to `timeoutMs`, reports them, then closes; whatever is still running
 * then is abandoned. A coordinator that offers `drain` is told first
 * (WORKER_DRAINING), so it assigns nothing more and retries abandoned
 * attempts at once; a v1 coordinator is not sent the extension.
 *
 * Negotiation: the worker uses an extension only when the coordinator listed
 * it in `WORKER_REGISTERED.features` (absent = a v1 coordinator):
 * WORKER_DRAINING needs `drain`, `TASK_RESULT.retryable: false` needs
 * `retryable`, `TASK_RESULT.requeue` needs `requeue`, `TASK_RESULT.rateLimited`
 * needs `rateLimits`, a capacity above 1,024
 * needs `slots` (without it the worker uses 1,024 slots), and deadlines from
 * `TASK_ASSIGN.timeoutMillis` need `assignLimits`. `resultFormat` is an
 * optional field any peer may ignore.
 *
 * Deadlines and cancels preempt (see TaskPool): the handler's signal fires,
 * and a handler that ignores it loses its thread after `cancelGraceMs`. A
 * stopped attempt is never reported: the coordinator has revoked its lease
 * (cancel) or does so at the same deadline, measured from assignment.
 *
 * Calls (worker-calls.ts): a handler's call goes out with a `requestId`
 * (ENQUEUE_CHILD, the steps' calls, only to a coordinator that offers their
 * feature); its answer, a reply or an ERROR carrying that `requestId`,
 * settles that call only.
 *
 * Tasks of a lost connection are orphans. They keep running, and the next
 * WORKER_REGISTER lists them (`heldAttempts`, with the ones that finished and
 * were not reported yet). A coordinator that offers `reattach` gives the
 * ones whose lease is still current (the connection died only because the
 * coordinator was frozen or restarted, or it had not noticed yet) to the
 * new session and cancels the others with TASK_CANCEL; so they run on.
 * Against any other coordinator the orphans still running when the worker
 * registers again are abandoned, so the new session starts with every slot
 * free. Either way an orphan that finished before the new session has its
 * result reported once that session starts: counted if its lease is still
 * current, otherwise logged and rejected by the coordinator as stale — so a
 * worker that was frozen (SIGSTOP, a long pause) leaves a trace instead of
 * silently dropping finished work.
 *
 * A sharded coordinator (its public worker port answers the registration
 * with NOT_LEADER and the shard map) makes the worker *sharded*: it closes
 * that first session and opens one per worker address that leads some of
 * its shards (all shards, or its queues' shards), each a full session as
 * above (register, heartbeats, reconnect, reattach), each with the attempts
 * it assigned ({@link SessionLink}). All of them share this worker's one
 * task pool, task modules and threads: the pool runs at most `capacity`
 * attempts at once and queues the rest. Each session registers a share of
 * the capacity and prefetch (shard-map.ts: in proportion to the shards its
 * address leads, at least 1 each, so the shares may add up to more than
 * `capacity` when there are more sessions than slots). An attempt's
 * deadline counts from its assignment, so time spent in the pool's queue
 * counts against it: an attempt that waits for a slot that long is stopped
 * before it starts, as its coordinator revokes it at the same moment.
 *
 * The map changes as shards move: every `shardRefreshMs`, and at once when
 * a session loses its connection, the worker asks for it again (LIST_SHARDS
 * on its public addresses, shard-list.ts); it opens sessions to new
 * addresses, registers again a session whose share changed (a successor
 * session registers beside it and replaces it, taking its attempts over;
 * only where the coordinator offers `reattach`, or nothing runs on it, so
 * no attempt is lost), and closes sessions whose address leads none of its
 * shards now:
 * one still registered first takes nothing more (WORKER_DRAINING where
 * offered) and lets its attempts finish and report; one whose connection is
 * gone hands its attempts to the session that now serves their shard (the
 * job id names it), whose registration lists them as held, or lets them go
 * when no session does.
 */
import { EventEmitter } from 'node:events';
import { formatHostPort, parseAddressList, type HostPort } from '../net/address.js';
import type { FramedConnection } from '../net/framed-connection.js';
import type { Logger } from '../observability/logger.js';
import { loadOtel } from '../observability/tracing.js';
import { DtpError, describeError } from '../protocol/errors.js';
import { ErrorCode, LocalErrorCode, ProtocolErrorCode } from '../protocol/error-codes.js';
import { decodeValue } from '../protocol/codec.js';
import { CALL_FEATURES, type Feature } from '../protocol/features.js';
import { MAX_CAPACITY } from '../protocol/limits.js';
import {
  isWorkerCall,
  type HeldAttempt,
  type JsonObject,
  type ShardInfo,
  type TaskAssign,
  type TaskCancel,
  type TaskResult,
  type WorkerRegister,
} from '../protocol/messages.js';
import { shardOfJobId, shardOfQueue } from '../protocol/shards.js';
import { BUILTIN_TASK_TYPES } from '../protocol/task-types.js';
import { Attempt, type AttemptHost } from './attempt.js';
import { TASK_MEMORY_MB } from './memory-budget.js';
import {
  DEFAULT_CANCEL_GRACE_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_PREFETCH_PER_SLOT,
  DEFAULT_SHARD_REFRESH_MS,
  MIN_DEFAULT_COORDINATOR_TIMEOUT_MS,
  defaultPrefetch,
  validateWorkerOptions,
  type WorkerOptions,
} from './options.js';
import { heldParts, splitHeld } from './held-list.js';
import { sendOutcome, type ResultIds } from './results.js';
import { SessionLink, type SessionView } from './session-link.js';
import { MapRefresher, askShardList } from './shard-list.js';
import { planShards, shareOut, type Share, type ShardPlan } from './shard-map.js';
import { NO_TASK_MODULES, type LoadedTaskModules } from './task-modules.js';
import { TaskPool, defaultThreads, type StopOutcome, type TaskOutcome } from './task-pool.js';
import type { AbortReason, CallOutcome } from './thread-messages.js';
import { WorkerCalls } from './worker-calls.js';
import { WorkerSession, type SessionHost, type WorkerMode } from './worker-session.js';

export type { WorkerOptions } from './options.js';
export type { WorkerMode } from './worker-session.js';
export type { SessionView } from './session-link.js';
export type { ShardPlan, ShardRoute } from './shard-map.js';
export { DEFAULT_PREFETCH_PER_SLOT, MIN_DEFAULT_COORDINATOR_TIMEOUT_MS, validateWorkerOptions };

/** What {@link Worker.events} emits; tests wait on these instead of sleeping. */
export interface WorkerEvents {
  connected: [];
  registered: [];
  disconnected: [reason: string];
  assigned: [jobId: string, attemptId: string];
  /** The task's payload was valid and its code began running in a thread. */
  started: [jobId: string, attemptId: string];
  /** A TASK_CANCEL matched a running task, which has now stopped (its slot is free). */
  cancelled: [jobId: string, attemptId: string];
  /** A task was preempted (cancel or deadline) and its thread is free or gone. */
  stopped: [jobId: string, attemptId: string, reason: AbortReason, how: StopOutcome];
  /** A task was dropped because its connection ended. */
  abandoned: [jobId: string, attemptId: string];
  /** A TASK_RESULT was queued on the connection. */
  result: [message: TaskResult];
  /**
   * The coordinator refused this worker (id taken over, token or certificate
   * refused, TLS required): the worker closes and does not reconnect.
   */
  refused: [error: DtpError];
  /**
   * A sharded coordinator's map as this worker serves it: when it first
   * arrives, and whenever it changes (a shard moved, lost or gained a leader).
   */
  shards: [plan: ShardPlan];
  /** One session registered, with this coordinator (`registered` follows for the worker). */
  sessionRegistered: [coordinator: string];
  /** A session closed for good: its address leads none of this worker's shards now. */
  sessionClosed: [coordinator: string];
}

/** Only a session of this worker is ever an attempt's session. */
type WorkerAttempt = Attempt<SessionLink>;

/** Session modes from the most to the least useful: a sharded worker shows its best. */
const MODE_RANK: readonly WorkerMode[] = ['registered', 'registering', 'connecting'];

export class Worker {
  readonly workerId: string;
  /** Attempts it runs at once (with a coordinator that offers `slots` above 1,024). */
  readonly capacity: number;
  /** Attempts it takes beyond `capacity`, queued until a slot is free. */
  readonly prefetch: number;
  /** Shared task threads. */
  readonly threads: number;
  readonly events = new EventEmitter<WorkerEvents>();
  readonly #options: WorkerOptions;
  readonly #log: Logger;
  readonly #tasksLoaded: LoadedTaskModules;
  readonly #pool: TaskPool;
  /** The session with `coordinatorHost`: the only one, until a sharded coordinator answers it. */
  readonly #primary: SessionLink;
  /** Every session not closed yet: the primary, or (sharded) one per shard leader and the closing ones. */
  #links: SessionLink[] = [];
  /** Running attempts by attemptId (the lease), orphans included; each also in its session's set. */
  readonly #attempts = new Map<string, WorkerAttempt>();
  /** Calls of running attempts sent to the coordinator and not answered yet. */
  readonly #calls = new WorkerCalls();
  /** The named queues it takes from; null = every queue. */
  readonly #queues: readonly string[] | null;
  /** The shard map as this worker serves it; null while unsharded. */
  #plan: ShardPlan | null = null;
  /** Asks for the map again (sharded only). */
  #refresher: MapRefresher | null = null;
  /** Where to ask for the map: `coordinatorHost`, then the coordinators the last map named. */
  #mapSources: HostPort[];
  /** The last ask for the map found no coordinator (logged once until one answers). */
  #mapUnreachable = false;
  /** Aborts an ask for the map under way when the worker closes. */
  readonly #abort = new AbortController();
  #closing: Promise<void> | null = null;
  #draining: Promise<void> | null = null;
  /** Told when no task is left (drain waits on this). */
  #idleWaiters: (() => void)[] = [];
  /** The OpenTelemetry API when this process registered a tracer provider (or the like); else null. */
  #otel: Awaited<ReturnType<typeof loadOtel>> = null;
  readonly #attemptHost: AttemptHost<SessionLink>;

  private constructor(options: WorkerOptions) {
    this.workerId = options.workerId;
    this.capacity = options.capacity;
    this.prefetch = options.prefetch ?? defaultPrefetch(options.capacity);
    this.threads = options.threads ?? defaultThreads();
    this.#queues =
      options.queues === undefined || options.queues === null ? null : [...options.queues];
    this.#options = options;
    this.#log = options.logger.child({ workerId: options.workerId });
    this.#tasksLoaded = options.tasks ?? NO_TASK_MODULES;
    this.#mapSources = parseAddressList(options.coordinatorHost, options.coordinatorPort);
    this.#pool = new TaskPool({
      capacity: options.capacity,
      threads: this.threads,
      modules: this.#tasksLoaded.modules.map(({ specifier, url }) => ({ specifier, url })),
      cancelGraceMs: options.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS,
      queueLimit: this.prefetch,
      taskMemoryMb: options.taskMemoryMb ?? TASK_MEMORY_MB.default,
      ...(this.#tasksLoaded.local === undefined ? {} : { local: this.#tasksLoaded.local }),
      onBlocked: ({ thread, blockedMs, jobIds }) => {
        const fields = { thread, blockedMs, jobIds: jobIds.slice(0, 20), attempts: jobIds.length };
        this.#log.warn(
          fields,
          thread === 'main'
            ? "this process's event loop was held (heartbeats were late): a handler given in code computes without yielding; move it to a task module"
            : 'a task thread is blocked: a handler holds its event loop (no new attempt goes there)',
        );
      },
    });
    this.#primary = this.#newLink(null, { capacity: this.capacity, prefetch: this.prefetch });
    this.#links = [this.#primary];
    this.#attemptHost = this.#makeAttemptHost();
  }

  /** Validates the options and starts connecting in the background. */
  static start(options: WorkerOptions): Worker {
    validateWorkerOptions(options);
    const worker = new Worker(options);
    // OpenTelemetry only if this process set it up (tracing.ts); looked up once.
    worker.#primary.session.start(async () => {
      worker.#otel = await loadOtel();
    });
    return worker;
  }

  /** A session link (its session not started) with `address`, or with `coordinatorHost` when null. */
  #newLink(address: string | null, share: Share): SessionLink {
    return new SessionLink(address, share, (link) => this.#newSession(link));
  }

  /**
   * A session (not started) for `link`: its first, or a successor that
   * registers in its place (see {@link #reshare}). What an earlier session
   * of the link says once a successor exists is the replacement under way.
   */
  #newSession(link: SessionLink): WorkerSession {
    const address = link.address;
    const options =
      address === null ? this.#options : { ...this.#options, coordinatorHost: address };
    const log = address === null ? this.#log : this.#log.child({ session: address });
    const current = (): boolean => session === link.session;
    const host: SessionHost = {
      registration: () => this.#registration(link),
      onConnected: () => this.events.emit('connected'),
      onRegistered: (connection, features) => {
        if (session === link.successor) this.#promote(link, 'its successor registered');
        if (current()) this.#onRegistered(link, connection, features);
      },
      onAssign: (connection, msg) => {
        if (current()) this.#onAssign(link, connection, msg);
      },
      onCancel: (msg) => this.#onCancel(link, msg),
      onCallAnswer: (connection, requestId, outcome) =>
        this.#calls.settle(connection, requestId, outcome),
      onDisconnected: (connection, reason) => {
        this.#calls.connectionLost(connection, reason);
        if (!current()) return; // a replaced session, or a successor that dials again
        if (link.successor !== null) {
          // Its successor's registration lists what it held.
          this.#promote(link, `the session it replaces ended (${reason})`);
          return;
        }
        this.#onDisconnected(link, reason);
      },
      onRefused: (err) => {
        this.events.emit('refused', err);
        void this.close();
      },
      // The session a successor replaces is told WORKER_REPLACED: that is what we asked for.
      replacedOnPurpose: () => session !== link.latest,
      onShardMap: (shards) => this.#onShardMap(link, shards),
    };
    const session = new WorkerSession(options, log, host);
    return session;
  }

  /**
   * Unsharded: the session's mode. Sharded: the best of its sessions'
   * (registered if any is), `disconnected` while it has none.
   */
  get mode(): WorkerMode {
    if (this.#plan === null) return this.#primary.session.mode;
    if (this.#closing !== null) return 'closed';
    const modes = new Set(this.#links.map((link) => link.session.mode));
    return MODE_RANK.find((mode) => modes.has(mode)) ?? 'disconnected';
  }

  /** True while a connection is open (registered or not yet). */
  get connected(): boolean {
    return this.mode === 'registering' || this.mode === 'registered';
  }

  /** True while at least one session is registered. */
  get registered(): boolean {
    return this.#links.some((link) => link.registered);
  }

  /** The task types this worker declares: the built-ins, then its modules' tasks. */
  get taskTypes(): readonly string[] {
    return this.#tasksLoaded.taskTypes;
  }

  /**
   * The extensions the current coordinator offers (empty when none or not
   * registered); sharded, those every registered session's coordinator offers.
   */
  get features(): ReadonlySet<Feature> {
    if (this.#plan === null) return this.#primary.features;
    const registered = this.#links.filter((link) => link.registered);
    const [first, ...rest] = registered;
    if (first === undefined) return new Set();
    return new Set([...first.features].filter((f) => rest.every((l) => l.features.has(f))));
  }

  /** True once a sharded coordinator answered: the worker has a session per shard leader. */
  get sharded(): boolean {
    return this.#plan !== null;
  }

  /** The shard map as this worker serves it; null while unsharded. */
  get shardPlan(): ShardPlan | null {
    return this.#plan;
  }

  /** Its sessions not closed yet: one unsharded, one per shard leader (and closing ones) sharded. */
  get sessions(): readonly SessionView[] {
    return this.#links.map((link) => link.view());
  }

  /** Tasks running now, orphans included (cancelled and abandoned ones excluded). */
  get runningCount(): number {
    return this.#attempts.size;
  }

  /** Task threads that exist now (shared and isolated, ending ones included). */
  get threadCount(): number {
    return this.#pool.threadCount;
  }

  /**
   * Graceful shutdown: announces WORKER_DRAINING, takes no new connection,
   * waits up to `timeoutMs` for running tasks to finish and report, then
   * closes (abandoning what is left). Idempotent; always the same promise.
   */
  drain(timeoutMs: number): Promise<void> {
    this.#draining ??= this.#drainThenClose(timeoutMs);
    return this.#draining;
  }

  async #drainThenClose(timeoutMs: number): Promise<void> {
    const running = this.#attempts.size;
    void this.#refresher?.stop();
    for (const link of this.#links) {
      if (!link.retiring) this.#announceDrain(link);
    }
    this.#log.info({ runningTasks: running, timeoutMs }, 'draining: no new tasks');
    for (const link of this.#links) {
      this.#dropSuccessor(link);
      link.session.stopDialling();
    }
    const drained = await this.#whenIdle(timeoutMs);
    if (drained) this.#log.info('drained: every task finished');
    else {
      this.#log.warn({ leftTasks: this.#attempts.size }, 'drain timed out; releasing what is left');
    }
    await this.close();
  }

  /** WORKER_DRAINING to a session's coordinator, if it offers `drain`. */
  #announceDrain(link: SessionLink): void {
    if (link.registered && link.features.has('drain')) {
      link.connection?.send({ type: 'WORKER_DRAINING', workerId: this.workerId });
    } else if (link.registered) {
      // A v1 coordinator drops a worker that sends WORKER_DRAINING.
      this.#log.info(
        'coordinator does not offer drain: refusing new tasks instead of announcing it',
      );
    }
  }

  /** Resolves true once no task runs (or none could report), false after `timeoutMs`. */
  #whenIdle(timeoutMs: number): Promise<boolean> {
    if (!this.#someCanReport()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.#idleWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  /** Some session holds attempts and has a connection to report them on. */
  #someCanReport(): boolean {
    return this.#links.some((link) => link.attempts.size > 0 && link.connection !== null);
  }

  #notifyIfIdle(): void {
    if (this.#someCanReport()) return;
    for (const waiter of this.#idleWaiters.splice(0)) waiter();
  }

  /**
   * Stops everything: no more dials, heartbeats or results; running tasks are
   * abandoned and their threads terminated; the connections are closed.
   * Idempotent; always the same promise.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const refresher = this.#refresher?.stop();
      this.#abort.abort();
      // Every session first: closing one may end its connection at once, which must promote nothing.
      const all = this.#links.flatMap((link) => {
        const successor = link.successor;
        link.successor = null;
        return successor === null ? [link.session] : [link.session, successor];
      });
      const sessions = all.map((session) => session.close());
      for (const link of this.#links) this.#abandonAttempts(link);
      await Promise.all([...sessions, refresher, this.#pool.close()]);
      this.#log.info('worker closed');
    })();
    return this.#closing;
  }

  /** What WORKER_REGISTER says of this worker to a session (held attempts change from one to the next). */
  #registration(link: SessionLink): Omit<WorkerRegister, 'type' | 'workerId'> {
    const fields = this.#registrationFields(link);
    const { listed, rest } = splitHeld(
      { type: 'WORKER_REGISTER', workerId: this.workerId, ...fields },
      this.#heldAttempts(link),
    );
    link.heldToSend = rest.length > 0 ? rest : null;
    link.registeredShare = link.share;
    link.registeredQueues = fields.queues ?? null;
    return { ...fields, heldAttempts: listed, ...(rest.length > 0 ? { moreHeld: true } : {}) };
  }

  #registrationFields(
    link: SessionLink,
  ): Omit<WorkerRegister, 'type' | 'workerId' | 'heldAttempts'> {
    const authToken = this.#options.authToken ?? null;
    const { capacity, prefetch } = link.share;
    const queues = this.#queuesOf(link);
    return {
      // Above 1,024 only through `slots` (a v1 coordinator refuses more).
      capacity: Math.min(capacity, MAX_CAPACITY),
      ...(capacity > MAX_CAPACITY ? { slots: capacity } : {}),
      taskTypes: [...this.#tasksLoaded.taskTypes],
      heartbeatAck: true,
      parents: true,
      traceContext: true,
      steps: true,
      children: true,
      batches: true,
      ...(prefetch === 0 ? {} : { prefetch }),
      ...(authToken === null ? {} : { authToken }),
      ...(queues === null ? {} : { queues }),
    };
  }

  /** The queues a session asks for: the worker's, or (sharded) those of its shards. */
  #queuesOf(link: SessionLink): string[] | null {
    const queues = this.#queues;
    if (queues === null) return null;
    const plan = this.#plan;
    if (plan === null || link.address === null) return [...queues];
    const mine = queues.filter((queue) => link.shards.includes(shardOfQueue(queue, plan.count)));
    return mine.length > 0 ? mine : [...queues];
  }

  /** A session's orphans still running or queued, and finished ones not reported yet. */
  #heldAttempts(link: SessionLink): HeldAttempt[] {
    const held = [...link.attempts, ...link.lateResults];
    return held.map(({ jobId, attemptId }) => ({ jobId, attemptId }));
  }

  #onRegistered(
    link: SessionLink,
    connection: FramedConnection,
    features: ReadonlySet<Feature>,
  ): void {
    const shown = features.size === 0 ? 'none (v1 coordinator)' : [...features].join(',');
    const customTypes = this.#tasksLoaded.taskTypes.length - BUILTIN_TASK_TYPES.length;
    const { capacity } = link.share;
    this.#log.info(
      {
        capacity,
        threads: this.threads,
        features: shown,
        customTaskTypes: customTypes,
        ...(link.address === null ? {} : { coordinator: link.address, shards: link.shards }),
      },
      'registered',
    );
    if (capacity > MAX_CAPACITY && !features.has('slots')) {
      this.#log.warn(
        { capacity, slots: MAX_CAPACITY },
        `this coordinator does not offer slots: it hands this worker at most ${MAX_CAPACITY} attempts`,
      );
    }
    this.#sendRestOfHeld(link, connection, features);
    if (features.has('reattach')) this.#adoptOrphans(link, connection);
    else this.#abandonAttempts(link, true);
    this.#reportLateResults(link, connection);
    this.events.emit('registered');
    this.events.emit('sessionRegistered', link.session.coordinator);
    // The share changed while this registration was on its way.
    if (link.address !== null) this.#reshare(link, link.share);
  }

  /**
   * The held attempts the registration had no room for: in HELD_ATTEMPTS
   * parts to a coordinator that offers `moreHeld`; to any other, revoked at
   * the registration (it saw them not listed), so they are let go unreported.
   */
  #sendRestOfHeld(
    link: SessionLink,
    connection: FramedConnection,
    features: ReadonlySet<Feature>,
  ): void {
    const rest = link.heldToSend;
    link.heldToSend = null;
    if (rest === null) return;
    if (features.has('moreHeld')) {
      const parts = heldParts(rest);
      parts.forEach((heldAttempts, i) =>
        connection.send({
          type: 'HELD_ATTEMPTS',
          workerId: this.workerId,
          heldAttempts,
          more: i < parts.length - 1,
        }),
      );
      this.#log.info({ held: rest.length, parts: parts.length }, 'held attempts listed in parts');
      return;
    }
    const unlisted = new Set(rest.map((held) => held.attemptId));
    link.lateResults = link.lateResults.filter((late) => !unlisted.has(late.attemptId));
    for (const attempt of [...link.attempts]) {
      if (!unlisted.has(attempt.attemptId)) continue;
      this.#forget(attempt);
      attempt.abandon();
      this.events.emit('abandoned', attempt.jobId, attempt.attemptId);
    }
    this.#log.warn(
      { unlisted: rest.length },
      'this coordinator takes no held attempts beyond the registration: the unlisted ones are let go',
    );
  }

  /**
   * The coordinator takes back the orphans whose lease is still current and
   * cancels the others: every orphan of the session now belongs to its new connection.
   */
  #adoptOrphans(link: SessionLink, connection: FramedConnection): void {
    let adopted = 0;
    for (const attempt of link.attempts) {
      if (attempt.connection === connection) continue;
      attempt.connection = connection;
      adopted++;
    }
    if (adopted > 0) {
      this.#log.info({ tasks: adopted }, 'running tasks carried over to the new session');
    }
  }

  #reportLateResults(link: SessionLink, connection: FramedConnection): void {
    const late = link.lateResults;
    link.lateResults = [];
    for (const { jobId, attemptId, outcome } of late) {
      const hope = link.features.has('reattach')
        ? 'counted if its lease is still current'
        : 'its lease is probably revoked';
      this.#log.info({ jobId, attemptId }, `late result reported (${hope})`);
      this.#report(link, connection, { jobId, attemptId }, outcome);
    }
  }

  #onDisconnected(link: SessionLink, reason: string): void {
    if (link.session.closed) {
      // Closed by us: the worker closes, or the session's shards moved (its attempts moved on too).
      if (this.#closing !== null) this.#abandonAttempts(link);
      else this.#handOn(link);
      return;
    }
    const where = link.address === null ? {} : { coordinator: link.address };
    this.#log.warn({ ...where, reason, orphanedTasks: link.attempts.size }, 'connection lost');
    if (this.#draining === null && !link.retiring) {
      this.#log.info({ delayMs: this.#options.reconnectDelayMs }, 'reconnecting');
    }
    this.events.emit('disconnected', reason);
    if (link.retiring) {
      this.#closeLink(link); // nobody left to report to there
    } else if (this.#plan !== null) {
      // Its shard may have moved, or its coordinator died: where are they now?
      this.#refresher?.request(`a session lost its connection (${reason})`);
    }
    this.#notifyIfIdle(); // a draining worker has nobody left to report to
  }

  /**
   * Lets a session's running attempts (or only its orphans) go without ever
   * reporting them; all of them also drop its unreported results.
   */
  #abandonAttempts(link: SessionLink, onlyOrphans = false): void {
    const current = link.connection;
    const attempts = [...link.attempts].filter(
      (attempt) => !onlyOrphans || attempt.connection !== current,
    );
    if (!onlyOrphans) link.lateResults = [];
    for (const attempt of attempts) this.#abandon(attempt);
    this.#notifyIfIdle();
  }

  #abandon(attempt: WorkerAttempt): void {
    this.#forget(attempt);
    attempt.abandon();
    const { jobId, attemptId } = attempt;
    this.#log.info({ jobId, attemptId }, 'task abandoned');
    this.events.emit('abandoned', jobId, attemptId);
  }

  #onAssign(link: SessionLink, connection: FramedConnection, msg: TaskAssign): void {
    const { jobId, attemptId } = msg;
    this.events.emit('assigned', jobId, attemptId);
    if (this.#attempts.has(attemptId)) {
      this.#log.warn({ jobId, attemptId }, 'duplicate assignment ignored');
      return;
    }
    const refusal =
      this.#draining !== null
        ? 'worker is shutting down'
        : link.retiring
          ? "this session is closing: its coordinator leads none of this worker's shards now"
          : link.attempts.size >= link.window(MAX_CAPACITY)
            ? 'worker at capacity'
            : null;
    if (refusal !== null) {
      const { capacity } = link.share;
      this.#log.warn({ jobId, attemptId, capacity }, `task refused: ${refusal}`);
      const outcome = {
        success: false,
        error: refusal,
        cancelled: false,
        retryable: true,
      } as const;
      this.#report(link, connection, { jobId, attemptId }, outcome);
      return;
    }
    const attempt = new Attempt(this.#attemptHost, this.#pool, link, connection, msg, {
      otel: this.#otel,
      isolated: this.#tasksLoaded.isolated.has(msg.taskType),
      local: this.#tasksLoaded.local?.has(msg.taskType) === true,
    });
    this.#attempts.set(attemptId, attempt);
    link.attempts.add(attempt);
  }

  /** Takes an attempt out of the running set for good. */
  #forget(attempt: WorkerAttempt): void {
    if (this.#attempts.get(attempt.attemptId) === attempt) this.#attempts.delete(attempt.attemptId);
    attempt.session.attempts.delete(attempt);
    this.#calls.forgetAttempt(attempt.attemptId);
  }

  #makeAttemptHost(): AttemptHost<SessionLink> {
    return {
      workerId: this.workerId,
      log: this.#log,
      onCall: (attempt, callId, call) => this.#onCall(attempt, callId, call),
      onStarted: (attempt) => {
        const { jobId, attemptId, attemptNumber, taskType, timeoutMs } = attempt;
        // Logged once the task's code runs in its thread (not merely queued).
        this.#log.info({ jobId, attemptId, attemptNumber, taskType, timeoutMs }, 'task started');
        this.events.emit('started', jobId, attemptId);
      },
      onEnded: (attempt, outcome) => this.#onEnded(attempt, outcome),
      onDeadline: (attempt) => this.#stop(attempt, 'deadline'),
      onStopped: (attempt, reason, how) => {
        const { jobId, attemptId } = attempt;
        const stopMs = Math.round(performance.now() - attempt.stoppedAtMs);
        const what =
          how === 'cooperative'
            ? 'the handler stopped'
            : how === 'terminated'
              ? 'its thread was terminated'
              : 'its handler ignored the stop and runs on, unreported (a handler given in code cannot be ended)';
        this.#log.info({ jobId, attemptId, reason, stopMs }, `task stopped: ${what}`);
        this.events.emit('stopped', jobId, attemptId, reason, how);
        if (reason === 'cancel') this.events.emit('cancelled', jobId, attemptId);
      },
    };
  }

  #onEnded(attempt: WorkerAttempt, outcome: TaskOutcome): void {
    const link = attempt.session;
    this.#forget(attempt);
    if (!outcome.success && outcome.cancelled) {
      this.#left(link);
      return;
    }
    const { jobId, attemptId } = attempt;
    const durationMs = Math.round(performance.now() - attempt.startedAtMs);
    if (!outcome.success && outcome.suspend !== undefined) {
      this.#log.info({ jobId, attemptId, durationMs, ...outcome.suspend }, 'task suspended');
    } else {
      const error = outcome.success ? undefined : outcome.error;
      const requeue = !outcome.success && outcome.requeue === true ? true : undefined;
      this.#log.info(
        { jobId, attemptId, success: outcome.success, durationMs, error, requeue },
        'task finished',
      );
    }
    const connection = link.connection;
    if (link.successor !== null) {
      // Registering again: the successor lists it or takes it over, and reports it.
      link.lateResults.push({ jobId, attemptId, outcome });
    } else if (attempt.connection === connection) {
      this.#report(link, attempt.connection, attempt, outcome);
    } else if (connection !== null && link.registered) {
      // Handed over from a closed session: this one never had it, so it is a late result.
      this.#log.info({ jobId, attemptId }, 'late result reported (a session closed with it)');
      this.#report(link, connection, attempt, outcome);
    } else {
      // An orphan: its connection is gone and no new session exists yet.
      link.lateResults.push({ jobId, attemptId, outcome });
    }
    this.#left(link);
  }

  /** An attempt left `link`: a drain may be over, and a closing session may close now. */
  #left(link: SessionLink): void {
    this.#notifyIfIdle();
    if (link.retiring && link.attempts.size === 0 && link.lateResults.length === 0) {
      this.#closeLink(link);
    }
  }

  #report(
    link: SessionLink,
    connection: FramedConnection,
    ids: ResultIds,
    outcome: TaskOutcome,
  ): void {
    const sent = sendOutcome(connection, this.workerId, ids, outcome, link.features);
    if (sent !== null) this.events.emit('result', sent);
  }

  #onCancel(link: SessionLink, msg: TaskCancel): void {
    const { jobId, attemptId } = msg;
    this.#log.info({ jobId, attemptId }, 'cancel received');
    const attempt = this.#attempts.get(attemptId);
    if (attempt === undefined || attempt.jobId !== jobId || attempt.session !== link) {
      this.#log.info({ jobId, attemptId }, 'cancel ignored: no such running task');
      return;
    }
    this.#stop(attempt, 'cancel');
  }

  #stop(attempt: WorkerAttempt, reason: AbortReason): void {
    const link = attempt.session;
    this.#forget(attempt);
    attempt.stop(reason);
    this.#left(link);
  }

  /**
   * A call of a running attempt's handler (the message without its ids): sent
   * with the attempt's ids and a fresh requestId, if its coordinator offers
   * what it needs and the attempt's connection is its session's current one.
   */
  #onCall(attempt: WorkerAttempt, callId: number, call: JsonObject): void {
    if (this.#attempts.get(attempt.attemptId) !== attempt) return; // stopped: its thread failed the call
    const answer = (outcome: CallOutcome): void => attempt.answerCall(callId, outcome);
    const type = typeof call.type === 'string' ? call.type : JSON.stringify(call.type);
    const feature = Object.prototype.hasOwnProperty.call(CALL_FEATURES, type)
      ? CALL_FEATURES[type as keyof typeof CALL_FEATURES]
      : null;
    if (feature === null) {
      return answer({
        ok: false,
        code: ErrorCode.InvalidRequest,
        message: `no such call: ${type}`,
      });
    }
    const link = attempt.session;
    if (!link.features.has(feature)) {
      const message = `the coordinator does not offer ${feature} (${type} needs it)`;
      return answer({ ok: false, code: LocalErrorCode.UnsupportedFeature, message });
    }
    const connection = attempt.connection;
    if (connection !== link.connection || !link.registered) {
      const message = 'no connection to the coordinator now';
      return answer({ ok: false, code: LocalErrorCode.ConnectionLost, message });
    }
    const requestId = this.#calls.open(connection, attempt.attemptId, answer);
    if (requestId === null) return;
    const { workerId } = this;
    const ids = { workerId, jobId: attempt.jobId, attemptId: attempt.attemptId, requestId };
    try {
      const msg = decodeValue({ ...call, ...ids });
      if (!isWorkerCall(msg)) throw new Error(`${msg.type} is not a call`);
      if (!connection.send(msg)) {
        const message = 'the connection to the coordinator is closing';
        this.#calls.fail(requestId, { ok: false, code: LocalErrorCode.ConnectionLost, message });
      }
    } catch (err) {
      // Too large for a frame, or a field the message does not allow.
      const code = err instanceof DtpError && err.code === ProtocolErrorCode.FrameEncode;
      this.#calls.fail(requestId, {
        ok: false,
        code: code ? LocalErrorCode.PayloadTooLarge : ErrorCode.InvalidRequest,
        message: `${type} could not be sent: ${describeError(err)}`,
      });
    }
  }

  // ---- A sharded coordinator: one session per shard leader -------------------------------

  /** A registration was answered NOT_LEADER with the shard map. */
  #onShardMap(link: SessionLink, shards: readonly ShardInfo[]): void {
    if (this.#closing !== null || this.#draining !== null) return;
    this.#applyMap(shards, link.session.coordinator);
  }

  /** Asks for the map (never rejects: a failure is logged, and the next ask may do better). */
  async #refreshMap(why: string): Promise<void> {
    try {
      const answer = await askShardList(this.#mapSources, {
        timeoutMs: this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
        tls: this.#options.tls ?? null,
        authToken: this.#options.authToken ?? null,
        signal: this.#abort.signal,
      });
      if (this.#closing !== null || this.#draining !== null) return;
      if (!answer.ok) {
        if (!this.#mapUnreachable) {
          this.#log.warn({ why, problems: answer.problems }, 'shard map: no coordinator answered');
        }
        this.#mapUnreachable = true;
        return;
      }
      this.#mapUnreachable = false;
      this.#learnSources(answer.list.coordinators.map((c) => c.workerAddress));
      this.#applyMap(answer.list.shards, answer.from);
    } catch (err) {
      this.#log.error({ err: describeError(err) }, 'shard map refresh failed');
    }
  }

  /** The coordinators a map named become places to ask next time, after `coordinatorHost`. */
  #learnSources(addresses: readonly (string | null)[]): void {
    const configured = parseAddressList(
      this.#options.coordinatorHost,
      this.#options.coordinatorPort,
    );
    const seen = new Set(configured.map(formatHostPort));
    const sources = [...configured];
    for (const text of addresses) {
      if (text === null) continue;
      try {
        const [address] = parseAddressList(text, this.#options.coordinatorPort);
        if (address === undefined || seen.has(formatHostPort(address))) continue;
        seen.add(formatHostPort(address));
        sources.push(address);
      } catch {
        // Not an address: nothing to ask there.
      }
    }
    this.#mapSources = sources;
  }

  /**
   * Acts on a map: a session for each address that leads some of this
   * worker's shards (new ones opened, changed shares registered again),
   * and the others closed (see the module comment).
   */
  #applyMap(infos: readonly ShardInfo[], from: string): void {
    const plan = planShards(infos, this.#queues, this.#options.coordinatorPort);
    if (plan === null) {
      this.#log.warn({ from }, 'a shard map that names no shard: ignored');
      return;
    }
    const before = this.#plan;
    this.#plan = plan;
    if (before === null) {
      this.#log.info(
        { from, shards: plan.count, served: plan.served.join(',') },
        'sharded coordinator: one session per shard leader',
      );
      const refreshMs = this.#options.shardRefreshMs ?? DEFAULT_SHARD_REFRESH_MS;
      this.#refresher = new MapRefresher((why) => this.#refreshMap(why), refreshMs);
      this.#refresher.start();
    }
    const live = new Map(
      this.#links.flatMap((link) =>
        link.retiring || link.address === null ? [] : [[link.address, link] as const],
      ),
    );
    const shares = shareOut(this.capacity, this.prefetch, plan.routes);
    const opened: SessionLink[] = [];
    const reshared: [SessionLink, Share][] = [];
    plan.routes.forEach((route, i) => {
      const share = shares[i] as Share;
      const existing = live.get(route.address);
      const link = existing ?? this.#newLink(route.address, share);
      link.shards = route.shards;
      if (existing === undefined) {
        this.#links.push(link);
        opened.push(link);
      } else reshared.push([link, share]);
    });
    const wanted = new Set(plan.routes.map((route) => route.address));
    for (const link of [...this.#links]) {
      if (!link.retiring && (link.address === null || !wanted.has(link.address))) {
        this.#retire(link);
      }
    }
    for (const [link, share] of reshared) this.#reshare(link, share);
    for (const link of opened) link.session.start(() => Promise.resolve());
    this.#fitPoolQueue();
    if (before === null || planKey(before) !== planKey(plan)) {
      this.#log.info(
        {
          from,
          sessions: plan.routes.map(
            (r, i) => `${r.address}=${r.shards.join('+')}/${shares[i]?.capacity}`,
          ),
          unled: plan.unled.join(','),
        },
        'shard map',
      );
      this.events.emit('shards', plan);
    }
  }

  /**
   * A session whose address leads none of this worker's shards now: closed
   * at once when it holds nothing or cannot report, else it takes nothing
   * more and closes once its attempts have reported.
   */
  #retire(link: SessionLink): void {
    link.retiring = true;
    this.#dropSuccessor(link);
    link.session.stopDialling();
    if (!link.registered || link.attempts.size + link.lateResults.length === 0) {
      this.#closeLink(link);
      return;
    }
    if (link.features.has('drain')) {
      link.connection?.send({ type: 'WORKER_DRAINING', workerId: this.workerId });
    }
    this.#log.info(
      { coordinator: link.session.coordinator, runningTasks: link.attempts.size },
      "session draining: its coordinator leads none of this worker's shards now",
    );
  }

  /** Closes a session for good; what it still holds goes to the sessions of its shards. */
  #closeLink(link: SessionLink): void {
    const index = this.#links.indexOf(link);
    if (index < 0) return;
    this.#links.splice(index, 1);
    link.retiring = true;
    this.#dropSuccessor(link);
    this.#handOn(link);
    const coordinator = link.session.coordinator;
    if (link.address !== null) this.#log.info({ coordinator }, 'session closed');
    void link.session.close().then(() => this.events.emit('sessionClosed', coordinator));
    this.#fitPoolQueue();
    this.#notifyIfIdle();
  }

  /**
   * A closing session's attempts and unreported results go to the session
   * that now serves their shard (its job id names it): listed as held at its
   * next registration, or reported now if it is registered. Those of no
   * served shard are let go.
   */
  #handOn(link: SessionLink): void {
    for (const attempt of [...link.attempts]) {
      const to = this.#linkForJob(attempt.jobId);
      if (to === null) {
        this.#abandon(attempt);
        continue;
      }
      link.attempts.delete(attempt);
      to.attempts.add(attempt);
      attempt.session = to;
    }
    const late = link.lateResults;
    link.lateResults = [];
    for (const result of late) {
      const to = this.#linkForJob(result.jobId);
      const connection = to?.connection ?? null;
      if (to === null) {
        this.#log.info({ jobId: result.jobId }, 'late result dropped: no session serves its shard');
      } else if (connection !== null && to.registered) {
        this.#report(to, connection, result, result.outcome);
      } else to.lateResults.push(result);
    }
  }

  /** The open session that serves a job's shard, if any. */
  #linkForJob(jobId: string): SessionLink | null {
    const plan = this.#plan;
    if (plan === null) return null;
    const shard = shardOfJobId(jobId, plan.count);
    if (shard === null) return null;
    return this.#links.find((link) => !link.retiring && link.shards.includes(shard)) ?? null;
  }

  /**
   * A session's new share: said by its next registration, or now by a
   * successor that registers in its place while it still serves, if its
   * coordinator can carry running attempts over (`reattach`) or none runs
   * there. Registering the worker id again replaces the live session and
   * hands the successor the leases its registration lists, where dropping
   * the connection first would lose them. The session in force announces
   * WORKER_DRAINING first (where offered), so that nothing more is assigned
   * to it on the way.
   */
  #reshare(link: SessionLink, share: Share): void {
    link.share = share;
    const sent = link.registeredShare;
    // Not registered: its next registration says it. A successor under way: looked at once it registered.
    if (link.retiring || !link.registered || link.successor !== null) return;
    const queues = this.#queuesOf(link);
    if (sent === null || (sameShare(sent, share) && sameList(link.registeredQueues, queues))) {
      return;
    }
    const fields = { coordinator: link.session.coordinator, ...share, queues: queues ?? undefined };
    if (!link.features.has('reattach') && link.attempts.size > 0) {
      this.#log.info(fields, 'new share of capacity or queues: said at the next registration');
      return;
    }
    this.#log.info(fields, 'new share of capacity or queues: registering again');
    if (link.features.has('drain')) {
      link.connection?.send({ type: 'WORKER_DRAINING', workerId: this.workerId });
    }
    const successor = this.#newSession(link);
    link.successor = successor;
    link.latest = successor;
    successor.start(() => Promise.resolve());
  }

  /** The successor takes the place of the session in force, which closes. */
  #promote(link: SessionLink, why: string): void {
    const successor = link.successor;
    if (successor === null) return;
    const replaced = link.session;
    link.session = successor;
    link.successor = null;
    this.#log.debug({ coordinator: successor.coordinator, why }, 'session replaced');
    void replaced.close();
  }

  /**
   * A successor under way is not needed any more: the session in force
   * reports what was kept for the successor.
   */
  #dropSuccessor(link: SessionLink): void {
    const successor = link.successor;
    if (successor === null) return;
    link.successor = null;
    void successor.close();
    const connection = link.connection;
    if (connection !== null && link.registered) this.#reportLateResults(link, connection);
  }

  /**
   * The pool's queue holds what the sessions may be sent beyond `capacity`:
   * their shares (registered and next) together may exceed it. Each
   * session's window bounds what it takes.
   */
  #fitPoolQueue(): void {
    if (this.#plan === null) return;
    let held = 0;
    for (const link of this.#links) {
      const sent = link.registeredShare ?? link.share;
      held += Math.max(
        sent.capacity + sent.prefetch,
        link.share.capacity + link.share.prefetch,
        link.attempts.size,
      );
    }
    this.#pool.queueLimit = Math.max(this.prefetch, held);
  }
}

function sameShare(a: Share, b: Share): boolean {
  return a.capacity === b.capacity && a.prefetch === b.prefetch;
}

function sameList(a: readonly string[] | null, b: readonly string[] | null): boolean {
  return a === b || (a !== null && b !== null && a.join('\n') === b.join('\n'));
}

/** What of a plan matters for logging and the `shards` event. */
function planKey(plan: ShardPlan): string {
  return JSON.stringify([plan.count, plan.unled, plan.routes.map((r) => [r.address, r.shards])]);
}
