/**
 * Simulated clients: they submit valid built-in jobs (some with idempotency
 * keys, some resubmitting a key exactly, some reusing a key with a different
 * submission), invalid ones on purpose, cancel, ask for status, wait, list
 * jobs and workers, hang up and reconnect. Every reply must answer exactly one
 * outstanding request of the connection; a JOB_SUBMITTED is an
 * acknowledgement the invariants hold the coordinator to. They signal jobs
 * (mostly ones that wait for a signal, some ended or unknown), publish
 * events (with and without key and id, ids from a small pool), and set,
 * delete and list triggers; in the quiet phase they delete the triggers
 * and wake every job still waiting for a signal or an event.
 *
 * Flows (SUBMIT_FLOW, only where `weights` asks for them: the sharded
 * simulation) spread their jobs over the queues, each after some of the
 * earlier ones and now and then after an acknowledged job.
 */
import type {
  ClientReply,
  ClientRequest,
  DedupMode,
  FlowJob,
  FlowSubmitted,
  JobState,
  JsonObject,
  JsonValue,
  Priority,
  PublishEvent,
  ScheduleDefinition,
  SetQueue,
  SetTrigger,
  SignalJob,
  SubmitFlow,
  SubmitJob,
  SubmitJobs,
} from '../../src/protocol/messages.js';
import { submitElementToJson } from '../../src/protocol/codec.js';
import { KNOWN_STATES, StateView } from '../../src/protocol/job-view.js';
import { JOB_STATES, QUEUE_SETTING_FIELDS } from '../../src/protocol/messages.js';
import type { ClientLink, ClientPeer, SimClock } from './network.js';
import type { Random } from './random.js';
import type { Judge } from './violation.js';
import type { FaultCounter } from './workers.js';
import {
  EVENT_KEYS,
  EVENT_NAMES,
  SIGNAL_NAMES,
  TRIGGER_NAMES,
  type WaitingJob,
} from './signal-checks.js';

/** Where a client's connections go: the coordinator's client port (world.ts, sim-router.ts). */
export interface ClientPort {
  openClientLink(owner: ClientPeer, address: string): ClientLink;
  /** Writes a request; returns its request id, or null if the link is closed. */
  writeClient(link: ClientLink, msg: ClientRequest): number | null;
}

export interface ClientEnv {
  world: ClientPort;
  clock: SimClock;
  judge: Judge;
  faults: FaultCounter;
  /** Requests built invalid on purpose (the checks expect an ERROR for them). */
  invalid: WeakSet<object>;
  /** Acknowledged job ids (shared by all clients). */
  ackedIds: readonly string[];
  /** Keyed submissions made so far (shared, so clients also collide on keys). */
  keyed: SubmitJob[];
  /** The last valid definition sent for each schedule name (shared). */
  schedules: Map<string, ScheduleDefinition>;
  /** `deduplicated`: the reply named a job its dedup key matched (nothing was created). */
  onAck(jobId: string, submission: SubmitJob, deduplicated: boolean): void;
  /** The jobs waiting for a signal or an event now (signal-checks.ts). */
  waiting(): readonly WaitingJob[];
  /** Shared by all clients: the number the next signal's payload carries, and when each waiting job was last woken. */
  signalling: { next: number; poked: Map<string, number> };
  /** Weights of the kinds of request (default REQUEST_WEIGHTS). */
  weights?: typeof REQUEST_WEIGHTS;
  /** The queues requests name, `default` first (default QUEUES). */
  queues?: readonly string[];
  quiet(): boolean;
  log(line: () => string): void;
}

/** Most keyed submissions remembered for resubmission. */
const MAX_KEYED = 100;

export const REQUEST_WEIGHTS = {
  submit: 30,
  resubmit: 6,
  conflict: 3,
  invalidSubmit: 3,
  batch: 4,
  cancel: 8,
  status: 14,
  wait: 10,
  list: 6,
  listWorkers: 2,
  unknownJob: 2,
  setQueue: 3,
  listQueues: 1,
  dependent: 8,
  subscribe: 1,
  // Few schedules at a time, not living long: their ticks add jobs to every seed.
  setSchedule: 1,
  resetSchedule: 1,
  invalidSchedule: 1,
  pauseSchedule: 1,
  resumeSchedule: 1,
  triggerSchedule: 1,
  deleteSchedule: 2,
  getSchedule: 1,
  listSchedules: 1,
  signal: 5,
  publish: 4,
  setTrigger: 1,
  deleteTrigger: 1,
  listTriggers: 1,
  // Last, and none by default: a run without flows draws as it did before they existed.
  flow: 0,
};

/** Event ids the clients give (a small pool, so some repeat); half of the publishes give none. */
const EVENT_IDS = 40;

/** How long the quiet phase leaves a waiting job before it wakes it (again). */
const WAKE_AGAIN_MS = 1_000;

/** Schedule names the clients use (the last one is never set). */
const SCHEDULE_NAMES = ['s1', 's2', 's3'] as const;
const NO_SCHEDULE = 's9';
/** Cron expressions of simulated schedules: every few seconds, now and then every minute. */
const CRONS = ['*/2 * * * * *', '*/3 * * * * *', '* * * * * *', '*/5 * * * * *', '* * * * *'];

export const QUEUES: readonly string[] = ['default', 'q1', 'q2'];
const GROUPS = [null, 'g1', 'g2', 'g3'] as const;

const TASK_WEIGHTS = { SHA256: 3, SLEEP: 3, FAIL: 3, WORD_COUNT: 1, PRIME_COUNT: 1 } as const;

/**
 * Deduplication keys: a small pool, the same names in every queue (keys are
 * scoped to a queue). Most keys always come with one mode (and one throttle
 * window), so the spec's rules can be judged exactly; `m0` takes any mode.
 */
const DEDUP_KEYS = ['a0', 'a1', 't0', 't1', 'd0', 'd1', 'm0'] as const;

/** The mode a submission with `key` uses (`m0`: drawn each time), and the throttle window. */
export function dedupSpecOf(key: string): { mode: DedupMode | null; windowMs: number } {
  const windowMs = key === 't0' ? 400 : key === 't1' ? 2_500 : 1_500;
  switch (key.charAt(0)) {
    case 'a':
      return { mode: 'active', windowMs };
    case 't':
      return { mode: 'throttle', windowMs };
    case 'd':
      return { mode: 'debounce', windowMs };
    default:
      return { mode: null, windowMs };
  }
}

/** True for a key submitted with one mode only (its decisions follow the spec exactly). */
export function isFixedModeKey(key: string): boolean {
  return dedupSpecOf(key).mode !== null;
}

export class SimClient implements ClientPeer {
  readonly name: string;
  /** The address its connections come from (clients share a few). */
  readonly address: string;
  readonly #env: ClientEnv;
  readonly #rng: Random;
  /** Chance per step of issuing requests. */
  readonly #activity: number;
  #link: ClientLink | null = null;
  #reconnectAtMs = 0;
  readonly #pending = new Map<number, ClientRequest>();
  #cursor: string | null = null;
  #keySeq = 0;
  /** Counts submissions; every other one carries a trace context (no draw from the rng). */
  #traceSeq = 0;
  /** The connection on which the quiet phase's release was sent. */
  #released: ClientLink | null = null;
  readonly #queues: readonly string[];

  constructor(name: string, env: ClientEnv, rng: Random, address: string) {
    this.name = name;
    this.address = address;
    this.#env = env;
    this.#rng = rng;
    this.#activity = 0.1 + rng.float() * 0.5;
    this.#queues = env.queues ?? QUEUES;
  }

  /** Requests sent on the current connection and not answered yet. */
  get unanswered(): number {
    return this.#pending.size;
  }

  act(): void {
    const now = this.#env.clock.nowMs;
    if (this.#link === null) {
      if (now < this.#reconnectAtMs) return;
      this.#link = this.#env.world.openClientLink(this, this.address);
      this.#env.log(() => `  ${this.name} connects: connection ${this.#link?.connId}`);
    }
    if (this.#env.quiet()) {
      this.#releaseQueues();
      this.#wakeWaiters();
      return;
    }
    if (!this.#rng.chance(this.#activity)) return;
    const count = this.#rng.int(1, 2);
    for (let i = 0; i < count; i++) this.#send(this.#randomRequest());
  }

  /** The client closes its connection; requests still in flight may or may not be read. */
  hangUp(): void {
    const link = this.#link;
    if (link === null) return;
    this.#env.log(() => `  ${this.name} hangs up connection ${link.connId}`);
    link.hangUp(this.#rng.int(0, link.toCoordinator.length));
    this.#forget();
  }

  onReply(link: ClientLink, requestId: number, msg: ClientReply): void {
    if (link !== this.#link) return;
    const request = this.#pending.get(requestId);
    this.#env.judge.check(
      request !== undefined,
      () => `${msg.type} for request ${link.connId}/${requestId}, which is not outstanding`,
    );
    this.#pending.delete(requestId);
    if (request?.type === 'SUBMIT_JOB' && msg.type === 'JOB_SUBMITTED') {
      this.#env.onAck(msg.jobId, request, msg.deduplicated === true);
    }
    if (request?.type === 'SUBMIT_JOBS' && msg.type === 'JOBS_SUBMITTED') {
      const parts = batchParts(request);
      msg.jobIds.forEach((jobId, i) =>
        this.#env.onAck(jobId, parts[i] as SubmitJob, msg.deduplicated?.[i] === true),
      );
    }
    if (request?.type === 'SUBMIT_FLOW' && msg.type === 'FLOW_SUBMITTED') {
      flowParts(request, msg).forEach((part, i) =>
        this.#env.onAck(msg.jobs[i]?.jobId as string, part, msg.jobs[i]?.deduplicated === true),
      );
    }
    if (request?.type === 'LIST_JOBS' && msg.type === 'JOB_LIST') this.#cursor = msg.nextCursor;
    if (request?.type === 'TRIGGER_SCHEDULE' && msg.type === 'JOB_SUBMITTED' && msg.job !== null) {
      // A trigger's job is acknowledged like a submission (it has no key).
      this.#env.onAck(
        msg.jobId,
        {
          type: 'SUBMIT_JOB',
          taskType: msg.job.taskType,
          payload: {},
          maxAttempts: null,
          idempotencyKey: null,
          priority: null,
        },
        false,
      );
    }
  }

  onClosed(link: ClientLink): void {
    if (link === this.#link) this.#forget();
  }

  #forget(): void {
    this.#link = null;
    this.#pending.clear();
    this.#reconnectAtMs = this.#env.clock.nowMs + this.#rng.int(0, 500);
  }

  #send(msg: ClientRequest): void {
    if (this.#link === null) return;
    const requestId = this.#env.world.writeClient(this.#link, msg);
    if (requestId !== null) this.#pending.set(requestId, msg);
  }

  #randomRequest(): ClientRequest {
    const rng = this.#rng;
    const env = this.#env;
    const kind = rng.weighted(env.weights ?? REQUEST_WEIGHTS);
    switch (kind) {
      case 'submit':
        return this.#newSubmission();
      case 'resubmit':
        return env.keyed.length > 0 ? rng.pick(env.keyed) : this.#newSubmission();
      case 'conflict':
        return env.keyed.length > 0
          ? this.#conflicting(rng.pick(env.keyed))
          : this.#newSubmission();
      case 'invalidSubmit':
        return this.#invalidSubmission();
      case 'batch':
        return this.#batch();
      case 'cancel':
        return { type: 'CANCEL_JOB', jobId: this.#someJobId() };
      case 'status':
        return { type: 'GET_JOB_STATUS', jobId: this.#someJobId() };
      case 'wait':
        return { type: 'WAIT_JOB', jobId: this.#someJobId(), timeoutMillis: this.#waitTimeout() };
      case 'list':
        return this.#list();
      case 'listWorkers':
        return { type: 'LIST_WORKERS' };
      case 'setQueue':
        return this.#setQueue();
      case 'listQueues':
        return { type: 'LIST_QUEUES' };
      case 'dependent':
        return this.#dependentSubmission();
      case 'subscribe':
        return {
          type: 'SUBSCRIBE_JOBS',
          filter: rng.pick([
            {},
            { jobId: this.#someJobId() },
            { taskType: 'SLEEP' },
            { queue: 'default' },
            { queue: 'elsewhere' },
          ]),
        };
      case 'setSchedule':
        return {
          type: 'SET_SCHEDULE',
          schedule: this.#scheduleDefinition(rng.pick(SCHEDULE_NAMES)),
        };
      case 'resetSchedule':
        return this.#resetSchedule();
      case 'invalidSchedule':
        return this.#invalidSchedule();
      case 'pauseSchedule':
        return { type: 'PAUSE_SCHEDULE', name: this.#scheduleName() };
      case 'resumeSchedule':
        return { type: 'RESUME_SCHEDULE', name: this.#scheduleName() };
      case 'triggerSchedule':
        return {
          type: 'TRIGGER_SCHEDULE',
          name: this.#scheduleName(),
          knownStates: [...KNOWN_STATES],
        };
      case 'deleteSchedule':
        return { type: 'DELETE_SCHEDULE', name: this.#scheduleName() };
      case 'getSchedule':
        return { type: 'GET_SCHEDULE', name: this.#scheduleName(), knownStates: [...KNOWN_STATES] };
      case 'listSchedules':
        return { type: 'LIST_SCHEDULES' };
      case 'signal':
        return this.#randomSignal();
      case 'publish':
        return this.#publish();
      case 'setTrigger':
        return this.#setTrigger();
      case 'deleteTrigger':
        return { type: 'DELETE_TRIGGER', name: rng.pick(TRIGGER_NAMES) };
      case 'listTriggers':
        return { type: 'LIST_TRIGGERS' };
      case 'flow':
        return this.#flow();
      case 'unknownJob':
        return rng.chance(0.5)
          ? { type: 'GET_JOB_STATUS', jobId: `no-such-job-${rng.int(0, 9)}` }
          : { type: 'CANCEL_JOB', jobId: `no-such-job-${rng.int(0, 9)}` };
    }
  }

  /** Random settings of a queue: pauses, limits, clears; now and then an invalid one. */
  #setQueue(): SetQueue {
    const rng = this.#rng;
    const msg: SetQueue = { type: 'SET_QUEUE', name: rng.pick(this.#queues) };
    if (rng.chance(0.4)) msg.paused = rng.chance(0.4);
    // Now and then also for a queue without jobs or settings (else it may be UNKNOWN_QUEUE).
    if (msg.paused !== undefined && rng.chance(0.2)) msg.create = true;
    if (rng.chance(0.3)) msg.concurrency = rng.int(1, 3);
    if (rng.chance(0.3)) msg.rateLimit = { max: rng.int(1, 3), intervalMillis: rng.int(50, 2_000) };
    if (rng.chance(0.2)) msg.groupConcurrency = rng.int(1, 2);
    if (rng.chance(0.2)) {
      msg.groupRateLimit = { max: rng.int(1, 2), intervalMillis: rng.int(50, 1_000) };
    }
    if (rng.chance(0.3)) {
      msg.clear = QUEUE_SETTING_FIELDS.filter((f) => msg[f] === undefined && rng.chance(0.5));
    }
    if (rng.chance(0.05)) {
      const bad = rng.pick<SetQueue>([
        { ...msg, name: '9bad' },
        { ...msg, concurrency: 0 },
        { ...msg, rateLimit: { max: 0, intervalMillis: 10 } },
        { ...msg, clear: ['nonsense'] },
      ]);
      this.#env.invalid.add(bad);
      return bad;
    }
    return msg;
  }

  /**
   * What the quiet phase sends once per connection: every queue resumed,
   * every limit gone, every schedule deleted (so that the run can end).
   */
  #releaseQueues(): void {
    if (this.#released === this.#link) return;
    this.#released = this.#link;
    for (const name of this.#queues) {
      this.#send({ type: 'SET_QUEUE', name, paused: false, clear: [...QUEUE_SETTING_FIELDS] });
    }
    for (const name of SCHEDULE_NAMES) this.#send({ type: 'DELETE_SCHEDULE', name });
    // No event makes jobs from now on, so waking waiters ends.
    for (const name of TRIGGER_NAMES) this.#send({ type: 'DELETE_TRIGGER', name });
  }

  /** The quiet phase ends every signal or event wait: a signal or an event for it. */
  #wakeWaiters(): void {
    const now = this.#env.clock.nowMs;
    const poked = this.#env.signalling.poked;
    for (const wait of this.#env.waiting()) {
      if (now < (poked.get(wait.jobId) ?? -Infinity) + WAKE_AGAIN_MS) continue;
      poked.set(wait.jobId, now);
      this.#send(
        wait.kind === 'signal'
          ? this.#signal(wait.jobId, wait.name)
          : {
              type: 'PUBLISH_EVENT',
              name: wait.name,
              payload: { wake: wait.jobId },
              ...(wait.key !== null && { key: wait.key }),
            },
      );
    }
  }

  #signal(jobId: string, name: string): SignalJob {
    return { type: 'SIGNAL_JOB', jobId, name, payload: { sig: this.#env.signalling.next++ } };
  }

  /** A signal: mostly to a job that waits for one (maybe of another name), else to any known job. */
  #randomSignal(): SignalJob {
    const rng = this.#rng;
    const waiting = this.#env.waiting().filter((w) => w.kind === 'signal');
    if (waiting.length > 0 && rng.chance(0.6)) {
      const wait = rng.pick(waiting);
      return this.#signal(wait.jobId, rng.chance(0.8) ? wait.name : rng.pick(SIGNAL_NAMES));
    }
    return this.#signal(this.#someJobId(), rng.pick(SIGNAL_NAMES));
  }

  /** An event: with or without a key and an id (ids from a small pool repeat). */
  #publish(): PublishEvent {
    const rng = this.#rng;
    const msg: PublishEvent = {
      type: 'PUBLISH_EVENT',
      name: rng.pick(EVENT_NAMES),
      payload: rng.pick<JsonValue>([{ n: rng.int(0, 99) }, 'text', 7, null]),
    };
    if (rng.chance(0.5)) msg.key = rng.pick(EVENT_KEYS);
    if (rng.chance(0.5)) msg.eventId = `ev-${rng.int(0, EVENT_IDS - 1)}`;
    return msg;
  }

  #setTrigger(): SetTrigger {
    const rng = this.#rng;
    return {
      type: 'SET_TRIGGER',
      trigger: {
        name: rng.pick(TRIGGER_NAMES),
        event: rng.pick(EVENT_NAMES),
        taskType: rng.pick(['SLEEP', 'SHA256', 'WORD_COUNT']),
        ...(rng.chance(0.4) && { queue: rng.pick(this.#queues) }),
        ...(rng.chance(0.3) && { priority: rng.pick<Priority>(['HIGH', 'NORMAL', 'LOW']) }),
        ...(rng.chance(0.3) && { maxAttempts: rng.int(1, 3) }),
      },
    };
  }

  /** A schedule name, now and then one never set. */
  #scheduleName(): string {
    return this.#rng.chance(0.05) ? NO_SCHEDULE : this.#rng.pick(SCHEDULE_NAMES);
  }

  /** A random valid definition: mostly an interval of 1-4 s, now and then a cron. */
  #scheduleDefinition(name: string): ScheduleDefinition {
    const rng = this.#rng;
    const taskType = rng.weighted(TASK_WEIGHTS);
    const payload = this.#payload(taskType);
    // Short sleeps: a schedule's jobs should mostly finish before the next tick.
    if (taskType === 'SLEEP') payload.durationMillis = rng.int(0, 2_500);
    const cron = rng.chance(0.25) ? rng.pick(CRONS) : null;
    const d: ScheduleDefinition = {
      name,
      taskType,
      cron,
      everyMillis: cron === null ? rng.int(1_000, 4_000) : null,
      timezone: cron === null ? null : rng.pick([null, 'UTC', 'Europe/Berlin']),
      payload,
      maxAttempts: rng.chance(0.5) ? null : rng.int(1, 4),
      priority: rng.pick<Priority | null>([null, 'HIGH', 'NORMAL', 'LOW']),
      // The coordinator's task timeout (the timing checks hold every lease to it).
      timeoutMillis: null,
      overlap: rng.pick([null, 'allow', 'skip'] as const),
      catchUp: rng.pick([null, 'latest', 'none'] as const),
      paused: rng.chance(0.15) ? true : rng.pick([null, false]),
      ...(rng.chance(0.5) && { queue: rng.pick(this.#queues) }),
    };
    this.#env.schedules.set(name, d);
    return d;
  }

  /** A definition sent before, again: the same one, or with one thing changed. */
  #resetSchedule(): ClientRequest {
    const rng = this.#rng;
    const known = [...this.#env.schedules.values()];
    if (known.length === 0) {
      return { type: 'SET_SCHEDULE', schedule: this.#scheduleDefinition(rng.pick(SCHEDULE_NAMES)) };
    }
    const original = rng.pick(known);
    if (rng.chance(0.5)) return { type: 'SET_SCHEDULE', schedule: original };
    const changed: ScheduleDefinition = { ...original };
    switch (rng.int(0, 3)) {
      case 0:
        changed.overlap = original.overlap === 'skip' ? 'allow' : 'skip';
        break;
      case 1:
        changed.catchUp = original.catchUp === 'none' ? 'latest' : 'none';
        break;
      case 2:
        changed.paused = !(original.paused ?? false);
        break;
      default:
        if (original.everyMillis !== null) changed.everyMillis = rng.int(1_000, 4_000);
        else changed.payload = { ...original.payload };
    }
    this.#env.schedules.set(changed.name, changed);
    return { type: 'SET_SCHEDULE', schedule: changed };
  }

  /** A definition the core must refuse with INVALID_SCHEDULE (nothing created). */
  #invalidSchedule(): ClientRequest {
    const rng = this.#rng;
    const base: ScheduleDefinition = {
      name: rng.pick(SCHEDULE_NAMES),
      taskType: 'SLEEP',
      cron: null,
      everyMillis: 1_000,
      timezone: null,
      payload: { durationMillis: 10 },
      maxAttempts: null,
      priority: null,
      timeoutMillis: null,
      overlap: null,
      catchUp: null,
      paused: null,
    };
    const bad = rng.pick<ScheduleDefinition>([
      { ...base, name: '9bad' },
      { ...base, everyMillis: 999 },
      { ...base, everyMillis: 0 },
      { ...base, cron: '* * * * * *' },
      { ...base, everyMillis: null },
      { ...base, everyMillis: null, cron: '* * * *' },
      { ...base, everyMillis: null, cron: '*/2 * * * * * * *' },
      { ...base, everyMillis: null, cron: '61 * * * *' },
      { ...base, everyMillis: null, cron: '* * * * *', timezone: 'Mars/Olympus_Mons' },
      { ...base, timezone: 'UTC' },
      { ...base, payload: { durationMillis: -1 } },
      { ...base, taskType: 'no such task' },
      { ...base, maxAttempts: 0 },
      { ...base, timeoutMillis: 0 },
      { ...base, queue: '9 bad queue' },
    ]);
    const msg: ClientRequest = { type: 'SET_SCHEDULE', schedule: bad };
    this.#env.invalid.add(msg);
    return msg;
  }
  /**
   * A flow of 2..5 jobs over the queues (so over the shards), each after
   * some of the earlier ones and now and then after an acknowledged job;
   * FAIL tasks and the three policies make failures cascade. No keys: a job
   * outside the first one's shard may carry none.
   */
  #flow(): SubmitFlow {
    const rng = this.#rng;
    const jobs: FlowJob[] = [];
    const count = rng.int(2, 5);
    for (let i = 0; i < count; i++) {
      const taskType = rng.weighted(TASK_WEIGHTS);
      const parents = jobs.filter(() => rng.chance(0.5)).map((job) => job.ref);
      if (rng.chance(0.15)) parents.push(this.#someJobId());
      const policy = rng.pick<'cancel' | 'run' | null>([null, 'cancel', 'run']);
      jobs.push({
        ref: `r${i}`,
        taskType,
        payload: this.#payload(taskType),
        maxAttempts: rng.int(1, 3),
        queue: rng.pick(this.#queues),
        ...(parents.length > 0 && { dependsOn: parents }),
        ...(policy !== null && { onParentFailure: policy }),
        ...(rng.chance(0.2) && { groupKey: rng.pick(['g1', 'g2']) }),
        ...(rng.chance(0.1) && { runAtMillis: this.#env.clock.nowMs + rng.int(0, 2_000) }),
      });
    }
    return { type: 'SUBMIT_FLOW', jobs };
  }

  /** A job that depends on 1..3 acknowledged jobs (now and then an unknown one). */
  #dependentSubmission(): SubmitJob {
    const rng = this.#rng;
    const parents = Array.from({ length: rng.int(1, 3) }, () => this.#someJobId());
    const taskType = rng.weighted(TASK_WEIGHTS);
    const policy = rng.pick<'cancel' | 'run' | null>([null, 'cancel', 'run']);
    return {
      type: 'SUBMIT_JOB',
      taskType,
      payload: this.#payload(taskType),
      maxAttempts: rng.int(1, 4),
      idempotencyKey: null,
      priority: null,
      dependsOn: parents,
      ...(policy === null ? {} : { onParentFailure: policy }),
      // A waiting job may expire too (its own dependents then see a cancelled parent).
      ...(rng.chance(0.15) && { expiresAtMillis: this.#expiry(null) }),
      // Dependents go into the limited queues too: released into a paused
      // or full queue, they must wait there like any other job.
      ...(rng.chance(0.5) && { queue: rng.pick(this.#queues) }),
    };
  }

  #someJobId(): string {
    const ids = this.#env.ackedIds;
    if (ids.length === 0 || this.#rng.chance(0.03)) return `no-such-job-${this.#rng.int(0, 9)}`;
    // Favour recent jobs: they are the ones still moving.
    const recent = this.#rng.chance(0.7);
    const lo = recent ? Math.max(0, ids.length - 10) : 0;
    return ids[this.#rng.int(lo, ids.length - 1)] as string;
  }

  #waitTimeout(): number | null {
    const roll = this.#rng.float();
    if (roll < 0.1) return 0;
    if (roll < 0.2) return null;
    return this.#rng.int(1, 20_000);
  }

  #payload(taskType: keyof typeof TASK_WEIGHTS): JsonObject {
    const rng = this.#rng;
    switch (taskType) {
      case 'SHA256':
      case 'WORD_COUNT':
        return { text: `text ${rng.int(0, 1_000_000)} ${'w '.repeat(rng.int(0, 5))}` };
      case 'SLEEP':
        return { durationMillis: rng.int(0, 5_000) };
      case 'FAIL':
        return { failUntilAttempt: rng.int(0, 4) };
      case 'PRIME_COUNT':
        return { limit: rng.int(2, 100_000) };
    }
  }

  #newSubmission(): SubmitJob {
    const rng = this.#rng;
    const taskType = rng.weighted(TASK_WEIGHTS);
    const roll = rng.float();
    const maxAttempts = roll < 0.4 ? null : roll < 0.5 ? rng.int(-1, 0) : rng.int(1, 5);
    const priority = rng.pick<Priority | null>([null, 'HIGH', 'NORMAL', 'LOW']);
    const keyed = rng.chance(0.4);
    const msg: SubmitJob = {
      type: 'SUBMIT_JOB',
      taskType,
      payload: this.#payload(taskType),
      maxAttempts,
      idempotencyKey: keyed ? `key-${this.name}-${this.#keySeq++}` : null,
      priority,
      // Some jobs are delayed, a few into the past (which means now).
      ...(rng.chance(0.2) && { runAtMillis: this.#env.clock.nowMs + rng.int(-500, 3_000) }),
      ...this.#traceContext(),
    };
    const queue = rng.pick(this.#queues);
    const groupKey = rng.pick(GROUPS);
    if (queue !== 'default' || rng.chance(0.2)) msg.queue = queue;
    if (groupKey !== null) msg.groupKey = groupKey;
    if (rng.chance(0.25)) this.#withDedupKey(msg);
    if (rng.chance(0.2)) msg.expiresAtMillis = this.#expiry(msg.runAtMillis ?? null);
    if (keyed && msg.idempotencyKey !== null) {
      this.#env.keyed.push(msg);
      if (this.#env.keyed.length > MAX_KEYED) this.#env.keyed.shift();
    }
    return msg;
  }

  /**
   * A deduplication key from the pool, with its mode. A debounced job's
   * payload is replaced, so a submission that may debounce carries no
   * idempotency key (its exact resubmission would no longer match the job).
   */
  #withDedupKey(msg: SubmitJob): void {
    const rng = this.#rng;
    const key = rng.pick(DEDUP_KEYS);
    const spec = dedupSpecOf(key);
    const mode = spec.mode ?? rng.pick<DedupMode>(['active', 'throttle', 'debounce']);
    msg.dedupKey = key;
    // Active is the default: half of those say so.
    if (mode !== 'active' || rng.chance(0.5)) msg.dedupMode = mode;
    if (mode === 'throttle') msg.dedupWindowMillis = spec.windowMs;
    if (mode === 'debounce') {
      // Debounce needs a delay: mostly ahead, now and then already due.
      msg.runAtMillis = this.#env.clock.nowMs + rng.int(-100, 2_500);
    }
    if (mode === 'debounce' || !isFixedModeKey(key)) msg.idempotencyKey = null;
  }

  /**
   * An expiry after the job's run time (now for a job not delayed): some
   * near enough to pass before the coordinator reads the request (refused),
   * or before the job starts (expired), some far.
   */
  #expiry(runAtMs: number | null): number {
    const rng = this.#rng;
    const from = Math.max(this.#env.clock.nowMs, runAtMs ?? 0);
    return from + (rng.chance(0.4) ? rng.int(1, 300) : rng.int(300, 6_000));
  }

  /** A distinct W3C trace context for every other submission, none for the rest. */
  #traceContext(): { traceparent?: string; tracestate?: string } {
    const seq = this.#traceSeq++;
    if (seq % 2 === 1) return {};
    const traceId = `${this.name}-${seq}`
      .split('')
      .map((c) => c.charCodeAt(0).toString(16).padStart(2, '0'))
      .join('')
      .padStart(32, 'a')
      .slice(-32);
    const traceparent = `00-${traceId}-${'1'.repeat(16)}-01`;
    return seq % 4 === 0 ? { traceparent, tracestate: `sim=${seq}` } : { traceparent };
  }

  /** The same key with something else changed. */
  #conflicting(original: SubmitJob): SubmitJob {
    const rng = this.#rng;
    const changed = { ...original };
    switch (rng.int(0, 2)) {
      case 0:
        changed.payload = { ...original.payload, extra: rng.int(0, 9) };
        break;
      case 1:
        changed.maxAttempts = (original.maxAttempts ?? 0) > 0 ? null : 7;
        break;
      default:
        changed.priority = original.priority === 'LOW' ? 'HIGH' : 'LOW';
    }
    return changed;
  }

  #invalidSubmission(): SubmitJob {
    const rng = this.#rng;
    const base: SubmitJob = {
      type: 'SUBMIT_JOB',
      taskType: 'SLEEP',
      payload: { durationMillis: 10 },
      maxAttempts: null,
      idempotencyKey:
        rng.chance(0.5) && this.#env.keyed.length > 0
          ? rng.pick(this.#env.keyed).idempotencyKey
          : null,
      priority: null,
    };
    const bad: SubmitJob[] = [
      { ...base, payload: { durationMillis: -1 } },
      { ...base, payload: { durationMillis: 600_001 } },
      { ...base, taskType: 'SHA256', payload: { text: 42 } },
      { ...base, taskType: 'no such task', payload: {} },
      { ...base, taskType: 'sha256', payload: { text: 'a shortcut is not a type' } },
      { ...base, timeoutMillis: 0 },
      { ...base, taskType: '' },
      { ...base, maxAttempts: 5_000 },
      { ...base, idempotencyKey: '' },
      { ...base, taskType: 'FAIL', payload: { failUntilAttempt: 1_001 } },
      { ...base, dedupKey: '' },
      { ...base, dedupMode: 'active' },
      { ...base, dedupKey: 'a0', dedupMode: 'throttle' },
      { ...base, dedupKey: 'a0', dedupWindowMillis: 100 },
      { ...base, dedupKey: 'd0', dedupMode: 'debounce' },
      { ...base, expiresAtMillis: this.#env.clock.nowMs - 1 },
    ];
    const msg = rng.pick(bad);
    this.#env.invalid.add(msg);
    return msg;
  }

  /** 1..5 jobs: new ones, exact resubmissions, conflicts, sometimes one invalid. */
  #batch(): SubmitJobs {
    const rng = this.#rng;
    const keyed = this.#env.keyed;
    const parts = Array.from({ length: rng.int(1, 5) }, (): SubmitJob => {
      const roll = rng.float();
      if (roll < 0.15 && keyed.length > 0) return rng.pick(keyed);
      if (roll < 0.2 && keyed.length > 0) return this.#conflicting(rng.pick(keyed));
      return this.#newSubmission();
    });
    let invalidAt: number | null = null;
    if (rng.chance(0.1)) {
      invalidAt = rng.int(0, parts.length - 1);
      parts[invalidAt] = this.#invalidSubmission();
    }
    const keys = parts.map((p) => p.idempotencyKey).filter((k) => k !== null);
    const keyTwice = new Set(keys).size !== keys.length; // one key twice in a batch
    const msg: SubmitJobs = {
      type: 'SUBMIT_JOBS',
      jobs: parts.map(({ type: _type, knownStates: _known, ...element }) =>
        submitElementToJson(element),
      ),
    };
    if (invalidAt !== null || keyTwice) this.#env.invalid.add(msg);
    // The job invalid in any batch too (a batch split by shard: sim-router.ts).
    if (invalidAt !== null) this.#env.invalid.add(msg.jobs[invalidAt] as object);
    return msg;
  }

  #list(): ClientRequest {
    const rng = this.#rng;
    const roll = rng.float();
    const limit = roll < 0.3 ? null : roll < 0.35 ? 0 : rng.int(1, 20);
    const state = rng.chance(0.3) ? rng.pick<JobState>(JOB_STATES) : null;
    const cursorRoll = rng.float();
    const cursor = cursorRoll < 0.3 ? this.#cursor : cursorRoll < 0.33 ? 'not-a-cursor' : null;
    // Half the lists come from a client that knows every state; a filter on a
    // state the request did not list is refused.
    const knownStates = rng.chance(0.5) ? [...KNOWN_STATES] : undefined;
    const msg: ClientRequest = {
      type: 'LIST_JOBS',
      limit,
      state,
      cursor,
      ...(knownStates !== undefined && { knownStates }),
    };
    const unknownState = state !== null && !StateView.of(knownStates).knows(state);
    if (limit === 0 || cursor === 'not-a-cursor' || unknownState) this.#env.invalid.add(msg);
    return msg;
  }
}

/** The jobs of a flow as the SUBMIT_JOBs they stand for, their parents named by id. */
export function flowParts(msg: SubmitFlow, reply: FlowSubmitted): SubmitJob[] {
  const idOf = new Map(reply.jobs.map((job) => [job.ref, job.jobId]));
  return msg.jobs.map((job) => ({
    type: 'SUBMIT_JOB',
    taskType: job.taskType,
    payload: job.payload,
    maxAttempts: job.maxAttempts ?? null,
    idempotencyKey: job.idempotencyKey ?? null,
    priority: job.priority ?? null,
    ...(job.dependsOn != null && {
      dependsOn: job.dependsOn.map((name) => idOf.get(name) ?? name),
    }),
    ...(job.onParentFailure != null && { onParentFailure: job.onParentFailure }),
    ...(typeof job.runAtMillis === 'number' && { runAtMillis: job.runAtMillis }),
    ...(typeof job.queue === 'string' && { queue: job.queue }),
    ...(typeof job.groupKey === 'string' && { groupKey: job.groupKey }),
    ...(typeof job.traceparent === 'string' && { traceparent: job.traceparent }),
    ...(typeof job.expiresAtMillis === 'number' && { expiresAtMillis: job.expiresAtMillis }),
  }));
}

/** The jobs of a batch as the SUBMIT_JOBs they stand for. */
export function batchParts(msg: SubmitJobs): SubmitJob[] {
  return msg.jobs.map((job) => ({
    type: 'SUBMIT_JOB',
    taskType: job.taskType as string,
    payload: job.payload as JsonObject,
    maxAttempts: (job.maxAttempts as number | null | undefined) ?? null,
    idempotencyKey: (job.idempotencyKey as string | null | undefined) ?? null,
    priority: (job.priority as Priority | null | undefined) ?? null,
    ...(typeof job.timeoutMillis === 'number' && { timeoutMillis: job.timeoutMillis }),
    ...(typeof job.traceparent === 'string' && { traceparent: job.traceparent }),
    ...(typeof job.runAtMillis === 'number' && { runAtMillis: job.runAtMillis }),
    ...(typeof job.queue === 'string' && { queue: job.queue }),
    ...(typeof job.groupKey === 'string' && { groupKey: job.groupKey }),
    ...(typeof job.dedupKey === 'string' && { dedupKey: job.dedupKey }),
    ...(typeof job.dedupMode === 'string' && { dedupMode: job.dedupMode as DedupMode }),
    ...(typeof job.dedupWindowMillis === 'number' && {
      dedupWindowMillis: job.dedupWindowMillis,
    }),
    ...(typeof job.expiresAtMillis === 'number' && { expiresAtMillis: job.expiresAtMillis }),
  }));
}
